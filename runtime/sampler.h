// Token sampling: llama.cpp's default sampler chain, draw for draw.
//
// For the parameters vtc supports, Sampler picks the token that
// llama-server's common_sampler picks from the same logits with the same
// seed and the same accepted tokens (reference: src/llama-sampler.cpp and
// common/sampling.cpp; the oracle is `vtc-chat-ref sample`, checked by
// tests/serve/sampler_parity). The chain, in llama.cpp's order:
//   penalties  over the last `penalty_last_n` accepted tokens (prompt and
//              generated; llama_sampler_penalties): repeat (logit > 0
//              divided, else multiplied), then -= count * frequency +
//              (count > 0) * presence
//   top-k      llama.cpp's partial sort: for k <= 128 std::partial_sort's
//              heap select, replayed on a k + 1 slot heap without building
//              the vocabulary array; above 128 its 128-bucket sort. The
//              order it leaves, ties included, is llama.cpp's
//   top-p      softmax in float over the current order, then the head whose
//              float cumulative probability reaches p (adaptive: the top
//              256 by buckets first, all of them when that is not enough)
//   min-p      unsorted: logit >= max + logf(p), order kept; sorted: the head
//   temperature  divided; <= 0 keeps only the first maximum in the current
//              order (temp_ext): greedy, lowest id on ties without top-k
//   dist       one std::uniform_real_distribution<double> draw from a
//              std::mt19937 seeded with the 32-bit seed (every call draws,
//              even with one candidate), weights expf(logit - max) in float
//              summed in double in the current order, the first index whose
//              running sum reaches sum * u.
// min_keep is 0 (llama-server's default); the samplers llama-server leaves
// off by default (DRY, typical, XTC, top-n-sigma, dynamic temperature,
// mirostat) are not offered.
//
// Seeds: a seed below 2^32 seeds std::mt19937 directly, as llama-server's
// uint32 seed does. Larger seeds (vtc's API takes 64 bits) seed it through
// std::seed_seq of both halves, so they stay distinct; llama-server would
// truncate them. kRandomSeed (llama.cpp's LLAMA_DEFAULT_SEED) asks for a
// random 32-bit seed unless `seed_exact` is set (the server sets it, so
// every explicit seed, 4294967295 included, is reproducible; llama-server
// would draw a random one).
//
// Cost per token: O(vocab), and no full sort unless llama.cpp sorts fully
// (top-p or min-p without top-k on a spread distribution). Greedy without
// truncation is one argmax pass. Without top-k the draw computes expf for
// every token (as llama.cpp does); bit-equal weights need the same libm
// expf, so it is not vectorized. The arithmetic must stay unfused (no FMA
// contraction: the build has no -march), as the reference's.
//
// Only this host sampler has llama.cpp's draw. The device `sample` op
// (DeviceSampling, runtime/backend.h) draws its own way, seeded from
// seed(): a request decoded on the device repeats itself, not llama.cpp.
// last_candidates() is built on demand, so sample() never sorts for it.
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
  // Below 2^32 the seed is llama.cpp's (std::mt19937(seed)); all 64 bits
  // count (see above). kRandomSeed (vtc run's `--seed` convention,
  // llama.cpp's LLAMA_DEFAULT_SEED) asks for a random seed unless
  // `seed_exact` is set: the server sets it, so every explicit seed of a
  // request, 4294967295 included, is reproducible.
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
  // The seed in use: the given one, or the random one kRandomSeed asked
  // for (drawn again by reset()).
  uint64_t seed() const;
  // The candidates that survived the chain in the last sample(), most
  // probable first, with the draw's probabilities (for logprobs). Greedy
  // reports the full softmax top 20 of the penalized logits.
  // Built (and sorted) on the first call after a sample(), not by sample().
  const std::vector<TokenCandidate>& last_candidates() const;
  const SamplingParams& params() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace vtc
