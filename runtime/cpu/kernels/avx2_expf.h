// ggml's vector expf in its AVX2 and AVX-512 roundings, written with AVX2
// instructions (float_avx2.cpp: silu/swiglu; attention_avx2.cpp: the tiled
// flash-attention softmax).
//
// Include only from translation units compiled with -mavx2 -mfma -mf16c;
// the anonymous namespace keeps each copy private to its file (see
// internal.h).
#pragma once

#include <immintrin.h>

namespace vtc::cpu::detail {
namespace {

// ggml's vector expf (ggml_v_expf, a polynomial after Arm's optimized
// routines), which ggml_vec_swiglu_f32, ggml_vec_silu_f32, its softmax and
// its tiled flash attention use for whole vectors. Its AVX2 and AVX-512 versions
// round differently: AVX2 evaluates the polynomial without the constant 1
// and finishes with k + k*j (one FMA, k = 2^n); AVX-512 adds the 1 inside
// the polynomial and scales by 2^n exactly (vscalefps). Both are reproduced
// here with AVX2 instructions.
inline __m256 v_expf_avx2(__m256 x) {
  const __m256 r = _mm256_set1_ps(0x1.8p23f);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
  const __m256 n = _mm256_sub_ps(z, r);
  const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                    _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
  const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1))));
  const __m256 absn = _mm256_andnot_ps(_mm256_set1_ps(-0.f), n);
  const __m256 c = _mm256_cmp_ps(absn, _mm256_set1_ps(126), _CMP_GT_OQ);
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 j = _mm256_fmadd_ps(
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                      _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
      u, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
  if (!_mm256_movemask_ps(c)) return _mm256_fmadd_ps(j, k, k);
  const __m256i g = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                     _mm256_set1_epi32(static_cast<int>(0x82000000u)));
  const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
  const __m256 d = _mm256_cmp_ps(absn, _mm256_set1_ps(192), _CMP_GT_OQ);
  return _mm256_or_ps(
      _mm256_and_ps(d, _mm256_mul_ps(s1, s1)),
      _mm256_andnot_ps(d, _mm256_or_ps(_mm256_and_ps(c, _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1)),
                                       _mm256_andnot_ps(c, _mm256_fmadd_ps(k, j, k)))));
}

// 2^n for integral n in [-126, 127], exactly.
inline __m256 pow2i(__m256 n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
}

inline __m256 v_expf_avx512(__m256 x) {
  const __m256 r = _mm256_set1_ps(0x1.8p23f);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
  const __m256 n = _mm256_sub_ps(z, r);
  const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                    _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256 absn = _mm256_andnot_ps(_mm256_set1_ps(-0.f), n);
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 j = _mm256_fmadd_ps(
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                      _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
      u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
  // scalef(j, n) = j * 2^n rounded once. Within |n| <= 126 one exact
  // multiply; up to 192 split into two powers (the second multiply is the
  // only rounding unless the result is subnormal); beyond, inf or 0.
  const __m256 small = _mm256_cmp_ps(absn, _mm256_set1_ps(126), _CMP_LE_OQ);
  if (_mm256_movemask_ps(small) == 0xff) return _mm256_mul_ps(j, pow2i(n));
  const __m256 half = _mm256_round_ps(_mm256_mul_ps(n, _mm256_set1_ps(0.5f)), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 nc = _mm256_min_ps(_mm256_max_ps(half, _mm256_set1_ps(-126)), _mm256_set1_ps(126));
  const __m256 rest = _mm256_min_ps(_mm256_max_ps(_mm256_sub_ps(n, nc), _mm256_set1_ps(-126)), _mm256_set1_ps(126));
  const __m256 mid = _mm256_mul_ps(_mm256_mul_ps(j, pow2i(nc)), pow2i(rest));
  const __m256 big = _mm256_cmp_ps(absn, _mm256_set1_ps(192), _CMP_GT_OQ);
  const __m256 alt = _mm256_and_ps(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ), _mm256_set1_ps(0.0f));
  const __m256 inf_or_zero = _mm256_blendv_ps(_mm256_set1_ps(__builtin_inff()), alt,
                                              _mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ));
  return _mm256_blendv_ps(mid, inf_or_zero, big);
}

}  // namespace
}  // namespace vtc::cpu::detail
