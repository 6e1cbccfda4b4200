// Fingerprints: a per-tensor summary that two execution arms can compare.
//
// DESIGN.md, "Fingerprint": non-finite count, non-zero count, max |x|,
// sum |x| and the first 4 values. It is a summary, not a hash, because two
// arms (CPU and CUDA, fused and unfused) legitimately differ in the last
// bits of a float: a hash would disagree on a correct pair and say nothing
// about how far apart the two are. Closeness is judged by relative L2 on
// the full values (compare_values); the fingerprint is what a human reads.
//
// Algorithm: widen every element to double (f16/bf16 exactly, integers
// exactly up to 2^53), then one pass:
//   nonfinite += !isfinite(x)            (NaN, +Inf, -Inf)
//   nonzero   += x != 0                  (NaN and Inf count as non-zero)
//   max_abs    = max |x| over finite x   (so one NaN does not hide the rest)
//   sum_abs   += |x|    over finite x
//   first      = x[0..min(4, n))         (as stored, NaN included)
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ir/types.h"
#include "runtime/cpu/interpreter.h"

namespace vtc::diff {

inline constexpr size_t kFingerprintFirst = 4;

struct Fingerprint {
  int64_t count = 0;
  int64_t nonfinite = 0;
  int64_t nonzero = 0;
  double max_abs = 0;
  double sum_abs = 0;
  std::vector<double> first;
};

// The elements of a tensor as doubles; a block-quantized one (a KV cache
// of a block type) dequantized. Throws vtc::Error for a partial block.
std::vector<double> widen(ir::ElemType elem, std::span<const uint8_t> bytes, int64_t count);
std::vector<double> widen(const HostTensor& t);

Fingerprint fingerprint(std::span<const double> values);

// "nonfinite=0 nonzero=3 max|x|=1.5 sum|x|=3 first=[1, 0, -1.5, 0.5]";
// integers print without a fraction.
std::string format_fingerprint(const Fingerprint& f);

// How far arm B's values are from arm A's (the reference).
struct ValueComparison {
  // ||a - b|| / ||a|| over the positions where both are finite; 0 when both
  // norms are 0, +inf when only ||a|| is.
  double rel_l2 = 0;
  // Positions where exactly one side is non-finite, or both are but differ
  // (NaN vs Inf, +Inf vs -Inf). NaN vs NaN agrees.
  int64_t nonfinite_mismatches = 0;
};
// Throws vtc::Error when the sizes differ.
ValueComparison compare_values(std::span<const double> a, std::span<const double> b);

}  // namespace vtc::diff
