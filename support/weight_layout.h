// How a weight's bytes are arranged in memory.
//
// Rows is ggml's own layout: each weight row a run of its type's blocks,
// rows one after another, as a GGUF stores them. The other layouts are
// chosen by the weight-layout pass (passes/weight_layout.h) for a target's
// kernels, recorded in the weight's IR element type (q4_k_x8), and produced
// either at load or by `vtc compile --pack`.
//
// Interleaved8 (IR suffix _x8), for Q4_0, Q8_0, Q4_K and Q6_K weights with a multiple of
// 8 rows: each group of 8 consecutive rows is stored as one run of "x8
// blocks", the k-th x8 block holding block k of each of the 8 rows with
// their fields interleaved so that one 32-byte load reads 4 consecutive
// quants of all 8 rows. The bytes are a permutation of the Rows bytes (same
// size, nothing re-encoded); runtime/cpu/kernels/packed_x8.cpp spells the
// permutation out.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "support/ggml_type.h"

namespace vtc {

enum class WeightLayout : uint8_t { Rows = 0, Interleaved8 = 1 };

// "rows", "x8".
std::string_view weight_layout_name(WeightLayout layout);
std::optional<WeightLayout> weight_layout_from_name(std::string_view name);

// Rows per interleaved group (1 for Rows).
int64_t weight_layout_rows(WeightLayout layout);

// True if `type` weights can be stored in `layout` (any type for Rows;
// Q4_0, Q8_0, Q4_K and Q6_K for Interleaved8). The row count must also be a multiple of
// weight_layout_rows(layout).
bool weight_layout_supports(WeightLayout layout, GgmlType type);

}  // namespace vtc
