// grammar_cost: what grammar-constrained sampling adds to a decode step.
//
//   grammar_cost MODEL.gguf [--tokens N] [--threads T] [--seed S] [--schema FILE.json]
//                [--gen SIZE]
//
// --gen SIZE: when MODEL.gguf does not exist, write a random-weight qwen2
// model of that size (samples/synthetic_model.h: tiny ... 0.56b, f16
// matrices) with the qwen2 vocabulary (151936 tokens) there first.
// Runs one sampled generation (temperature 1) of up to N tokens under a
// nested JSON schema (or FILE.json) and times, per token: the decode step
// (Session::decode), mask_logits over the whole vocabulary, accept, and the
// sampler. Also times building the TokenTable (once per model) and the
// first mask of a fresh matcher (cold transition cache). Prints a JSON
// object; "ratio" is (mask + accept) / decode, the figure to keep <= 0.10.
#include <chrono>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontends/gguf/tokenizer/tokenizer.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "samples/synthetic_model.h"
#include "serve/constraints/grammar/grammar.h"
#include "serve/constraints/grammar/json_schema.h"
#include "serve/constraints/grammar/matcher.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

const char* const kDefaultSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "kind": {"enum": ["alpha", "beta", "gamma"]},
    "count": {"type": "integer"},
    "owner": {"type": "object", "properties": {"id": {"type": "integer"}, "email": {"type": "string"}},
              "required": ["id", "email"]},
    "items": {"type": "array", "items": {"type": "object",
              "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
              "required": ["sku", "qty"]}}
  },
  "required": ["name", "kind", "count", "owner", "items"]
})";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: grammar_cost MODEL.gguf [--tokens N] [--threads T] [--seed S] [--schema FILE.json]\n");
    return 2;
  }
  int n_tokens = 128, threads = 0;
  uint64_t seed = 1;
  std::string schema_text = kDefaultSchema, gen_size;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--tokens") n_tokens = std::stoi(v);
    else if (k == "--threads") threads = std::stoi(v);
    else if (k == "--seed") seed = std::stoull(v);
    else if (k == "--gen") gen_size = v;
    else if (k == "--schema") {
      std::ifstream in(v);
      std::stringstream ss;
      ss << in.rdbuf();
      schema_text = ss.str();
    } else {
      std::fprintf(stderr, "grammar_cost: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  try {
    if (!gen_size.empty() && !std::filesystem::exists(argv[1])) {
      vtc::synth::Options o;
      o.arch = "qwen2";
      o.size = gen_size;
      o.weight_type = vtc::GgmlType::F16;
      o.vocab_path = vtc::synth::find_default_vocab(o.arch);
      std::fprintf(stderr, "grammar_cost: writing %s (qwen2 %s)\n", argv[1], gen_size.c_str());
      vtc::synth::write_model(o, argv[1]);
    }
    vtc::SessionOptions so;
    so.threads = threads;
    so.n_ctx = 1024;
    vtc::Session session(argv[1], so);
    const vtc::Tokenizer tok = vtc::Tokenizer::from_gguf(session.file());
    auto t0 = Clock::now();
    auto table = vtc::grammar::make_token_table(tok);
    const double table_ms = ms_since(t0);
    auto grammar = vtc::grammar::parse_gbnf(vtc::grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(schema_text)));

    const std::vector<int32_t> prompt = tok.encode("Write the record as JSON:", false, false);
    vtc::HostTensor out = session.prefill(0, prompt, 0);
    std::vector<float> logits = out.row(0);
    vtc::grammar::GrammarMatcher matcher(grammar, table);
    vtc::SamplingParams sp;
    sp.temperature = 1.0f;
    sp.top_k = 0;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    sp.seed = seed;
    sp.seed_exact = true;
    vtc::Sampler sampler(sp);

    double mask_ms = 0, accept_ms = 0, sample_ms = 0, decode_ms = 0, first_mask_ms = 0, max_mask_ms = 0;
    int steps = 0, decodes = 0;
    std::string text;
    for (int k = 0; k < n_tokens; ++k) {
      t0 = Clock::now();
      matcher.mask_logits(logits.data(), logits.size());
      const double m = ms_since(t0);
      if (k == 0) first_mask_ms = m;
      else max_mask_ms = std::max(max_mask_ms, m);
      mask_ms += m;
      t0 = Clock::now();
      const int32_t t = sampler.sample(logits);
      sample_ms += ms_since(t0);
      t0 = Clock::now();
      if (!matcher.accept(t)) throw vtc::Error("sampled token refused");
      accept_ms += ms_since(t0);
      ++steps;
      if (tok.is_eog(t)) break;
      text += tok.token_piece(t);
      const int32_t slot = 0, pos = static_cast<int32_t>(prompt.size()) + k;
      t0 = Clock::now();
      out = session.decode(std::span<const int32_t>(&slot, 1), std::span<const int32_t>(&t, 1), std::span<const int32_t>(&pos, 1));
      decode_ms += ms_since(t0);
      ++decodes;
      logits = out.row(0);
    }
    const double mask_avg = mask_ms / steps, accept_avg = accept_ms / steps, decode_avg = decode_ms / std::max(decodes, 1);
    nlohmann::json r;
    r["model"] = argv[1];
    r["n_vocab"] = session.n_vocab();
    r["trie_nodes"] = table->nodes().size();
    r["token_table_ms"] = table_ms;
    r["tokens"] = steps;
    r["first_mask_ms"] = first_mask_ms;
    r["mask_ms_avg"] = mask_avg;
    r["mask_ms_max_warm"] = max_mask_ms;
    r["accept_ms_avg"] = accept_avg;
    r["sample_ms_avg"] = sample_ms / steps;
    r["decode_ms_avg"] = decode_avg;
    r["ratio"] = (mask_avg + accept_avg) / decode_avg;
    r["text"] = text;
    std::cout << r.dump(2) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grammar_cost: %s\n", e.what());
    return 1;
  }
}
