// Fuzzing the three parsers: random and mutated GBNF, regexes and schemas
// must parse or throw GrammarError, never crash, hang or throw anything
// else; grammars that parse are also driven a few steps by the matcher.
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <random>

#include "serve/constraints/grammar/grammar.h"
#include "serve/constraints/grammar/json_schema.h"
#include "serve/constraints/grammar/matcher.h"
#include "serve/constraints/grammar/regex.h"

using namespace vtc::grammar;

namespace {

std::string random_text(std::mt19937& rng, const std::string& alphabet, size_t max_len) {
  std::string s;
  size_t n = rng() % max_len;
  for (size_t i = 0; i < n; ++i) s += alphabet[rng() % alphabet.size()];
  return s;
}

std::string mutate(std::string s, std::mt19937& rng, const std::string& alphabet) {
  int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits && !s.empty(); ++e) {
    size_t at = rng() % s.size();
    switch (rng() % 4) {
      case 0: s.erase(at, 1); break;
      case 1: s.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
      case 2: s[at] = static_cast<char>(rng() % 256); break;
      default: s.resize(at); break;
    }
  }
  return s;
}

std::shared_ptr<const TokenTable> byte_table() {
  static auto t = [] {
    std::vector<std::string> p;
    for (int c = 0; c < 256; ++c) p.emplace_back(1, static_cast<char>(c));
    return std::make_shared<TokenTable>(p, std::vector<int32_t>{});
  }();
  return t;
}

void drive(const std::shared_ptr<const Grammar>& g, std::mt19937& rng) {
  GrammarMatcher m(g, byte_table());
  for (int step = 0; step < 8; ++step) {
    auto allowed = m.allowed_tokens();
    std::vector<int32_t> ok;
    for (size_t i = 0; i < allowed.size(); ++i)
      if (allowed[i]) ok.push_back(static_cast<int32_t>(i));
    if (ok.empty()) break;
    REQUIRE(m.accept(ok[rng() % ok.size()]));
  }
}

// A compiler's output must parse (left recursion aside: a schema can
// define a value only by itself).
std::shared_ptr<const Grammar> parse_output(const std::string& gbnf) {
  try {
    return parse_gbnf(gbnf);
  } catch (const GrammarError& e) {
    if (std::string(e.what()).find("left recursion") == std::string::npos)
      FAIL("compiled grammar does not parse: " << e.what() << "\n" << gbnf);
    throw;
  }
}

// Runs f; GrammarError is fine, anything else fails.
template <typename F>
void expect_clean(F&& f, const std::string& input) {
  try {
    f();
  } catch (const GrammarError&) {
  } catch (const std::exception& e) {
    FAIL("input " << input << " threw a non-GrammarError: " << e.what());
  }
}

}  // namespace

TEST_CASE("fuzz: GBNF text", "[grammar][fuzz]") {
  std::mt19937 rng(1234);
  const std::string alphabet = "root::= \"ab\\[]^-()|*+?{},.#\n\txyz0129";
  const std::vector<std::string> seeds = {
      "root ::= \"a\" [b-d]* (e | \"f\"){1,3} .\n",
      "root ::= obj\nobj ::= \"{\" (kv (\",\" kv)*)? \"}\"\nkv ::= [a-z]+ \":\" obj | [0-9]+\n",
      "root ::= \"\\x41\\u00e9\" [^\\n\"] x?\nx ::= \"y\"{2,} # c\n"};
  const auto start = std::chrono::steady_clock::now();
  int parsed = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text = i % 3 == 0 ? random_text(rng, alphabet, 60) : mutate(seeds[rng() % seeds.size()], rng, alphabet);
    expect_clean([&] {
      auto g = parse_gbnf(text);
      ++parsed;
      drive(g, rng);
    }, text);
  }
  INFO(parsed << " of 3000 parsed");
  CHECK(parsed > 100);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(60));
  // Sizes that would blow up are refused, quickly.
  // (Nested groups are rule references: that grammar stays small.)
  CHECK_NOTHROW(drive(parse_gbnf("root ::= (((\"a\"{1000}){1000}){1000})"), rng));
  CHECK_THROWS_AS(parse_gbnf("root ::= \"" + std::string(1000, 'a') + "\"{5000}"), GrammarError);
  CHECK_THROWS_AS(parse_gbnf(std::string(1000, '(') + "\"a\"" + std::string(1000, ')')), GrammarError);
}

TEST_CASE("fuzz: regexes", "[grammar][fuzz]") {
  std::mt19937 rng(99);
  const std::string alphabet = "ab09^$.|()[]{}*+?\\-,:dDwWsSx\"";
  int parsed = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string re = random_text(rng, alphabet, 30);
    expect_clean([&] {
      std::string g = regex_to_gbnf(re);
      ++parsed;
      drive(parse_output(g), rng);
      parse_output("root ::= \"\\\"\" " + detail::regex_to_gbnf_expression(re, true) + " \"\\\"\"");
    }, re);
  }
  INFO(parsed << " of 3000 parsed");
  CHECK(parsed > 100);
  CHECK_THROWS_AS(regex_to_gbnf(std::string(500, '(') + "a" + std::string(500, ')')), GrammarError);
}

TEST_CASE("fuzz: JSON schemas", "[grammar][fuzz]") {
  std::mt19937 rng(5);
  const std::vector<std::string> keys = {"type", "properties", "required", "items", "prefixItems", "enum", "const",
                                         "anyOf", "oneOf", "allOf", "$ref", "minItems", "maxItems", "minLength",
                                         "maxLength", "pattern", "format", "minimum", "maximum", "additionalProperties",
                                         "$defs", "exclusiveMinimum"};
  const std::vector<nlohmann::ordered_json> leaves = {"object", "array", "string", "integer", "number", "boolean", "null",
                                                      "date", "uuid", "#/$defs/a", "#/$defs", "^[a-z]+$", "(", 3, -2,
                                                      1.5, true, false, nullptr, nlohmann::ordered_json::array(),
                                                      nlohmann::ordered_json::object()};
  std::function<nlohmann::ordered_json(int)> random_schema = [&](int depth) -> nlohmann::ordered_json {
    if (depth > 3 || rng() % 4 == 0) return leaves[rng() % leaves.size()];
    nlohmann::ordered_json o = nlohmann::ordered_json::object();
    int n = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < n; ++i) {
      const std::string& k = keys[rng() % keys.size()];
      if (rng() % 3 == 0) {
        nlohmann::ordered_json a = nlohmann::ordered_json::array();
        for (int j = 0; j < 2; ++j) a.push_back(random_schema(depth + 1));
        o[k] = a;
      } else if (k == "properties" || k == "$defs") {
        o[k] = {{"a", random_schema(depth + 1)}, {"b", random_schema(depth + 1)}};
      } else {
        o[k] = random_schema(depth + 1);
      }
    }
    return o;
  };
  int compiled = 0;
  for (int i = 0; i < 3000; ++i) {
    nlohmann::ordered_json s = random_schema(0);
    expect_clean([&] {
      std::string g = json_schema_to_gbnf(s);
      ++compiled;
      drive(parse_output(g), rng);
    }, s.dump());
  }
  INFO(compiled << " of 3000 compiled");
  CHECK(compiled > 100);
}
