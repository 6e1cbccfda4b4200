// The `sample` op on the CPU (docs/ir.md "### sample"), one row at a time.
//
// Per row, with params = (temperature, top_k, top_p, min_p):
//   - temperature <= 0 (or NaN): greedy, argmax's rule (the first maximum,
//     NaN never wins, a row with nothing above -inf gives 0);
//   - else: k = max_k, or trunc(top_k) when 1 <= top_k < max_k; k <= V.
//     The candidates are the k best in the top_k op's total order (value
//     descending, NaN last, ties to the lower index), selected by
//     cpu::top_k's partial_sort (O(V log k), one pass, not k scans).
//     p[j] = expf((v[j] - v[0]) / temperature), total = sum p; keep is the
//     smallest prefix whose running sum of p[j] / total reaches top_p, cut
//     before the first j with p[j] < min_p * p[0], and at least 1;
//     kept = sum of the kept p. The draw is splitmix64 of
//     z = seed + 0x9E3779B97F4A7C15 * (pos + 1) (u64, wrapping):
//     u = float(z >> 40) * 2^-24 * kept, and the pick is the first j with
//     u < the running sum of p (else keep - 1).
// The float operations run in the order of the CUDA kernel (emit_sample.cpp,
// emit_sample) so both arms draw the same token, up to 1-ulp differences of
// expf. The file is built with -ffp-contract=off for the same reason.
#include <algorithm>
#include <array>
#include <cmath>

#include "runtime/cpu/kernels/kernels.h"

namespace vtc::cpu {
namespace {

// splitmix64's finalizer over the (seed, pos) counter: a draw depends only
// on the row's seed and position, never on a step or batch counter.
uint64_t sample_bits(uint64_t seed, int32_t pos) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (uint64_t(int64_t(pos)) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The candidate count: top_k truncated toward zero, "off" below 1 (and
// for NaN), at most max_k and the vocabulary.
int64_t sample_k(float top_k, int64_t max_k, int64_t n) {
  int64_t k = max_k;
  if (top_k >= 1.0f && top_k < float(max_k)) k = int64_t(top_k);
  return std::min(k, n);
}

// Keep: the top-p prefix, cut at min-p; at least one candidate.
int64_t sample_keep(const float* p, int64_t k, float total, float top_p, float min_p) {
  int64_t keep = k;
  float mass = 0.0f;
  for (int64_t j = 0; j < k; ++j) {
    if (p[j] < min_p * p[0]) {
      keep = j;
      break;
    }
    mass += p[j] / total;
    if (mass >= top_p) {
      keep = j + 1;
      break;
    }
  }
  return std::max<int64_t>(keep, 1);
}

}  // namespace

int32_t sample_row(const float* logits, int64_t n, const float params[4], uint64_t seed, int32_t pos, int64_t max_k) {
  if (n <= 0) return 0;
  const float temp = params[0];
  if (!(temp > 0.0f)) return int32_t(argmax(logits, n));
  max_k = std::clamp<int64_t>(max_k, 1, kSampleMaxK);
  const int64_t k = sample_k(params[1], max_k, n);
  std::array<int32_t, kSampleMaxK> idx;
  top_k(logits, n, k, idx.data());
  std::array<float, kSampleMaxK> p;
  float total = 0.0f;
  const float v0 = logits[idx[0]];
  for (int64_t j = 0; j < k; ++j) {
    p[size_t(j)] = std::exp((logits[idx[size_t(j)]] - v0) / temp);
    total += p[size_t(j)];
  }
  const int64_t keep = sample_keep(p.data(), k, total, params[2], params[3]);
  float kept = 0.0f;
  for (int64_t j = 0; j < keep; ++j) kept += p[size_t(j)];
  const float u = float(sample_bits(seed, pos) >> 40) * (1.0f / 16777216.0f) * kept;
  float acc = 0.0f;
  for (int64_t j = 0; j < keep; ++j) {
    acc += p[size_t(j)];
    if (u < acc) return idx[size_t(j)];
  }
  return idx[size_t(keep - 1)];
}

}  // namespace vtc::cpu
