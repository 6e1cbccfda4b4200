// Operators, attribute/item access, Python methods, filters, tests, globals.
//
// Semantics are Python's and Jinja2's as HF transformers sets them up:
// bool is an int (True + 1 == 2), / is true division, // and % floor,
// strings index and measure by code point, dict.get() returns None when the
// key is missing, tojson is json.dumps(ensure_ascii=False). Where
// llama.cpp's engine (the oracle, tests/serve/jinja) parts from Python on
// what chat templates do, this follows llama.cpp (template.h lists it all):
// `str + x` concatenates, None beside a string in + or ~ is "", and
// none|default('x') is 'x' (templates read a null message content through
// |default('')).
#include "serve/jinja/builtins.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <optional>

#include "frontends/gguf/tokenizer/unicode_util.h"

namespace vtc::jinja {
namespace {

// ---- UTF-8 ----------------------------------------------------------------

// The string's code points, each as its UTF-8 bytes (invalid bytes stand alone).
std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const int valid = tok::detail::utf8_sequence_length(s, i);
    const size_t n = valid > 0 ? static_cast<size_t>(valid) : 1;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

size_t cp_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_digitc(char c) { return c >= '0' && c <= '9'; }
char to_upper(char c) { return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 32) : c; }
char to_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

std::string upper(std::string s) {
  for (char& c : s) c = to_upper(c);
  return s;
}
std::string lower(std::string s) {
  for (char& c : s) c = to_lower(c);
  return s;
}
std::string capitalize(const std::string& s) {
  std::string out = lower(s);
  if (!out.empty()) out[0] = to_upper(out[0]);
  return out;
}
// str.title(): a letter after a non-letter is upper-cased, others lowered.
std::string py_title(const std::string& s) {
  std::string out = s;
  bool prev_letter = false;
  for (char& c : out) {
    bool letter = is_alpha(c) || static_cast<unsigned char>(c) >= 0x80;
    if (is_alpha(c)) c = prev_letter ? to_lower(c) : to_upper(c);
    prev_letter = letter;
  }
  return out;
}
// Jinja's title filter: words split at whitespace and -({[<.
std::string jinja_title(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    if (is_ws(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<') {
      start = true;
      continue;
    }
    c = start ? to_upper(c) : to_lower(c);
    start = false;
  }
  return out;
}

// str.strip family; chars null = whitespace.
std::string strip(const std::string& s, const Value* chars, bool left, bool right) {
  std::vector<std::string> cps = code_points(s);
  std::vector<std::string> set;
  bool ws = !chars || chars->is_none() || chars->is_undefined();
  if (!ws) set = code_points(chars->str());
  auto strip_it = [&](const std::string& cp) {
    if (ws) return cp.size() == 1 && is_ws(cp[0]);
    return std::find(set.begin(), set.end(), cp) != set.end();
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_it(cps[b])) ++b;
  if (right)
    while (e > b && strip_it(cps[e - 1])) --e;
  std::string out;
  for (size_t i = b; i < e; ++i) out += cps[i];
  return out;
}

std::vector<std::string> split(const std::string& s, const Value* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (!sep || sep->is_none() || sep->is_undefined()) {
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && is_ws(s[i])) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t e = s.size();
        while (e > i && is_ws(s[e - 1])) --e;
        out.push_back(s.substr(i, e - i));
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_ws(s[j])) ++j;
      out.push_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  std::string d = sep->str();
  if (d.empty()) throw std::invalid_argument("empty separator");
  size_t start = 0;
  while (true) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) break;
    size_t k = s.find(d, start);
    if (k == std::string::npos) break;
    out.push_back(s.substr(start, k - start));
    start = k + d.size();
  }
  out.push_back(s.substr(start));
  return out;
}

std::vector<std::string> rsplit(const std::string& s, const Value* sep, int64_t maxsplit) {
  if (maxsplit < 0 || !sep || sep->is_none() || sep->is_undefined()) {
    if (maxsplit < 0) return split(s, sep, -1);
  }
  std::string d = (sep && !sep->is_none() && !sep->is_undefined()) ? sep->str() : " ";
  if (d.empty()) throw std::invalid_argument("empty separator");
  std::vector<std::string> out;
  size_t end = s.size();
  while (static_cast<int64_t>(out.size()) < maxsplit) {
    if (end < d.size()) break;
    size_t k = s.rfind(d, end - d.size());
    if (k == std::string::npos) break;
    out.push_back(s.substr(k + d.size(), end - k - d.size()));
    end = k;
  }
  out.push_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::string replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  std::string out;
  if (from.empty()) {
    auto cps = code_points(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      if (i < cps.size()) out += cps[i];
    }
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t k = s.find(from, start);
    if (k == std::string::npos) break;
    out.append(s, start, k - start);
    out += to;
    start = k + from.size();
    ++done;
  }
  out.append(s, start, std::string::npos);
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// ---- arguments -------------------------------------------------------------

struct ArgReader {
  Args& args;
  const Value* at(size_t i, std::string_view kw) const {
    if (i < args.positional.size()) return &args.positional[i];
    for (auto& [k, v] : args.keyword)
      if (k == kw) return &v;
    return nullptr;
  }
  Value get(size_t i, std::string_view kw, Value def = Value()) const {
    const Value* p = at(i, kw);
    return p && !p->is_undefined() ? *p : def;
  }
};

bool is_intlike(const Value& v) { return v.is_int() || v.is_bool(); }
int64_t int_of(const Value& v) { return v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int(); }
double float_of(const Value& v) { return v.is_bool() ? (v.as_bool() ? 1.0 : 0.0) : v.as_float(); }
bool numeric(const Value& v) { return v.is_number() || v.is_bool(); }


const char* const kDictMethods[] = {"items", "keys", "values", "get", "pop", "update", "setdefault", "copy"};
// d.items etc. are the methods even where d has such a key (d['items'] is
// the key): Jinja2 tries getattr first, and llama.cpp's engine does the same
// for the methods it has. The rest of kDictMethods yield to keys.
const char* const kDictMethodsBeforeKeys[] = {"items", "keys", "values", "get"};
const char* const kListMethods[] = {"append", "pop", "extend", "insert", "index", "count", "copy", "remove", "reverse"};
const char* const kStrMethods[] = {"strip",      "lstrip",    "rstrip",       "split",        "rsplit",  "startswith",
                                   "endswith",   "replace",   "upper",        "lower",        "title",   "capitalize",
                                   "format",     "find",      "rfind",        "index",        "count",   "join",
                                   "splitlines", "isdigit",   "isalpha",      "isalnum",      "isspace", "isupper",
                                   "islower",    "isnumeric", "removeprefix", "removesuffix", "zfill",   "swapcase"};

// What llama.cpp's engine binds as attributes of undefined and of None (the
// builtins of its value_undefined_t and value_none_t): `x.items()` is []
// there when x is undefined or None, not an error; any other attribute is
// undefined. The kind is what the builtin returns, whatever its arguments:
// 's' "", 'l' [], 'i' 0, 'u' undefined, 'N' "None", 'f' the filter of that
// name (default, tojson).
struct EmptyBuiltin {
  const char* name;
  char kind;
};
const EmptyBuiltin kUndefinedBuiltins[] = {
    {"default", 'f'},    {"capitalize", 's'}, {"first", 'u'},  {"items", 'l'},  {"join", 's'},     {"last", 'u'},
    {"length", 'i'},     {"list", 'l'},       {"lower", 's'},  {"map", 'l'},    {"max", 'u'},      {"min", 'u'},
    {"reject", 'l'},     {"rejectattr", 'l'}, {"replace", 's'}, {"reverse", 'l'}, {"safe", 's'},   {"select", 'l'},
    {"selectattr", 'l'}, {"sort", 'l'},       {"string", 's'}, {"strip", 's'},  {"sum", 'i'},      {"title", 's'},
    {"truncate", 's'},   {"unique", 'l'},     {"upper", 's'},  {"wordcount", 'i'}};
const EmptyBuiltin kNoneBuiltins[] = {{"default", 'f'}, {"tojson", 'f'},     {"string", 'N'}, {"safe", 'N'},
                                      {"items", 'l'},   {"map", 'l'},        {"reject", 'l'}, {"rejectattr", 'l'},
                                      {"select", 'l'},  {"selectattr", 'l'}, {"unique", 'l'}};

template <size_t N>
const EmptyBuiltin* find_builtin(const EmptyBuiltin (&table)[N], const std::string& name) {
  for (const EmptyBuiltin& b : table)
    if (name == b.name) return &b;
  return nullptr;
}

template <size_t N>
bool contains(const char* const (&table)[N], const std::string& name) {
  for (const char* m : table)
    if (name == m) return true;
  return false;
}

}  // namespace

void Renderer::fail(const std::string& message) const { throw TemplateError(message, line_); }

RenderStats Renderer::stats() const {
  RenderStats st;
  st.steps = steps_;
  st.bytes = bytes_;
  st.scans = value_scan_count() - scan_base_;
  st.work = st.steps + st.bytes / kBytesPerStep + st.scans / kScansPerStep;
  return st;
}

void Renderer::check_work() {
  const uint64_t work = steps_ + bytes_ / kBytesPerStep + (value_scan_count() - scan_base_) / kScansPerStep;
  if (work > budget_)
    fail(fmt::format("template exceeded its work limit ({} steps: evaluations, loop iterations x{}, bytes/{}, "
                     "lookups/{})",
                     budget_, kLoopIterationSteps, kBytesPerStep, kScansPerStep));
}

void Renderer::charge_value(const Value& v) {
  if (v.is_string())
    charge_bytes(v.as_string().size());
  else if (v.is_list())
    charge_bytes(16 * v.as_list().size());
  else if (v.is_dict())
    charge_bytes(32 * v.as_dict().size());
}

void Renderer::check_size(size_t bytes) {
  if (bytes > options_.max_output_bytes) fail(fmt::format("value larger than {} bytes", options_.max_output_bytes));
}

// ---- access ----------------------------------------------------------------

bool Renderer::has_method(const Value& obj, const std::string& name) {
  return (obj.is_dict() && contains(kDictMethods, name)) || (obj.is_list() && contains(kListMethods, name)) ||
         (obj.is_string() && contains(kStrMethods, name));
}

static bool reaches(const Value& from, const void* target, int depth) {
  if (depth > 1000) return true;  // too deep to tell: refuse
  if (from.is_list()) {
    if (&from.as_list() == target) return true;
    for (auto& v : from.as_list())
      if ((v.is_list() || v.is_dict()) && reaches(v, target, depth + 1)) return true;
  } else if (from.is_dict()) {
    if (&from.as_dict() == target) return true;
    for (auto& [k, v] : from.as_dict())
      if ((v.is_list() || v.is_dict()) && reaches(v, target, depth + 1)) return true;
  }
  return false;
}

void Renderer::check_no_cycle(const Value& container, const Value& item) {
  if (!item.is_list() && !item.is_dict()) return;
  const void* target = container.is_list() ? static_cast<const void*>(&container.as_list())
                                           : static_cast<const void*>(&container.as_dict());
  if (reaches(item, target, 0)) fail("cannot store a list or dict inside itself");
}

Value Renderer::get_attr(const Value& obj, const std::string& name) {
  if (obj.is_dict()) {
    if (!contains(kDictMethodsBeforeKeys, name))
      if (Value* v = obj.find(name)) return *v;
    if (!contains(kDictMethods, name)) return Value();
  } else if (obj.is_list()) {
    if (!contains(kListMethods, name)) return Value();
  } else if (obj.is_string()) {
    if (!contains(kStrMethods, name)) return Value();
  } else if (obj.is_undefined() || obj.is_none()) {
    const EmptyBuiltin* b =
        obj.is_undefined() ? find_builtin(kUndefinedBuiltins, name) : find_builtin(kNoneBuiltins, name);
    if (!b) return Value();
    Value self = obj;
    const char kind = b->kind;
    return Value::callable(
        [this, self, name, kind](Args& args) -> Value {
          switch (kind) {
            case 's':
              return Value(std::string());
            case 'l':
              return Value::list();
            case 'i':
              return Value(0);
            case 'N':
              return Value("None");
            case 'f':
              return apply_filter(name, self, args);
            default:
              return Value();
          }
        },
        name);
  } else if (obj.is_callable()) {
    // As llama.cpp's engine does (Python would give undefined): a template
    // reading a field of a method, e.g. schema.items.type, is broken.
    fail(fmt::format("'{}' is a function, it has no attribute '{}'", obj.callable_name(), name));
  } else {
    return Value();
  }
  Value self = obj;
  return Value::callable([this, self, name](Args& args) { return call_method(self, name, args); }, name);
}

Value Renderer::get_item(const Value& obj, const Value& key) {
  // undefined[key] is undefined, as in llama.cpp's engine (which still
  // refuses an unhashable key first).
  if (obj.is_undefined()) {
    if (key.is_callable()) fail("unhashable type: 'function'");
    return Value();
  }
  if (obj.is_dict()) {
    if (Value* v = obj.find(key)) return *v;
    return Value();
  }
  if ((obj.is_list() || obj.is_string()) && is_intlike(key)) {
    int64_t i = int_of(key);
    if (obj.is_list()) {
      int64_t n = static_cast<int64_t>(obj.as_list().size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value();
      return obj.as_list()[static_cast<size_t>(i)];
    }
    auto cps = code_points(obj.as_string());
    int64_t n = static_cast<int64_t>(cps.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value();
    return Value(cps[static_cast<size_t>(i)]);
  }
  if (key.is_string()) return get_attr(obj, key.as_string());
  // Other keys: llama.cpp's engine raises (None[0], [1][1.5]; Jinja2 would
  // give undefined), except an undefined key.
  if (key.is_undefined()) return Value();
  fail(fmt::format("cannot subscript a {} with a {}", obj.type_name(), key.type_name()));
}

Value Renderer::slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  auto bound = [&](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!is_intlike(v)) fail(fmt::format("slice {} must be an integer, not {}", what, v.type_name()));
    return int_of(v);
  };
  std::vector<Value> items;
  std::vector<std::string> cps;
  bool is_str = obj.is_string();
  if (is_str)
    cps = code_points(obj.as_string());
  else if (obj.is_list())
    items = obj.as_list();
  else
    fail(fmt::format("cannot slice a {}", obj.type_name()));
  int64_t n = static_cast<int64_t>(is_str ? cps.size() : items.size());
  int64_t st = bound(step, "step").value_or(1);
  if (st == 0) fail("slice step cannot be zero");
  auto norm = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) x += n;
    if (st > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  int64_t b = norm(bound(start, "start"), st > 0 ? 0 : n - 1);
  int64_t e = norm(bound(stop, "stop"), st > 0 ? n : -1);
  std::string s;
  Value::List out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) {
    if (is_str)
      s += cps[static_cast<size_t>(i)];
    else
      out.push_back(items[static_cast<size_t>(i)]);
  }
  return is_str ? Value(std::move(s)) : Value::list(std::move(out));
}

std::vector<Value> Renderer::iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
      return {};
    case Value::Kind::List:
      return v.as_list();
    case Value::Kind::Dict: {
      std::vector<Value> keys;
      for (auto& [k, _] : v.as_dict()) keys.push_back(k);
      return keys;
    }
    case Value::Kind::String: {
      std::vector<Value> out;
      for (auto& cp : code_points(v.as_string())) out.push_back(Value(cp));
      return out;
    }
    default:
      fail(fmt::format("'{}' object is not iterable", v.type_name()));
  }
}

// ---- operators -------------------------------------------------------------

Value Renderer::unary(const std::string& op, const Value& v) {
  if (!numeric(v)) fail(fmt::format("bad operand type for unary {}: '{}'", op, v.type_name()));
  if (op == "+") return v.is_float() ? v : Value(int_of(v));
  if (v.is_float()) return Value(-v.as_float());
  if (int_of(v) == INT64_MIN) fail("integer overflow");
  return Value(-int_of(v));
}

bool Renderer::less(const Value& a, const Value& b) {
  ++value_scan_count();
  if (numeric(a) && numeric(b)) {
    if (a.is_float() || b.is_float()) return float_of(a) < float_of(b);
    return int_of(a) < int_of(b);
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list()) {
    auto &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (less(x[i], y[i])) return true;
      if (less(y[i], x[i])) return false;
    }
    return x.size() < y.size();
  }
  fail(fmt::format("'<' not supported between '{}' and '{}'", a.type_name(), b.type_name()));
}

static std::string printf_format(Renderer& r, const std::string& fmtstr, const Value& arg) {
  std::vector<Value> args;
  if (arg.is_list())
    args = arg.as_list();
  else
    args.push_back(arg);
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < fmtstr.size(); ++i) {
    if (fmtstr[i] != '%') {
      out += fmtstr[i];
      continue;
    }
    if (++i >= fmtstr.size()) r.fail("incomplete format");
    if (fmtstr[i] == '%') {
      out += '%';
      continue;
    }
    std::string spec = "%";
    while (i < fmtstr.size() && (fmtstr[i] == '-' || fmtstr[i] == '+' || fmtstr[i] == ' ' || fmtstr[i] == '0' ||
                                 fmtstr[i] == '.' || is_digitc(fmtstr[i])))
      spec += fmtstr[i++];
    if (i >= fmtstr.size()) r.fail("incomplete format");
    char conv = fmtstr[i];
    if (next >= args.size()) r.fail("not enough arguments for format string");
    const Value& a = args[next++];
    char buf[512];
    switch (conv) {
      case 's': {
        std::snprintf(buf, sizeof buf, (spec + "s").c_str(), a.str().c_str());
        out += spec == "%" ? a.str() : std::string(buf);
        break;
      }
      case 'r':
        out += a.repr();
        break;
      case 'd':
      case 'i':
        if (!numeric(a)) r.fail(fmt::format("%d format: a number is required, not {}", a.type_name()));
        std::snprintf(buf, sizeof buf, (spec + "lld").c_str(),
                      static_cast<long long>(a.is_float() ? static_cast<int64_t>(a.as_float()) : int_of(a)));
        out += buf;
        break;
      case 'f':
      case 'e':
      case 'g':
        if (!numeric(a)) r.fail(fmt::format("%{} format: a number is required, not {}", conv, a.type_name()));
        std::snprintf(buf, sizeof buf, (spec + conv).c_str(), float_of(a));
        out += buf;
        break;
      default:
        r.fail(fmt::format("unsupported format character '{}'", conv));
    }
  }
  if (next < args.size() && arg.is_list()) r.fail("not all arguments converted during string formatting");
  return out;
}

Value Renderer::binary(const std::string& op, Value l, const Value& r) {
  if (op == "==") return Value(l == r);
  if (op == "!=") return Value(!(l == r));
  // '~', and '+' with a string on either side (where Python raises;
  // functionary-v3.2 adds a dict of tool-call arguments to a string),
  // concatenate str()s as llama.cpp's engine does; None or undefined beside
  // a string is "" there (a null message content prints as nothing).
  // Linear: l's string grows in place when l is its only owner (geometric
  // growth, so N appends copy O(total) bytes); otherwise one copy of each
  // side into a new string.
  if (op == "~" || (op == "+" && (l.is_string() || r.is_string()))) {
    std::string scratch_l, scratch_r;
    auto text = [](const Value& v, const Value& other, std::string& scratch) -> std::string_view {
      if (v.is_string()) return v.as_string();
      if ((v.is_none() || v.is_undefined()) && other.is_string()) return {};
      scratch = v.str();
      return scratch;
    };
    const std::string_view right = text(r, l, scratch_r);
    if (std::string* buf = l.unique_string()) {
      check_size(buf->size() + right.size());
      charge_bytes(right.size());
      buf->append(right);
      return l;
    }
    const std::string_view left = text(l, r, scratch_l);
    check_size(left.size() + right.size());
    charge_bytes(left.size() + right.size());
    std::string s;
    s.reserve(left.size() + right.size());
    s.append(left).append(right);
    return Value(std::move(s));
  }
  if (op == "in" || op == "not in") {
    bool found = false;
    if (r.is_string()) {
      if (!l.is_string()) fail(fmt::format("'in <string>' requires string as left operand, not {}", l.type_name()));
      found = r.as_string().find(l.as_string()) != std::string::npos;
    } else if (r.is_list()) {
      for (auto& e : r.as_list()) found = found || e == l;
    } else if (r.is_dict()) {
      found = r.find(l) != nullptr;
    } else if (!r.is_undefined()) {
      fail(fmt::format("argument of type '{}' is not iterable", r.type_name()));
    }
    return Value(op == "in" ? found : !found);
  }
  if (op == "<") return Value(less(l, r));
  if (op == ">") return Value(less(r, l));
  if (op == "<=") return Value(!less(r, l));
  if (op == ">=") return Value(!less(l, r));

  if (l.is_undefined() || r.is_undefined()) fail(fmt::format("unsupported operand for {}: an undefined value", op));
  if (numeric(l) && numeric(r)) {
    bool flt = l.is_float() || r.is_float();
    double x = float_of(l), y = float_of(r);
    int64_t a = flt ? 0 : int_of(l), b = flt ? 0 : int_of(r), out = 0;
    if (op == "+") {
      if (flt) return Value(x + y);
      if (__builtin_add_overflow(a, b, &out)) fail("integer overflow");
      return Value(out);
    }
    if (op == "-") {
      if (flt) return Value(x - y);
      if (__builtin_sub_overflow(a, b, &out)) fail("integer overflow");
      return Value(out);
    }
    if (op == "*") {
      if (flt) return Value(x * y);
      if (__builtin_mul_overflow(a, b, &out)) fail("integer overflow");
      return Value(out);
    }
    if (op == "/") {
      if (y == 0) fail("division by zero");
      return Value(x / y);
    }
    if (op == "//" || op == "%") {
      if (y == 0) fail(op == "//" ? "integer division or modulo by zero" : "modulo by zero");
      if (flt) {
        double m = std::fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return op == "%" ? Value(m) : Value(std::floor(x / y));
      }
      if (a == INT64_MIN && b == -1) fail("integer overflow");
      int64_t q = a / b, m = a % b;
      if (m != 0 && ((m < 0) != (b < 0))) {
        m += b;
        --q;
      }
      return op == "%" ? Value(m) : Value(q);
    }
    if (op == "**") {
      if (!flt && b >= 0) {
        int64_t result = 1, base = a;
        for (int64_t e = b; e > 0; e >>= 1) {
          if (e & 1)
            if (__builtin_mul_overflow(result, base, &result)) fail("integer overflow");
          if (e > 1 && __builtin_mul_overflow(base, base, &base)) fail("integer overflow");
        }
        return Value(result);
      }
      return Value(std::pow(x, y));
    }
  }
  if (op == "+") {
    if (l.is_list() && r.is_list()) {
      check_size((l.as_list().size() + r.as_list().size()) * sizeof(Value));
      if (Value::List* own = l.unique_list()) {  // in place, as for strings
        charge_bytes(16 * r.as_list().size());
        own->insert(own->end(), r.as_list().begin(), r.as_list().end());
        return l;
      }
      charge_bytes(16 * (l.as_list().size() + r.as_list().size()));
      Value::List out = l.as_list();
      out.insert(out.end(), r.as_list().begin(), r.as_list().end());
      return Value::list(std::move(out));
    }
  }
  if (op == "*" && (is_intlike(l) || is_intlike(r)) && (l.is_string() || r.is_string() || l.is_list() || r.is_list())) {
    const Value& seq = is_intlike(l) ? r : l;
    int64_t n = std::max<int64_t>(0, int_of(is_intlike(l) ? l : r));
    const size_t unit = seq.is_string() ? seq.as_string().size() : seq.as_list().size() * sizeof(Value);
    if (unit == 0) n = 0;  // '' * 10**18 is '' at once, not 10**18 empty appends
    if (n > 0 && unit > options_.max_output_bytes / static_cast<size_t>(n)) check_size(options_.max_output_bytes + 1);
    if (seq.is_string()) {
      check_size(seq.as_string().size() * static_cast<size_t>(n));
      charge_bytes(seq.as_string().size() * static_cast<size_t>(n));
      std::string out;
      out.reserve(seq.as_string().size() * static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) out += seq.as_string();
      return Value(std::move(out));
    }
    check_size(seq.as_list().size() * static_cast<size_t>(n) * sizeof(Value));
    charge_bytes(16 * seq.as_list().size() * static_cast<size_t>(n));
    Value::List out;
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
    return Value::list(std::move(out));
  }
  if (op == "%" && l.is_string()) return Value(printf_format(*this, l.as_string(), r));
  fail(fmt::format("unsupported operand types for {}: '{}' and '{}'", op, l.type_name(), r.type_name()));
}

// ---- methods ---------------------------------------------------------------

static std::string format_method(Renderer& r, const std::string& f, Args& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    char c = f[i];
    if (c == '{' && i + 1 < f.size() && f[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    if (c == '}' && i + 1 < f.size() && f[i + 1] == '}') {
      out += '}';
      ++i;
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    size_t e = f.find('}', i);
    if (e == std::string::npos) r.fail("single '{' in format string");
    std::string field = f.substr(i + 1, e - i - 1);
    size_t colon = field.find(':');
    if (colon != std::string::npos) field = field.substr(0, colon);  // format specs are ignored
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_index >= args.positional.size()) r.fail("format(): not enough positional arguments");
      v = &args.positional[auto_index++];
    } else if (std::all_of(field.begin(), field.end(), is_digitc)) {
      if (field.size() > 9) r.fail("format(): positional index out of range");
      size_t k = std::stoul(field);
      if (k >= args.positional.size()) r.fail("format(): positional index out of range");
      v = &args.positional[k];
    } else {
      for (auto& [name, kv] : args.keyword)
        if (name == field) v = &kv;
      if (!v) r.fail(fmt::format("format(): no argument '{}'", field));
    }
    out += v->str();
    i = e;
  }
  return out;
}

Value Renderer::call_method(const Value& obj, const std::string& name, Args& args) {
  ArgReader a{args};
  auto str_arg = [&](size_t i, const char* kw) {
    const Value* v = a.at(i, kw);
    if (!v || !v->is_string()) fail(fmt::format("{}() argument must be a string", name));
    return v->as_string();
  };
  if (obj.is_string()) {
    const std::string& s = obj.as_string();
    if (name == "strip") return Value(strip(s, a.at(0, "chars"), true, true));
    if (name == "lstrip") return Value(strip(s, a.at(0, "chars"), true, false));
    if (name == "rstrip") return Value(strip(s, a.at(0, "chars"), false, true));
    if (name == "split" || name == "rsplit") {
      Value max = a.get(1, "maxsplit", Value(-1));
      try {
        auto parts = name == "split" ? split(s, a.at(0, "sep"), int_of(max)) : rsplit(s, a.at(0, "sep"), int_of(max));
        Value::List out;
        for (auto& p : parts) out.push_back(Value(p));
        return Value::list(std::move(out));
      } catch (const std::invalid_argument&) {
        fail("empty separator");
      }
    }
    if (name == "startswith" || name == "endswith") {
      Value what = a.get(0, "prefix");
      std::vector<Value> options = what.is_list() ? what.as_list() : std::vector<Value>{what};
      for (auto& o : options) {
        if (!o.is_string()) fail(fmt::format("{}() argument must be a string or a tuple of strings", name));
        const std::string& p = o.as_string();
        if (p.size() <= s.size() &&
            (name == "startswith" ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0))
          return Value(true);
      }
      return Value(false);
    }
    if (name == "replace") {
      std::string out = replace(s, str_arg(0, "old"), str_arg(1, "new"), int_of(a.get(2, "count", Value(-1))));
      check_size(out.size());
      return Value(std::move(out));
    }
    if (name == "upper") return Value(upper(s));
    if (name == "lower") return Value(lower(s));
    if (name == "title") return Value(py_title(s));
    if (name == "capitalize") return Value(capitalize(s));
    if (name == "swapcase") {
      std::string out = s;
      for (char& c : out) c = (c >= 'a' && c <= 'z') ? to_upper(c) : to_lower(c);
      return Value(out);
    }
    if (name == "format") return Value(format_method(*this, s, args));
    if (name == "find" || name == "rfind" || name == "index") {
      std::string sub = str_arg(0, "sub");
      size_t k = name == "rfind" ? s.rfind(sub) : s.find(sub);
      if (k == std::string::npos) {
        if (name == "index") fail("substring not found");
        return Value(-1);
      }
      return Value(static_cast<int64_t>(cp_length(s.substr(0, k))));
    }
    if (name == "count") {
      std::string sub = str_arg(0, "sub");
      if (sub.empty()) return Value(static_cast<int64_t>(cp_length(s) + 1));
      int64_t n = 0;
      for (size_t k = s.find(sub); k != std::string::npos; k = s.find(sub, k + sub.size())) ++n;
      return Value(n);
    }
    if (name == "join") {
      std::string out;
      bool first = true;
      for (auto& v : iterate(a.get(0, "iterable"))) {
        if (!v.is_string()) fail(fmt::format("join(): expected str, got {}", v.type_name()));
        if (!first) out += s;
        first = false;
        out += v.as_string();
        check_size(out.size());
      }
      return Value(std::move(out));
    }
    if (name == "splitlines") {
      Value::List out;
      size_t start = 0;
      for (size_t i = 0; i < s.size(); ++i)
        if (s[i] == '\n' || s[i] == '\r') {
          out.push_back(Value(s.substr(start, i - start)));
          if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
          start = i + 1;
        }
      if (start < s.size()) out.push_back(Value(s.substr(start)));
      return Value::list(std::move(out));
    }
    auto all = [&](auto pred) { return Value(!s.empty() && std::all_of(s.begin(), s.end(), pred)); };
    if (name == "isdigit" || name == "isnumeric") return all(is_digitc);
    if (name == "isalpha") return all(is_alpha);
    if (name == "isalnum") return all([](char c) { return is_alpha(c) || is_digitc(c); });
    if (name == "isspace") return all(is_ws);
    if (name == "isupper" || name == "islower") {
      bool cased = false, ok = true;
      for (char c : s) {
        if (!is_alpha(c)) continue;
        cased = true;
        ok = ok && (name == "isupper" ? to_upper(c) == c : to_lower(c) == c);
      }
      return Value(cased && ok);
    }
    if (name == "removeprefix") {
      std::string p = str_arg(0, "prefix");
      return Value(s.compare(0, p.size(), p) == 0 ? s.substr(p.size()) : s);
    }
    if (name == "removesuffix") {
      std::string p = str_arg(0, "suffix");
      return Value(p.size() <= s.size() && s.compare(s.size() - p.size(), p.size(), p) == 0 && !p.empty()
                       ? s.substr(0, s.size() - p.size())
                       : s);
    }
    if (name == "zfill") {
      int64_t w = int_of(a.get(0, "width", Value(0)));
      int64_t n = static_cast<int64_t>(cp_length(s));
      if (n >= w) return obj;
      check_size(static_cast<size_t>(w));
      size_t sign = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
      return Value(s.substr(0, sign) + std::string(static_cast<size_t>(w - n), '0') + s.substr(sign));
    }
  } else if (obj.is_dict()) {
    if (name == "items" || name == "keys" || name == "values") {
      Value::List out;
      for (auto& [k, v] : obj.as_dict()) {
        if (name == "items")
          out.push_back(Value::list({k, v}));
        else
          out.push_back(name == "keys" ? k : v);
      }
      return Value::list(std::move(out));
    }
    if (name == "get") {
      if (Value* v = obj.find(a.get(0, "key"))) return *v;
      const Value* def = a.at(1, "default");
      return def ? *def : Value::none();
    }
    if (name == "pop") {
      Value key = a.get(0, "key");
      auto& d = obj.as_dict();
      for (auto it = d.begin(); it != d.end(); ++it)
        if (it->first == key) {
          Value v = it->second;
          d.erase(it);
          return v;
        }
      if (const Value* def = a.at(1, "default")) return *def;
      fail(fmt::format("pop(): key {} not found", key.repr()));
    }
    if (name == "setdefault") {
      Value key = a.get(0, "key");
      if (Value* v = obj.find(key)) return *v;
      Value def = a.get(1, "default", Value::none());
      check_no_cycle(obj, def);
      obj.set(key, def);
      return def;
    }
    if (name == "update") {
      if (!args.positional.empty()) {
        if (!args.positional[0].is_dict()) fail("update(): expected a dict");
        check_no_cycle(obj, args.positional[0]);
        for (auto& [k, v] : args.positional[0].as_dict()) obj.set(k, v);
      }
      for (auto& [k, v] : args.keyword) {
        check_no_cycle(obj, v);
        obj.set(Value(k), v);
      }
      return Value::none();
    }
    if (name == "copy") return Value::dict(obj.as_dict());
  } else if (obj.is_list()) {
    auto& l = obj.as_list();
    if (name == "append") {
      check_no_cycle(obj, a.get(0, "object"));
      l.push_back(a.get(0, "object"));
      check_size(l.size() * sizeof(Value));
      return Value::none();
    }
    if (name == "extend") {
      for (auto& v : iterate(a.get(0, "iterable"))) {
        check_no_cycle(obj, v);
        l.push_back(v);
      }
      check_size(l.size() * sizeof(Value));
      return Value::none();
    }
    if (name == "insert") {
      int64_t n = static_cast<int64_t>(l.size()), i = int_of(a.get(0, "index", Value(0)));
      if (i < 0) i = std::max<int64_t>(0, i + n);
      i = std::min(i, n);
      check_no_cycle(obj, a.get(1, "object"));
      l.insert(l.begin() + i, a.get(1, "object"));
      return Value::none();
    }
    if (name == "pop") {
      if (l.empty()) fail("pop from empty list");
      int64_t n = static_cast<int64_t>(l.size()), i = int_of(a.get(0, "index", Value(-1)));
      if (i < 0) i += n;
      if (i < 0 || i >= n) fail("pop index out of range");
      Value v = l[static_cast<size_t>(i)];
      l.erase(l.begin() + i);
      return v;
    }
    if (name == "index" || name == "count" || name == "remove") {
      Value x = a.get(0, "value");
      int64_t count = 0;
      for (size_t i = 0; i < l.size(); ++i)
        if (l[i] == x) {
          if (name == "index") return Value(static_cast<int64_t>(i));
          if (name == "remove") {
            l.erase(l.begin() + static_cast<int64_t>(i));
            return Value::none();
          }
          ++count;
        }
      if (name == "count") return Value(count);
      fail(fmt::format("{}(): value not in list", name));
    }
    if (name == "copy") return Value::list(l);
    if (name == "reverse") {
      std::reverse(l.begin(), l.end());
      return Value::none();
    }
  }
  fail(fmt::format("'{}' object has no method '{}'", obj.type_name(), name));
}

// ---- filters ---------------------------------------------------------------

Value Renderer::attribute_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!part.empty() && part.size() < 18 && std::all_of(part.begin(), part.end(), is_digitc) && cur.is_list())
      cur = get_item(cur, Value(static_cast<int64_t>(std::stoll(part))));
    else if (cur.is_undefined())
      return Value();
    else
      cur = get_item(cur, Value(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

static Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(lower(v.as_string()));
  return v;
}

Value Renderer::apply_filter(const std::string& name, const Value& v, Args& args) {
  ArgReader a{args};
  auto need_string = [&]() -> std::string {
    if (v.is_undefined()) return "";
    return v.str();
  };
  auto attr_arg = [&](size_t pos) -> std::optional<std::string> {
    Value at = a.get(pos, "attribute");
    if (at.is_undefined() || at.is_none()) return std::nullopt;
    return at.str();
  };

  if (name == "tojson") {
    JsonStyle st;
    Value indent = a.get(0, "indent");
    if (is_intlike(indent))
      st.indent = static_cast<int>(std::clamp<int64_t>(int_of(indent), 0, 64));
    else if (!indent.is_undefined() && !indent.is_none())
      fail("tojson: indent must be an integer");
    st.sort_keys = a.get(99, "sort_keys", Value(false)).truthy();
    st.ensure_ascii = a.get(99, "ensure_ascii", Value(false)).truthy();
    Value seps = a.get(99, "separators");
    std::string item_sep, key_sep;
    if (seps.is_list()) {
      if (seps.as_list().size() != 2) fail("tojson: separators must be a pair");
      item_sep = seps.as_list()[0].str();
      key_sep = seps.as_list()[1].str();
      st.item_sep = item_sep.c_str();
      st.key_sep = key_sep.c_str();
    }
    std::string out = dump_json(v, st);
    check_size(out.size());
    return Value(std::move(out));
  }
  if (name == "length" || name == "count") {
    if (v.is_string()) return Value(static_cast<int64_t>(cp_length(v.as_string())));
    if (v.is_list()) return Value(static_cast<int64_t>(v.as_list().size()));
    if (v.is_dict()) return Value(static_cast<int64_t>(v.as_dict().size()));
    if (v.is_undefined()) return Value(0);
    fail(fmt::format("object of type '{}' has no len()", v.type_name()));
  }
  if (name == "default" || name == "d") {
    bool boolean = a.get(1, "boolean", Value(false)).truthy();
    if (v.is_undefined() || v.is_none() || (boolean && !v.truthy())) return a.get(0, "default_value", Value(""));
    return v;
  }
  if (name == "trim") return Value(strip(need_string(), a.at(0, "chars"), true, true));
  // |string and |safe of a float are its tojson form in llama.cpp ("2" for 2.0).
  if ((name == "string" || name == "safe") && v.is_float()) return Value(dump_json(v));
  if (name == "string") return Value(v.str());
  if (name == "upper") return Value(upper(need_string()));
  if (name == "lower") return Value(lower(need_string()));
  if (name == "capitalize") return Value(capitalize(need_string()));
  if (name == "title") return Value(jinja_title(need_string()));
  if (name == "escape" || name == "e" || name == "forceescape") return Value(html_escape(need_string()));
  if (name == "replace") {
    Value from = a.get(0, "old"), to = a.get(1, "new");
    std::string out = replace(need_string(), from.str(), to.str(), int_of(a.get(2, "count", Value(-1))));
    check_size(out.size());
    return Value(std::move(out));
  }
  if (name == "list") {
    return Value::list(iterate(v));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::list();
    if (!v.is_dict()) fail(fmt::format("items: expected a mapping, got {}", v.type_name()));
    Value::List out;
    for (auto& [k, x] : v.as_dict()) out.push_back(Value::list({k, x}));
    return Value::list(std::move(out));
  }
  if (name == "dictsort") {
    if (!v.is_dict()) fail(fmt::format("dictsort: expected a mapping, got {}", v.type_name()));
    bool cs = a.get(0, "case_sensitive", Value(false)).truthy();
    std::string by = a.get(1, "by", Value("key")).str();
    bool rev = a.get(2, "reverse", Value(false)).truthy();
    if (by != "key" && by != "value") fail("dictsort: 'by' must be 'key' or 'value'");
    Value::List items;
    for (auto& [k, x] : v.as_dict()) items.push_back(Value::list({k, x}));
    size_t idx = by == "key" ? 0 : 1;
    std::stable_sort(items.begin(), items.end(), [&](const Value& p, const Value& q) {
      Value x = sort_key(p.as_list()[idx], cs), y = sort_key(q.as_list()[idx], cs);
      return rev ? less(y, x) : less(x, y);
    });
    return Value::list(std::move(items));
  }
  if (name == "join") {
    std::string sep = a.get(0, "d", Value("")).str();
    auto attr = attr_arg(1);
    std::string out;
    bool first = true;
    for (auto& item : iterate(v)) {
      if (!first) out += sep;
      first = false;
      out += (attr ? attribute_path(item, *attr) : item).str();
      check_size(out.size());
    }
    return Value(std::move(out));
  }
  if (name == "first" || name == "last") {
    auto items = iterate(v);
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (v.is_string()) {
      auto cps = code_points(v.as_string());
      std::string out;
      for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
      return Value(out);
    }
    auto items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (name == "unique") {
    bool cs = a.get(0, "case_sensitive", Value(false)).truthy();
    auto attr = attr_arg(1);
    Value::List out, seen;
    for (auto& item : iterate(v)) {
      Value key = sort_key(attr ? attribute_path(item, *attr) : item, cs);
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
      seen.push_back(key);
      out.push_back(item);
    }
    return Value::list(std::move(out));
  }
  if (name == "sort") {
    bool rev = a.get(0, "reverse", Value(false)).truthy();
    bool cs = a.get(1, "case_sensitive", Value(false)).truthy();
    auto attr = attr_arg(2);
    auto items = iterate(v);
    std::stable_sort(items.begin(), items.end(), [&](const Value& p, const Value& q) {
      Value x = sort_key(attr ? attribute_path(p, *attr) : p, cs),
            y = sort_key(attr ? attribute_path(q, *attr) : q, cs);
      return rev ? less(y, x) : less(x, y);
    });
    return Value::list(std::move(items));
  }
  if (name == "min" || name == "max") {
    bool cs = a.get(0, "case_sensitive", Value(false)).truthy();
    auto attr = attr_arg(1);
    auto items = iterate(v);
    if (items.empty()) return Value();
    Value best = items[0];
    for (auto& item : items) {
      Value x = sort_key(attr ? attribute_path(item, *attr) : item, cs);
      Value y = sort_key(attr ? attribute_path(best, *attr) : best, cs);
      if (name == "min" ? less(x, y) : less(y, x)) best = item;
    }
    return best;
  }
  if (name == "sum") {
    auto attr = attr_arg(0);
    Value total = a.get(1, "start", Value(0));
    for (auto& item : iterate(v)) total = binary("+", total, attr ? attribute_path(item, *attr) : item);
    return total;
  }
  if (name == "map") {
    Value::List out;
    if (!v.truthy()) return Value::list();  // Jinja maps a falsy value (none) to nothing
    if (auto attr = attr_arg(99)) {
      Value def = a.get(99, "default");
      for (auto& item : iterate(v)) {
        Value x = attribute_path(item, *attr);
        out.push_back(x.is_undefined() && !def.is_undefined() ? def : x);
      }
      return Value::list(std::move(out));
    }
    if (args.positional.empty()) fail("map: expected a filter name or attribute=");
    std::string filter = args.positional[0].str();
    Args rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.keyword = args.keyword;
    for (auto& item : iterate(v)) {
      Args copy = rest;
      out.push_back(apply_filter(filter, item, copy));
    }
    return Value::list(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    bool by_attr = name == "selectattr" || name == "rejectattr";
    bool keep_if = name == "select" || name == "selectattr";
    size_t first = 0;
    std::string attr;
    if (by_attr) {
      if (args.positional.empty()) fail(fmt::format("{}: expected an attribute name", name));
      attr = args.positional[0].str();
      first = 1;
    }
    std::string test;
    Args test_args;
    if (args.positional.size() > first) {
      test = args.positional[first].str();
      test_args.positional.assign(args.positional.begin() + static_cast<int64_t>(first) + 1, args.positional.end());
    }
    Value::List out;
    if (!v.truthy()) return Value::list();  // Jinja selects nothing from a falsy value (none)
    for (auto& item : iterate(v)) {
      Value x = by_attr ? attribute_path(item, attr) : item;
      bool pass;
      if (test.empty()) {
        pass = x.truthy();
      } else {
        Args copy = test_args;
        pass = apply_test(test, x, copy);
      }
      if (pass == keep_if) out.push_back(item);
    }
    return Value::list(std::move(out));
  }
  if (name == "int") {
    Value def = a.get(0, "default", Value(0));
    if (v.is_int()) return v;
    if (v.is_bool()) return Value(int_of(v));
    if (v.is_float()) {
      double d = v.as_float();
      if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return def;
      return Value(static_cast<int64_t>(d));
    }
    if (v.is_string()) {
      std::string s = strip(v.as_string(), nullptr, true, true);
      std::string clean;
      for (char c : s)
        if (c != '_') clean += c;
      char* end = nullptr;
      errno = 0;
      long long i = std::strtoll(clean.c_str(), &end, static_cast<int>(int_of(a.get(1, "base", Value(10)))));
      if (!clean.empty() && end && *end == '\0' && errno == 0) return Value(static_cast<int64_t>(i));
      double d = std::strtod(clean.c_str(), &end);
      if (!clean.empty() && end && *end == '\0' && std::isfinite(d) && std::fabs(d) < 9.2e18)
        return Value(static_cast<int64_t>(d));
    }
    return def;
  }
  if (name == "float") {
    Value def = a.get(0, "default", Value(0.0));
    if (numeric(v)) return Value(float_of(v));
    if (v.is_string()) {
      std::string s = strip(v.as_string(), nullptr, true, true);
      char* end = nullptr;
      double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && end && *end == '\0') return Value(d);
    }
    return def;
  }
  if (name == "abs") {
    if (!numeric(v)) fail(fmt::format("bad operand type for abs(): '{}'", v.type_name()));
    if (v.is_float()) return Value(std::fabs(v.as_float()));
    if (int_of(v) == INT64_MIN) fail("integer overflow");
    return Value(static_cast<int64_t>(std::llabs(int_of(v))));
  }
  if (name == "round") {
    if (!numeric(v)) fail(fmt::format("round: expected a number, got {}", v.type_name()));
    int64_t precision = int_of(a.get(0, "precision", Value(0)));
    std::string method = a.get(1, "method", Value("common")).str();
    double scale = std::pow(10.0, static_cast<double>(std::clamp<int64_t>(precision, -300, 300)));
    double x = float_of(v) * scale;
    if (method == "common")
      x = std::nearbyint(x);  // Python's round(): half to even
    else if (method == "ceil")
      x = std::ceil(x);
    else if (method == "floor")
      x = std::floor(x);
    else
      fail("round: method must be 'common', 'ceil' or 'floor'");
    return Value(x / scale);
  }
  if (name == "wordcount") {
    std::string s = need_string();
    int64_t n = 0;
    bool in_word = false;
    for (char c : s) {
      bool w = is_alpha(c) || is_digitc(c) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
      if (w && !in_word) ++n;
      in_word = w;
    }
    return Value(n);
  }
  if (name == "indent") {
    // Jinja 3: lines after the first get the indent, empty ones only with
    // blank=true; the first line only with first=true.
    Value width = a.get(0, "width", Value(4));
    std::string pad = width.is_string()
                          ? width.as_string()
                          : std::string(static_cast<size_t>(std::clamp<int64_t>(int_of(width), 0, 1024)), ' ');
    bool first = a.get(1, "first", Value(false)).truthy();
    bool blank = a.get(2, "blank", Value(false)).truthy();
    std::string s = need_string() + "\n";
    std::vector<std::string> lines;
    for (size_t start = 0; start < s.size();) {
      size_t nl = s.find('\n', start);
      lines.push_back(s.substr(start, nl - start));
      start = nl + 1;
    }
    std::string out = lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      out += '\n';
      if (blank || !lines[i].empty()) out += pad;
      out += lines[i];
      check_size(out.size());
    }
    if (first) out = pad + out;
    return Value(std::move(out));
  }
  if (name == "center") {
    int64_t width = int_of(a.get(0, "width", Value(80)));
    std::string s = need_string();
    int64_t n = static_cast<int64_t>(cp_length(s));
    if (width <= n) return Value(s);
    check_size(static_cast<size_t>(width));
    int64_t total = width - n, left = total / 2 + (total & width & 1);
    return Value(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(total - left), ' '));
  }
  if (name == "attr") return get_attr(v, a.get(0, "name").str());
  if (name == "from_json") {
    try {
      return Value::from_json(nlohmann::json::parse(need_string()));
    } catch (const nlohmann::json::exception& e) {
      fail(fmt::format("from_json: invalid JSON: {}", e.what()));
    }
  }
  if (name == "format") return Value(printf_format(*this, need_string(), Value::list(args.positional)));
  if (name == "pprint") return Value(v.repr());
  if (name == "batch") {
    int64_t size = int_of(a.get(0, "linecount", Value(1)));
    if (size <= 0) fail("batch: size must be positive");
    Value::List out, cur;
    for (auto& item : iterate(v)) {
      cur.push_back(item);
      if (static_cast<int64_t>(cur.size()) == size) {
        out.push_back(Value::list(std::move(cur)));
        cur.clear();
      }
    }
    if (!cur.empty()) {
      if (const Value* fill = a.at(1, "fill_with"))
        while (static_cast<int64_t>(cur.size()) < size) cur.push_back(*fill);
      out.push_back(Value::list(std::move(cur)));
    }
    return Value::list(std::move(out));
  }
  if (name == "safe") return Value(v.str());
  fail(fmt::format("unknown filter '{}'", name));
}

// ---- tests -----------------------------------------------------------------

bool Renderer::apply_test(const std::string& name, const Value& v, Args& args) {
  ArgReader a{args};
  Value other = a.get(0, "other");
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return numeric(v);
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_iterable() || v.is_undefined();
  if (name == "sequence") return v.is_iterable();
  if (name == "callable") return v.is_callable();
  if (name == "sameas") {
    if (v.kind() != other.kind()) return false;
    if (v.is_list()) return &v.as_list() == &other.as_list();
    if (v.is_dict()) return &v.as_dict() == &other.as_dict();
    return v == other;
  }
  if (name == "equalto" || name == "eq" || name == "==") return v == other;
  if (name == "ne" || name == "!=") return !(v == other);
  if (name == "lt" || name == "lessthan" || name == "<") return less(v, other);
  if (name == "gt" || name == "greaterthan" || name == ">") return less(other, v);
  if (name == "le" || name == "<=") return !less(other, v);
  if (name == "ge" || name == ">=") return !less(v, other);
  if (name == "in") return binary("in", v, other).as_bool();
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (!is_intlike(v)) fail(fmt::format("test '{}' needs an integer, got {}", name, v.type_name()));
    int64_t x = int_of(v);
    if (name == "odd") return x % 2 != 0;
    if (name == "even") return x % 2 == 0;
    if (!is_intlike(other) || int_of(other) == 0) fail("divisibleby needs a non-zero integer");
    return x % int_of(other) == 0;
  }
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    const std::string& s = v.as_string();
    return name == "lower" ? lower(s) == s : upper(s) == s;
  }
  if (name == "filter" || name == "test") {
    static const char* const known_filters[] = {
        "tojson",   "length",     "count",  "default", "d",          "trim",        "string",  "safe",   "upper",
        "lower",    "capitalize", "title",  "escape",  "e",          "forceescape", "replace", "list",   "items",
        "dictsort", "join",       "first",  "last",    "reverse",    "unique",      "sort",    "min",    "max",
        "sum",      "map",        "select", "reject",  "selectattr", "rejectattr",  "int",     "float",  "abs",
        "round",    "wordcount",  "indent", "center",  "attr",       "from_json",   "format",  "pprint", "batch"};
    static const char* const known_tests[] = {
        "defined", "undefined",   "none",     "boolean",  "true",        "false",   "integer", "float",   "number",
        "string",  "mapping",     "iterable", "sequence", "callable",    "sameas",  "equalto", "eq",
        "ne",      "lt",          "lessthan", "gt",       "greaterthan", "le",      "ge",      "in",      "odd",
        "even",    "divisibleby", "lower",    "upper",    "filter",      "test"};
    if (!v.is_string()) return false;
    return name == "filter" ? contains(known_filters, v.as_string()) : contains(known_tests, v.as_string());
  }
  fail(fmt::format("unknown test '{}'", name));
}

// ---- globals ---------------------------------------------------------------

Value Renderer::global(const std::string& name) {
  auto it = globals_.find(name);
  if (it != globals_.end()) return it->second;
  Value g;
  if (name == "range") {
    g = Value::callable(
        [this](Args& args) {
          std::vector<int64_t> p;
          for (auto& v : args.positional) {
            if (!is_intlike(v)) fail(fmt::format("range() arguments must be integers, not {}", v.type_name()));
            p.push_back(int_of(v));
          }
          if (p.empty() || p.size() > 3 || !args.keyword.empty()) fail("range() takes 1 to 3 integer arguments");
          int64_t start = p.size() == 1 ? 0 : p[0], stop = p.size() == 1 ? p[0] : p[1], step = p.size() == 3 ? p[2] : 1;
          if (step == 0) fail("range() step must not be zero");
          // Python's len(range(...)), computed without overflow.
          __int128 span = step > 0 ? (__int128)stop - start : (__int128)start - stop;
          __int128 abs_step = step > 0 ? step : -(__int128)step;
          __int128 n = span <= 0 ? 0 : (span + abs_step - 1) / abs_step;
          if (n > 1'000'000) fail("range() longer than 1000000 items");
          Value::List out;
          for (__int128 i = 0; i < n; ++i) out.push_back(Value(static_cast<int64_t>(start + i * step)));
          return Value::list(std::move(out));
        },
        "range");
  } else if (name == "namespace" || name == "dict") {
    g = Value::callable(
        [this, name](Args& args) {
          Value ns = Value::dict();
          for (auto& p : args.positional) {
            if (!p.is_dict()) fail(fmt::format("{}() positional argument must be a mapping", name));
            for (auto& [k, v] : p.as_dict()) ns.set(k, v);
          }
          for (auto& [k, v] : args.keyword) ns.set(Value(k), v);
          return ns;
        },
        name);
  } else if (name == "raise_exception") {
    g = Value::callable(
        [this](Args& args) -> Value {
          std::string msg = args.positional.empty() ? "raise_exception() called" : args.positional[0].str();
          throw TemplateError(msg, line_, /*raised=*/true);
        },
        name);
  } else if (name == "strftime_now") {
    g = Value::callable(
        [this](Args& args) {
          std::string f = args.positional.empty() ? "%Y-%m-%d" : args.positional[0].str();
          time_t t = options_.now_epoch_s >= 0 ? static_cast<time_t>(options_.now_epoch_s) : std::time(nullptr);
          std::tm tm{};
          gmtime_r(&t, &tm);
          char buf[512];
          size_t n = f.size() < 200 ? std::strftime(buf, sizeof buf, f.c_str(), &tm) : 0;
          if (n == 0 && !f.empty()) fail("strftime_now: format produced no output or is too long");
          return Value(std::string(buf, n));
        },
        name);
  } else if (name == "joiner") {
    g = Value::callable(
        [](Args& args) {
          std::string sep = args.positional.empty() ? ", " : args.positional[0].str();
          auto used = std::make_shared<bool>(false);
          return Value::callable(
              [sep, used](Args&) {
                if (!*used) {
                  *used = true;
                  return Value("");
                }
                return Value(sep);
              },
              "joiner");
        },
        name);
  } else {
    return Value();
  }
  globals_[name] = g;
  return g;
}

}  // namespace vtc::jinja
