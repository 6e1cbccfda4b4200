// Constrained generation through vtc's runtime on a generated tiny qwen2
// model with the real qwen2 vocabulary (151k BPE tokens): sampled runs
// under a nested schema must all give valid instances, and a greedy run
// must pick the same tokens as llama.cpp's grammar sampler. Both are
// [reference]: the model takes its vocabulary from the reference's models/.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <mutex>

#include <fmt/format.h>
#include <unistd.h>

#include "frontends/gguf/tokenizer/tokenizer.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "samples/synthetic_model.h"
#include "serve/constraints/grammar/grammar.h"
#include "serve/constraints/grammar/json_schema.h"
#include "serve/constraints/grammar/matcher.h"
#include "tests/generated_model.h"
#include "tests/test_process.h"

using namespace vtc::grammar;
using Json = nlohmann::ordered_json;

namespace {

std::string qwen2_model() {
  vtc::synth::Options o;
  o.arch = "qwen2";
  o.size = "tiny";
  o.seed = 7;
  o.vocab_path = vtc::synth::find_default_vocab(o.arch);
  return vtc::test::generated_model("grammar", "tiny-qwen2.gguf", o);
}

// Every string bounded, so every run ends within the token budget.
const char* const kNestedSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 8},
    "kind": {"enum": ["alpha", "beta", "gamma"]},
    "count": {"type": "integer", "minimum": 0, "maximum": 500},
    "owner": {"type": "object",
              "properties": {"id": {"type": "integer"}, "email": {"type": "string", "maxLength": 10}},
              "required": ["id"], "additionalProperties": false},
    "items": {"type": "array", "maxItems": 3,
              "items": {"type": "object",
                        "properties": {"sku": {"type": "string", "maxLength": 6}, "qty": {"type": "integer"}},
                        "required": ["sku", "qty"], "additionalProperties": false}}
  },
  "required": ["name", "kind", "count", "owner", "items"],
  "additionalProperties": false
})";

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// The keywords kNestedSchema uses; returns "" or the first violation.
std::string validate(const nlohmann::json& v, const Json& s, const std::string& path = "$") {
  if (s.contains("enum")) {
    for (const auto& e : s["enum"])
      if (nlohmann::json::parse(e.dump()) == v) return "";
    return path + ": not in enum";
  }
  const std::string type = s.value("type", "");
  if (type == "integer") {
    if (!v.is_number_integer()) return path + ": not an integer";
    if (s.contains("minimum") && v.get<int64_t>() < s["minimum"].get<int64_t>()) return path + ": below minimum";
    if (s.contains("maximum") && v.get<int64_t>() > s["maximum"].get<int64_t>()) return path + ": above maximum";
  } else if (type == "string") {
    if (!v.is_string()) return path + ": not a string";
    if (s.contains("maxLength") && code_points(v.get<std::string>()) > s["maxLength"].get<size_t>()) return path + ": too long";
  } else if (type == "array") {
    if (!v.is_array()) return path + ": not an array";
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return path + ": too many items";
    for (size_t i = 0; i < v.size(); ++i)
      if (auto e = validate(v[i], s["items"], path + "[" + std::to_string(i) + "]"); !e.empty()) return e;
  } else if (type == "object") {
    if (!v.is_object()) return path + ": not an object";
    for (const auto& r : s["required"])
      if (!v.contains(r.get<std::string>())) return path + ": missing " + r.get<std::string>();
    for (const auto& [k, x] : v.items()) {
      if (!s["properties"].contains(k)) return path + ": unexpected property " + k;
      if (auto e = validate(x, s["properties"][k], path + "." + k); !e.empty()) return e;
    }
  }
  return "";
}

struct Run {
  std::vector<int32_t> tokens;
  std::string text;
  bool ended = false;  // the grammar finished or an end-of-generation token came
};

// Generates under `grammar`: mask, pick (sampler, or argmax when greedy),
// accept, decode. Every pick must be accepted.
Run generate(vtc::Session& session, const vtc::Tokenizer& tok, const std::shared_ptr<const TokenTable>& table,
             const std::shared_ptr<const Grammar>& grammar, const std::vector<int32_t>& prompt,
             const vtc::SamplingParams& params, int max_tokens, bool check_mask = false) {
  session.reset(0);
  vtc::HostTensor out = session.prefill(0, prompt, 0);
  std::vector<float> logits = out.row(0);
  GrammarMatcher m(grammar, table);
  vtc::Sampler sampler(params);
  Run run;
  for (int k = 0; k < max_tokens; ++k) {
    if (check_mask) {
      // The trie walk against the one-token check, over all 151k tokens.
      const std::vector<uint8_t> allowed = m.allowed_tokens();
      size_t mismatches = 0;
      for (size_t t = 0; t < allowed.size(); ++t) mismatches += (allowed[t] != 0) != m.allows(static_cast<int32_t>(t));
      REQUIRE(mismatches == 0);
    }
    m.mask_logits(logits.data(), logits.size());
    int32_t t = sampler.sample(logits);
    if (!m.accept(t)) FAIL("sampled token " << t << " was refused by the matcher");
    run.tokens.push_back(t);
    if (tok.is_eog(t)) {
      run.ended = true;
      break;
    }
    run.text += tok.token_piece(t);
    const int32_t slot = 0, pos = static_cast<int32_t>(prompt.size()) + k;
    out = session.decode(std::span<const int32_t>(&slot, 1), std::span<const int32_t>(&t, 1), std::span<const int32_t>(&pos, 1));
    logits = out.row(0);
  }
  return run;
}

struct Fixture {
  vtc::Session session;
  vtc::Tokenizer tok;
  std::shared_ptr<const TokenTable> table;
  Fixture() : session(qwen2_model(), options()), tok(vtc::Tokenizer::from_gguf(session.file())), table(make_token_table(tok)) {}
  static vtc::SessionOptions options() {
    vtc::SessionOptions o;
    o.threads = 2;
    o.n_ctx = 512;
    return o;
  }
};

}  // namespace

TEST_CASE("generate: 100 sampled runs under a nested schema are all valid", "[grammar][reference]") {
  Fixture f;
  const Json schema = Json::parse(kNestedSchema);
  auto grammar = parse_gbnf(json_schema_to_gbnf(schema));
  const std::vector<int32_t> prompt = f.tok.encode("Give me the record as JSON:", false, false);
  int valid = 0;
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    vtc::SamplingParams p;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    p.seed_exact = true;
    Run run = generate(f.session, f.tok, f.table, grammar, prompt, p, 400, /*check_mask=*/seed <= 2);
    std::string problem;
    if (!run.ended) {
      problem = "did not end within 400 tokens";
    } else {
      try {
        problem = validate(nlohmann::json::parse(run.text), schema);
      } catch (const std::exception& e) {
        problem = std::string("not JSON: ") + e.what();
      }
    }
    if (problem.empty())
      ++valid;
    else
      UNSCOPED_INFO("seed " << seed << ": " << problem << "\n" << run.text);
  }
  CHECK(valid == 100);
}

TEST_CASE("generate: greedy runs pick the tokens of llama.cpp's grammar sampler", "[grammar][reference]") {
  const std::string vtc_ref = VTC_REF;
  REQUIRE_FALSE(vtc_ref.empty());
  Fixture f;
  const std::vector<std::string> grammars = {
      json_schema_to_gbnf(Json::parse(kNestedSchema)),
      "root ::= \"名前: \" [\\u4e00-\\u9fff]{2,5} \"\\n\" ([a-z] | [\\u00e0-\\u00ff]){1,12} \"!\"\n",
      "root ::= \"<\" [^>]{1,20} \">\" [0-9]+\n",
  };
  const std::vector<int32_t> prompt = f.tok.encode("Answer:", false, false);
  std::string ids;
  for (int32_t t : prompt) ids += (ids.empty() ? "" : ",") + std::to_string(t);
  for (size_t i = 0; i < grammars.size(); ++i) {
    const int n = 64;
    Run ours = generate(f.session, f.tok, f.table, parse_gbnf(grammars[i]), prompt, vtc::SamplingParams::greedy(), n);
    const std::string path = vtc::test::unique_temp_path("grammar_" + std::to_string(i) + ".gbnf");
    std::ofstream(path) << grammars[i];
    const std::string out = vtc::test::run_capture(fmt::format("'{}' grammar '{}' '{}' --tokens {} --n-predict {} --threads 2",
                                                               vtc_ref, qwen2_model(), path, ids, n));
    std::remove(path.c_str());
    auto ref = nlohmann::json::parse(out)["tokens"].get<std::vector<int32_t>>();
    INFO("grammar " << i << ": vtc " << nlohmann::json(ours.tokens).dump() << "\nreference " << nlohmann::json(ref).dump()
                    << "\nvtc text: " << ours.text);
    CHECK(ours.tokens == ref);
    CHECK(ours.tokens.size() > 5);
  }
}

TEST_CASE("generate: the test's validator refuses what the schema forbids", "[grammar]") {
  const Json schema = Json::parse(kNestedSchema);
  const auto good = nlohmann::json::parse(
      R"({"name":"ab","kind":"beta","count":3,"owner":{"id":1},"items":[{"sku":"x","qty":2}]})");
  CHECK(validate(good, schema).empty());
  for (const char* bad : {
           R"({"name":"abcdefghi","kind":"beta","count":3,"owner":{"id":1},"items":[]})",        // maxLength
           R"({"name":"ab","kind":"delta","count":3,"owner":{"id":1},"items":[]})",             // enum
           R"({"name":"ab","kind":"beta","count":501,"owner":{"id":1},"items":[]})",            // maximum
           R"({"name":"ab","kind":"beta","count":1.5,"owner":{"id":1},"items":[]})",            // integer
           R"({"name":"ab","kind":"beta","count":3,"owner":{},"items":[]})",                    // required
           R"({"name":"ab","kind":"beta","count":3,"owner":{"id":1,"x":0},"items":[]})",        // additional
           R"({"name":"ab","kind":"beta","count":3,"owner":{"id":1},"items":[{},{},{},{}]})",   // maxItems
           R"({"name":"ab","kind":"beta","count":3,"owner":{"id":1},"items":[{"sku":"x"}]})",   // nested required
       }) {
    INFO(bad);
    CHECK_FALSE(validate(nlohmann::json::parse(bad), schema).empty());
  }
}
