// Token sampling: a fixed chain of logit transforms, then a draw.
//
// Chain (the order of llama.cpp's default sampler chain, for the steps vtc
// supports): penalties over the last `penalty_last_n` accepted tokens
// (repetition, frequency, presence) -> top-k -> top-p -> min-p ->
// temperature -> draw from the softmax (inverse CDF of one uniform from a
// std::mt19937_64 seeded with all 64 bits of the seed). Temperature <= 0
// means greedy: the argmax after penalties, lowest id on ties. With the
// same seed and the same logits, the draws repeat exactly.
//
// Cost per token: O(vocab) without a sort. Top-k selects its k candidates
// (nth_element); top-p sorts only the head of the distribution it needs
// (growing partial selections); min-p is a threshold; the draw is one pass.
// last_candidates() is built on demand, so sample() never sorts the
// vocabulary.
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
  // All 64 bits seed the generator. kRandomSeed (vtc run's `--seed`
  // convention, llama.cpp's LLAMA_DEFAULT_SEED) asks for a random seed
  // unless `seed_exact` is set: the server sets it, so every explicit seed
  // of a request, 4294967295 included, is reproducible.
  static constexpr uint64_t kRandomSeed = 0xFFFFFFFFull;
  uint64_t seed = kRandomSeed;
  bool seed_exact = false;

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
  // The seed in use: the given one, or the random one kRandomSeed asked for
  // (drawn again by reset()).
  uint64_t seed() const;
  // The candidates that survived the chain in the last sample(), most
  // probable first (for logprobs). Greedy reports the full softmax top 20.
  // Built (and sorted) on the first call after a sample(), not by sample().
  const std::vector<TokenCandidate>& last_candidates() const;
  const SamplingParams& params() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace vtc
