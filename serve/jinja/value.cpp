// Value: construction, Python truthiness/equality/str/repr, what {{ }}
// prints, JSON in and out.
#include "serve/jinja/value.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "frontends/gguf/tokenizer/unicode_util.h"
#include "serve/jinja/template.h"

namespace vtc::jinja {

// Containers are freed iteratively: a deleter queues the storage and only
// the outermost one deletes, so a list nested 100000 deep does not recurse
// 100000 frames when it dies.
namespace {
struct Graveyard {
  std::vector<Value::List*> lists;
  std::vector<Value::Dict*> dicts;
  bool draining = false;
};
thread_local Graveyard graveyard;

void drain() {
  if (graveyard.draining) return;
  graveyard.draining = true;
  while (!graveyard.lists.empty() || !graveyard.dicts.empty()) {
    if (!graveyard.lists.empty()) {
      Value::List* l = graveyard.lists.back();
      graveyard.lists.pop_back();
      delete l;
    } else {
      Value::Dict* d = graveyard.dicts.back();
      graveyard.dicts.pop_back();
      delete d;
    }
  }
  graveyard.draining = false;
}
void delete_list(Value::List* l) {
  graveyard.lists.push_back(l);
  drain();
}
void delete_dict(Value::Dict* d) {
  graveyard.dicts.push_back(d);
  drain();
}

// repr, tojson and == recurse into containers; deeper than this is an error.
constexpr int kMaxNesting = 1000;
thread_local int nesting = 0;
struct NestingGuard {
  NestingGuard() {
    if (++nesting > kMaxNesting) {
      --nesting;
      throw TemplateError(fmt::format("value nested deeper than {} levels", kMaxNesting), 0);
    }
  }
  ~NestingGuard() { --nesting; }
};
}  // namespace

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}
Value::Value(bool b) : kind_(Kind::Bool), b_(b) {}
Value::Value(int64_t i) : kind_(Kind::Int), i_(i) {}
Value::Value(double d) : kind_(Kind::Float), d_(d) {}
Value::Value(std::string s) : kind_(Kind::String), s_(std::make_shared<std::string>(std::move(s))) {}

Value Value::list(List items) {
  Value v;
  v.kind_ = Kind::List;
  v.list_ = std::shared_ptr<List>(new List(std::move(items)), delete_list);
  return v;
}
Value Value::dict(Dict items) {
  Value v;
  v.kind_ = Kind::Dict;
  v.dict_ = std::shared_ptr<Dict>(new Dict(std::move(items)), delete_dict);
  return v;
}
Value Value::callable(Function f, std::string name) {
  Value v;
  v.kind_ = Kind::Callable;
  v.fn_ = std::make_shared<Function>(std::move(f));
  v.s_ = std::make_shared<std::string>(std::move(name));
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return b_;
    case Kind::Int:
      return i_ != 0;
    case Kind::Float:
      return d_ != 0;
    case Kind::String:
      return !s_->empty();
    case Kind::List:
      return !list_->empty();
    case Kind::Dict:
      return !dict_->empty();
    case Kind::Callable:
      return true;
  }
  return false;
}

uint64_t& value_scan_count() {
  thread_local uint64_t count = 0;
  return count;
}

Value* Value::find(const Value& key) const {
  if (kind_ != Kind::Dict) return nullptr;
  for (auto& [k, v] : *dict_)
    if (k == key) return &v;
  return nullptr;
}
Value* Value::find(std::string_view key) const {
  if (kind_ != Kind::Dict) return nullptr;
  uint64_t& scanned = value_scan_count();
  for (auto& [k, v] : *dict_) {
    ++scanned;
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}
void Value::set(const Value& key, Value v) const {
  if (Value* slot = find(key)) {
    *slot = std::move(v);
    return;
  }
  dict_->emplace_back(key, std::move(v));
}

bool operator==(const Value& a, const Value& b) {
  using K = Value::Kind;
  ++value_scan_count();
  auto numeric = [](const Value& v) { return v.is_number() || v.is_bool(); };
  if (numeric(a) && numeric(b)) {
    if (a.is_float() || b.is_float()) {
      double x = a.is_bool() ? a.b_ : a.as_float(), y = b.is_bool() ? b.b_ : b.as_float();
      return x == y;
    }
    int64_t x = a.is_bool() ? a.b_ : a.i_, y = b.is_bool() ? b.b_ : b.i_;
    return x == y;
  }
  if (a.kind_ != b.kind_) return false;
  switch (a.kind_) {
    case K::Undefined:
    case K::None:
      return true;
    case K::String:
      value_scan_count() += std::min(a.s_->size(), b.s_->size()) / 64;  // memcmp: 64 bytes ~ one element
      return *a.s_ == *b.s_;
    case K::List: {
      if (a.list_ == b.list_) return true;
      NestingGuard guard;
      return *a.list_ == *b.list_;
    }
    case K::Dict: {
      if (a.dict_ == b.dict_) return true;
      NestingGuard guard;
      if (a.dict_->size() != b.dict_->size()) return false;
      for (auto& [k, v] : *a.dict_) {
        Value* o = b.find(k);
        if (!o || !(*o == v)) return false;
      }
      return true;
    }
    case K::Callable:
      return a.fn_ == b.fn_;
    default:
      return false;
  }
}

std::string format_float(double d) {
  std::string out = fmt::format("{:f}", d);
  if (std::isfinite(d)) {
    out.erase(out.find_last_not_of('0') + 1);
    if (out.back() == '.') out += '0';
  }
  return out;
}

// The backslash escapes Python's repr() and json.dumps() share; false for
// any other byte.
static bool append_shared_escape(std::string& out, unsigned char c) {
  switch (c) {
    case '\\':
      out += "\\\\";
      return true;
    case '\n':
      out += "\\n";
      return true;
    case '\r':
      out += "\\r";
      return true;
    case '\t':
      out += "\\t";
      return true;
    default:
      return false;
  }
}

static std::string repr_string(const std::string& s) {
  // Python prefers single quotes, double quotes when the text has a single
  // quote and no double quote.
  bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  char q = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (append_shared_escape(out, c)) continue;
    if (c == q) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  out += q;
  return out;
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::Undefined:
      return "";
    case Kind::String:
      return *s_;
    default:
      return repr();
  }
}

static void append_output(std::string& out, const Value& v, size_t max_bytes) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None:
    case Value::Kind::Dict:
    case Value::Kind::Callable:
      return;
    case Value::Kind::List: {
      NestingGuard guard;
      for (const Value& item : v.as_list()) {
        append_output(out, item, max_bytes);
        if (out.size() > max_bytes) throw TemplateError(fmt::format("template output exceeds {} bytes", max_bytes), 0);
      }
      return;
    }
    default:
      out += v.str();
  }
}

std::string Value::output(size_t max_bytes) const {
  std::string out;
  append_output(out, *this, max_bytes);
  return out;
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::Undefined:
      return "";
    case Kind::None:
      return "None";
    case Kind::Bool:
      return b_ ? "True" : "False";
    case Kind::Int:
      return std::to_string(i_);
    case Kind::Float:
      return format_float(d_);
    case Kind::String:
      return repr_string(*s_);
    case Kind::List: {
      NestingGuard guard;
      std::string out = "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) out += ", ";
        out += (*list_)[i].repr();
      }
      return out + "]";
    }
    case Kind::Dict: {
      NestingGuard guard;
      std::string out = "{";
      bool first = true;
      for (auto& [k, v] : *dict_) {
        if (!first) out += ", ";
        first = false;
        out += k.repr() + ": " + v.repr();
      }
      return out + "}";
    }
    case Kind::Callable:
      return "<function " + *s_ + ">";
  }
  return "";
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return "str";
    case Kind::List:
      return "list";
    case Kind::Dict:
      return "dict";
    case Kind::Callable:
      return "function";
  }
  return "?";
}

template <typename Json>
static Value value_from_json(const Json& j) {
  using List = Value::List;
  using Dict = Value::Dict;
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value::none();
    case nlohmann::json::value_t::boolean:
      return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value(j.template get<double>());
    case nlohmann::json::value_t::string:
      return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (auto& e : j) items.push_back(value_from_json(e));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Dict items;
      items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) items.emplace_back(Value(it.key()), value_from_json(it.value()));
      return Value::dict(std::move(items));
    }
    default:
      return Value::none();
  }
}

Value Value::from_json(const nlohmann::json& j) { return value_from_json(j); }
Value Value::from_json(const nlohmann::ordered_json& j) { return value_from_json(j); }

nlohmann::json Value::to_json() const {
  switch (kind_) {
    case Kind::Bool:
      return b_;
    case Kind::Int:
      return i_;
    case Kind::Float:
      return d_;
    case Kind::String:
      return *s_;
    case Kind::List: {
      auto out = nlohmann::json::array();
      for (auto& e : *list_) out.push_back(e.to_json());
      return out;
    }
    case Kind::Dict: {
      auto out = nlohmann::json::object();
      for (auto& [k, v] : *dict_) out[k.str()] = v.to_json();
      return out;
    }
    default:
      return nullptr;
  }
}

// One byte of a JSON string as json.dumps writes it (bytes >= 0x80 as they are).
static void json_byte(std::string& out, unsigned char c) {
  if (append_shared_escape(out, c)) return;
  switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    default:
      if (c < 0x20)
        out += fmt::format("\\u{:04x}", c);
      else
        out += static_cast<char>(c);
  }
}

static void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  if (!ensure_ascii) {
    for (unsigned char c : s) json_byte(out, c);
  } else {
    // Each UTF-8 sequence escapes as \uXXXX (a surrogate pair above the
    // BMP); invalid bytes (decoded alone) pass through as they are.
    for (const tok::detail::Char& ch : tok::detail::decode_utf8(s)) {
      if (ch.len == 1) {
        json_byte(out, static_cast<unsigned char>(s[ch.offset]));
      } else if (ch.cp >= 0x10000) {
        const uint32_t v = ch.cp - 0x10000;
        out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        out += fmt::format("\\u{:04x}", ch.cp);
      }
    }
  }
  out += '"';
}

static void dump(std::string& out, const Value& v, const JsonStyle& st, int level) {
  NestingGuard guard;
  const int indent = st.indent;
  auto newline = [&](int lv) {
    out += '\n';
    out.append(static_cast<size_t>(indent * lv), ' ');
  };
  const char* item_sep = st.item_sep ? st.item_sep : indent < 0 ? ", " : ",";
  const char* key_sep = st.key_sep ? st.key_sep : ": ";
  switch (v.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None:
    case Value::Kind::Callable:
      out += "null";
      return;
    case Value::Kind::Bool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::Int:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::Float:
      // As llama.cpp's engine writes it (a C++ stream's default, "%g"):
      // six significant digits, "21" for 21.0, "1e+20".
      out += fmt::format("{:g}", v.as_float());
      return;
    case Value::Kind::String:
      json_string(out, v.as_string(), st.ensure_ascii);
      return;
    case Value::Kind::List: {
      auto& l = v.as_list();
      if (l.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) out += item_sep;
        if (indent >= 0) newline(level + 1);
        dump(out, l[i], st, level + 1);
      }
      if (indent >= 0) newline(level);
      out += ']';
      return;
    }
    case Value::Kind::Dict: {
      auto& d = v.as_dict();
      if (d.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<Value, Value>*> items;
      for (auto& kv : d) items.push_back(&kv);
      if (st.sort_keys)
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first.str() < b->first.str(); });
      out += '{';
      bool first = true;
      for (auto* kv : items) {
        if (!first) out += item_sep;
        first = false;
        if (indent >= 0) newline(level + 1);
        json_string(out, kv->first.is_string() ? kv->first.as_string() : kv->first.to_json().dump(), st.ensure_ascii);
        out += key_sep;
        dump(out, kv->second, st, level + 1);
      }
      if (indent >= 0) newline(level);
      out += '}';
      return;
    }
  }
}

std::string dump_json(const Value& v, const JsonStyle& style) {
  std::string out;
  dump(out, v, style, 0);
  return out;
}

}  // namespace vtc::jinja
