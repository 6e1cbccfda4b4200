// Lexer and recursive-descent parser.
//
// Lexing follows Jinja2's lexer as HF configures it:
//   1. newlines (\r\n, \r, \n) become \n and one trailing newline is dropped
//      (keep_trailing_newline=False);
//   2. text runs up to the next "{{", "{%" or "{#";
//   3. "{%-" / "{{-" / "{#-" strip all whitespace before the tag, "-%}" /
//      "-}}" / "-#}" all whitespace after it;
//   4. trim_blocks: a block or comment tag eats the one "\n" right after it;
//   5. lstrip_blocks: spaces and tabs between a line's start and a block or
//      comment tag are dropped (not before "{{", not after "{%+");
//   6. inside a tag, tokens are names, numbers, strings and operators; the
//      closing "}}" / "%}" counts only outside brackets, so a dict literal
//      can end in "}}".
// {% raw %}...{% endraw %} is copied verbatim.
//
// Expression grammar, lowest precedence first (Jinja2's parser):
//   cond    := or ["if" or ["else" cond]]
//   or      := and ("or" and)*          and := not ("and" not)*
//   not     := "not" not | compare
//   compare := add (("=="|"!="|"<"|"<="|">"|">="|"in"|"not" "in") add)*
//   add     := concat (("+"|"-") concat)*   concat := mul ("~" mul)*
//   mul     := pow (("*"|"/"|"//"|"%") pow)*  pow := unary ("**" unary)*
//   unary   := ("-"|"+") unary | primary postfix* (filter | test | call)*
// so `a + b | length` is `a + (b | length)` and `x is not none and y` works.
#include <fmt/format.h>

#include <cstdlib>
#include <optional>

#include "frontends/gguf/tokenizer/unicode_util.h"
#include "serve/jinja/ast.h"
#include "serve/jinja/template.h"

namespace vtc::jinja {
namespace {

enum class Tok { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  Tok type;
  std::string text;
  int line;
  int64_t i = 0;
  double d = 0;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(std::string_view text) {
    // Newline normalization and the dropped trailing newline.
    src_.reserve(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\r') {
        src_ += '\n';
        if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
      } else {
        src_ += text[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<Token> run() {
    bool strip_next = false;  // the previous tag ended with "-"
    while (pos_ < src_.size()) {
      size_t open = find_open(pos_);
      std::string text = src_.substr(pos_, open - pos_);
      size_t text_start = pos_;
      if (strip_next) {
        size_t k = 0;
        while (k < text.size() && is_space(text[k])) ++k;
        text.erase(0, k);
        text_start += k;
      }
      strip_next = false;
      if (open == src_.size()) {
        emit_text(text, text_start);
        break;
      }
      char kind = src_[open + 1];
      char mod = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (mod == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (kind != '{' && mod != '+') {
        lstrip_line(text, text_start);
      }
      emit_text(text, text_start);
      size_t body = open + 2 + ((mod == '-' || (mod == '+' && kind != '{')) ? 1 : 0);
      if (kind == '#') {
        size_t close = src_.find("#}", body);
        if (close == std::string::npos) fail("unterminated comment", open);
        bool dash = close > body && src_[close - 1] == '-';
        advance_to(close + 2);
        strip_next = dash;
        if (!dash) trim_newline();
        continue;
      }
      advance_to(body);
      if (kind == '%' && try_raw(strip_next)) continue;
      tokens_.push_back({kind == '{' ? Tok::VarBegin : Tok::BlockBegin, "", line_});
      strip_next = lex_tag(kind == '{' ? '}' : '%');
      if (!strip_next && kind == '%') trim_newline();
    }
    tokens_.push_back({Tok::Eof, "", line_});
    return std::move(tokens_);
  }

 private:
  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;

  [[noreturn]] void fail(const std::string& msg, size_t at) {
    int line = 1;
    for (size_t i = 0; i < at && i < src_.size(); ++i) line += src_[i] == '\n';
    throw TemplateError(msg, line);
  }

  void advance_to(size_t p) {
    for (; pos_ < p; ++pos_) line_ += src_[pos_] == '\n';
  }

  size_t find_open(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return src_.size();
  }

  // lstrip_blocks: drop [ \t]* between the line start and the tag.
  void lstrip_line(std::string& text, size_t text_start) {
    size_t nl = text.rfind('\n');
    size_t from = nl == std::string::npos ? 0 : nl + 1;
    bool line_start = nl != std::string::npos || text_start == 0 || src_[text_start - 1] == '\n';
    if (!line_start) return;
    for (size_t k = from; k < text.size(); ++k)
      if (!is_space(text[k])) return;
    text.erase(from);
  }

  void emit_text(std::string& text, size_t at) {
    advance_to(at);
    if (!text.empty()) tokens_.push_back({Tok::Text, text, line_});
    advance_to(at + text.size());
  }

  void trim_newline() {
    if (pos_ < src_.size() && src_[pos_] == '\n') advance_to(pos_ + 1);
  }

  void skip_space() {
    while (pos_ < src_.size() && is_space(src_[pos_])) advance_to(pos_ + 1);
  }

  // At "{% raw %}": copy text up to "{% endraw %}" verbatim.
  bool try_raw(bool& strip_next) {
    size_t save = pos_;
    int save_line = line_;
    skip_space();
    if (src_.compare(pos_, 3, "raw") != 0 || (pos_ + 3 < src_.size() && is_name_start(src_[pos_ + 3]))) {
      pos_ = save;
      line_ = save_line;
      return false;
    }
    advance_to(pos_ + 3);
    skip_space();
    bool dash = false;
    if (pos_ < src_.size() && src_[pos_] == '-') {
      dash = true;
      advance_to(pos_ + 1);
    }
    if (src_.compare(pos_, 2, "%}") != 0) fail("expected '%}' after 'raw'", pos_);
    advance_to(pos_ + 2);
    if (!dash) trim_newline();
    // Find {%[-] endraw [-]%}.
    for (size_t i = pos_; i + 1 < src_.size(); ++i) {
      if (src_[i] != '{' || src_[i + 1] != '%') continue;
      size_t j = i + 2;
      bool pre_dash = j < src_.size() && src_[j] == '-';
      if (pre_dash) ++j;
      while (j < src_.size() && is_space(src_[j])) ++j;
      if (src_.compare(j, 6, "endraw") != 0) continue;
      j += 6;
      while (j < src_.size() && is_space(src_[j])) ++j;
      bool post_dash = j < src_.size() && src_[j] == '-';
      if (post_dash) ++j;
      if (src_.compare(j, 2, "%}") != 0) continue;
      std::string text = src_.substr(pos_, i - pos_);
      if (dash) {
        size_t k = 0;
        while (k < text.size() && is_space(text[k])) ++k;
        text.erase(0, k);
      }
      if (pre_dash)
        while (!text.empty() && is_space(text.back())) text.pop_back();
      if (!text.empty()) tokens_.push_back({Tok::Text, text, line_});
      advance_to(j + 2);
      strip_next = post_dash;
      if (!post_dash) trim_newline();
      return true;
    }
    fail("unterminated raw block", save);
  }

  // Lexes a tag's inside up to its closer; returns whether the closer had '-'.
  bool lex_tag(char closer) {
    int depth = 0;
    size_t start = pos_;
    while (true) {
      skip_space();
      if (pos_ >= src_.size()) fail(closer == '}' ? "unterminated '{{'" : "unterminated '{%'", start);
      char c = src_[pos_];
      if (depth == 0) {
        bool dash = c == '-' && pos_ + 2 < src_.size() && src_[pos_ + 1] == closer && src_[pos_ + 2] == '}';
        if (dash || (c == closer && pos_ + 1 < src_.size() && src_[pos_ + 1] == '}')) {
          tokens_.push_back({closer == '}' ? Tok::VarEnd : Tok::BlockEnd, "", line_});
          advance_to(pos_ + (dash ? 3 : 2));
          return dash;
        }
      }
      if (is_name_start(c)) {
        size_t e = pos_;
        while (e < src_.size() && (is_name_start(src_[e]) || is_digit(src_[e]))) ++e;
        tokens_.push_back({Tok::Name, src_.substr(pos_, e - pos_), line_});
        advance_to(e);
      } else if (is_digit(c)) {
        lex_number();
      } else if (c == '\'' || c == '"') {
        lex_string(c);
      } else {
        static const char* ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                    ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|"};
        const char* found = nullptr;
        for (const char* op : ops)
          if (src_.compare(pos_, std::char_traits<char>::length(op), op) == 0) {
            found = op;
            break;
          }
        if (!found) fail(fmt::format("unexpected character '{}'", c), pos_);
        std::string op = found;
        if (op == "(" || op == "[" || op == "{") ++depth;
        if (op == ")" || op == "]" || op == "}") {
          if (depth == 0) fail(fmt::format("unbalanced '{}'", op), pos_);
          --depth;
        }
        tokens_.push_back({Tok::Op, op, line_});
        advance_to(pos_ + op.size());
      }
    }
  }

  void lex_number() {
    size_t e = pos_;
    auto digits = [&] {
      while (e < src_.size() && (is_digit(src_[e]) || src_[e] == '_')) ++e;
    };
    digits();
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
      is_float = true;
      ++e;
      digits();
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t k = e + 1;
      if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
      if (k < src_.size() && is_digit(src_[k])) {
        is_float = true;
        e = k;
        digits();
      }
    }
    std::string text;
    for (size_t k = pos_; k < e; ++k)
      if (src_[k] != '_') text += src_[k];
    Token t{is_float ? Tok::Float : Tok::Int, text, line_};
    if (is_float) {
      t.d = std::strtod(text.c_str(), nullptr);
    } else {
      errno = 0;
      t.i = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) fail("integer literal out of range", pos_);
    }
    tokens_.push_back(t);
    advance_to(e);
  }

  void lex_string(char q) {
    size_t start = pos_;
    int line = line_;
    std::string out;
    size_t i = pos_ + 1;
    auto hex = [&](size_t n) -> uint32_t {
      if (i + n >= src_.size()) fail("truncated escape in string", i);
      uint32_t v = 0;
      for (size_t k = 1; k <= n; ++k) {
        char h = src_[i + k];
        int d = is_digit(h)              ? h - '0'
                : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                         : -1;
        if (d < 0) fail("bad hex escape in string", i);
        v = v * 16 + static_cast<uint32_t>(d);
      }
      i += n;
      return v;
    };
    for (;; ++i) {
      if (i >= src_.size()) fail("unterminated string", start);
      char c = src_[i];
      if (c == q) break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (++i >= src_.size()) fail("unterminated string", start);
      switch (char e = src_[i]) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'v':
          out += '\v';
          break;
        case 'a':
          out += '\a';
          break;
        case '0':
          out += '\0';
          break;
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case '\n':
          break;  // line continuation
        case 'x':
          tok::detail::append_utf8(out, hex(2));
          break;
        case 'u':
          tok::detail::append_utf8(out, hex(4));
          break;
        case 'U':
          tok::detail::append_utf8(out, hex(8));
          break;
        default:
          out += '\\';
          out += e;
      }
    }
    tokens_.push_back({Tok::String, out, line});
    advance_to(i + 1);
  }
};

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  NodePtr parse() {
    auto body = parse_body({});
    if (peek().type != Tok::Eof) fail(fmt::format("unexpected '{}'", peek_name(1)));
    return body;
  }

 private:
  std::vector<Token> toks_;
  size_t p_ = 0;
  int depth_ = 0;
  static constexpr int kMaxDepth = 200;

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxDepth) p.fail("template nesting too deep");
    }
    ~DepthGuard() { --p.depth_; }
  };

  const Token& peek(size_t ahead = 0) const { return toks_[std::min(p_ + ahead, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = toks_[p_];
    if (p_ + 1 < toks_.size()) ++p_;
    return t;
  }
  // The name of the block statement after a BlockBegin at p_+ahead-1.
  std::string peek_name(size_t ahead) const {
    const Token& t = peek(ahead);
    return t.type == Tok::Name ? t.text : t.text.empty() ? "end of tag" : t.text;
  }

  [[noreturn]] void fail(const std::string& msg) const { throw TemplateError(msg, peek().line); }

  bool is_op(const char* op, size_t ahead = 0) const {
    const Token& t = peek(ahead);
    return t.type == Tok::Op && t.text == op;
  }
  bool is_name(const char* name, size_t ahead = 0) const {
    const Token& t = peek(ahead);
    return t.type == Tok::Name && t.text == name;
  }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(fmt::format("expected '{}', got {}", op, describe(peek())));
    next();
  }
  void expect_name(const char* name) {
    if (!is_name(name)) fail(fmt::format("expected '{}', got {}", name, describe(peek())));
    next();
  }
  std::string expect_identifier() {
    if (peek().type != Tok::Name) fail(fmt::format("expected a name, got {}", describe(peek())));
    return next().text;
  }
  void expect_block_end() {
    if (peek().type != Tok::BlockEnd) fail(fmt::format("expected end of statement '%}}', got {}", describe(peek())));
    next();
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::Eof:
        return "end of template";
      case Tok::BlockEnd:
        return "'%}'";
      case Tok::VarEnd:
        return "'}}'";
      case Tok::String:
        return "a string";
      case Tok::Text:
        return "text";
      default:
        return "'" + t.text + "'";
    }
  }

  NodePtr make(Node::Kind k) const { return std::make_shared<Node>(k, peek().line); }

  // Statements until a {% name %} with name in `ends` (left unconsumed).
  NodePtr parse_body(const std::vector<std::string>& ends) {
    DepthGuard guard(*this);
    auto body = make(Node::Kind::Body);
    while (true) {
      const Token& t = peek();
      if (t.type == Tok::Eof) {
        if (!ends.empty()) fail(fmt::format("unexpected end of template, expected '{{% {} %}}'", ends.back()));
        return body;
      }
      if (t.type == Tok::Text) {
        auto n = make(Node::Kind::Text);
        n->value = Value(next().text);
        body->kids.push_back(n);
      } else if (t.type == Tok::VarBegin) {
        next();
        auto n = make(Node::Kind::Output);
        n->kids.push_back(parse_tuple());
        if (peek().type != Tok::VarEnd) fail(fmt::format("expected '}}}}', got {}", describe(peek())));
        next();
        body->kids.push_back(n);
      } else if (t.type == Tok::BlockBegin) {
        std::string name = peek_name(1);
        for (auto& e : ends)
          if (name == e) return body;
        next();
        body->kids.push_back(parse_statement());
      } else {
        fail(fmt::format("unexpected {}", describe(t)));
      }
    }
  }

  // After a BlockBegin: consume "{% name" of an expected end tag.
  void expect_tag(const char* name) {
    if (peek().type != Tok::BlockBegin || !is_name(name, 1)) fail(fmt::format("expected '{{% {} %}}'", name));
    next();
    next();
  }

  NodePtr parse_statement() {
    int line = peek().line;
    std::string kw = expect_identifier();
    if (kw == "if") return parse_if();
    if (kw == "for") return parse_for();
    if (kw == "set") return parse_set();
    if (kw == "macro") return parse_macro();
    if (kw == "filter") return parse_filter_block();
    if (kw == "call") return parse_call_block();
    if (kw == "break" || kw == "continue") {
      auto n = std::make_shared<Node>(kw == "break" ? Node::Kind::Break : Node::Kind::Continue, line);
      expect_block_end();
      return n;
    }
    if (kw == "generation") {
      expect_block_end();
      auto body = parse_body({"endgeneration"});
      expect_tag("endgeneration");
      expect_block_end();
      return body;
    }
    throw TemplateError(fmt::format("unknown statement '{}'", kw), line);
  }

  NodePtr parse_if() {
    auto n = make(Node::Kind::If);
    n->kids.push_back(parse_expression());
    expect_block_end();
    n->kids.push_back(parse_body({"elif", "else", "endif"}));
    while (true) {
      next();  // BlockBegin
      std::string kw = next().text;
      if (kw == "elif") {
        n->kids.push_back(parse_expression());
        expect_block_end();
        n->kids.push_back(parse_body({"elif", "else", "endif"}));
      } else if (kw == "else") {
        expect_block_end();
        n->kids.push_back(nullptr);
        n->kids.push_back(parse_body({"endif"}));
      } else {
        expect_block_end();
        return n;
      }
    }
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    bool paren = is_op("(");
    if (paren) next();
    names.push_back(expect_identifier());
    while (is_op(",")) {
      next();
      names.push_back(expect_identifier());
    }
    if (paren) expect_op(")");
    return names;
  }

  NodePtr parse_for() {
    auto n = make(Node::Kind::For);
    n->names = parse_targets();
    expect_name("in");
    // The iterable is a tuple expression without a conditional, so that
    // "for x in xs if cond" reads the "if" as a filter.
    n->kids.push_back(parse_tuple(/*with_cond=*/false));
    NodePtr cond;
    if (is_name("if")) {
      next();
      cond = parse_expression();
    }
    if (is_name("recursive")) fail("recursive for loops are not supported");
    n->kids.push_back(cond);
    expect_block_end();
    n->kids.push_back(parse_body({"else", "endfor"}));
    NodePtr else_body;
    if (is_name("else", 1)) {
      next();
      next();
      expect_block_end();
      else_body = parse_body({"endfor"});
    }
    n->kids.push_back(else_body);
    expect_tag("endfor");
    expect_block_end();
    return n;
  }

  NodePtr parse_set() {
    auto n = make(Node::Kind::Set);
    std::string first = expect_identifier();
    if (is_op(".")) {
      next();
      n->is_attr = true;
      n->names = {first, expect_identifier()};
    } else {
      n->names.push_back(first);
      while (is_op(",")) {
        next();
        n->names.push_back(expect_identifier());
      }
    }
    if (is_op("=")) {
      next();
      n->kids = {parse_tuple(), nullptr, nullptr};
      expect_block_end();
      return n;
    }
    // Block set: {% set x [| filter] %}...{% endset %}
    NodePtr filter;
    if (is_op("|")) filter = parse_filters(input_name());
    expect_block_end();
    auto body = parse_body({"endset"});
    expect_tag("endset");
    expect_block_end();
    n->kids = {nullptr, body, filter};
    return n;
  }

  NodePtr input_name() {
    auto in = make(Node::Kind::Name);
    in->name = std::string(kFilterInput);
    return in;
  }

  NodePtr parse_filter_block() {
    auto n = make(Node::Kind::FilterBlock);
    auto chain = input_name();
    chain = parse_filter(chain);
    if (is_op("|")) chain = parse_filters(chain);
    expect_block_end();
    n->kids.push_back(chain);
    n->kids.push_back(parse_body({"endfilter"}));
    expect_tag("endfilter");
    expect_block_end();
    return n;
  }

  NodePtr parse_call_block() {
    auto n = make(Node::Kind::CallBlock);
    if (is_op("(")) {
      next();
      while (!is_op(")")) {
        n->names.push_back(expect_identifier());
        if (!is_op(",")) break;
        next();
      }
      expect_op(")");
    }
    auto call = parse_expression();
    if (call->kind != Node::Kind::Call) fail("'call' block expects a macro call");
    expect_block_end();
    n->kids.push_back(call);
    n->kids.push_back(parse_body({"endcall"}));
    expect_tag("endcall");
    expect_block_end();
    return n;
  }

  NodePtr parse_macro() {
    auto n = make(Node::Kind::Macro);
    n->name = expect_identifier();
    expect_op("(");
    std::vector<NodePtr> defaults;
    while (!is_op(")")) {
      n->names.push_back(expect_identifier());
      if (is_op("=")) {
        next();
        defaults.push_back(parse_expression());
      } else {
        defaults.push_back(nullptr);
      }
      if (!is_op(",")) break;
      next();
    }
    expect_op(")");
    expect_block_end();
    n->kids.push_back(parse_body({"endmacro"}));
    for (auto& d : defaults) n->kids.push_back(d);
    expect_tag("endmacro");
    if (peek().type == Tok::Name) next();  // {% endmacro name %}
    expect_block_end();
    return n;
  }

  // expr ("," expr)* -> a Tuple when there is a comma.
  NodePtr parse_tuple(bool with_cond = true) {
    auto first = with_cond ? parse_expression() : parse_or();
    if (!is_op(",")) return first;
    auto t = make(Node::Kind::Tuple);
    t->kids.push_back(first);
    while (is_op(",")) {
      next();
      if (peek().type == Tok::BlockEnd || peek().type == Tok::VarEnd || is_op(")") || is_name("if")) break;
      t->kids.push_back(with_cond ? parse_expression() : parse_or());
    }
    return t;
  }

  NodePtr parse_expression() {
    DepthGuard guard(*this);
    auto e = parse_or();
    if (!is_name("if")) return e;
    auto n = make(Node::Kind::Cond);
    next();
    auto cond = parse_or();
    NodePtr other;
    if (is_name("else")) {
      next();
      other = parse_expression();
    }
    n->kids = {cond, e, other};
    return n;
  }

  NodePtr binary(const std::string& op, NodePtr l, NodePtr r) {
    auto n = make(Node::Kind::Binary);
    n->name = op;
    n->kids = {std::move(l), std::move(r)};
    return n;
  }

  NodePtr parse_or() {
    auto l = parse_and();
    while (is_name("or")) {
      next();
      l = binary("or", l, parse_and());
    }
    return l;
  }
  NodePtr parse_and() {
    auto l = parse_not();
    while (is_name("and")) {
      next();
      l = binary("and", l, parse_not());
    }
    return l;
  }
  NodePtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      auto n = make(Node::Kind::Unary);
      next();
      n->name = "not";
      n->kids.push_back(parse_not());
      return n;
    }
    return parse_compare();
  }
  NodePtr parse_compare() {
    auto l = parse_add();
    while (true) {
      const Token& t = peek();
      std::string op;
      if (t.type == Tok::Op &&
          (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" || t.text == ">" || t.text == ">=")) {
        op = t.text;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && is_name("in", 1)) {
        op = "not in";
        next();
        next();
      } else {
        return l;
      }
      l = binary(op, l, parse_add());
    }
  }
  NodePtr parse_add() {
    auto l = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = next().text;
      l = binary(op, l, parse_concat());
    }
    return l;
  }
  NodePtr parse_concat() {
    auto l = parse_mul();
    while (is_op("~")) {
      next();
      l = binary("~", l, parse_mul());
    }
    return l;
  }
  NodePtr parse_mul() {
    auto l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = next().text;
      l = binary(op, l, parse_pow());
    }
    return l;
  }
  NodePtr parse_pow() {
    auto l = parse_unary();
    while (is_op("**")) {
      next();
      l = binary("**", l, parse_unary());
    }
    return l;
  }
  NodePtr parse_unary(bool with_filter = true) {
    DepthGuard guard(*this);
    NodePtr node;
    if (is_op("-") || is_op("+")) {
      node = make(Node::Kind::Unary);
      node->name = next().text;
      node->kids.push_back(parse_unary(false));
    } else {
      node = parse_postfix(parse_primary());
    }
    if (with_filter) node = parse_filter_expr(node);
    return node;
  }

  NodePtr parse_primary() {
    const Token& t = peek();
    auto n = make(Node::Kind::Literal);
    switch (t.type) {
      case Tok::Name: {
        std::string name = next().text;
        if (name == "true" || name == "True")
          n->value = Value(true);
        else if (name == "false" || name == "False")
          n->value = Value(false);
        else if (name == "none" || name == "None")
          n->value = Value::none();
        else {
          n->kind = Node::Kind::Name;
          n->name = name;
        }
        return n;
      }
      case Tok::String: {
        std::string s = next().text;
        while (peek().type == Tok::String) s += next().text;
        n->value = Value(s);
        return n;
      }
      case Tok::Int:
        n->value = Value(next().i);
        return n;
      case Tok::Float:
        n->value = Value(next().d);
        return n;
      case Tok::Op:
        if (t.text == "(") {
          next();
          if (is_op(")")) {
            next();
            n->kind = Node::Kind::Tuple;
            return n;
          }
          auto e = parse_tuple();
          if (e->kind == Node::Kind::Tuple) e->kids.shrink_to_fit();
          expect_op(")");
          return e;
        }
        if (t.text == "[") {
          next();
          n->kind = Node::Kind::List;
          while (!is_op("]")) {
            n->kids.push_back(parse_expression());
            if (!is_op(",")) break;
            next();
          }
          expect_op("]");
          return n;
        }
        if (t.text == "{") {
          next();
          n->kind = Node::Kind::Dict;
          while (!is_op("}")) {
            n->kids.push_back(parse_expression());
            expect_op(":");
            n->kids.push_back(parse_expression());
            if (!is_op(",")) break;
            next();
          }
          expect_op("}");
          return n;
        }
        break;
      default:
        break;
    }
    fail(fmt::format("unexpected {} in expression", describe(t)));
  }

  NodePtr parse_postfix(NodePtr node) {
    while (true) {
      if (is_op(".")) {
        next();
        auto n = make(Node::Kind::Attr);
        if (peek().type == Tok::Int) {  // foo.0 is foo[0]
          n->kind = Node::Kind::Item;
          auto idx = make(Node::Kind::Literal);
          idx->value = Value(next().i);
          n->kids = {node, idx};
        } else {
          n->name = expect_identifier();
          n->kids = {node};
        }
        node = n;
      } else if (is_op("[")) {
        next();
        node = parse_subscript(node);
      } else if (is_op("(")) {
        node = parse_call(node);
      } else {
        return node;
      }
    }
  }

  NodePtr parse_subscript(NodePtr obj) {
    NodePtr parts[3];
    bool slice = false;
    int i = 0;
    while (true) {
      if (is_op(":")) {
        slice = true;
        next();
        if (++i > 2) fail("too many ':' in slice");
        continue;
      }
      if (is_op("]")) break;
      if (parts[i]) fail("expected ':' or ']' in subscript");
      parts[i] = parse_expression();
    }
    expect_op("]");
    auto n = make(slice ? Node::Kind::Slice : Node::Kind::Item);
    if (!slice && !parts[0]) fail("empty subscript");
    n->kids.push_back(obj);
    n->kids.push_back(parts[0]);
    if (slice) {
      n->kids.push_back(parts[1]);
      n->kids.push_back(parts[2]);
    }
    return n;
  }

  // "(" args ")" into n's kids[1..] / arg_names.
  void parse_args(Node& n) {
    expect_op("(");
    while (!is_op(")")) {
      if (peek().type == Tok::Name && is_op("=", 1)) {
        n.arg_names.push_back(next().text);
        next();
      } else {
        n.arg_names.push_back("");
      }
      n.kids.push_back(parse_expression());
      if (!is_op(",")) break;
      next();
    }
    expect_op(")");
  }

  NodePtr parse_call(NodePtr callee) {
    auto n = make(Node::Kind::Call);
    n->kids.push_back(callee);
    parse_args(*n);
    return n;
  }

  NodePtr parse_filter(NodePtr operand) {
    auto n = make(Node::Kind::Filter);
    n->name = expect_identifier();
    while (is_op(".")) {  // dotted filter names
      next();
      n->name += "." + expect_identifier();
    }
    n->kids.push_back(operand);
    if (is_op("(")) parse_args(*n);
    return n;
  }

  NodePtr parse_filters(NodePtr node) {
    while (is_op("|")) {
      next();
      node = parse_filter(node);
    }
    return node;
  }

  NodePtr parse_filter_expr(NodePtr node) {
    while (true) {
      if (is_op("|")) {
        next();
        node = parse_filter(node);
      } else if (is_name("is")) {
        next();
        auto n = make(Node::Kind::Test);
        if (is_name("not")) {
          next();
          n->negated = true;
        }
        n->name = expect_identifier();
        n->kids.push_back(node);
        if (is_op("(")) {
          parse_args(*n);
        } else {
          const Token& t = peek();
          bool arg_start = t.type == Tok::String || t.type == Tok::Int || t.type == Tok::Float ||
                           (t.type == Tok::Op && (t.text == "[" || t.text == "{" || t.text == "(")) ||
                           (t.type == Tok::Name && t.text != "else" && t.text != "or" && t.text != "and" &&
                            t.text != "if" && t.text != "is" && t.text != "in" && t.text != "not");
          if (arg_start) {
            n->arg_names.push_back("");
            n->kids.push_back(parse_postfix(parse_primary()));
          }
        }
        node = n;
      } else if (is_op("(")) {
        node = parse_call(node);
      } else {
        return node;
      }
    }
  }
};

}  // namespace

NodePtr parse_template(std::string_view text) {
  Lexer lexer(text);
  Parser parser(lexer.run());
  return parser.parse();
}

}  // namespace vtc::jinja
