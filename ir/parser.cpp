// Parser for the textual IR.
//
// Two phases: a lexer turns the whole text into tokens (with line and
// column), then a recursive-descent parser walks them with one token of
// lookahead (two for signed floats). Only dimension expressions nest, and
// their depth is capped, so hostile input cannot exhaust the stack. Names
// resolve as they are read: a value must be defined before its use, which
// is the textual half of SSA dominance. Attributes are coerced to the op's
// schema (ops.def) so the printed form is canonical.
#include "ir/parser.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <llvm/ADT/StringMap.h>


#include "support/error.h"

namespace vtc::ir {
namespace {

enum class Tok { Eof, Ident, ValueName, SymbolName, Int, Float, String, Punct };

struct Token {
  Tok kind = Tok::Eof;
  std::string text;    // identifier, name without sigil, string contents, punct char
  uint64_t magnitude = 0;  // Int
  double real = 0;         // Float
  Location loc;
};

bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }
bool is_name_char(char c) { return is_ident_char(c) || c == '.'; }

[[noreturn]] void error_at(Location loc, const std::string& message) {
  throw Error(std::to_string(loc.line) + ":" + std::to_string(loc.column) + ": error: " + message);
}

class Lexer {
 public:
  Lexer(std::string_view text, int first_line) : text_(text), line_(first_line) {}

  std::vector<Token> run() {
    std::vector<Token> tokens;
    for (;;) {
      skip_space_and_comments();
      Token t;
      t.loc = {line_, column()};
      if (pos_ >= text_.size()) {
        tokens.push_back(t);
        return tokens;
      }
      char c = text_[pos_];
      if (c == 'x' && !tokens.empty() && tokens.back().kind == Tok::Int && pos_ > 0 && is_digit(text_[pos_ - 1])) {
        // Compact shapes ("4x4xf32"): an 'x' glued to an integer separates.
        t.kind = Tok::Ident;
        t.text = "x";
        ++pos_;
      } else if (is_ident_start(c)) {
        t.kind = Tok::Ident;
        t.text = take_while(is_ident_char);
      } else if (c == '%' || c == '@') {
        ++pos_;
        t.kind = c == '%' ? Tok::ValueName : Tok::SymbolName;
        t.text = take_while(is_name_char);
        if (t.text.empty()) error_at(t.loc, std::string("expected a name after '") + c + "'");
      } else if (is_digit(c)) {
        lex_number(t);
      } else if (c == '"') {
        lex_string(t);
      } else if (std::string_view("(){}<>[],:=*+-").find(c) != std::string_view::npos) {
        t.kind = Tok::Punct;
        t.text = std::string(1, c);
        ++pos_;
      } else {
        error_at(t.loc, "unexpected character '" + printable(c) + "'");
      }
      tokens.push_back(std::move(t));
    }
  }

 private:
  static std::string printable(char c) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) return std::string(1, c);
    static const char kHex[] = "0123456789abcdef";
    return std::string("\\x") + kHex[u >> 4] + kHex[u & 15];
  }

  int column() const { return static_cast<int>(pos_ - line_start_) + 1; }

  void skip_space_and_comments() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '\n') {
        ++pos_;
        ++line_;
        line_start_ = pos_;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++pos_;
      } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        return;
      }
    }
  }

  template <typename Pred>
  std::string take_while(Pred pred) {
    size_t start = pos_;
    while (pos_ < text_.size() && pred(text_[pos_])) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  void lex_number(Token& t) {
    size_t start = pos_;
    bool is_float = false;
    while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
    if (pos_ + 1 < text_.size() && text_[pos_] == '.' && is_digit(text_[pos_ + 1])) {
      is_float = true;
      for (++pos_; pos_ < text_.size() && is_digit(text_[pos_]);) ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      size_t save = pos_++;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (pos_ < text_.size() && is_digit(text_[pos_])) {
        is_float = true;
        while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
      } else {
        pos_ = save;  // not an exponent; let the 'e' lex as an identifier
      }
    }
    std::string_view s = text_.substr(start, pos_ - start);
    if (is_float) {
      t.kind = Tok::Float;
      auto r = std::from_chars(s.data(), s.data() + s.size(), t.real);
      if (r.ec != std::errc() || !std::isfinite(t.real)) error_at(t.loc, "float literal out of range");
    } else {
      t.kind = Tok::Int;
      auto r = std::from_chars(s.data(), s.data() + s.size(), t.magnitude);
      if (r.ec != std::errc()) error_at(t.loc, "integer literal out of range");
    }
    t.text = std::string(s);
  }

  void lex_string(Token& t) {
    t.kind = Tok::String;
    ++pos_;
    for (;;) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') error_at(t.loc, "unterminated string");
      char c = text_[pos_++];
      if (c == '"') return;
      if (c != '\\') {
        t.text += c;
        continue;
      }
      if (pos_ >= text_.size()) error_at(t.loc, "unterminated string");
      char e = text_[pos_++];
      if (e == '"' || e == '\\') t.text += e;
      else if (e == 'n') t.text += '\n';
      else if (e == 't') t.text += '\t';
      else if (e == 'x') t.text += static_cast<char>(hex_byte(t.loc));
      else error_at(t.loc, "unknown escape '\\" + printable(e) + "' in string");
    }
  }

  int hex_byte(Location loc) {
    int value = 0;
    for (int k = 0; k < 2; ++k) {
      char c = pos_ < text_.size() ? text_[pos_++] : '\0';
      int d = is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
      if (d < 0) error_at(loc, "\\x in a string needs two hex digits");
      value = value * 16 + d;
    }
    return value;
  }

  std::string_view text_;
  size_t pos_ = 0;
  size_t line_start_ = 0;
  int line_;
};

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Module run() {
    Module m;
    while (peek().kind != Tok::Eof) {
      Token t = expect_ident("'weight', 'state' or 'func'");
      if (t.text == "weight") parse_weight(m, t.loc);
      else if (t.text == "state") parse_state(m, t.loc);
      else if (t.text == "func") parse_function(m, t.loc);
      else error_at(t.loc, "expected 'weight', 'state' or 'func', got '" + t.text + "'");
    }
    return m;
  }

 private:
  static constexpr int kMaxDimDepth = 32;

  const Token& peek(size_t ahead = 0) const { return toks_[std::min(pos_ + ahead, toks_.size() - 1)]; }
  Token next() {
    Token t = peek();
    if (pos_ < toks_.size() - 1) ++pos_;
    return t;
  }
  bool at_punct(char c, size_t ahead = 0) const {
    return peek(ahead).kind == Tok::Punct && peek(ahead).text[0] == c;
  }
  bool accept(char c) {
    if (!at_punct(c)) return false;
    next();
    return true;
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::Eof: return "end of input";
      case Tok::Ident: return "'" + t.text + "'";
      case Tok::ValueName: return "'%" + t.text + "'";
      case Tok::SymbolName: return "'@" + t.text + "'";
      case Tok::Int:
      case Tok::Float: return "number " + t.text;
      case Tok::String: return "a string";
      case Tok::Punct: return "'" + t.text + "'";
    }
    return "?";
  }
  void expect(char c) {
    if (!accept(c)) error_at(peek().loc, std::string("expected '") + c + "', got " + describe(peek()));
  }
  Token expect_kind(Tok kind, const std::string& what) {
    if (peek().kind != kind) error_at(peek().loc, "expected " + what + ", got " + describe(peek()));
    return next();
  }
  Token expect_ident(const std::string& what) { return expect_kind(Tok::Ident, what); }

  // --- dimensions -------------------------------------------------------
  Dim parse_dim(int depth = 0) {
    Dim d = parse_dim_term(depth);
    for (;;) {
      if (accept('+')) d = d + parse_dim_term(depth);
      else if (accept('-')) d = d - parse_dim_term(depth);
      else return d;
    }
  }
  Dim parse_dim_term(int depth) {
    Dim d = parse_dim_factor(depth);
    while (accept('*')) d = d * parse_dim_factor(depth);
    return d;
  }
  Dim parse_dim_factor(int depth) {
    const Token& t = peek();
    if (depth > kMaxDimDepth) error_at(t.loc, "dimension expression nests too deeply");
    if (at_punct('-')) {
      next();
      // INT64_MIN has no positive spelling; read "-9223372036854775808" whole.
      if (peek().kind == Tok::Int && peek().magnitude == uint64_t{1} << 63) {
        next();
        return Dim(std::numeric_limits<int64_t>::min());
      }
      return Dim(0) - parse_dim_factor(depth + 1);
    }
    if (accept('(')) {
      Dim d = parse_dim(depth + 1);
      expect(')');
      return d;
    }
    if (t.kind == Tok::Int) {
      if (t.magnitude > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) error_at(t.loc, "integer out of range");
      return Dim(static_cast<int64_t>(next().magnitude));
    }
    if (t.kind == Tok::Ident && is_symbol_name(t.text)) return Dim::symbol(next().text);
    error_at(t.loc, "expected a dimension (integer or step symbol such as T), got " + describe(t));
  }
  Dim parse_dim_checked() {
    Location loc = peek().loc;
    try {
      return parse_dim();
    } catch (const Error& e) {
      std::string what = e.what();
      if (!what.empty() && what[0] >= '0' && what[0] <= '9') throw;  // already located
      error_at(loc, what);
    }
  }

  // Parses "d x d x ... x elem, placement" (after '<'), through '>'.
  void parse_type_body(Shape& shape, ElemType& elem, Placement& placement) {
    for (;;) {
      const Token& t = peek();
      if (t.kind == Tok::Ident && !is_symbol_name(t.text)) {
        Token name = next();
        auto e = ElemType::from_name(name.text);
        if (!e) error_at(name.loc, ElemType::unknown_name_reason(name.text));
        elem = *e;
        break;
      }
      Location loc = t.loc;
      Dim d = parse_dim_checked();
      if (auto k = d.constant(); k && *k < 0) error_at(loc, "dimension must not be negative");
      shape.push_back(std::move(d));
      Token x = expect_ident("'x' between dimensions");
      if (x.text != "x") error_at(x.loc, "expected 'x' between dimensions, got '" + x.text + "'");
    }
    expect(',');
    Token p = expect_ident("'host' or 'device'");
    auto pl = placement_from_name(p.text);
    if (!pl) error_at(p.loc, "expected 'host' or 'device', got '" + p.text + "'");
    placement = *pl;
    expect('>');
  }

  TensorType parse_type() {
    Token t = expect_ident("a type ('tensor<...>')");
    if (t.text != "tensor") error_at(t.loc, "expected 'tensor', got '" + t.text + "'");
    expect('<');
    TensorType type;
    parse_type_body(type.shape, type.elem, type.placement);
    return type;
  }

  // --- declarations -----------------------------------------------------
  void parse_weight(Module& m, Location loc) {
    Token name = expect_kind(Tok::SymbolName, "a weight name ('@...')");
    expect(':');
    TensorType type = parse_type();
    expect('=');
    Token g = expect_ident("'gguf'");
    if (g.text != "gguf") error_at(g.loc, "expected 'gguf', got '" + g.text + "'");
    expect('(');
    Token src = expect_kind(Tok::String, "the GGUF tensor name as a string");
    expect(')');
    m.add_weight(name.text, std::move(type), src.text).loc = loc;
  }

  void parse_state(Module& m, Location loc) {
    Token name = expect_kind(Tok::SymbolName, "a state name ('@...')");
    expect(':');
    Token kind = expect_ident("a state kind (ring, paged or plain)");
    auto k = state_kind_from_name(kind.text);
    if (!k) error_at(kind.loc, "unknown state kind '" + kind.text + "' (expected ring, paged or plain)");
    expect('<');
    TensorType type;
    parse_type_body(type.shape, type.elem, type.placement);
    m.add_state(name.text, *k, std::move(type)).loc = loc;
  }

  // --- functions --------------------------------------------------------
  void define(const Token& name, Value v) {
    if (!values_.try_emplace(name.text, v).second) error_at(name.loc, "redefinition of value %" + name.text);
  }

  Value use(const Token& name) {
    auto it = values_.find(name.text);
    if (it == values_.end()) error_at(name.loc, "use of undefined value %" + name.text);
    return it->second;
  }

  void parse_function(Module& m, Location loc) {
    Token name = expect_kind(Tok::SymbolName, "a function name ('@...')");
    Function& f = m.add_function(name.text);
    f.loc = loc;
    values_.clear();
    parse_args_and_ops(f, "func @" + f.name);
  }

  // "(%a: T, ...) { ops }" into `f`, whose values are in the current scope.
  void parse_args_and_ops(Function& f, const std::string& what) {
    expect('(');
    if (!at_punct(')')) {
      do {
        Token arg = expect_kind(Tok::ValueName, "an argument name ('%...')");
        expect(':');
        define(arg, f.add_arg(arg.text, parse_type()));
      } while (accept(','));
    }
    expect(')');
    expect('{');
    while (!accept('}')) {
      if (peek().kind == Tok::Eof) error_at(peek().loc, "expected '}' to close " + what);
      parse_op(f);
    }
  }

  // The body of a fused op: a function with its own value scope (it sees
  // only its arguments). Bodies do not nest.
  void parse_body(Op& op, Location loc) {
    if (in_body_) error_at(loc, "a fused body cannot contain another body");
    auto body = std::make_unique<Function>();
    body->name = "body";
    body->loc = loc;
    auto outer = std::move(values_);
    values_.clear();
    in_body_ = true;
    parse_args_and_ops(*body, "the body of '" + std::string(op.mnemonic()) + "'");
    in_body_ = false;
    values_ = std::move(outer);
    op.body = std::move(body);
  }

  void parse_op(Function& f) {
    Location loc = peek().loc;
    std::vector<Token> result_names;
    if (peek().kind == Tok::ValueName) {
      do result_names.push_back(expect_kind(Tok::ValueName, "a result name ('%...')"));
      while (accept(','));
      expect('=');
    }
    Token mn = expect_ident("an op name");
    const OpInfo* info = find_op(mn.text);
    if (!info) error_at(mn.loc, "unknown op '" + mn.text + "'");
    expect('(');
    std::vector<Value> operands;
    if (!at_punct(')')) {
      do operands.push_back(use(expect_kind(Tok::ValueName, "an operand ('%...')")));
      while (accept(','));
    }
    expect(')');
    std::vector<NamedAttr> attrs;
    if (accept('{')) parse_attrs(*info, attrs);
    std::vector<TensorType> types;
    if (accept(':')) {
      do types.push_back(parse_type());
      while (accept(','));
    }
    if (types.size() != result_names.size())
      error_at(loc, "op '" + mn.text + "' names " + std::to_string(result_names.size()) + " results but gives " +
                        std::to_string(types.size()) + " types");
    std::vector<std::string> names;
    for (const auto& r : result_names) names.push_back(r.text);
    Op& op = f.append(info->kind, std::move(operands), std::move(types), std::move(attrs), names);
    op.loc = loc;
    if (peek().kind == Tok::Ident && peek().text == "body") parse_body(op, next().loc);
    for (size_t i = 0; i < result_names.size(); ++i) define(result_names[i], op.results[i]);
  }

  // --- attributes -------------------------------------------------------
  void parse_attrs(const OpInfo& info, std::vector<NamedAttr>& attrs) {
    if (accept('}')) return;
    do {
      Token name = expect_ident("an attribute name");
      for (const auto& a : attrs)
        if (a.name == name.text) error_at(name.loc, "duplicate attribute '" + name.text + "'");
      expect('=');
      Attr value = parse_attr_value();
      if (const AttrSpec* spec = info.find_attr(name.text)) coerce_attr(value, spec->kind);
      attrs.push_back({name.text, std::move(value)});
    } while (accept(','));
    expect('}');
  }

  // A signed float, or nullopt when the next tokens are not one.
  std::optional<double> try_float() {
    bool negative = at_punct('-');
    const Token& t = peek(negative ? 1 : 0);
    double v;
    if (t.kind == Tok::Float) v = t.real;
    else if (t.kind == Tok::Ident && t.text == "inf") v = std::numeric_limits<double>::infinity();
    else if (t.kind == Tok::Ident && t.text == "nan") v = std::numeric_limits<double>::quiet_NaN();
    else return std::nullopt;
    if (negative) next();
    next();
    return negative ? -v : v;
  }

  Attr parse_attr_value() {
    const Token& t = peek();
    if (t.kind == Tok::String) return Attr::of_string(next().text);
    if (t.kind == Tok::SymbolName) return Attr::of_symbol(next().text);
    if (at_punct('[')) return parse_list();
    if (auto f = try_float()) return Attr::of_float(*f);
    if (t.kind == Tok::Ident && !is_symbol_name(t.text)) {
      Token id = next();
      if (id.text == "true" || id.text == "false") return Attr::of_bool(id.text == "true");
      return Attr::of_enum(id.text);
    }
    Dim d = parse_dim_checked();
    if (auto k = d.constant()) return Attr::of_int(*k);
    return Attr::of_dim(std::move(d));
  }

  // [a, b, ...]: ints, floats (if any element is a float) or dims (if any
  // element has a symbol). Floats and symbols cannot mix.
  Attr parse_list() {
    Location loc = peek().loc;
    expect('[');
    std::vector<Dim> dims;
    std::vector<double> floats;
    bool any_float = false, any_symbol = false;
    if (!at_punct(']')) {
      do {
        if (auto f = try_float()) {
          any_float = true;
          floats.push_back(*f);
          continue;
        }
        Dim d = parse_dim_checked();
        if (auto k = d.constant()) floats.push_back(static_cast<double>(*k));
        else any_symbol = true;
        dims.push_back(std::move(d));
      } while (accept(','));
    }
    expect(']');
    if (any_float && any_symbol) error_at(loc, "a list cannot mix floats and symbolic dimensions");
    if (any_float) return Attr::of_floats(std::move(floats));
    if (any_symbol) return Attr::of_dims(std::move(dims));
    std::vector<int64_t> ints;
    for (const auto& d : dims) ints.push_back(*d.constant());
    return Attr::of_ints(std::move(ints));
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  llvm::StringMap<Value> values_;  // SSA names of the function being parsed
  bool in_body_ = false;
};

}  // namespace

Module parse(std::string_view text, const ParseOptions& options) {
  return Parser(Lexer(text, options.first_line).run()).run();
}

std::vector<SourceCase> split_source_cases(const std::string& text, bool split) {
  std::vector<SourceCase> cases{{"", 1}};
  size_t start = 0;
  int line_no = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    start = end == std::string::npos ? text.size() : end + 1;
    ++line_no;
    if (split && line.rfind("// -----", 0) == 0) {
      cases.push_back({"", line_no + 1});
      continue;
    }
    cases.back().text += line + "\n";
  }
  return cases;
}

}  // namespace vtc::ir
