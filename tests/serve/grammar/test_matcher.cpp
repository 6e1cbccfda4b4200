// GrammarMatcher: the trie-walk mask agrees with token-by-token acceptance,
// characters split across tokens, end-of-generation handling, logits.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "serve/constraints/grammar/grammar.h"
#include "serve/constraints/grammar/json_schema.h"
#include "serve/constraints/grammar/matcher.h"

using namespace vtc::grammar;

namespace {

// A small vocabulary: every printable ASCII byte, some words and JSON
// pieces, the bytes of 中 (E4 B8 AD) and é (C3 A9) whole and split, an
// empty token, and an end-of-generation token (the last id).
struct TestVocab {
  std::vector<std::string> pieces;
  int32_t eog;
  std::shared_ptr<const TokenTable> table;

  TestVocab() {
    for (int c = 0x20; c < 0x7F; ++c) pieces.emplace_back(1, static_cast<char>(c));
    for (const char* p : {"\n", "\t", "true", "false", "null", "{\"", "\":", "\",", "\"}", " \"", "ab", "abc", "12", "123",
                          "\xE4", "\xB8", "\xAD", "\xE4\xB8", "\xB8\xAD", "\xE4\xB8\xAD", "\xE4\xB8\xAD\xE6\x96\x87",
                          "\xC3", "\xA9", "\xC3\xA9", "a\xC3", "\xA9z", "", "\xFF", "x\"y"})
      pieces.emplace_back(p);
    pieces.emplace_back("</s>");
    eog = static_cast<int32_t>(pieces.size() - 1);
    std::vector<int32_t> eogs{eog};
    table = std::make_shared<TokenTable>(pieces, eogs);
  }
  int32_t id(const std::string& p) const {
    for (size_t i = 0; i < pieces.size(); ++i)
      if (pieces[i] == p) return static_cast<int32_t>(i);
    FAIL("no token " << p);
    return -1;
  }
};

const TestVocab& vocab() {
  static TestVocab v;
  return v;
}

// Random walks: at every step the mask must equal "accept() succeeds" for
// every token, checked on a fresh matcher replaying the history.
void check_mask_against_accept(const std::string& gbnf, uint32_t seed, int steps) {
  auto g = parse_gbnf(gbnf);
  const auto& v = vocab();
  std::mt19937 rng(seed);
  std::vector<int32_t> history;
  GrammarMatcher m(g, v.table);
  for (int step = 0; step < steps; ++step) {
    const std::vector<uint8_t> allowed = m.allowed_tokens();
    std::vector<int32_t> ok;
    size_t mismatches = 0;
    std::string first_mismatch;
    for (size_t t = 0; t < v.pieces.size(); ++t) {
      GrammarMatcher probe(g, v.table);
      for (int32_t h : history) probe.accept(h);
      const bool accepted = probe.accept(static_cast<int32_t>(t));
      if (accepted != (allowed[t] != 0)) {
        if (mismatches++ == 0) first_mismatch = "token " + std::to_string(t) + " accept=" + std::to_string(accepted);
      }
      if (accepted) ok.push_back(static_cast<int32_t>(t));
    }
    INFO("grammar " << gbnf << " seed " << seed << " step " << step << ": " << first_mismatch);
    REQUIRE(mismatches == 0);
    if (ok.empty()) break;
    int32_t pick = ok[rng() % ok.size()];
    REQUIRE(m.accept(pick));
    history.push_back(pick);
    if (pick == v.eog) break;
  }
}

}  // namespace

TEST_CASE("matcher: the mask equals token-by-token acceptance", "[grammar]") {
  const std::vector<std::string> grammars = {
      R"(root ::= "ab" [0-9]+ ("x" | "中文") .)",
      R"(root ::= [^"]* "\"" [a-z]*)",
      R"(root ::= ([\u00e0-\u00ff] | [a-c] | "\u4e2d")+)",
      R"(root ::= "{" ( "\"k\":" ("true" | "null" | [0-9]{1,3}) )? "}")",
      json_schema_to_gbnf(nlohmann::ordered_json::parse(R"({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}})")),
  };
  for (size_t i = 0; i < grammars.size(); ++i)
    for (uint32_t seed = 1; seed <= 6; ++seed) check_mask_against_accept(grammars[i], seed * 31 + static_cast<uint32_t>(i), 12);
}

TEST_CASE("matcher: a character split across tokens", "[grammar]") {
  const auto& v = vocab();
  GrammarMatcher m(parse_gbnf(R"(root ::= "中" "x")"), v.table);
  auto allowed = m.allowed_tokens();
  CHECK(allowed[static_cast<size_t>(v.id("\xE4"))]);
  CHECK(allowed[static_cast<size_t>(v.id("\xE4\xB8"))]);
  CHECK(allowed[static_cast<size_t>(v.id("\xE4\xB8\xAD"))]);
  CHECK_FALSE(allowed[static_cast<size_t>(v.id("\xE4\xB8\xAD\xE6\x96\x87"))]);  // 文 is not x
  CHECK_FALSE(allowed[static_cast<size_t>(v.id("\xB8"))]);  // a continuation byte cannot start
  CHECK_FALSE(allowed[static_cast<size_t>(v.id("\xC3"))]);  // starts a 2-byte character, not 中
  CHECK_FALSE(allowed[static_cast<size_t>(v.id("x"))]);
  REQUIRE(m.accept(v.id("\xE4")));
  allowed = m.allowed_tokens();
  CHECK(allowed[static_cast<size_t>(v.id("\xB8"))]);
  CHECK(allowed[static_cast<size_t>(v.id("\xB8\xAD"))]);
  CHECK_FALSE(allowed[static_cast<size_t>(v.id("\xAD"))]);  // E4 AD is not the start of 中
  CHECK_FALSE(allowed[static_cast<size_t>(v.id("x"))]);  // not a continuation byte
  CHECK_FALSE(allowed[static_cast<size_t>(v.id("\xE4"))]);
  CHECK_FALSE(m.can_end());
  REQUIRE(m.accept(v.id("\xB8")));
  CHECK_FALSE(m.accept(v.id("x")));  // refused, state unchanged
  REQUIRE(m.accept(v.id("\xAD")));
  allowed = m.allowed_tokens();
  CHECK(allowed[static_cast<size_t>(v.id("x"))]);
  CHECK_FALSE(allowed[static_cast<size_t>(v.eog)]);
  REQUIRE(m.accept(v.id("x")));
  CHECK(m.can_end());
  CHECK(m.finished());
  allowed = m.allowed_tokens();
  CHECK(allowed[static_cast<size_t>(v.eog)]);
  CHECK(std::count(allowed.begin(), allowed.end(), 1) == 1);
  CHECK(m.accept(v.eog));
}

TEST_CASE("matcher: a token that ends mid-character and one that finishes it", "[grammar]") {
  const auto& v = vocab();
  GrammarMatcher m(parse_gbnf(R"(root ::= "a" [\u00e0-\u00ff] "z")"), v.table);
  auto allowed = m.allowed_tokens();
  CHECK(allowed[static_cast<size_t>(v.id("a\xC3"))]);
  CHECK_FALSE(allowed[static_cast<size_t>(v.id("\xFF"))]);
  REQUIRE(m.accept(v.id("a\xC3")));
  allowed = m.allowed_tokens();
  CHECK(allowed[static_cast<size_t>(v.id("\xA9z"))]);
  CHECK(allowed[static_cast<size_t>(v.id("\xA9"))]);
  CHECK_FALSE(allowed[static_cast<size_t>(v.id("z"))]);
  REQUIRE(m.accept(v.id("\xA9z")));
  CHECK(m.can_end());
}

TEST_CASE("matcher: end of generation, empty pieces, logits", "[grammar]") {
  const auto& v = vocab();
  GrammarMatcher m(parse_gbnf(R"(root ::= "ab" "c"?)"), v.table);
  std::vector<float> logits(v.pieces.size() + 3, 1.0f);  // the model's rows may be padded
  m.mask_logits(logits.data(), logits.size());
  CHECK(logits[static_cast<size_t>(v.id("a"))] == 1.0f);
  CHECK(logits[static_cast<size_t>(v.id("ab"))] == 1.0f);
  CHECK(logits[static_cast<size_t>(v.id("abc"))] == 1.0f);
  CHECK(std::isinf(logits[static_cast<size_t>(v.id("b"))]));
  CHECK(std::isinf(logits[static_cast<size_t>(v.eog)]));
  CHECK(std::isinf(logits[static_cast<size_t>(v.id(""))]));
  CHECK(std::isinf(logits.back()));
  CHECK_FALSE(m.accept(v.eog));
  REQUIRE(m.accept(v.id("ab")));
  CHECK(m.can_end());
  CHECK_FALSE(m.finished());  // "c" may still follow
  std::fill(logits.begin(), logits.end(), 0.5f);
  m.mask_logits(logits.data(), logits.size());
  CHECK(logits[static_cast<size_t>(v.eog)] == 0.5f);
  CHECK(logits[static_cast<size_t>(v.id("c"))] == 0.5f);
  CHECK(m.accept(v.eog));
  CHECK(m.finished());
  CHECK_FALSE(m.accept(v.id("c")));
  CHECK_FALSE(m.accept(-1));
  CHECK_FALSE(m.accept(100000));
}
