// Writing K and V rows into a cache of any KV cache type, and the
// Walsh-Hadamard rotation the reference applies before a quantized cache.
//
// quantize_kv_row stores what the reference's KV store (ggml_set_rows on the
// CPU backend, through the type's from_float) stores:
//   f32: the values; f16: round to nearest even (F16C where the level has it,
//   same bits); bf16: round to nearest even;
//   q8_0: the matmul's activation quantizer for q8_0 (ggml's from_float for
//         q8_0 on this ISA level);
//   q4_0: d = max / -8 where max is the value of largest magnitude,
//         q = min(15, trunc(x / d + 8.5));
//   q4_1: d = (max - min) / 15, m = min, q = min(15, trunc((x - min) / d + 0.5));
//   q5_0: d = max / -16, q = min(31, trunc(x / d + 16.5)), bit 4 of each q in qh;
//   q5_1: d = (max - min) / 31, q = trunc((x - min) / d + 0.5), bit 4 in qh;
//   iq4_nl: d0 = max / -127 picks each value's nearest codebook entry L, then
//         d = sum(w q x) / sum(w q^2) with w = x^2 (least squares over those
//         entries; the reference's row quantizer makes no further tries).
// 1/d is 0 for d = 0, as there. A block of iq4_nl whose largest magnitude is
// below 1e-15 gets d = 0 and codes 0 (the reference leaves whatever its code
// buffer held; they dequantize to 0 either way).
//
// hadamard_rows is ggml's CPU fast Walsh-Hadamard transform (the path its
// mul_mat takes for a matrix marked GGML_HINT_SRC0_IS_HADAMARD): each block
// of n values is scaled by 1/sqrt(n) first, then butterflies of span 1, 2,
// 4, ... n/2: (u, v) -> (u + v, u - v). Every pass is exact in its order, so
// the SIMD width does not change the bits.
#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "frontends/gguf/dequant.h"
#include "runtime/cpu/kernels/internal.h"
#include "runtime/cpu/kernels/kernels.h"
#include "support/error.h"
#include "support/kv_cache_type.h"

namespace vtc::cpu {

namespace {

using detail::BlockIQ4_NL;
using detail::BlockQ4_0;
using detail::BlockQ4_1;
using detail::BlockQ5_0;
using detail::BlockQ5_1;

constexpr int kBlock = 32;

// The value of largest magnitude (the first of equal magnitudes), signed.
float signed_absmax(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kBlock; ++j)
    if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];
  return max;
}

void min_max(const float* x, float& min, float& max) {
  min = 3.402823466e38f, max = -3.402823466e38f;
  for (int j = 0; j < kBlock; ++j) min = std::min(min, x[j]), max = std::max(max, x[j]);
}

// Codes q[0..32) of one block: low nibbles hold values 0..15, high 16..31.
void pack_nibbles(const int* q, uint8_t* qs) {
  for (int j = 0; j < kBlock / 2; ++j) qs[j] = uint8_t((q[j] & 0x0F) | ((q[j + kBlock / 2] & 0x0F) << 4));
}

uint32_t high_bits(const int* q) {
  uint32_t qh = 0;
  for (int j = 0; j < kBlock; ++j) qh |= uint32_t((q[j] >> 4) & 1) << j;
  return qh;
}

// q4_0 / q5_0 (Bits 4 / 5): d = max / -2^(Bits-1) from the value of
// largest magnitude, q = min(2^Bits - 1, trunc(x / d + 2^(Bits-1) + 0.5));
// q5_0 keeps each code's bit 4 in qh.
template <int Bits, class Block>
void quantize_symmetric(const float* x, Block* y, int64_t nb) {
  constexpr int kHalf = 1 << (Bits - 1), kTop = (1 << Bits) - 1;
  for (int64_t i = 0; i < nb; ++i, x += kBlock) {
    const float d = signed_absmax(x) / float(-kHalf), id = d != 0.0f ? 1.0f / d : 0.0f;
    int q[kBlock];
    for (int j = 0; j < kBlock; ++j) q[j] = std::min(kTop, int(x[j] * id + (float(kHalf) + 0.5f)));
    y[i].d = fp32_to_fp16(d);
    if constexpr (Bits == 5) {
      const uint32_t qh = high_bits(q);
      std::memcpy(y[i].qh, &qh, 4);
    }
    pack_nibbles(q, y[i].qs);
  }
}

// q4_1 / q5_1: d = (max - min) / (2^Bits - 1), m = min, q = trunc((x - min)
// / d + 0.5), clamped to 15 for q4_1 and wrapped to a byte for q5_1 (as the
// reference's casts do); q5_1 keeps bit 4 in qh.
template <int Bits, class Block>
void quantize_with_min(const float* x, Block* y, int64_t nb) {
  constexpr int kTop = (1 << Bits) - 1;
  for (int64_t i = 0; i < nb; ++i, x += kBlock) {
    float min, max;
    min_max(x, min, max);
    const float d = (max - min) / float(kTop), id = d != 0.0f ? 1.0f / d : 0.0f;
    int q[kBlock];
    for (int j = 0; j < kBlock; ++j) {
      const float v = (x[j] - min) * id + 0.5f;
      q[j] = Bits == 4 ? std::min(kTop, int(v)) : int(uint8_t(v));
    }
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    if constexpr (Bits == 5) {
      const uint32_t qh = high_bits(q);
      std::memcpy(y[i].qh, &qh, 4);
    }
    pack_nibbles(q, y[i].qs);
  }
}

// The codebook entry nearest to v (the lower one on a tie), by bisection
// over the sorted codebook.
int nearest_code(float v) {
  const int8_t* values = detail::kIq4nlValues;
  if (v <= values[0]) return 0;
  if (v >= values[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (v < values[mid] ? hi : lo) = mid;
  }
  return v - values[hi - 1] < values[hi] - v ? hi - 1 : hi;
}

void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kBlock) {
    int q[kBlock] = {};
    const float max = signed_absmax(x);
    float d = 0.0f;
    if (std::fabs(max) >= 1e-15f) {
      const float id = 1.0f / (max / float(detail::kIq4nlValues[0]));
      float sumqx = 0.0f, sumq2 = 0.0f;
      for (int j = 0; j < kBlock; ++j) {
        q[j] = nearest_code(id * x[j]);
        const float v = float(detail::kIq4nlValues[q[j]]), w = x[j] * x[j];
        sumqx += w * v * x[j];
        sumq2 += w * v * v;
      }
      d = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
    }
    y[i].d = fp32_to_fp16(d);
    pack_nibbles(q, y[i].qs);
  }
}

}  // namespace

// ggml_vec_dot_iq4_nl_q8_0 (x86, AVX2 and up): lane i of a block's integer
// sums covers values 4i..4i+3; blocks alternate between two 8-lane
// accumulators (even blocks the first), acc = fma(f16(k.d) * f16(q.d),
// float(lane), acc); then hsum(acc1 + acc2) (lanes l + l+4, then (0 + 2) +
// (1 + 3)); an odd last block is added after, d * float(its integer sum).
// Not the matmul's dot (one accumulator): the KV cache's K dot follows the
// reference's vec_dot, which the reference's attention calls.
float detail::kv_dot_iq4_nl(int64_t n, const void* k, const void* q) {
  const auto* kb = static_cast<const BlockIQ4_NL*>(k);
  const auto* qb = static_cast<const detail::BlockQ8_0*>(q);
  const int64_t nb = n / kBlock;
  const float* f16 = detail::fp16_table();
  float acc[2][8] = {};
  auto lanes = [&](int64_t b, int32_t out[8]) {
    for (int l = 0; l < 8; ++l) {
      out[l] = 0;
      for (int j = 4 * l; j < 4 * l + 4; ++j) {
        const int code = j < 16 ? kb[b].qs[j] & 0x0F : kb[b].qs[j - 16] >> 4;
        out[l] += int32_t(detail::kIq4nlValues[code]) * int32_t(qb[b].qs[j]);
      }
    }
  };
  int64_t b = 0;
  for (; b + 1 < nb; b += 2)
    for (int64_t i = 0; i < 2; ++i) {
      int32_t l8[8];
      lanes(b + i, l8);
      const float d = f16[kb[b + i].d] * f16[qb[b + i].d];
      for (int l = 0; l < 8; ++l) acc[i][l] = std::fma(d, float(l8[l]), acc[i][l]);
    }
  float s[8];
  for (int l = 0; l < 8; ++l) s[l] = acc[0][l] + acc[1][l];
  const float r0 = s[0] + s[4], r1 = s[1] + s[5], r2 = s[2] + s[6], r3 = s[3] + s[7];
  float sum = (r0 + r2) + (r1 + r3);
  if (b < nb) {
    int32_t l8[8], isum = 0;
    lanes(b, l8);
    for (int32_t v : l8) isum += v;
    sum += f16[kb[b].d] * f16[qb[b].d] * float(isum);
  }
  return sum;
}

void quantize_kv_row(GgmlType type, const float* x, void* y, int64_t n) {
  const uint64_t block = ggml_traits(type).block_size;
  if (n < 0 || uint64_t(n) % block != 0)
    throw Error(fmt::format("KV cache: a row of {} values is not a whole number of {} blocks", n, ggml_type_name(type)));
  const int64_t nb = n / int64_t(block);
  switch (type) {
    case GgmlType::F32: std::memcpy(y, x, size_t(n) * 4); return;
    case GgmlType::F16: detail::active_float_kernels().f32_to_f16(x, static_cast<uint16_t*>(y), n); return;
    case GgmlType::BF16: detail::quantize_bf16_scalar(x, y, n); return;
    case GgmlType::Q8_0:
      detail::active_quant_kernels().quantize[static_cast<int>(detail::ActType::Q8_0)](x, y, n);
      return;
    case GgmlType::Q4_0: quantize_symmetric<4>(x, static_cast<BlockQ4_0*>(y), nb); return;
    case GgmlType::Q4_1: quantize_with_min<4>(x, static_cast<BlockQ4_1*>(y), nb); return;
    case GgmlType::Q5_0: quantize_symmetric<5>(x, static_cast<BlockQ5_0*>(y), nb); return;
    case GgmlType::Q5_1: quantize_with_min<5>(x, static_cast<BlockQ5_1*>(y), nb); return;
    case GgmlType::IQ4_NL: quantize_iq4_nl(x, static_cast<BlockIQ4_NL*>(y), nb); return;
    default: break;
  }
  throw Error(fmt::format("KV cache: {} is not a cache type (one of: {})", ggml_type_name(type), kv_cache_type_list()));
}

void hadamard_rows(const float* x, float* y, int64_t n_values, int64_t block) {
  if (block < 2 || (block & (block - 1)) != 0 || n_values % block != 0)
    throw Error(fmt::format("hadamard: {} values are not whole blocks of a power of two ({})", n_values, block));
  const float scale = 1.0f / std::sqrt(float(block));
  for (int64_t b0 = 0; b0 < n_values; b0 += block) {
    float* r = y + b0;
    for (int64_t j = 0; j < block; ++j) r[j] = x[b0 + j] * scale;
    for (int64_t len = 1; len < block; len <<= 1)
      for (int64_t i = 0; i < block; i += 2 * len)
        for (int64_t j = i; j < i + len; ++j) {
          const float u = r[j], v = r[j + len];
          r[j] = u + v;
          r[j + len] = u - v;
        }
  }
}

}  // namespace vtc::cpu
