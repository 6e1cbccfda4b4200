// AVX2 (+FMA, F16C) float helpers: the vector pieces of rms_norm, the
// elementwise ops and attention. See internal.h for the rules of this file.
#include <immintrin.h>

#include <cstdint>

#include "runtime/cpu/kernels/internal.h"

namespace vtc::cpu::detail {
namespace {

inline float hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float h2f(uint16_t h) { return _cvtsh_ss(h); }
inline uint16_t f2h(float f) { return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)); }
inline __m256 load_h(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline void store_h(uint16_t* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

double sum_squares(const float* x, int64_t n) {
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 sq = _mm256_mul_ps(v, v);  // float product, widened, as ggml
    a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
    a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
  }
  a0 = _mm256_add_pd(a0, a1);
  const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(a0), _mm256_extractf128_pd(a0, 1));
  double sum = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
  for (; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  return sum;
}

void add(const float* a, const float* b, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  for (; i < n; ++i) y[i] = a[i] + b[i];
}

void mul(const float* a, const float* b, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  for (; i < n; ++i) y[i] = a[i] * b[i];
}

void scale(const float* x, float s, float* y, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
  for (; i < n; ++i) y[i] = x[i] * s;
}

float dot_f32(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  float sum = hsum_ps(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

float dot_f16(const uint16_t* a, const uint16_t* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(load_h(a + i), load_h(b + i), acc0);
    acc1 = _mm256_fmadd_ps(load_h(a + i + 8), load_h(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(load_h(a + i), load_h(b + i), acc0);
  float sum = hsum_ps(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += h2f(a[i]) * h2f(b[i]);
  return sum;
}

void mad_f32(float* y, const float* x, float v, int64_t n) {
  const __m256 vv = _mm256_set1_ps(v);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), vv, _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] = __builtin_fmaf(x[i], v, y[i]);
}

void mad_f16(uint16_t* y, const uint16_t* x, float v, int64_t n) {
  const __m256 vv = _mm256_set1_ps(v);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store_h(y + i, _mm256_fmadd_ps(load_h(x + i), vv, load_h(y + i)));
  for (; i < n; ++i) y[i] = f2h(__builtin_fmaf(h2f(x[i]), v, h2f(y[i])));
}

void mad_f32_f16(float* y, const uint16_t* x, float v, int64_t n) {
  const __m256 vv = _mm256_set1_ps(v);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(load_h(x + i), vv, _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] = __builtin_fmaf(h2f(x[i]), v, y[i]);
}

void scale_f16(uint16_t* y, float v, int64_t n) {
  const __m256 vv = _mm256_set1_ps(v);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store_h(y + i, _mm256_mul_ps(load_h(y + i), vv));
  for (; i < n; ++i) y[i] = f2h(h2f(y[i]) * v);
}

void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store_h(y + i, _mm256_loadu_ps(x + i));
  for (; i < n; ++i) y[i] = f2h(x[i]);
}

}  // namespace

const FloatKernels* avx2_float_kernels() {
  static const FloatKernels k = {sum_squares, add, mul, scale, dot_f32, dot_f16, mad_f32,
                                 mad_f16, mad_f32_f16, scale_f16, f32_to_f16};
  return &k;
}

}  // namespace vtc::cpu::detail
