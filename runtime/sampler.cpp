#include "runtime/sampler.h"

#include <algorithm>
#include <cfloat>
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

namespace {

// llama_token_data: the element the reference's chain sorts, so that the
// std:: algorithms below see the same sequences and make the same moves.
struct Cand {
  int32_t id;
  float logit;
  float p;
};

// std::allocator that leaves a resized element uninitialised: the candidate
// array is refilled whole before each use, so zeroing it on every
// resize() to the vocabulary only costs time (3% of a sampled serve step).
template <class T>
struct UninitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitAllocator<U>;
  };
  UninitAllocator() = default;
  template <class U>
  UninitAllocator(const UninitAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* at) noexcept {
    ::new (static_cast<void*>(at)) U;
  }
  template <class U, class... Args>
  void construct(U* at, Args&&... args) {
    ::new (static_cast<void*>(at)) U(std::forward<Args>(args)...);
  }
};
using CandVector = std::vector<Cand, UninitAllocator<Cand>>;

constexpr size_t kGreedyReported = 20;

// The comparator of every sort in llama-sampler.cpp: logit only, so the
// order of ties is the algorithm's (libstdc++'s), reproduced by making the
// same calls on the same sequences.
inline bool by_logit(const Cand& a, const Cand& b) { return a.logit > b.logit; }

// llama_token_data_array_partial_sort: the first `npartial` of `cur` by a
// 128-bucket histogram over [-10, 10], each bucket above the cut sorted,
// the cut bucket partially; `res` holds the buckets down to the cut.
void bucket_partial_sort(const Cand* cur, size_t size, int npartial, CandVector& res,
                         std::vector<int>& bucket_idx) {
  constexpr int nbuckets = 128;
  constexpr float bucket_low = -10.0f;
  constexpr float bucket_high = 10.0f;
  constexpr float bucket_scale = nbuckets / (bucket_high - bucket_low);
  constexpr float bucket_inter = -bucket_low * bucket_scale;
  int histo[nbuckets] = {};
  bucket_idx.clear();
  bucket_idx.reserve(size);
  for (size_t i = 0; i < size; ++i) {
    int ib = int(bucket_scale * cur[i].logit + bucket_inter);
    ib = std::max(0, std::min(nbuckets - 1, ib));
    bucket_idx.push_back(ib);
    ++histo[ib];
  }
  int nhave = 0;
  int ib = nbuckets - 1;
  for (; ib >= 0; --ib) {
    nhave += histo[ib];
    if (nhave >= npartial) break;
  }
  res.resize(size_t(nhave));
  Cand* bucket_ptrs[nbuckets];
  Cand* ptr = res.data();
  for (int j = nbuckets - 1; j >= ib; --j) {
    bucket_ptrs[nbuckets - 1 - j] = ptr;
    ptr += histo[j];
  }
  for (size_t i = 0; i < size; ++i) {
    const int j = bucket_idx[i];
    if (j >= ib) *bucket_ptrs[nbuckets - 1 - j]++ = cur[i];
  }
  ptr = res.data();
  int ndone = 0;
  for (int j = nbuckets - 1; j > ib; --j) {
    std::sort(ptr, ptr + histo[j], by_logit);
    ptr += histo[j];
    ndone += histo[j];
  }
  std::partial_sort(ptr, ptr + npartial - ndone, ptr + histo[ib], by_logit);
}

}  // namespace

struct Sampler::State {
  SamplingParams params;
  std::mt19937 rng;
  uint64_t seed = 0;  // resolved by reset()
  // The largest candidate logit (the first when sorted), the softmax's shift.
  float max_logit() const {
    float m = cur[0].logit;
    if (!sorted)
      for (size_t i = 1; i < cur.size(); ++i) m = std::max(m, cur[i].logit);
    return m;
  }
  // The penalty window (llama_sampler_penalties: the last penalty_last_n
  // accepted tokens) and each token's count in it.
  std::deque<int32_t> history;
  std::unordered_map<int32_t, int> counts;

  // The last sample(): logits after penalties (indexed by id), then the
  // chain's candidate array (llama_token_data_array: cur, sorted).
  std::vector<float> work;
  CandVector cur;
  bool sorted = false;
  CandVector buf;  // the bucket sort's output
  std::vector<double> prefix;  // dist(): the running sums of the weights
  // dist_whole(): the whole vocabulary in id order, after temperature, and
  // each id's weight (the array `cur` would hold, without building it).
  std::vector<float> scaled, weights;
  bool whole = false;
  std::vector<int> bucket_idx;
  bool greedy = true;
  double sum = 1;  // the draw's normaliser (cur[i].p / sum is the probability)

  mutable std::vector<TokenCandidate> candidates;
  mutable bool candidates_ready = true;

  void penalize();
  void materialize();
  void sort_inplace(size_t npartial);
  void top_k(int32_t k);
  void top_p(float p);
  void min_p(float p);
  void temperature(float t);
  size_t dist();
  size_t dist_whole(float t);
};

// llama_sampler_penalties_apply.
void Sampler::State::penalize() {
  const SamplingParams& p = params;
  if (p.penalty_last_n <= 0 || (p.repeat_penalty == 1.0f && p.frequency_penalty == 0.0f && p.presence_penalty == 0.0f))
    return;
  for (const auto& [token, count] : counts) {
    if (token < 0 || size_t(token) >= work.size()) continue;
    float& logit = work[size_t(token)];
    if (logit <= 0) logit *= p.repeat_penalty;
    else logit /= p.repeat_penalty;
    logit -= float(count) * p.frequency_penalty + float(count > 0) * p.presence_penalty;
  }
}

// The whole vocabulary in id order, unsorted (common_sampler's set_logits).
void Sampler::State::materialize() {
  const size_t V = work.size();
  cur.resize(V);
  for (size_t i = 0; i < V; ++i) cur[i] = Cand{int32_t(i), work[i], 0.0f};
  sorted = false;
}

// llama_token_data_array_partial_sort_inplace.
void Sampler::State::sort_inplace(size_t npartial) {
  if (npartial <= 128) {
    std::partial_sort(cur.begin(), cur.begin() + ptrdiff_t(npartial), cur.end(), by_logit);
  } else {
    bucket_partial_sort(cur.data(), cur.size(), int(npartial), buf, bucket_idx);
    std::copy(buf.begin(), buf.begin() + ptrdiff_t(npartial), cur.begin());
  }
  cur.resize(npartial);
  sorted = true;
}

// llama_sampler_top_k_impl on the unsorted vocabulary. For k <= 128 the
// reference's std::partial_sort over the whole array is its heap select
// (make_heap of the first k, then each later element that beats the top
// swapped in by __pop_heap, then sort_heap); the same calls on a k + 1
// slot heap (the last slot standing for the scanned element) give the
// same heap, ties included, without building the array.
void Sampler::State::top_k(int32_t k_in) {
  const size_t V = work.size();
  const size_t k = std::min(size_t(k_in), V);
  if (k > 128) {
    materialize();
    sort_inplace(k);
    return;
  }
  cur.resize(k + 1);
  for (size_t i = 0; i < k; ++i) cur[i] = Cand{int32_t(i), work[i], 0.0f};
  std::make_heap(cur.begin(), cur.begin() + ptrdiff_t(k), by_logit);
  const float* l = work.data();
  for (size_t i = k; i < V; ++i) {
    if (l[i] > cur[0].logit) {
      cur[k] = Cand{int32_t(i), l[i], 0.0f};
      std::pop_heap(cur.begin(), cur.begin() + ptrdiff_t(k + 1), by_logit);
    }
  }
  cur.resize(k);
  std::sort_heap(cur.begin(), cur.end(), by_logit);
  sorted = true;
}

// llama_sampler_top_p_apply (min_keep 0): softmax_impl without a sort
// (float sum in the current order), then the head by cumulative float
// probability, sorting adaptively (the top 256 by buckets first).
void Sampler::State::top_p(float p) {
  const size_t size = cur.size();
  const float max_l = max_logit();
  float cum = 0.0f;
  for (size_t i = 0; i < size; ++i) {
    const float e = std::exp(cur[i].logit - max_l);
    cur[i].p = e;
    cum += e;
  }
  for (size_t i = 0; i < size; ++i) cur[i].p /= cum;

  size_t k = size;
  const Cand* pdata = cur.data();
  if (!sorted && size > 1024) {
    k = std::min<size_t>(256, size);
    bucket_partial_sort(cur.data(), size, int(k), buf, bucket_idx);
    pdata = buf.data();
  } else if (!sorted) {
    sort_inplace(k);
    pdata = cur.data();
  }
  const bool sorted_now = sorted;
  float cum_sum = 0.0f;
  size_t last_idx = size;
  for (size_t i = 0; i < size; ++i) {
    cum_sum += pdata[i].p;
    if (cum_sum >= p) {
      last_idx = i + 1;
      break;
    }
    if (!sorted_now && i == k - 1) {
      k = size;
      bucket_partial_sort(cur.data(), size, int(k), buf, bucket_idx);
      pdata = buf.data();
    }
  }
  if (!sorted_now) {
    std::copy(buf.begin(), buf.begin() + ptrdiff_t(last_idx), cur.begin());
    sorted = true;
  }
  cur.resize(last_idx);
}

// llama_sampler_min_p_apply (min_keep 0): unsorted, a filter at
// max + logf(p) that keeps the order; sorted (or nothing passed), the
// sorted head down to data[0] + logf(p).
void Sampler::State::min_p(float p) {
  if (cur.empty()) return;
  if (!sorted) {
    float max_logit = -FLT_MAX;
    for (const Cand& c : cur) max_logit = std::max(max_logit, c.logit);
    const float min_logit = max_logit + std::log(p);
    size_t n = 0;
    for (const Cand& c : cur)
      if (c.logit >= min_logit) ++n;
    if (n > 0) {
      size_t j = 0;
      for (size_t i = 0; i < cur.size(); ++i)
        if (cur[i].logit >= min_logit) cur[j++] = cur[i];
      cur.resize(j);
      return;
    }
    sort_inplace(cur.size());
  }
  const float min_logit = cur[0].logit + std::log(p);
  size_t i = 1;
  for (; i < cur.size(); ++i)
    if (cur[i].logit < min_logit) break;
  cur.resize(i);
}

// llama_sampler_temp_impl: <= 0 keeps only the first maximum in the
// current order (the others -inf); otherwise every logit divided.
void Sampler::State::temperature(float t) {
  if (cur.empty()) return;
  if (t <= 0.0f) {
    size_t max_i = 0;
    float max_l = cur[0].logit;
    for (size_t i = 1; i < cur.size(); ++i) {
      if (cur[i].logit > max_l) {
        cur[max_i].logit = -INFINITY;
        max_i = i;
        max_l = cur[i].logit;
      } else {
        cur[i].logit = -INFINITY;
      }
    }
    return;
  }
  for (Cand& c : cur) c.logit /= t;
}

// llama_sampler_dist_apply: one uniform double per call (a single
// candidate still draws), expf weights in float summed in double in the
// current order, the first index whose running sum reaches sum * u.
size_t Sampler::State::dist() {
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const size_t size = cur.size();
  if (size == 1) {
    uniform(rng);
    cur[0].p = 1.0f;
    sum = 1.0;
    return 0;
  }
  const float max_l = max_logit();
  // The reference sums the weights in order, then walks the same running
  // sums again to the first one >= sum * rnd. Keeping them makes the walk
  // a binary search over the same doubles (they never decrease: every
  // weight is >= 0), so the draw is the reference's, for one pass.
  prefix.resize(size);
  double sum_cum = 0.0;
  for (size_t i = 0; i < size; ++i) {
    const float e = std::exp(cur[i].logit - max_l);
    cur[i].p = e;
    sum_cum += e;
    prefix[i] = sum_cum;
  }
  sum = sum_cum;
  const double rnd = uniform(rng);
  const double target = sum_cum * rnd;
  const auto first = std::lower_bound(prefix.begin(), prefix.end(), target);
  if (first != prefix.end()) return size_t(first - prefix.begin());
  return size - 1;
}

// The chain without truncation (top-k, top-p and min-p off, temperature
// > 0): materialize, temperature and dist over the whole vocabulary, the
// same arithmetic in the same order, on flat arrays. Dividing by t > 0
// keeps the order of the logits, so the largest scaled logit is the one
// dist() would find.
size_t Sampler::State::dist_whole(float t) {
  const size_t V = work.size();
  whole = true;
  scaled.resize(V);
  weights.resize(V);
  prefix.resize(V);
  for (size_t i = 0; i < V; ++i) scaled[i] = work[i] / t;
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  if (V == 1) {
    uniform(rng);
    weights[0] = 1.0f;
    sum = 1.0;
    return 0;
  }
  float max_l = scaled[0];
  for (size_t i = 1; i < V; ++i) max_l = std::max(max_l, scaled[i]);
  double sum_cum = 0.0;
  for (size_t i = 0; i < V; ++i) {
    const float e = std::exp(scaled[i] - max_l);
    weights[i] = e;
    sum_cum += e;
    prefix[i] = sum_cum;
  }
  sum = sum_cum;
  const double target = sum_cum * uniform(rng);
  const auto first = std::lower_bound(prefix.begin(), prefix.end(), target);
  return first != prefix.end() ? size_t(first - prefix.begin()) : V - 1;
}

Sampler::Sampler(const SamplingParams& params) : state_(std::make_unique<State>()) {
  state_->params = params;
  reset();
}
Sampler::~Sampler() = default;
Sampler::Sampler(Sampler&&) noexcept = default;
Sampler& Sampler::operator=(Sampler&&) noexcept = default;

void Sampler::reset() {
  State& s = *state_;
  uint64_t seed = s.params.seed;
  if (seed == SamplingParams::kRandomSeed && !s.params.seed_exact) {
    std::random_device rd;
    seed = rd();  // llama.cpp's get_rng_seed: 32 random bits
  }
  s.seed = seed;
  if (seed <= 0xFFFFFFFFull) {
    s.rng.seed(uint32_t(seed));  // llama_sampler_dist: std::mt19937(seed)
  } else {
    std::seed_seq seq{uint32_t(seed), uint32_t(seed >> 32)};  // beyond llama.cpp's range: both halves count
    s.rng.seed(seq);
  }
  s.history.clear();
  s.counts.clear();
}

uint64_t Sampler::seed() const { return state_->seed; }

// llama_sampler_penalties_accept.
void Sampler::accept(int32_t token) {
  State& s = *state_;
  const int32_t n = s.params.penalty_last_n;
  if (n <= 0) return;
  s.counts[token]++;
  if (s.history.size() >= size_t(n)) {
    const int32_t old = s.history.front();
    s.history.pop_front();
    if (--s.counts[old] == 0) s.counts.erase(old);
  }
  s.history.push_back(token);
}

int32_t Sampler::sample(std::span<const float> logits) {
  State& s = *state_;
  const SamplingParams& p = s.params;
  const size_t V = logits.size();
  s.work.assign(logits.begin(), logits.end());
  s.candidates_ready = false;
  s.candidates.clear();
  s.cur.clear();
  s.whole = false;
  s.greedy = p.temperature <= 0.0f;
  if (V == 0) return 0;
  s.penalize();

  // Greedy over the whole vocabulary (no truncation): the chain would
  // leave the first maximum in id order and draw over {0, ..., 1, ..., 0},
  // which picks id 0 only when the uniform is exactly 0.
  if (s.greedy && p.top_k <= 0 && p.top_p >= 1.0f && p.min_p <= 0.0f) {
    const float* l = s.work.data();
    size_t best = 0;
    for (size_t i = 1; i < V; ++i)
      if (l[i] > l[best]) best = i;
    if (std::isfinite(l[best])) {
      std::uniform_real_distribution<double> uniform(0.0, 1.0);
      const double rnd = uniform(s.rng);
      if (V == 1) return 0;
      return rnd == 0.0 ? 0 : int32_t(best);
    }
  }

  // The chain: top-k, top-p, min-p, temperature, dist.
  if (!s.greedy && p.top_k <= 0 && p.top_p >= 1.0f && p.min_p <= 0.0f) return int32_t(s.dist_whole(p.temperature));
  if (p.top_k > 0) s.top_k(p.top_k);
  else s.materialize();
  if (p.top_p < 1.0f) s.top_p(p.top_p);
  if (p.min_p > 0.0f) s.min_p(p.min_p);
  s.temperature(p.temperature);
  return s.cur[s.dist()].id;
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
  // Best first, lower id on ties.
  auto better = [l](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
  if (s.greedy) {
    // The full softmax's top kGreedyReported, logits after penalties.
    std::vector<int32_t> ids(V);
    for (size_t i = 0; i < V; ++i) ids[i] = int32_t(i);
    float m = -INFINITY;
    for (size_t i = 0; i < V; ++i) m = std::max(m, l[i]);
    double z = 0;
    for (size_t i = 0; i < V; ++i) z += std::exp(double(l[i]) - m);
    const size_t keep = std::min(kGreedyReported, V);
    std::partial_sort(ids.begin(), ids.begin() + ptrdiff_t(keep), ids.end(), better);
    ids.resize(keep);
    for (int32_t id : ids) out.push_back({id, l[id], float(std::exp(double(l[id]) - m) / z)});
    return out;
  }
  // The survivors, logits after temperature, the draw's probabilities.
  if (s.whole)
    for (size_t i = 0; i < V; ++i) out.push_back({int32_t(i), s.scaled[i], float(double(s.weights[i]) / s.sum)});
  for (const Cand& c : s.cur) out.push_back({c.id, c.logit, float(double(c.p) / s.sum)});
  std::stable_sort(out.begin(), out.end(), [](const TokenCandidate& a, const TokenCandidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  });
  return out;
}

const SamplingParams& Sampler::params() const { return state_->params; }

}  // namespace vtc
