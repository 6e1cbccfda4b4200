// GBNF parsing (syntax, errors with line:column, left recursion) and whole-
// string matching through the stack-set engine.
#include <catch2/catch.hpp>

#include "serve/constraints/grammar/grammar.h"

using vtc::grammar::GrammarError;
using vtc::grammar::parse_gbnf;

namespace {

bool accepts(const std::string& grammar, const std::string& text) { return parse_gbnf(grammar)->matches(text); }

std::string error_of(const std::string& grammar) {
  try {
    parse_gbnf(grammar);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("gbnf: literals, classes, groups and alternatives", "[grammar]") {
  const std::string g = R"(
# a comment
root ::= greeting " " name ("!" | "?")   # trailing comment
greeting ::= "hello" | "hi"
name ::= [A-Z] [a-z]*
)";
  CHECK(accepts(g, "hello World!"));
  CHECK(accepts(g, "hi Bob?"));
  CHECK_FALSE(accepts(g, "hello world!"));
  CHECK_FALSE(accepts(g, "hello World"));
  CHECK_FALSE(accepts(g, "hey World!"));
}

TEST_CASE("gbnf: repetition operators", "[grammar]") {
  CHECK(accepts(R"(root ::= "a"*)", ""));
  CHECK(accepts(R"(root ::= "a"*)", "aaaa"));
  CHECK_FALSE(accepts(R"(root ::= "a"+)", ""));
  CHECK(accepts(R"(root ::= "ab"+)", "ababab"));
  CHECK_FALSE(accepts(R"(root ::= "ab"+)", "aba"));
  CHECK(accepts(R"(root ::= "a"? "b")", "b"));
  CHECK(accepts(R"(root ::= "a"? "b")", "ab"));
  const std::string rep = R"(root ::= [0-9]{2,4})";
  CHECK_FALSE(accepts(rep, "1"));
  CHECK(accepts(rep, "12"));
  CHECK(accepts(rep, "1234"));
  CHECK_FALSE(accepts(rep, "12345"));
  CHECK(accepts(R"(root ::= "x"{3})", "xxx"));
  CHECK_FALSE(accepts(R"(root ::= "x"{3})", "xx"));
  CHECK(accepts(R"(root ::= "x"{2,})", "xxxxxxx"));
  CHECK_FALSE(accepts(R"(root ::= "x"{2,})", "x"));
  CHECK(accepts(R"(root ::= ("a" | "b"){0,2} "c")", "bac"));
  CHECK_FALSE(accepts(R"(root ::= ("a" | "b"){0,2} "c")", "abac"));
  CHECK(accepts(R"(root ::= ("a" | "b"){0,2} "c")", "bc"));
}

TEST_CASE("gbnf: negated classes, any char, escapes and UTF-8", "[grammar]") {
  CHECK(accepts(R"(root ::= "\"" [^"\\]* "\"")", "\"abc\""));
  CHECK_FALSE(accepts(R"(root ::= "\"" [^"\\]* "\"")", "\"a\"c\""));
  CHECK(accepts(R"(root ::= . . .)", "a\xC3\xA9z"));  // é is one character
  CHECK_FALSE(accepts(R"(root ::= . .)", "a\xC3\xA9z"));
  CHECK(accepts(R"(root ::= "\x41\u00e9\U0001F600\t\n")", "A\xC3\xA9\xF0\x9F\x98\x80\t\n"));
  CHECK(accepts(R"(root ::= [\u4e00-\u9fff]+)", "\xE4\xB8\xAD\xE6\x96\x87"));
  CHECK_FALSE(accepts(R"(root ::= [\u4e00-\u9fff]+)", "abc"));
  CHECK(accepts(R"(root ::= [a\-z]+)", "-az"));
  CHECK_FALSE(accepts(R"(root ::= [a\-z]+)", "b"));
  CHECK(accepts(R"(root ::= [a-]+)", "a-"));
  CHECK(accepts("root ::= \"日本\"", "日本"));
}

TEST_CASE("gbnf: newlines end rules except inside groups and after |", "[grammar]") {
  const std::string g = "root ::= (\n  \"a\"\n  | \"b\"\n) x\nx ::= \"c\" |\n  \"d\"\n";
  CHECK(accepts(g, "ac"));
  CHECK(accepts(g, "bd"));
  CHECK(accepts("root ::= \"a\"\r\n", "a"));
}

TEST_CASE("gbnf: recursion", "[grammar]") {
  const std::string g = R"g(root ::= "(" root ")" | "")g";
  CHECK(accepts(g, "((()))"));
  CHECK(accepts(g, ""));
  CHECK_FALSE(accepts(g, "(()"));
  const std::string list = "root ::= item (\",\" item)*\nitem ::= [a-z]+ | \"[\" root \"]\"";
  CHECK(accepts(list, "a,[b,[c,d]],e"));
  CHECK_FALSE(accepts(list, "a,[b,"));
}

TEST_CASE("gbnf: errors name line:column and the problem", "[grammar]") {
  CHECK_THAT(error_of("root ::= \"abc"), Catch::Contains("1:10") && Catch::Contains("unterminated string"));
  CHECK_THAT(error_of("root ::= foo\n"), Catch::Contains("1:10") && Catch::Contains("undefined rule 'foo'"));
  CHECK_THAT(error_of("root ::= \"a\"\n\nfoo := \"b\""), Catch::Contains("3:5") && Catch::Contains("expected '::='"));
  CHECK_THAT(error_of("root ::= [a-z"), Catch::Contains("unterminated character class"));
  CHECK_THAT(error_of("root ::= (\"a\" "), Catch::Contains("expected ')'"));
  CHECK_THAT(error_of("root ::= * \"a\""), Catch::Contains("nothing to repeat"));
  CHECK_THAT(error_of("root ::= \"\\q\""), Catch::Contains("unknown escape"));
  CHECK_THAT(error_of("root ::= \"a\"{3,2}"), Catch::Contains("max below min"));
  CHECK_THAT(error_of("root ::= \"a\"{99999999}"), Catch::Contains("repetition count above"));
  CHECK_THAT(error_of("foo ::= \"a\""), Catch::Contains("no rule named 'root'"));
  CHECK_THAT(error_of("root ::= \"a\"\nroot ::= \"b\""), Catch::Contains("defined twice"));
  CHECK_THAT(error_of("root ::= <think>"), Catch::Contains("not supported"));
  CHECK_THAT(error_of("root ::= \"\\x4\""), Catch::Contains("hex digits"));
  CHECK_THAT(error_of("root ::= \"\xC3\""), Catch::Contains("invalid UTF-8"));
  CHECK_THAT(error_of("root ::= [a-z] ) x"), Catch::Contains("expected end of line"));
}

TEST_CASE("gbnf: left recursion is rejected", "[grammar]") {
  CHECK_THAT(error_of("root ::= root \"a\" | \"b\""), Catch::Contains("left recursion") && Catch::Contains("'root'"));
  CHECK_THAT(error_of("root ::= a\na ::= b \"x\"\nb ::= a | \"y\""), Catch::Contains("left recursion"));
  // Through a nullable prefix.
  CHECK_THAT(error_of("root ::= e root \"x\" | \"y\"\ne ::= \"\" | \"z\""), Catch::Contains("left recursion"));
  // A repetition of something that can be empty recurses without input.
  CHECK_THAT(error_of("root ::= (\"a\"?)*"), Catch::Contains("left recursion"));
  // Right recursion is fine.
  CHECK(error_of("root ::= \"a\" root | \"b\"").empty());
}

TEST_CASE("gbnf: a custom root rule", "[grammar]") {
  auto g = parse_gbnf("start ::= \"x\" \nroot ::= \"y\"", "start");
  CHECK(g->matches("x"));
  CHECK_FALSE(g->matches("y"));
}
