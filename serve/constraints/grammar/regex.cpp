// regex.h: a recursive-descent regex parser that emits GBNF text directly.
//
//   alternation := sequence ('|' sequence)*       -> ( a | b )
//   sequence    := (atom quantifier?)*            -> a b c
//   atom        := group | class | . | escape | literal
//
// A class is kept as sorted code-point ranges until it is printed, so
// negation is a complement over [0, 0x10FFFF] and, in JSON-string mode,
// the characters JSON must escape are taken out of it and offered in their
// escaped form instead. Nesting and repetition counts are bounded, so an
// untrusted pattern cannot recurse deeply or blow up the grammar.
#include "serve/constraints/grammar/regex.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "frontends/gguf/tokenizer/unicode_util.h"
#include "serve/constraints/grammar/grammar.h"

namespace vtc::grammar {
namespace {

using tok::detail::append_utf8;

constexpr int kMaxDepth = 100;
constexpr int kMaxCount = 1000;
constexpr uint32_t kMaxCodePoint = 0x10FFFF;

using Ranges = std::vector<CodeRange>;

Ranges normalize(Ranges r) {
  std::sort(r.begin(), r.end(), [](const CodeRange& a, const CodeRange& b) { return a.lo < b.lo; });
  Ranges out;
  for (const CodeRange& x : r) {
    if (!out.empty() && x.lo <= out.back().hi + 1)
      out.back().hi = std::max(out.back().hi, x.hi);
    else
      out.push_back(x);
  }
  return out;
}

Ranges complement(const Ranges& in) {
  Ranges out;
  uint32_t next = 0;
  for (const CodeRange& x : normalize(in)) {
    if (x.lo > next) out.push_back({next, x.lo - 1});
    next = x.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

Ranges subtract(const Ranges& a, const Ranges& b) {
  Ranges nb = complement(b), out;
  for (const CodeRange& x : normalize(a))
    for (const CodeRange& y : nb) {
      uint32_t lo = std::max(x.lo, y.lo), hi = std::min(x.hi, y.hi);
      if (lo <= hi) out.push_back({lo, hi});
    }
  return out;
}

bool contains(const Ranges& r, uint32_t cp) {
  return std::any_of(r.begin(), r.end(), [&](const CodeRange& x) { return x.lo <= cp && cp <= x.hi; });
}

// One code point as GBNF source, inside a literal or a class.
std::string gbnf_char(uint32_t cp) {
  if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') || cp == ' ' || cp == '_' ||
      cp == ',' || cp == '.' || cp == ':' || cp == '/' || cp == '@' || cp == '!' || cp == '=' || cp == '+')
    return std::string(1, static_cast<char>(cp));
  if (cp <= 0xFF) return fmt::format("\\x{:02X}", cp);
  if (cp <= 0xFFFF) return fmt::format("\\u{:04X}", cp);
  return fmt::format("\\U{:08X}", cp);
}

std::string gbnf_class(const Ranges& r) {
  std::string s = "[";
  for (const CodeRange& x : r) {
    s += gbnf_char(x.lo);
    if (x.hi != x.lo) s += "-" + gbnf_char(x.hi);
  }
  return s + "]";
}

std::string gbnf_literal(std::string_view bytes) {
  std::string s = "\"";
  for (char c : bytes) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x80)
      s += c;  // already UTF-8
    else
      s += gbnf_char(u);
  }
  return s + "\"";
}

// How a character appears in JSON text ("\"" -> \", newline -> \n).
std::string json_escaped(uint32_t cp) {
  switch (cp) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '\b': return "\\b";
    case '\f': return "\\f";
    default: break;
  }
  if (cp < 0x20) return fmt::format("\\u{:04x}", cp);
  std::string s;
  append_utf8(s, cp);
  return s;
}

class RegexParser {
 public:
  RegexParser(std::string_view re, bool json) : re_(re), json_(json) {}

  std::string parse() {
    bool start_anchor = false, end_anchor = false;
    if (!re_.empty() && re_.front() == '^') {
      start_anchor = true;
      pos_ = 1;
    }
    std::string body = alternation(0);
    if (pos_ < re_.size() && re_[pos_] == '$' && pos_ + 1 == re_.size()) {
      end_anchor = true;
      ++pos_;
    }
    if (pos_ < re_.size()) fail(re_[pos_] == ')' ? "unbalanced ')'" : fmt::format("unexpected '{}'", re_[pos_]));
    if (!json_) return body.empty() ? "\"\"" : body;
    const std::string any = "(" + set_text(complement({})) + ")*";
    return (start_anchor ? "" : any + " ") + "(" + body + ")" + (end_anchor ? "" : " " + any);
  }

 private:
  std::string_view re_;
  bool json_;
  size_t pos_ = 0;

  [[noreturn]] void fail(const std::string& problem) const {
    throw GrammarError(fmt::format("regex: at offset {}: {}", pos_, problem));
  }
  bool at(char c) const { return pos_ < re_.size() && re_[pos_] == c; }

  // A set of characters as GBNF, JSON-escaped in JSON mode.
  std::string set_text(const Ranges& chars) const {
    Ranges r = normalize(chars);
    if (!json_) return gbnf_class(r);
    Ranges must_escape{{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
    std::vector<std::string> alts;
    Ranges plain = subtract(r, must_escape);
    if (!plain.empty()) alts.push_back(gbnf_class(plain));
    for (uint32_t cp : {uint32_t{'"'}, uint32_t{'\\'}, uint32_t{'\n'}, uint32_t{'\r'}, uint32_t{'\t'}})
      if (contains(r, cp)) alts.push_back(gbnf_literal(json_escaped(cp)));
    if (alts.empty()) return "[]";
    if (alts.size() == 1) return alts[0];
    std::string s = "(";
    for (size_t i = 0; i < alts.size(); ++i) s += (i ? " | " : "") + alts[i];
    return s + ")";
  }

  std::string alternation(int depth) {
    if (depth > kMaxDepth) fail(fmt::format("groups nested deeper than {}", kMaxDepth));
    std::vector<std::string> alts{sequence(depth)};
    while (at('|')) {
      ++pos_;
      alts.push_back(sequence(depth));
    }
    if (alts.size() == 1) return alts[0];
    std::string s = "(";
    for (size_t i = 0; i < alts.size(); ++i) s += (i ? " | " : "") + (alts[i].empty() ? "\"\"" : alts[i]);
    return s + ")";
  }

  std::string sequence(int depth) {
    std::string seq;
    while (pos_ < re_.size() && !at('|') && !at(')')) {
      if (at('$') && pos_ + 1 == re_.size()) break;
      std::string a = atom(depth);
      a = quantified(a);
      seq += (seq.empty() ? "" : " ") + a;
    }
    return seq;
  }

  int number() {
    size_t start = pos_;
    int v = 0;
    while (pos_ < re_.size() && re_[pos_] >= '0' && re_[pos_] <= '9') {
      v = v * 10 + (re_[pos_] - '0');
      if (v > kMaxCount) fail(fmt::format("repetition count above {}", kMaxCount));
      ++pos_;
    }
    if (pos_ == start) fail("expected a number in {...}");
    return v;
  }

  std::string quantified(const std::string& item) {
    std::string op;
    if (at('*') || at('+') || at('?')) {
      op = std::string(1, re_[pos_++]);
    } else if (at('{')) {
      ++pos_;
      int min = number(), max = min;
      bool unbounded = false;
      if (at(',')) {
        ++pos_;
        if (at('}'))
          unbounded = true;
        else
          max = number();
      }
      if (!at('}')) fail("expected '}'");
      ++pos_;
      if (!unbounded && max < min) fail("repetition with max below min");
      op = unbounded ? fmt::format("{{{},}}", min) : fmt::format("{{{},{}}}", min, max);
    } else {
      return item;
    }
    if (at('?')) ++pos_;  // lazy: the same whole matches
    if (at('+')) fail("possessive quantifiers are not supported");
    if (at('*') || at('{')) fail("a quantifier cannot follow a quantifier");
    return "(" + item + ")" + op;
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i, ++pos_) {
      if (pos_ >= re_.size()) fail("truncated hex escape");
      char c = re_[pos_];
      int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
      if (d < 0) fail("bad hex digit in escape");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    if (v > kMaxCodePoint) fail("code point above U+10FFFF");
    return v;
  }

  // An escape after '\': its character set.
  Ranges escape() {
    if (pos_ >= re_.size()) fail("trailing backslash");
    char c = re_[pos_++];
    const Ranges digit{{'0', '9'}}, word{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}},
        space{{'\t', '\r'}, {' ', ' '}};
    switch (c) {
      case 'd': return digit;
      case 'D': return complement(digit);
      case 'w': return word;
      case 'W': return complement(word);
      case 's': return space;
      case 'S': return complement(space);
      case 't': return {{'\t', '\t'}};
      case 'n': return {{'\n', '\n'}};
      case 'r': return {{'\r', '\r'}};
      case 'f': return {{'\f', '\f'}};
      case 'v': return {{'\v', '\v'}};
      case 'x': { uint32_t v = hex(2); return {{v, v}}; }
      case 'u': { uint32_t v = hex(4); return {{v, v}}; }
      default: break;
    }
    auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
      return {{u, u}};
    --pos_;
    fail(fmt::format("unsupported escape '\\{}'", c));
  }

  // One UTF-8 character of the pattern.
  uint32_t utf8_char() {
    auto c = static_cast<unsigned char>(re_[pos_]);
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || pos_ + static_cast<size_t>(len) > re_.size()) fail("invalid UTF-8");
    uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (int i = 1; i < len; ++i) {
      auto cc = static_cast<unsigned char>(re_[pos_ + static_cast<size_t>(i)]);
      if ((cc >> 6) != 2) fail("invalid UTF-8");
      cp = (cp << 6) | (cc & 0x3F);
    }
    pos_ += static_cast<size_t>(len);
    return cp;
  }

  Ranges char_class() {
    ++pos_;  // '['
    bool negate = false;
    if (at('^')) {
      negate = true;
      ++pos_;
    }
    Ranges r;
    bool first = true;
    while (first || !at(']')) {
      if (pos_ >= re_.size()) fail("unterminated character class");
      first = false;
      Ranges item;
      if (at('\\')) {
        ++pos_;
        item = escape();
      } else {
        if (at('[') && pos_ + 1 < re_.size() && re_[pos_ + 1] == ':') fail("POSIX classes [:...:] are not supported");
        uint32_t cp = utf8_char();
        item = {{cp, cp}};
      }
      if (item.size() == 1 && item[0].lo == item[0].hi && at('-') && pos_ + 1 < re_.size() && re_[pos_ + 1] != ']') {
        ++pos_;
        uint32_t hi;
        if (at('\\')) {
          ++pos_;
          Ranges h = escape();
          if (h.size() != 1 || h[0].lo != h[0].hi) fail("a class cannot end a range");
          hi = h[0].lo;
        } else {
          hi = utf8_char();
        }
        if (hi < item[0].lo) fail("range out of order in character class");
        item[0].hi = hi;
      }
      r.insert(r.end(), item.begin(), item.end());
    }
    ++pos_;  // ']'
    return negate ? complement(r) : normalize(r);
  }

  std::string atom(int depth) {
    char c = re_[pos_];
    if (c == '(') {
      ++pos_;
      if (at('?')) {
        if (pos_ + 1 < re_.size() && re_[pos_ + 1] == ':')
          pos_ += 2;
        else
          fail("only (?:...) groups are supported (no lookaround, named groups or flags)");
      }
      std::string inner = alternation(depth + 1);
      if (!at(')')) fail("unclosed '('");
      ++pos_;
      return "(" + (inner.empty() ? std::string("\"\"") : inner) + ")";
    }
    if (c == '[') return set_text(char_class());
    if (c == '.') {
      ++pos_;
      return set_text(complement({{'\n', '\n'}, {'\r', '\r'}}));
    }
    if (c == '\\') {
      ++pos_;
      if (pos_ < re_.size() && re_[pos_] >= '1' && re_[pos_] <= '9') fail("backreferences are not supported");
      if (pos_ < re_.size() && (re_[pos_] == 'b' || re_[pos_] == 'B')) fail("word boundaries are not supported");
      return set_text(escape());
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') fail(fmt::format("nothing to repeat before '{}'", c));
    if (c == '^' || c == '$') fail("anchors are only supported at the start and end");
    uint32_t cp = utf8_char();
    if (json_) return gbnf_literal(json_escaped(cp));
    std::string s;
    append_utf8(s, cp);
    return gbnf_literal(s);
  }
};

}  // namespace

namespace detail {
std::string regex_to_gbnf_expression(std::string_view regex, bool json_string) {
  return RegexParser(regex, json_string).parse();
}
}  // namespace detail

std::string regex_to_gbnf(std::string_view regex) {
  return "root ::= " + detail::regex_to_gbnf_expression(regex, false) + "\n";
}

}  // namespace vtc::grammar
