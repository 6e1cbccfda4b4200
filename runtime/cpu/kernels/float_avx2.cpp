// AVX2 (+FMA, F16C) float helpers: the vector pieces of rms_norm, the
// elementwise ops and attention. See internal.h for the rules of this file.
#include <immintrin.h>

#include <cstdint>

#include "runtime/cpu/kernels/avx2_expf.h"
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

// ggml's reduction of 4 accumulators of L lanes: acc0+acc2, acc1+acc3,
// their sum, then the horizontal sum of its AVX2 build (8 -> 4, two hadds)
// or of its AVX-512 builds (_mm512_reduce_add_ps: 16 -> 8 -> 4 -> (0+2) +
// (1+3)); an L = 16 accumulator is two 8-lane halves.
float reduce_l8(const __m256 acc[4]) {
  const __m256 r = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
  const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(r), _mm256_extractf128_ps(r, 1));
  const __m128 t1 = _mm_hadd_ps(t0, t0);  // (t0[0]+t0[1]) + (t0[2]+t0[3])
  return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

float reduce_l16(const __m256 lo[4], const __m256 hi[4]) {
  const __m256 rlo = _mm256_add_ps(_mm256_add_ps(lo[0], lo[2]), _mm256_add_ps(lo[1], lo[3]));
  const __m256 rhi = _mm256_add_ps(_mm256_add_ps(hi[0], hi[2]), _mm256_add_ps(hi[1], hi[3]));
  const __m256 t8 = _mm256_add_ps(rlo, rhi);
  const __m128 t4 = _mm_add_ps(_mm256_castps256_ps128(t8), _mm256_extractf128_ps(t8, 1));
  const __m128 t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
  return _mm_cvtss_f32(_mm_add_ss(t2, _mm_shuffle_ps(t2, t2, 1)));
}

// f16 dot products in the summation order of ggml_vec_dot_f16 (attention's
// K.q): 4 accumulators of L lanes (L = 8 for ggml's AVX2 build, 16 for its
// AVX-512 builds without AVX512-FP16) over steps of 4*L values, each
// accumulator a chain of FMAs; then acc0+acc2, acc1+acc3, their sum, a
// horizontal reduction in ggml's order, and the leftover (n % 4L) products
// added one by one in double. An L = 16 accumulator is two 8-lane halves.
float dot_f16_l8(const uint16_t* a, const uint16_t* b, int64_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  const int64_t np = n & ~int64_t{31};
  for (int64_t i = 0; i < np; i += 32)
    for (int j = 0; j < 4; ++j) acc[j] = _mm256_fmadd_ps(load_h(a + i + 8 * j), load_h(b + i + 8 * j), acc[j]);
  double sum = reduce_l8(acc);
  for (int64_t i = np; i < n; ++i) sum += static_cast<double>(h2f(a[i]) * h2f(b[i]));
  return static_cast<float>(sum);
}

float dot_f16_l16(const uint16_t* a, const uint16_t* b, int64_t n) {
  __m256 lo[4], hi[4];
  for (int j = 0; j < 4; ++j) lo[j] = hi[j] = _mm256_setzero_ps();
  const int64_t np = n & ~int64_t{63};
  for (int64_t i = 0; i < np; i += 64)
    for (int j = 0; j < 4; ++j) {
      lo[j] = _mm256_fmadd_ps(load_h(a + i + 16 * j), load_h(b + i + 16 * j), lo[j]);
      hi[j] = _mm256_fmadd_ps(load_h(a + i + 16 * j + 8), load_h(b + i + 16 * j + 8), hi[j]);
    }
  double sum = reduce_l16(lo, hi);
  for (int64_t i = np; i < n; ++i) sum += static_cast<double>(h2f(a[i]) * h2f(b[i]));
  return static_cast<float>(sum);
}

// The vector part of ggml_vec_dot_f32 (the delta rule's row dots), in
// the order of dot_f16_l8 / dot_f16_l16 above without the leftovers: the
// caller adds those as the reference's compiled tail loop does.
float dot_f32_blocks_l8(const float* a, const float* b, int64_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t i = 0; i < n; i += 32)
    for (int j = 0; j < 4; ++j)
      acc[j] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * j), _mm256_loadu_ps(b + i + 8 * j), acc[j]);
  return reduce_l8(acc);
}

float dot_f32_blocks_l16(const float* a, const float* b, int64_t n) {
  __m256 lo[4], hi[4];
  for (int j = 0; j < 4; ++j) lo[j] = hi[j] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 64)
    for (int j = 0; j < 4; ++j) {
      lo[j] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16 * j), _mm256_loadu_ps(b + i + 16 * j), lo[j]);
      hi[j] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16 * j + 8), _mm256_loadu_ps(b + i + 16 * j + 8), hi[j]);
    }
  return reduce_l16(lo, hi);
}

// silu x/(1+exp(-x)) with ggml's vector expf (avx2_expf.h) for whole
// vectors; the tail (n % 8) uses libm expf, as ggml does for its leftovers.

template <__m256 (*Exp)(__m256)>
void silu_v(const float* x, float* y, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 e = Exp(_mm256_sub_ps(_mm256_setzero_ps(), v));
    _mm256_storeu_ps(y + i, _mm256_div_ps(v, _mm256_add_ps(one, e)));
  }
  for (; i < n; ++i) y[i] = x[i] / (1.0f + __builtin_expf(-x[i]));
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
  static const FloatKernels k = {sum_squares, add, mul, scale, dot_f32, dot_f16_l8, mad_f32,
                                 mad_f16, mad_f32_f16, scale_f16, f32_to_f16, silu_v<v_expf_avx2>, dot_f32_blocks_l8};
  return &k;
}

const FloatKernels* avx2_float_kernels_l16() {
  static const FloatKernels k = {sum_squares, add, mul, scale, dot_f32, dot_f16_l16, mad_f32,
                                 mad_f16, mad_f32_f16, scale_f16, f32_to_f16, silu_v<v_expf_avx512>, dot_f32_blocks_l16};
  return &k;
}

}  // namespace vtc::cpu::detail
