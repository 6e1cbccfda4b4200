// A GBNF grammar, parsed into a flat element table for the stack-set
// matcher (matcher.h). Syntax and meaning follow llama.cpp's
// grammars/README.md:
//
//   rule-name ::= alternative | alternative ...     one rule per line
//   "literal" with \x.. \u.... \U........ \t \r \n \\ \" \[ \] \- escapes
//   [a-z0-9_] [^"\\] character classes (ranges, negation), . any character
//   ( ... ) groups, * + ? {m} {m,} {m,n} repetition, # comments
//   newlines end a rule except inside ( ) and after |
//
// Representation: every rule is a list of alternatives; every alternative
// is a run of elements in one flat array, closed by an kEnd element. An
// element is a character set (ranges over Unicode code points, possibly
// negated) or a reference to a rule. Groups and repetitions are rewritten
// into generated rules at parse time:
//   S*  -> R ::= S R |          S+ -> S R
//   S?  -> R ::= S |            S{m,n} -> S..S (m times) O(n-m),
//                                         O(k) ::= S O(k-1) |
// A matcher position is an index into that array. Left recursion (a rule
// that can reach itself before consuming a character) is rejected at parse
// time, since the matcher's rule expansion would not terminate on it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "support/error.h"

namespace vtc::grammar {

// Bad grammar text, schema or regex. The message names the place
// (line:column for GBNF, the keyword for schemas, the offset for regexes)
// and the problem.
class GrammarError : public vtc::Error {
 public:
  explicit GrammarError(const std::string& message) : vtc::Error(message) {}
};

struct CodeRange {
  uint32_t lo, hi;  // inclusive
};

struct Element {
  enum Kind : uint8_t { kEnd, kChars, kCharsNot, kRuleRef };
  Kind kind = kEnd;
  uint32_t a = 0;  // kChars/kCharsNot: first range in Grammar::ranges; kRuleRef: rule id
  uint32_t b = 0;  // kChars/kCharsNot: number of ranges
};

class Grammar {
 public:
  std::vector<Element> elements;                    // alternatives, each closed by kEnd
  std::vector<CodeRange> ranges;                    // the character sets' ranges
  std::vector<std::vector<uint32_t>> alternatives;  // rule id -> first element of each alternative
  std::vector<std::string> rule_names;              // rule id -> name (generated: parent_N)
  uint32_t root = 0;

  // Whether the character set at `pos` contains code point `cp`.
  bool chars_match(uint32_t pos, uint32_t cp) const {
    const Element& e = elements[pos];
    bool in = false;
    for (uint32_t i = e.a; i < e.a + e.b && !in; ++i) in = ranges[i].lo <= cp && cp <= ranges[i].hi;
    return in != (e.kind == Element::kCharsNot);
  }
  // Whether some code point in [lo, hi] is in the character set at `pos`.
  bool chars_overlap(uint32_t pos, uint32_t lo, uint32_t hi) const;
  // Whether the text, as a whole, is in the language of the root rule.
  bool matches(std::string_view text) const;
};

// Throws GrammarError for bad syntax, an undefined rule, a missing root,
// left recursion or a grammar that expands beyond a sane size.
std::shared_ptr<const Grammar> parse_gbnf(std::string_view text, std::string_view root = "root");

}  // namespace vtc::grammar
