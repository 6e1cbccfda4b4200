// Token sampling: a fixed chain of logit transforms, then a draw.
//
// Chain (the order of llama.cpp's default sampler chain, for the steps vtc
// supports): penalties over the last `penalty_last_n` accepted tokens
// (repetition, frequency, presence) -> top-k -> top-p -> min-p ->
// temperature -> draw from the softmax with a seeded std::mt19937.
// Temperature <= 0 means greedy: the argmax after penalties, lowest id on
// ties. With the same seed and the same logits, the draws repeat exactly.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

namespace vtc {

struct SamplingParams {
  float temperature = 0.8f;     // <= 0: greedy
  int32_t top_k = 40;           // <= 0: off
  float top_p = 0.95f;          // >= 1: off
  float min_p = 0.05f;          // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off; logits > 0 divided, < 0 multiplied
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  int32_t penalty_last_n = 64;  // window of accepted tokens the penalties see
  uint64_t seed = 0xFFFFFFFFull;  // 0xFFFFFFFF: a random seed

  static SamplingParams greedy();
};

struct TokenCandidate {
  int32_t id;
  float logit;  // after penalties and temperature
  float prob;   // softmax over the surviving candidates
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  ~Sampler();
  Sampler(Sampler&&) noexcept;
  Sampler& operator=(Sampler&&) noexcept;

  // Picks the next token from one row of logits (size = vocab).
  int32_t sample(std::span<const float> logits);
  // Records a token (prompt or generated) for the penalties.
  void accept(int32_t token);
  void reset();
  // The candidates that survived the chain in the last sample(), most
  // probable first (for logprobs). Greedy reports the full softmax top 20.
  const std::vector<TokenCandidate>& last_candidates() const;
  const SamplingParams& params() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace vtc
