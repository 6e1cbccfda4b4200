#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
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
  std::mt19937_64 rng;
  uint64_t seed = 0;  // resolved by reset()
  std::deque<int32_t> history;
  // The last sample(): logits after penalties (indexed by id), and the
  // survivors of the chain (`all`: every id, `ids` unused).
  std::vector<float> work;
  std::vector<int32_t> ids;
  std::vector<float> weights;  // scratch: exp((logit - max) / T) of the survivors
  bool all = true, greedy = true;
  // last_candidates(), built on demand.
  mutable std::vector<TokenCandidate> candidates;
  mutable bool candidates_ready = true;
};

namespace {

constexpr size_t kGreedyReported = 20;

void apply_penalties(const SamplingParams& p, const std::deque<int32_t>& history, std::vector<float>& logits) {
  if (history.empty() || (p.repeat_penalty == 1.0f && p.frequency_penalty == 0.0f &&
                          p.presence_penalty == 0.0f))
    return;
  std::unordered_map<int32_t, int> counts;
  for (int32_t t : history) counts[t]++;
  for (auto& [token, count] : counts) {
    if (token < 0 || size_t(token) >= logits.size()) continue;
    float& logit = logits[size_t(token)];
    logit = logit > 0 ? logit / p.repeat_penalty : logit * p.repeat_penalty;
    logit -= float(count) * p.frequency_penalty + p.presence_penalty;
  }
}

// Best first: higher logit, then lower id.
struct Better {
  const float* l;
  bool operator()(int32_t a, int32_t b) const { return l[a] > l[b] || (l[a] == l[b] && a < b); }
};

// The probability the chain uses for top-p and min-p: the softmax at
// temperature 1 over the current set (max logit `m`, normalizer `z`),
// rounded to float as the reference chain does.
inline float prob_of(float logit, float m, double z) { return float(std::exp(double(logit) - m) / z); }

// exp(x) for the draw's weights (x <= 0 there): Cephes' expf polynomial,
// relative error ~1e-7, 0 below -87. Branch-free and call-free, so the
// weight loop vectorizes; std::exp would be most of a sampled token's cost.
[[gnu::always_inline]] inline float exp_weight(float x) {
  x = x > -87.0f ? x : -87.0f;
  const float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;  // round to nearest
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const int32_t bits = (int32_t(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return y * scale;
}

// The draw's weights over the whole vocabulary: w[i] = exp((l[i] - max) /
// t); returns their sum. Eight explicit lanes, so the max and the sum
// vectorize without reassociating (the result does not depend on the
// compiler), and O3 for this loop only (the build's O2 does not vectorize).
[[gnu::optimize("O3")]] double weights_all(const float* l, size_t n, float t, float* w) {
  constexpr size_t L = 8;
  float lane_max[L];
  for (size_t j = 0; j < L; ++j) lane_max[j] = -INFINITY;
  size_t i = 0;
  for (; i + L <= n; i += L)
    for (size_t j = 0; j < L; ++j) lane_max[j] = lane_max[j] > l[i + j] ? lane_max[j] : l[i + j];
  float m = -INFINITY;
  for (size_t j = 0; j < L; ++j) m = std::max(m, lane_max[j]);
  for (; i < n; ++i) m = std::max(m, l[i]);
  const float inv_t = 1.0f / t, mt = m * inv_t;
  float lane_sum[L] = {};
  for (i = 0; i + L <= n; i += L)
    for (size_t j = 0; j < L; ++j) {
      w[i + j] = exp_weight(l[i + j] * inv_t - mt);
      lane_sum[j] += w[i + j];
    }
  double sum = 0;
  for (; i < n; ++i) sum += w[i] = exp_weight(l[i] * inv_t - mt);
  for (size_t j = 0; j < L; ++j) sum += lane_sum[j];
  return sum;
}

// The k best ids (k < size), best first: one scan against the worst kept
// one (a min-heap), so only the rare improvement costs more than a compare.
void select_top_k(const float* l, size_t size, size_t k, std::vector<int32_t>& ids) {
  ids.resize(k);
  std::iota(ids.begin(), ids.end(), 0);
  auto worse_on_top = [l](int32_t a, int32_t b) { return Better{l}(a, b); };  // heap top = the worst
  std::make_heap(ids.begin(), ids.end(), worse_on_top);
  for (size_t i = k; i < size; ++i) {
    // Ids only grow, so a tie never beats a kept id.
    if (l[i] > l[ids.front()]) {
      std::pop_heap(ids.begin(), ids.end(), worse_on_top);
      ids.back() = int32_t(i);
      std::push_heap(ids.begin(), ids.end(), worse_on_top);
    }
  }
  std::sort_heap(ids.begin(), ids.end(), worse_on_top);
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
  if (seed == SamplingParams::kRandomSeed && !state_->params.seed_exact) {
    std::random_device rd;
    seed = uint64_t(rd()) << 32 | rd();
  }
  state_->seed = seed;
  state_->rng.seed(seed);
  state_->history.clear();
}

uint64_t Sampler::seed() const { return state_->seed; }

void Sampler::accept(int32_t token) {
  auto& h = state_->history;
  h.push_back(token);
  while (h.size() > size_t(std::max(0, state_->params.penalty_last_n))) h.pop_front();
}

int32_t Sampler::sample(std::span<const float> logits) {
  State& s = *state_;
  const SamplingParams& p = s.params;
  const size_t V = logits.size();
  s.work.assign(logits.begin(), logits.end());
  s.candidates_ready = false;
  s.candidates.clear();
  if (V == 0) return 0;
  apply_penalties(p, s.history, s.work);
  const float* l = s.work.data();

  if (p.temperature <= 0.0f) {
    // Greedy: the argmax, lowest id on ties (strict > keeps the first).
    s.greedy = true;
    size_t best = 0;
    for (size_t i = 1; i < V; ++i)
      if (l[i] > l[best]) best = i;
    return int32_t(best);
  }
  s.greedy = false;
  s.all = true;
  s.ids.clear();
  auto materialize = [&] {
    if (!s.all) return;
    s.ids.resize(V);
    std::iota(s.ids.begin(), s.ids.end(), 0);
    s.all = false;
  };

  // Top-k: select the k best (unordered), O(vocab).
  if (p.top_k > 0 && size_t(p.top_k) < V) {
    if (size_t(p.top_k) <= V / 16) {
      select_top_k(l, V, size_t(p.top_k), s.ids);
      s.all = false;
    } else {
      materialize();
      std::nth_element(s.ids.begin(), s.ids.begin() + (p.top_k - 1), s.ids.end(), Better{l});
      s.ids.resize(size_t(p.top_k));
    }
  }

  if (p.top_p < 1.0f || p.min_p > 0.0f) {
    // Softmax (temperature 1) over the current set.
    float m = -INFINITY;
    double z = 0;
    if (s.all) {
      for (size_t i = 0; i < V; ++i) m = std::max(m, l[i]);
      for (size_t i = 0; i < V; ++i) z += std::exp(double(l[i]) - m);
    } else {
      for (int32_t id : s.ids) m = std::max(m, l[id]);
      for (int32_t id : s.ids) z += std::exp(double(l[id]) - m);
    }
    if (p.top_p < 1.0f) {
      // The smallest head, best first, whose mass reaches top_p: sort only
      // growing slices of the head (each one selected with nth_element).
      materialize();
      const size_t n = s.ids.size();
      size_t sorted = 0, chunk = 64;
      double cumulative = 0;
      while (sorted < n) {
        const size_t end = std::min(n, sorted + chunk);
        if (end < n) std::nth_element(s.ids.begin() + ptrdiff_t(sorted), s.ids.begin() + ptrdiff_t(end), s.ids.end(), Better{l});
        std::sort(s.ids.begin() + ptrdiff_t(sorted), s.ids.begin() + ptrdiff_t(end), Better{l});
        bool cut = false;
        for (size_t i = sorted; i < end; ++i) {
          cumulative += prob_of(l[s.ids[i]], m, z);
          if (cumulative >= p.top_p) {
            s.ids.resize(i + 1);
            cut = true;
            break;
          }
        }
        if (cut) break;
        sorted = end;
        chunk *= 4;
      }
    }
    if (p.min_p > 0.0f) {
      // Keeps p >= p_max * min_p (the max survives every step before).
      const float threshold = prob_of(m, m, z) * p.min_p;
      if (s.all) {
        s.ids.clear();
        for (size_t i = 0; i < V; ++i)
          if (prob_of(l[i], m, z) >= threshold) s.ids.push_back(int32_t(i));
        s.all = false;
      } else {
        std::erase_if(s.ids, [&](int32_t id) { return prob_of(l[id], m, z) < threshold; });
      }
    }
  }

  // Temperature, then one draw by inverse CDF over the survivors.
  const float t = p.temperature;
  const size_t n = s.all ? V : s.ids.size();
  s.weights.resize(n);
  double sum = 0;
  float* w = s.weights.data();
  if (s.all) {
    sum = weights_all(l, V, t, w);
  } else {
    float mt = -INFINITY;
    for (int32_t id : s.ids) mt = std::max(mt, l[id] / t);
    for (size_t i = 0; i < n; ++i) sum += w[i] = exp_weight(l[s.ids[i]] / t - mt);
  }
  const double u = double(s.rng() >> 11) * 0x1.0p-53;  // [0, 1)
  const double target = u * sum;
  double cumulative = 0;
  size_t pick = n;
  for (size_t i = 0; i < n; ++i) {
    cumulative += w[i];
    if (target < cumulative) {
      pick = i;
      break;
    }
  }
  if (pick == n) {  // rounding at the very top: the last candidate with weight
    pick = n - 1;
    while (pick > 0 && w[pick] == 0.0f) --pick;
  }
  return s.all ? int32_t(pick) : s.ids[pick];
}

const std::vector<TokenCandidate>& Sampler::last_candidates() const {
  const State& s = *state_;
  if (s.candidates_ready) return s.candidates;
  s.candidates_ready = true;
  auto& out = s.candidates;
  out.clear();
  const size_t V = s.work.size();
  if (V == 0) return out;
  const float* l = s.work.data();
  std::vector<int32_t> ids;
  if (s.greedy || s.all) {
    ids.resize(V);
    std::iota(ids.begin(), ids.end(), 0);
  } else {
    ids = s.ids;
  }
  if (s.greedy) {
    // The full softmax's top kGreedyReported, logits after penalties.
    float m = -INFINITY;
    for (size_t i = 0; i < V; ++i) m = std::max(m, l[i]);
    double z = 0;
    for (size_t i = 0; i < V; ++i) z += std::exp(double(l[i]) - m);
    const size_t keep = std::min(kGreedyReported, V);
    std::partial_sort(ids.begin(), ids.begin() + ptrdiff_t(keep), ids.end(), Better{l});
    ids.resize(keep);
    for (int32_t id : ids) out.push_back({id, l[id], float(std::exp(double(l[id]) - m) / z)});
    return out;
  }
  // Survivors best first, logits after temperature, softmax over them.
  std::sort(ids.begin(), ids.end(), Better{l});
  const float t = s.params.temperature;
  const float mt = l[ids.front()] / t;
  double z = 0;
  for (int32_t id : ids) z += std::exp(double(l[id] / t) - mt);
  for (int32_t id : ids) out.push_back({id, l[id] / t, float(std::exp(double(l[id] / t) - mt) / z)});
  return out;
}

const SamplingParams& Sampler::params() const { return state_->params; }

}  // namespace vtc
