// Text generation on a loaded model: prefill the prompt, then sample and
// decode one token at a time until an end-of-generation token, the token
// budget, or the end of the context.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "runtime/sampler.h"

namespace vtc {
class Session;
class Tokenizer;

struct GenerateOptions {
  int32_t n_predict = 128;          // < 0: until end of generation or context
  SamplingParams sampling;
  int32_t slot = 0;
  bool keep_logits = false;          // record every prompt and generated row
  // Decode with the step's own `sample` op on the backend, the ids fed back
  // there (Session::decode_sampled): only the ids leave the backend. Used
  // when the sampling has no penalties and no logits are kept; the first
  // token, from the prompt's logits, is sampled on the host.
  bool device_sampling = false;
};

struct GenerateResult {
  std::vector<int32_t> prompt;
  std::vector<int32_t> generated;
  std::string stop_reason;           // "eog" | "length" | "context"
  double prompt_seconds = 0, generate_seconds = 0;
  // keep_logits: rows of n_vocab; one per prompt position, then one per
  // generated token, computed with that token as input (so row P+i
  // predicts the token after generated[i]).
  std::vector<float> logits;
};

// on_piece receives each generated token's text as soon as it is complete
// UTF-8 (multi-byte characters split across tokens are held back).
GenerateResult generate(Session& session, const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                        const GenerateOptions& options,
                        const std::function<void(int32_t id, const std::string& piece)>& on_piece = nullptr);

}  // namespace vtc
