// `vtc bench --spec MODES` and `vtc bench --verify-cost`: what speculative
// decoding gains on one sequence (docs/speculative.md, "Figures").
//
// --spec ngram|draft|ngram,draft: greedy (or --spec-temp: seeded sampled)
// generation of -n tokens after a
// prompt, with speculation off and then with each mode, -r repetitions
// interleaved (off, mode, off, mode, ...) after one warm-up of each, all in
// one process on one session. Per mode: the median tok/s of the decode
// (after the prompt, as `vtc run` and llama-lookup count it) with its
// min-max, the draft acceptance, the accepted draft tokens per verify step,
// the tokens per target step, and the median over the off median. The
// prompt: --prompt-file (text, tokenized as `vtc run -p` does), or -p ids
// of the --spec-prompt workload: `repeat` (a passage of --spec-passage
// random ids, repeated) or `random` (random ids).
//
// --verify-cost: after --batch-context prompt tokens, the time of a verify
// step of k draft rows (one @prefill chunk of 1 + k tokens, logits of all
// 1 + k rows: SeqChunk::logit_rows) for k = 1..--verify-max, against a
// 1-row @decode step, each the mean of --batch-steps steps, the median of
// -r repetitions; with --vs-reference llama.cpp's (vtc-ref verify-cost:
// one llama_decode of 1 + k tokens of one sequence, logits for every row,
// against one of 1 token) in the same run.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/session.h"

namespace vtc::cli {

struct SpecBenchOptions {
  std::string model;
  SessionOptions session;             // threads, target, cache types; n_ctx and n_slots are set here
  std::string modes;                  // "ngram", "draft" or "ngram,draft"; empty: no generation bench
  std::string draft_model;
  int32_t draft_max = 16;
  float draft_p_min = 0.75f;
  bool draft_fixed = false;           // verify every draft the drafter has (no adaptive length)
  std::string draft_on = "auto";      // --draft-on (serve::DraftOn)
  float temperature = 0;              // > 0: sampled (llama.cpp's default top-k/top-p/min-p), seed `seed`
  uint64_t seed = 1234;
  std::string prompt_kind = "repeat";  // repeat | random
  std::string prompt_file;            // text, instead of prompt_kind
  int32_t passage = 32;               // ids per passage of `repeat`
  int32_t prompt_tokens = 512, gen_tokens = 128, repetitions = 3;
  bool verify_cost = false;
  int32_t verify_max = 8, context = 64, steps = 16;
  std::string ref_tool;               // non-empty: llama.cpp's verify cost too (vtc-ref verify-cost)
  std::string json_out;
};

int run_spec_bench(const SpecBenchOptions& o);

}  // namespace vtc::cli
