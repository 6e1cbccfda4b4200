// ALiBi (attention with linear biases; bloom, mpt, jais, refact, baichuan
// 13B) as llama.cpp applies it, computed on the host so that the CPU
// kernels and the CUDA emitters (which bake the slopes in) round alike.
//
// The reference writes -|pos_q - pos_k| into its KQ mask (llama-kv-cache.cpp
// set_input_kq_mask, `use_alibi`), stored as f16 for flash attention, and
// ggml (soft_max_ext / flash_attn_ext) multiplies each head's mask by its
// slope before adding it to the scaled, softcapped score:
//   n_head_log2 = 2^floor(log2(n_head))
//   m0 = 2^(-max_bias / n_head_log2),  m1 = 2^(-(max_bias / 2) / n_head_log2)
//   slope(h) = m0^(h + 1)                          for h < n_head_log2
//            = m1^(2 (h - n_head_log2) + 1)        otherwise
//   score += slope(h) * f16(-|pos_q - pos_k|)
// every step in float, in ggml's order (powf, not pow).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "support/mutation.h"

namespace vtc {

// Query head h's slope for n_head query heads; 1 when max_bias is 0 (no
// ALiBi: the reference's mask then holds 0 or -inf only).
inline float alibi_slope(float max_bias, int64_t n_head, int64_t h) {
  if (max_bias <= 0.0f) return 1.0f;
  if (mutated(Mutation::AlibiSlope) && h > 0) --h;  // support/mutation.h
  const auto n_head_log2 = uint32_t(1) << static_cast<uint32_t>(std::floor(std::log2(double(n_head))));
  const float m0 = std::pow(2.0f, -max_bias / static_cast<float>(n_head_log2));
  const float m1 = std::pow(2.0f, -(max_bias / 2.0f) / static_cast<float>(n_head_log2));
  return h < int64_t(n_head_log2) ? std::pow(m0, static_cast<float>(h + 1))
                                  : std::pow(m1, static_cast<float>(2 * (h - int64_t(n_head_log2)) + 1));
}

// The reference's mask entry for a visible key: -|pos_q - pos_k| rounded to
// f16 (exact up to 2048; then to 11 significant bits, ties to even; past
// f16's largest value, 65504, it is -inf, so the key is masked as there).
inline float alibi_distance(int64_t pos_q, int64_t pos_k) {
  uint64_t d = uint64_t(pos_q > pos_k ? pos_q - pos_k : pos_k - pos_q);
  if (d >= 2048) {
    int bits = 0;
    for (uint64_t x = d; x != 0; x >>= 1) ++bits;
    const int shift = bits - 11;
    uint64_t kept = d >> shift;
    const uint64_t rest = d & ((uint64_t(1) << shift) - 1), half = uint64_t(1) << (shift - 1);
    if (rest > half || (rest == half && (kept & 1) != 0)) ++kept;
    d = kept << shift;
    if (d > 65504) return -std::numeric_limits<float>::infinity();
  }
  return -static_cast<float>(d);
}

}  // namespace vtc
