// The PEG engine's evaluator: one function per combinator kind over a
// tree of immutable nodes (see peg.h for the semantics). Recursion (JSON
// values contain values) goes through a Lazy node bound once.
#include "serve/chat/peg.h"

#include <cctype>
#include <utility>

namespace vtc::chat::peg {

enum class Kind { Eps, End, Literal, Seq, Choice, Repeat, Peek, Not, Any, Space, Chars, String, Until, Tag, Atomic, Lazy };

struct Node {
  explicit Node(Kind k) : kind(k) {}
  Kind kind;
  std::string text;                 // Literal text, Tag name, Chars set
  std::vector<std::string> delims;  // Until
  std::vector<Parser> kids;
  int min = 0, max = 0;
  char delimiter = '"';
  const Parser* lazy = nullptr;
};

namespace {

Parser make(Node n) { return std::make_shared<const Node>(std::move(n)); }

enum class Utf8 { Ok, Incomplete, Invalid };

// Length of the UTF-8 sequence at pos, or why there is none.
Utf8 utf8_at(std::string_view s, size_t pos, size_t& len) {
  const auto c = static_cast<unsigned char>(s[pos]);
  if (c < 0x80) {
    len = 1;
    return Utf8::Ok;
  }
  if ((c & 0xE0) == 0xC0) len = 2;
  else if ((c & 0xF0) == 0xE0) len = 3;
  else if ((c & 0xF8) == 0xF0) len = 4;
  else return Utf8::Invalid;
  for (size_t i = 1; i < len; ++i) {
    if (pos + i >= s.size()) return Utf8::Incomplete;
    if ((static_cast<unsigned char>(s[pos + i]) & 0xC0) != 0x80) return Utf8::Invalid;
  }
  return Utf8::Ok;
}

Result make_result(Outcome o, size_t start, size_t end, std::vector<size_t> nodes = {}) {
  Result r;
  r.outcome = o;
  r.start = start;
  r.end = end;
  r.nodes = std::move(nodes);
  return r;
}

bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

}  // namespace

Parser eps() { return make(Node(Kind::Eps)); }
Parser end() { return make(Node(Kind::End)); }
Parser lit(std::string text) {
  Node n(Kind::Literal);
  n.text = std::move(text);
  return make(std::move(n));
}
Parser seq(std::vector<Parser> parts) {
  Node n(Kind::Seq);
  n.kids = std::move(parts);
  return make(std::move(n));
}
Parser choice(std::vector<Parser> options) {
  Node n(Kind::Choice);
  n.kids = std::move(options);
  return make(std::move(n));
}
Parser repeat(Parser p, int min, int max) {
  Node n(Kind::Repeat);
  n.kids = {std::move(p)};
  n.min = min;
  n.max = max;
  return make(std::move(n));
}
Parser peek(Parser p) {
  Node n(Kind::Peek);
  n.kids = {std::move(p)};
  return make(std::move(n));
}
Parser negate(Parser p) {
  Node n(Kind::Not);
  n.kids = {std::move(p)};
  return make(std::move(n));
}
Parser any_char() { return make(Node(Kind::Any)); }
Parser space() { return make(Node(Kind::Space)); }
Parser chars(std::string set, int min, int max) {
  Node n(Kind::Chars);
  n.text = std::move(set);
  n.min = min;
  n.max = max;
  return make(std::move(n));
}
Parser string_body(char delimiter) {
  Node n(Kind::String);
  n.delimiter = delimiter;
  return make(std::move(n));
}
Parser until(std::vector<std::string> delimiters) {
  Node n(Kind::Until);
  n.delims = std::move(delimiters);
  return make(std::move(n));
}
Parser tag(std::string name, Parser p) {
  Node n(Kind::Tag);
  n.text = std::move(name);
  n.kids = {std::move(p)};
  return make(std::move(n));
}
Parser atomic(Parser p) {
  Node n(Kind::Atomic);
  n.kids = {std::move(p)};
  return make(std::move(n));
}

Parser optspace(const std::string& marker) {
  size_t first = 0;
  while (first < marker.size() && std::isspace(static_cast<unsigned char>(marker[first]))) ++first;
  size_t last = marker.size();
  while (last > first && std::isspace(static_cast<unsigned char>(marker[last - 1]))) --last;
  if (first == marker.size()) first = last = marker.size();  // all whitespace: each char optional
  std::vector<Parser> parts;
  for (size_t i = 0; i < first; ++i) parts.push_back(optional(lit(std::string(1, marker[i]))));
  parts.push_back(lit(marker.substr(first, last - first)));
  for (size_t i = last; i < marker.size(); ++i) parts.push_back(optional(lit(std::string(1, marker[i]))));
  return seq(std::move(parts));
}

namespace {

struct JsonGrammar {
  Parser value, number;
};

const JsonGrammar& json_grammar() {
  // Built once; `value` is bound after the containers that refer to it.
  static const JsonGrammar grammar = [] {
    static Parser value;
    Node lazy(Kind::Lazy);
    lazy.lazy = &value;
    const Parser ref = make(std::move(lazy));
    const Parser ws = space();
    const Parser str = seq({lit("\""), string_body('"'), lit("\"")});
    const Parser member = seq({str, ws, lit(":"), ws, ref});
    const Parser members = seq({member, zero_or_more(seq({ws, lit(","), ws, member}))});
    const Parser object = seq({lit("{"), ws, choice({lit("}"), seq({members, ws, lit("}")})})});
    const Parser elements = seq({ref, zero_or_more(seq({ws, lit(","), ws, ref}))});
    const Parser array = seq({lit("["), ws, choice({lit("]"), seq({elements, ws, lit("]")})})});
    const Parser digits = chars("0123456789", 1, -1);
    const Parser int_part = choice({lit("0"), seq({chars("123456789", 1, 1), chars("0123456789", 0, -1)})});
    const Parser frac = seq({lit("."), digits});
    const Parser exp = seq({choice({lit("e"), lit("E")}), optional(chars("+-", 1, 1)), digits});
    // A number is only complete once the next character cannot extend it.
    const Parser number = seq({optional(lit("-")), int_part, optional(frac), optional(exp),
                               negate(chars("0123456789.eE+-", 1, 1))});
    const Parser boolean = choice({lit("true"), lit("false")});
    value = choice({object, array, str, number, boolean, lit("null")});
    return JsonGrammar{value, number};
  }();
  return grammar;
}

}  // namespace

Parser json() { return json_grammar().value; }
Parser json_number() { return json_grammar().number; }

size_t Context::add_node(std::string tag_name, size_t start, size_t end_pos, std::vector<size_t> children,
                         bool partial) {
  AstNode n;
  n.tag = std::move(tag_name);
  if (start < input_.size()) n.text = input_.substr(start, end_pos - start);
  n.children = std::move(children);
  n.partial = partial;
  nodes_.push_back(std::move(n));
  return nodes_.size() - 1;
}

namespace {

Result parse_node(Context& ctx, const Node& p, size_t start);

Result parse_literal(Context& ctx, const Node& p, size_t start) {
  const auto in = ctx.input();
  size_t pos = start;
  for (char c : p.text) {
    if (pos >= in.size()) return make_result(Outcome::NeedMore, start, pos);
    if (in[pos] != c) return make_result(Outcome::Fail, start, start);
    ++pos;
  }
  return make_result(Outcome::Success, start, pos);
}

Result parse_seq(Context& ctx, const Node& p, size_t start) {
  size_t pos = start;
  std::vector<size_t> nodes;
  for (const auto& kid : p.kids) {
    Result r = parse_node(ctx, *kid, pos);
    if (r.fail()) return make_result(Outcome::Fail, start, r.end);
    nodes.insert(nodes.end(), r.nodes.begin(), r.nodes.end());
    if (r.need_more()) return make_result(Outcome::NeedMore, start, r.end, std::move(nodes));
    pos = r.end;
  }
  return make_result(Outcome::Success, start, pos, std::move(nodes));
}

Result parse_choice(Context& ctx, const Node& p, size_t start) {
  for (const auto& kid : p.kids) {
    Result r = parse_node(ctx, *kid, start);
    if (!r.fail()) return r;
  }
  return make_result(Outcome::Fail, start, start);
}

Result parse_repeat(Context& ctx, const Node& p, size_t start) {
  const auto in = ctx.input();
  size_t pos = start;
  int count = 0;
  std::vector<size_t> nodes;
  while (p.max == -1 || count < p.max) {
    if (pos >= in.size()) break;
    Result r = parse_node(ctx, *p.kids[0], pos);
    if (r.success()) {
      if (r.end == pos) break;  // an empty match would loop forever
      nodes.insert(nodes.end(), r.nodes.begin(), r.nodes.end());
      pos = r.end;
      ++count;
      continue;
    }
    if (r.need_more()) {
      nodes.insert(nodes.end(), r.nodes.begin(), r.nodes.end());
      return make_result(Outcome::NeedMore, start, r.end, std::move(nodes));
    }
    break;
  }
  if (p.min > 0 && count < p.min) {
    if (pos >= in.size()) return make_result(Outcome::NeedMore, start, pos, std::move(nodes));
    return make_result(Outcome::Fail, start, pos);
  }
  return make_result(Outcome::Success, start, pos, std::move(nodes));
}

Result parse_chars(Context& ctx, const Node& p, size_t start) {
  const auto in = ctx.input();
  size_t pos = start;
  int count = 0;
  while (p.max == -1 || count < p.max) {
    if (pos >= in.size()) break;
    size_t len = 0;
    const Utf8 u = utf8_at(in, pos, len);
    if (u == Utf8::Incomplete) {
      if (count >= p.min) return make_result(Outcome::Success, start, pos);
      return make_result(Outcome::NeedMore, start, pos);
    }
    if (u == Utf8::Invalid) {
      if (count >= p.min) return make_result(Outcome::Success, start, pos);
      return make_result(Outcome::Fail, start, start);
    }
    if (len != 1 || p.text.find(in[pos]) == std::string::npos) break;
    ++pos;
    ++count;
  }
  if (count < p.min) {
    if (pos >= in.size()) return make_result(Outcome::NeedMore, start, pos);
    return make_result(Outcome::Fail, start, pos);
  }
  return make_result(Outcome::Success, start, pos);
}

// A backslash escape at pos; on NeedMore, pos is left before the backslash
// so half an escape never becomes text.
Result parse_escape(std::string_view in, size_t start, size_t& pos, char delimiter) {
  const size_t save = pos;
  ++pos;
  if (pos >= in.size()) {
    pos = save;
    return make_result(Outcome::NeedMore, start, pos);
  }
  const char c = in[pos];
  if (c == delimiter || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
    ++pos;
    return make_result(Outcome::Success, start, pos);
  }
  if (c != 'u') return make_result(Outcome::Fail, start, start);
  ++pos;
  for (int i = 0; i < 4; ++i) {
    if (pos >= in.size()) {
      pos = save;
      return make_result(Outcome::NeedMore, start, pos);
    }
    if (!is_hex(in[pos])) return make_result(Outcome::Fail, start, start);
    ++pos;
  }
  return make_result(Outcome::Success, start, pos);
}

Result parse_string(Context& ctx, const Node& p, size_t start) {
  const auto in = ctx.input();
  size_t pos = start;
  while (pos < in.size()) {
    const char c = in[pos];
    if (c == p.delimiter) return make_result(Outcome::Success, start, pos);
    if (c == '\\') {
      Result r = parse_escape(in, start, pos, p.delimiter);
      if (!r.success()) return r;
      continue;
    }
    size_t len = 0;
    const Utf8 u = utf8_at(in, pos, len);
    if (u == Utf8::Incomplete) return make_result(Outcome::NeedMore, start, pos);
    if (u == Utf8::Invalid) return make_result(Outcome::Fail, start, start);
    pos += len;
  }
  return make_result(Outcome::NeedMore, start, pos);
}

enum class Match { None, Partial, Complete };

Match delimiter_at(std::string_view in, size_t pos, const std::vector<std::string>& delims) {
  const std::string_view tail = in.substr(pos);
  bool partial = false;
  for (const auto& d : delims) {
    if (d.empty()) continue;
    if (tail.size() >= d.size()) {
      if (tail.compare(0, d.size(), d) == 0) return Match::Complete;
    } else if (!tail.empty() && d.compare(0, tail.size(), tail) == 0) {
      partial = true;
    }
  }
  return partial ? Match::Partial : Match::None;
}

Result parse_until(Context& ctx, const Node& p, size_t start) {
  const auto in = ctx.input();
  // Only a delimiter's first byte can start a match: skip the rest fast.
  bool first_byte[256] = {};
  for (const auto& d : p.delims) {
    if (!d.empty()) first_byte[static_cast<unsigned char>(d[0])] = true;
  }
  size_t pos = start;
  while (pos < in.size()) {
    const auto c = static_cast<unsigned char>(in[pos]);
    if (c < 0x80 && !first_byte[c]) {
      ++pos;
      continue;
    }
    size_t len = 0;
    const Utf8 u = utf8_at(in, pos, len);
    if (u == Utf8::Incomplete) return make_result(Outcome::NeedMore, start, pos);
    if (u == Utf8::Invalid) return make_result(Outcome::Fail, start, start);
    if (first_byte[c] && delimiter_at(in, pos, p.delims) != Match::None) return make_result(Outcome::Success, start, pos);
    pos += len;
  }
  return make_result(Outcome::NeedMore, start, pos);
}

Result parse_kind(Context& ctx, const Node& p, size_t start);

Result parse_node(Context& ctx, const Node& p, size_t start) {
  if (ctx.depth >= Context::kMaxDepth) return make_result(Outcome::Fail, start, start);
  ++ctx.depth;
  Result r = parse_kind(ctx, p, start);
  --ctx.depth;
  return r;
}

Result parse_kind(Context& ctx, const Node& p, size_t start) {
  const auto in = ctx.input();
  switch (p.kind) {
    case Kind::Eps:
      return make_result(Outcome::Success, start, start);
    case Kind::End:
      return make_result(start >= in.size() ? Outcome::Success : Outcome::Fail, start, start);
    case Kind::Literal:
      return parse_literal(ctx, p, start);
    case Kind::Seq:
      return parse_seq(ctx, p, start);
    case Kind::Choice:
      return parse_choice(ctx, p, start);
    case Kind::Repeat:
      return parse_repeat(ctx, p, start);
    case Kind::Peek: {
      Result r = parse_node(ctx, *p.kids[0], start);
      return make_result(r.outcome, start, start);
    }
    case Kind::Not: {
      Result r = parse_node(ctx, *p.kids[0], start);
      if (r.success()) return make_result(Outcome::Fail, start, start);
      if (r.need_more()) return make_result(Outcome::NeedMore, start, start);
      return make_result(Outcome::Success, start, start);
    }
    case Kind::Any: {
      if (start >= in.size()) return make_result(Outcome::NeedMore, start, start);
      size_t len = 0;
      const Utf8 u = utf8_at(in, start, len);
      if (u == Utf8::Incomplete) return make_result(Outcome::NeedMore, start, start);
      if (u == Utf8::Invalid) return make_result(Outcome::Fail, start, start);
      return make_result(Outcome::Success, start, start + len);
    }
    case Kind::Space: {
      size_t pos = start;
      while (pos < in.size() && std::isspace(static_cast<unsigned char>(in[pos]))) ++pos;
      return make_result(Outcome::Success, start, pos);
    }
    case Kind::Chars:
      return parse_chars(ctx, p, start);
    case Kind::String:
      return parse_string(ctx, p, start);
    case Kind::Until:
      return parse_until(ctx, p, start);
    case Kind::Tag: {
      Result r = parse_node(ctx, *p.kids[0], start);
      if (r.fail()) return r;
      const size_t id = ctx.add_node(p.text, r.start, r.end, std::move(r.nodes), r.need_more());
      return make_result(r.outcome, r.start, r.end, {id});
    }
    case Kind::Atomic: {
      Result r = parse_node(ctx, *p.kids[0], start);
      if (r.need_more()) r.nodes.clear();
      return r;
    }
    case Kind::Lazy:
      return parse_node(ctx, **p.lazy, start);
  }
  return make_result(Outcome::Fail, start, start);
}

}  // namespace

Result Context::parse(const Parser& p, size_t pos) { return parse_node(*this, *p, pos); }

}  // namespace vtc::chat::peg
