#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <unordered_map>

namespace vtc {

SamplingParams SamplingParams::greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  return p;
}

struct Sampler::State {
  SamplingParams params;
  std::mt19937 rng;
  std::deque<int32_t> history;
  std::vector<TokenCandidate> candidates;
};

namespace {

constexpr size_t kGreedyReported = 20;

void apply_penalties(const SamplingParams& p, const std::deque<int32_t>& history,
                     std::vector<TokenCandidate>& cands) {
  if (history.empty() || (p.repeat_penalty == 1.0f && p.frequency_penalty == 0.0f &&
                          p.presence_penalty == 0.0f))
    return;
  std::unordered_map<int32_t, int> counts;
  for (int32_t t : history) counts[t]++;
  for (auto& [token, count] : counts) {
    if (token < 0 || size_t(token) >= cands.size()) continue;
    float& logit = cands[size_t(token)].logit;  // candidates are still indexed by id here
    logit = logit > 0 ? logit / p.repeat_penalty : logit * p.repeat_penalty;
    logit -= float(count) * p.frequency_penalty + p.presence_penalty;
  }
}

bool better(const TokenCandidate& a, const TokenCandidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Keeps the `keep` best candidates (at least one), sorted best first. A
// partial sort, so top-k and greedy never sort the whole vocabulary.
void keep_best(std::vector<TokenCandidate>& cands, size_t keep) {
  keep = std::max<size_t>(1, std::min(keep, cands.size()));
  std::partial_sort(cands.begin(), cands.begin() + keep, cands.end(), better);
  cands.resize(keep);
}

// Probabilities from a softmax normalizer (max logit, sum of exp), which
// may cover a larger set than the candidates kept.
void fill_probs(std::vector<TokenCandidate>& cands, float max_logit, double sum) {
  for (auto& c : cands) c.prob = float(std::exp(double(c.logit) - max_logit) / sum);
}

void softmax_sorted(std::vector<TokenCandidate>& cands) {
  const float max_logit = cands.front().logit;
  double sum = 0;
  for (const auto& c : cands) sum += std::exp(double(c.logit) - max_logit);
  fill_probs(cands, max_logit, sum);
}

void truncate(std::vector<TokenCandidate>& cands, size_t keep) {
  if (keep < cands.size()) cands.resize(std::max<size_t>(keep, 1));
}

void apply_top_p(float top_p, std::vector<TokenCandidate>& cands) {
  if (top_p >= 1.0f) return;
  double cumulative = 0;
  for (size_t i = 0; i < cands.size(); ++i) {
    cumulative += cands[i].prob;
    if (cumulative >= top_p) return truncate(cands, i + 1);
  }
}

void apply_min_p(float min_p, std::vector<TokenCandidate>& cands) {
  if (min_p <= 0.0f) return;
  const float threshold = cands.front().prob * min_p;
  size_t keep = 0;
  while (keep < cands.size() && cands[keep].prob >= threshold) ++keep;
  truncate(cands, keep);
}

}  // namespace

Sampler::Sampler(const SamplingParams& params) : state_(std::make_unique<State>()) {
  state_->params = params;
  reset();
}
Sampler::~Sampler() = default;
Sampler::Sampler(Sampler&&) noexcept = default;
Sampler& Sampler::operator=(Sampler&&) noexcept = default;

void Sampler::reset() {
  uint64_t seed = state_->params.seed;
  if (seed == 0xFFFFFFFFull) seed = std::random_device{}();
  state_->rng.seed(static_cast<std::mt19937::result_type>(seed));
  state_->history.clear();
}

void Sampler::accept(int32_t token) {
  auto& h = state_->history;
  h.push_back(token);
  while (h.size() > size_t(std::max(0, state_->params.penalty_last_n))) h.pop_front();
}

int32_t Sampler::sample(std::span<const float> logits) {
  const SamplingParams& p = state_->params;
  auto& cands = state_->candidates;
  cands.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) cands[i] = {int32_t(i), logits[i], 0.0f};
  apply_penalties(p, state_->history, cands);
  if (p.temperature <= 0.0f) {
    // Greedy: probabilities over the whole vocabulary, for logprobs.
    float max_logit = cands.front().logit;
    for (const auto& c : cands) max_logit = std::max(max_logit, c.logit);
    double sum = 0;
    for (const auto& c : cands) sum += std::exp(double(c.logit) - max_logit);
    keep_best(cands, kGreedyReported);
    fill_probs(cands, max_logit, sum);
    return cands.front().id;
  }
  keep_best(cands, p.top_k > 0 ? size_t(p.top_k) : cands.size());
  softmax_sorted(cands);
  apply_top_p(p.top_p, cands);
  apply_min_p(p.min_p, cands);
  for (auto& c : cands) c.logit /= p.temperature;
  softmax_sorted(cands);
  std::vector<float> weights;
  weights.reserve(cands.size());
  for (const auto& c : cands) weights.push_back(c.prob);
  std::discrete_distribution<size_t> draw(weights.begin(), weights.end());
  return cands[draw(state_->rng)].id;
}

const std::vector<TokenCandidate>& Sampler::last_candidates() const { return state_->candidates; }
const SamplingParams& Sampler::params() const { return state_->params; }

}  // namespace vtc
