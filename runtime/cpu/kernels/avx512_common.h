// Shared by the AVX-512 kernel files (*_avx512.cpp): the warning set-up of
// GCC's AVX-512 headers, _mm512_reduce_add_ps's order spelled out, and the
// tinyBLAS-order tile of the F16 and BF16 matmuls.
//
// Include this first, and only from translation units compiled with the
// AVX-512 flags (CMakeLists.txt). Everything is in an anonymous namespace,
// so each such file gets its own copy and the linker can never merge one
// into code that runs on a machine without AVX-512 (see internal.h).
#pragma once

// GCC 12's AVX-512 headers initialize their "undefined" registers from
// themselves (__Y = __Y), which -Wuninitialized reports at every inlined
// cast and conversion (GCC bug 105593); nothing in these files reads an
// uninitialized value.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "runtime/cpu/kernels/avx2_common.h"  // AVX-512 files are built with AVX2 too (bf2f, h2f)
#include "runtime/cpu/kernels/internal.h"

namespace vtc::cpu::detail {
namespace {

// How far ahead (in 16-bit values) the one-token bf16 dots prefetch their
// weight row. A decode step streams each row from DRAM through the dot,
// whose two accumulator chains leave the loads little to overlap with:
// prefetching 2 KiB ahead took a 4096x4096 one-token vdpbf16ps matmul on
// one Zen 5 core from ~1.5 to ~1.1 ms (the AVX2 level: ~1.1 ms).
constexpr int64_t kDotPrefetchValues = 1024;

// The AVX-512 build's ggml_v_expf: the 1 inside the polynomial, then
// vscalefps; |n| > 192 gives inf or 0.
inline __m512 v_expf_l16(__m512 x) {
  const __m512 r = _mm512_set1_ps(0x1.8p23f);
  const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
  const __m512 n = _mm512_sub_ps(z, r);
  const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                    _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __mmask16 d = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192), _CMP_GT_OQ);
  const __m512 u = _mm512_mul_ps(b, b);
  const __m512 j = _mm512_fmadd_ps(
      _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                      _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
      u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
  const __m512 res = _mm512_scalef_ps(j, n);
  if (d == 0) return res;
  const __m512 alt = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ),
                                          _mm512_set1_ps(__builtin_inff()), _mm512_setzero_ps());
  return _mm512_mask_blend_ps(d, res, alt);
}

// _mm512_reduce_add_ps's order, spelled out: the upper 8 lanes plus the
// lower 8, then 4 + 4, then (0 + 2) + (1 + 3) (GCC's and Clang's expansion).
inline float reduce_add(__m512 v) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// RM rows x NT tokens of 16-bit values (w, x: rows of uint16_t, strides in
// bytes) in llamafile tinyBLAS's order: per output one 16-lane accumulator,
// acc = Step::madd(acc, w[l..l+K), x[l..l+K)) for l = 0, K, ..., then
// reduce_add. Step (the element type's policy) gives K = Step::kValues, the
// vector type Step::Vec, Step::load and Step::madd, and Step::dot, the
// one-row order the reference takes instead when n % K != 0.
template <class Step, int RM, int NT>
void tinyblas_tile(int64_t n, const void* vw, int64_t ws, const void* vx, int64_t xs, float* y, int64_t ys) {
  const uint16_t* w[RM];
  const uint16_t* x[NT];
  #pragma GCC unroll 16
  for (int r = 0; r < RM; ++r) w[r] = reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(vw) + r * ws);
  #pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) x[t] = reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(vx) + t * xs);
  if (n % Step::kValues != 0) {  // the reference's vec_dot path
    for (int t = 0; t < NT; ++t)
      for (int r = 0; r < RM; ++r) y[t * ys + r] = Step::dot(n, w[r], x[t]);
    return;
  }
  __m512 acc[RM][NT];
  #pragma GCC unroll 16
  for (int r = 0; r < RM; ++r)
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += Step::kValues) {
    typename Step::Vec wv[RM];
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) wv[r] = Step::load(w[r] + i);
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
      const typename Step::Vec xv = Step::load(x[t] + i);
      #pragma GCC unroll 16
      for (int r = 0; r < RM; ++r) acc[r][t] = Step::madd(acc[r][t], wv[r], xv);
    }
  }
  #pragma GCC unroll 16
  for (int t = 0; t < NT; ++t)
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) y[t * ys + r] = reduce_add(acc[r][t]);
}

// The GemmKernels of tinyblas_tile<Step, RM, 1..4> (rows are the activation
// rows' own type: widened_x off, so one token takes the table's dot).
template <class Step, int RM>
GemmKernels tinyblas_tiles() {
  static_assert(kMaxGemmToks >= 4);
  GemmKernels g{};
  g.rows = RM;
  g.toks = 4;
  g.widened_x = false;
  g.fn[1] = tinyblas_tile<Step, RM, 1>;
  g.fn[2] = tinyblas_tile<Step, RM, 2>;
  g.fn[3] = tinyblas_tile<Step, RM, 3>;
  g.fn[4] = tinyblas_tile<Step, RM, 4>;
  return g;
}

}  // namespace
}  // namespace vtc::cpu::detail
