// A small PEG combinator engine for parsing model output while it streams.
//
// The grammars that serve/chat builds per template family are expressions
// over these combinators. Parsing is always "lenient": running out of input
// in the middle of an expression is not a failure but NEED_MORE, with the
// end of what was consumed, so a prefix of a valid output parses as far as
// it goes. This is the semantics of the llama.cpp reference's chat parser
// (common/peg-parser), reimplemented here so that vtc's results equal it:
//
//  - literal: NEED_MORE when the input ends inside it, FAIL on a mismatch;
//  - sequence: stops at the first FAIL (dropping its nodes) or NEED_MORE
//    (keeping them);
//  - choice: the first option that does not FAIL;
//  - repeat(min,max): stops at the end of input, on an empty match, or on a
//    FAIL; NEED_MORE from the child propagates;
//  - until(delims): everything up to the first delimiter, or up to a proper
//    prefix of one that reaches the end of input (held back: it may become
//    the delimiter); NEED_MORE when it runs to the end;
//  - tag(name, p): records an AST node with p's span (also when NEED_MORE);
//  - atomic(p): a NEED_MORE result keeps no nodes, so half a marker never
//    reaches the output.
// Nodes are mapped to a message by chat/peg_mapper.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace vtc::chat::peg {

enum class Outcome { Fail, NeedMore, Success };

struct AstNode {
  std::string tag;
  std::string_view text;
  std::vector<size_t> children;
  bool partial = false;
};

struct Result {
  Outcome outcome = Outcome::Fail;
  size_t start = 0, end = 0;
  std::vector<size_t> nodes;
  bool fail() const { return outcome == Outcome::Fail; }
  bool need_more() const { return outcome == Outcome::NeedMore; }
  bool success() const { return outcome == Outcome::Success; }
};

struct Node;
using Parser = std::shared_ptr<const Node>;

// Grammar constructors.
Parser eps();
Parser end();
Parser lit(std::string text);
Parser seq(std::vector<Parser> parts);
Parser choice(std::vector<Parser> options);
Parser repeat(Parser p, int min, int max);  // max -1: unbounded
inline Parser optional(Parser p) { return repeat(std::move(p), 0, 1); }
inline Parser zero_or_more(Parser p) { return repeat(std::move(p), 0, -1); }
inline Parser one_or_more(Parser p) { return repeat(std::move(p), 1, -1); }
Parser peek(Parser p);
Parser negate(Parser p);
Parser any_char();
Parser space();
// ASCII character class: the bytes in `set` (ranges written out), min..max times.
Parser chars(std::string set, int min, int max);
Parser string_body(char delimiter);  // JSON-style string content up to an unescaped delimiter
Parser until(std::vector<std::string> delimiters);
inline Parser until(std::string delimiter) { return until(std::vector<std::string>{std::move(delimiter)}); }
inline Parser rest() { return until(std::vector<std::string>{}); }
Parser tag(std::string name, Parser p);
Parser atomic(Parser p);
// Optional whitespace around a marker: the marker's own leading and trailing
// whitespace characters each become optional.
Parser optspace(const std::string& marker);
// A JSON value (object, array, string, number, true/false/null).
Parser json();
Parser json_number();

// One parse over one input; the AST arena lives here.
class Context {
 public:
  explicit Context(std::string_view input) : input_(input) {}
  std::string_view input() const { return input_; }
  Result parse(const Parser& p, size_t pos = 0);
  const AstNode& node(size_t id) const { return nodes_[id]; }
  size_t add_node(std::string tag, size_t start, size_t end, std::vector<size_t> children, bool partial);

  // Nesting guard: model output can nest JSON arbitrarily deep, and each
  // level is a few frames of recursion. Past the limit a parse fails.
  static constexpr int kMaxDepth = 4000;
  int depth = 0;

 private:
  std::string_view input_;
  std::vector<AstNode> nodes_;
};

}  // namespace vtc::chat::peg
