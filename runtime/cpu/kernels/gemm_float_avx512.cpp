// AVX-512 F16 matmul: the AVX2 table's F16 arithmetic (dot_16bit in
// quant_avx2.cpp, gemm_16bit in gemm_avx2.cpp) in zmm registers, with
// larger tiles. See internal.h for the rules of this file.
//
// That arithmetic keeps, per output, 4 accumulators of 8 lanes over steps
// of 32 values (accumulator k takes values 8k..8k+7 of each step), adds
// the 8-value steps after them into accumulator 0, reduces
// (acc0 + acc1) + (acc2 + acc3), then 8 -> 4 -> 2 -> 1 lanes, and adds the
// last n % 8 products one by one in float. Here acc0|acc1 is one zmm (lanes
// 0-7 and 8-15) and acc2|acc3 another: values 0..15 and 16..31 of a step
// are one 16-value load each, and lane for lane the FMA chains are the
// AVX2 ones; so are the bits, whatever reference_lanes() says (the AVX2
// F16 matmul does not depend on it either). tests/cpu_kernels/
// test_float_avx512.cpp checks them against the AVX2 table bit for bit.
//
// Tiles: 4 rows x 2 tokens (16 zmm accumulators). A matmul box walks the
// row groups, each against all its tokens, so the weight rows stay in L1
// and the widened activations (f32, twice the weights' bytes per value)
// come from L2; 4 rows per activation load halve that traffic against
// 2 x 4 (measured 5120x1280, 64 tokens, one Zen 5 core: 2 x 4 40, 4 x 3
// 65, 4 x 2 100, 5 x 2 100, 6 x 2 80 GFLOP/s; the AVX2 1 x 3 tile 23).
// They read the activations rounded to f16 and widened back to f32
// (GemmKernels::widened_x), as the AVX2 tiles do.
//
// GCC 12's AVX-512 headers initialize their "undefined" registers from
// themselves (__Y = __Y), which -Wuninitialized reports at every inlined
// cast and conversion; nothing here reads an uninitialized value.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

#include "runtime/cpu/kernels/internal.h"

namespace vtc::cpu::detail {
namespace {

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

inline __m512 load16_f16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
// 8 values in lanes 0-7, zeros above (the 8-value steps touch acc0 only).
inline __m512 load8_f16(const uint16_t* p) {
  return _mm512_zextps256_ps512(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
inline __m512 load8_f32(const float* p) { return _mm512_zextps256_ps512(_mm256_loadu_ps(p)); }

// The AVX2 reduction of acc0..acc3 (a01 = acc0|acc1, a23 = acc2|acc3):
// (acc0 + acc1) + (acc2 + acc3), then avx2_common.h's hsum_ps.
inline float reduce(__m512 a01, __m512 a23) {
  const __m256 s01 = _mm256_add_ps(_mm512_castps512_ps256(a01), _mm512_extractf32x8_ps(a01, 1));
  const __m256 s23 = _mm256_add_ps(_mm512_castps512_ps256(a23), _mm512_extractf32x8_ps(a23, 1));
  const __m256 v = _mm256_add_ps(s01, s23);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

constexpr __mmask16 kLow8 = 0x00ff;

// RM rows x NT tokens of f16 weights against widened activations.
template <int RM, int NT>
void gemm_f16(int64_t n, const void* vw, int64_t ws, const void* vx, int64_t xs, float* y, int64_t ys) {
  const uint16_t* w[RM];
  const float* x[NT];
  #pragma GCC unroll 16
  for (int r = 0; r < RM; ++r)
    w[r] = reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(vw) + r * ws);
  #pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) x[t] = reinterpret_cast<const float*>(static_cast<const uint8_t*>(vx) + t * xs);
  __m512 a01[RM][NT], a23[RM][NT];
  #pragma GCC unroll 16
  for (int r = 0; r < RM; ++r)
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) a01[r][t] = a23[r][t] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512 w0[RM], w1[RM];
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) w0[r] = load16_f16(w[r] + i), w1[r] = load16_f16(w[r] + i + 16);
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
      const __m512 x0 = _mm512_loadu_ps(x[t] + i), x1 = _mm512_loadu_ps(x[t] + i + 16);
      #pragma GCC unroll 16
      for (int r = 0; r < RM; ++r) {
        a01[r][t] = _mm512_fmadd_ps(w0[r], x0, a01[r][t]);
        a23[r][t] = _mm512_fmadd_ps(w1[r], x1, a23[r][t]);
      }
    }
  }
  for (; i + 8 <= n; i += 8)
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) {
      const __m512 wv = load8_f16(w[r] + i);
      #pragma GCC unroll 16
      for (int t = 0; t < NT; ++t) a01[r][t] = _mm512_mask3_fmadd_ps(wv, load8_f32(x[t] + i), a01[r][t], kLow8);
    }
  #pragma GCC unroll 16
  for (int t = 0; t < NT; ++t)
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) {
      float sum = reduce(a01[r][t], a23[r][t]);
      for (int64_t k = i; k < n; ++k) sum += h2f(w[r][k]) * x[t][k];
      y[t * ys + r] = sum;
    }
}

// One row against one f16 activation row (QuantKernels::dot): the same
// arithmetic, converting the activations on the fly.
float dot_f16(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* x = static_cast<const uint16_t*>(vx);
  __m512 a01 = _mm512_setzero_ps(), a23 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a01 = _mm512_fmadd_ps(load16_f16(w + i), load16_f16(x + i), a01);
    a23 = _mm512_fmadd_ps(load16_f16(w + i + 16), load16_f16(x + i + 16), a23);
  }
  for (; i + 8 <= n; i += 8) a01 = _mm512_mask3_fmadd_ps(load8_f16(w + i), load8_f16(x + i), a01, kLow8);
  float sum = reduce(a01, a23);
  for (; i < n; ++i) sum += h2f(w[i]) * h2f(x[i]);
  return sum;
}

constexpr int kRows = 4;
constexpr int kToks = 2;  // add_avx512_float_tiles fills fn[1..2]

}  // namespace

void add_avx512_float_tiles(QuantKernels& t) {
  t.dot[kSlotF16] = dot_f16;
  GemmKernels g{};
  g.rows = kRows;
  g.toks = kToks;
  g.widened_x = true;
  g.fn[1] = gemm_f16<kRows, 1>;
  g.fn[2] = gemm_f16<kRows, 2>;
  t.gemm[kSlotF16] = g;
}

}  // namespace vtc::cpu::detail
