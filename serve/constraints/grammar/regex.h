// Regular expressions -> GBNF, for `pattern` in JSON schemas and for
// regex-constrained output.
//
// The subset: literals and escapes (\t \n \r \f \v \xHH \uHHHH, escaped
// punctuation), classes [...] with ranges and negation, \d \D \w \W \s \S,
// ., groups (...) and (?:...), alternation |, and the quantifiers * + ?
// {m} {m,} {m,n} (a lazy ? suffix is accepted: it does not change what a
// whole match is). ^ and $ are allowed only at the very start and end.
// Anything else (backreferences, lookaround, \b, named groups, possessive
// quantifiers) is a GrammarError naming the offset and the construct.
#pragma once

#include <string>
#include <string_view>

namespace vtc::grammar {

// A grammar ("root ::= ...") for the strings the regex matches as a whole.
std::string regex_to_gbnf(std::string_view regex);

namespace detail {
// A GBNF expression (no rule name). json_string: the expression matches
// the JSON-encoded text of a string's content (quotes, backslashes and
// control characters appear escaped, and . and negated classes never yield
// a raw one), and with JSON Schema's search semantics: a side without an
// anchor (^ or $) may have any characters there.
std::string regex_to_gbnf_expression(std::string_view regex, bool json_string);
}  // namespace detail

}  // namespace vtc::grammar
