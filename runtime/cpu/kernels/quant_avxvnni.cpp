// AVX-VNNI (VEX-encoded vpdpbusd on ymm) versions of some AVX2 dot kernels.
//
// Compiled with -mavx2 -mfma -mf16c -mavxvnni and reached only through
// avx2_quant_kernels() after cpu_has_avxvnni() (isa.cpp). Same rules as
// quant_avx2.cpp: anonymous namespace, only C headers. The results are
// bit-identical to the AVX2 kernels: vpdpbusd forms the same int32 lane sums
// (4 adjacent byte products per lane) as maddubs + madd, exactly, and the
// float operations are unchanged.
#include <immintrin.h>

#include <cstdint>

#include "runtime/cpu/kernels/internal.h"

namespace vtc::cpu::detail {
namespace {

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

inline float hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i loadu(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Signed w (as w ^ 0x80 = w + 128, unsigned) times signed x, minus
// 128 * (sums of 4 x bytes) given as `neg`: exactly the per-lane sums of
// w*x over 4 adjacent bytes.
inline __m256i dot_i8(__m256i w, __m256i x, __m256i neg) {
  return _mm256_dpbusd_avx_epi32(neg, _mm256_xor_si256(w, _mm256_set1_epi8(static_cast<char>(0x80))), x);
}

constexpr int kPrefetchBytes = 512;

void dot4_q8_0(int64_t n, const void* vw, int64_t stride, const void* vx, float* y) {
  const auto* w0 = static_cast<const BlockQ8_0W*>(vw);
  const auto* w1 = reinterpret_cast<const BlockQ8_0W*>(static_cast<const uint8_t*>(vw) + stride);
  const auto* w2 = reinterpret_cast<const BlockQ8_0W*>(static_cast<const uint8_t*>(vw) + 2 * stride);
  const auto* w3 = reinterpret_cast<const BlockQ8_0W*>(static_cast<const uint8_t*>(vw) + 3 * stride);
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps(),
         acc3 = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 32; ++b) {
    // The weight rows stream from memory: fetch ahead (hardware prefetchers
    // stop at page boundaries and track few streams).
    _mm_prefetch(reinterpret_cast<const char*>(w0 + b) + kPrefetchBytes, _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(w1 + b) + kPrefetchBytes, _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(w2 + b) + kPrefetchBytes, _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(w3 + b) + kPrefetchBytes, _MM_HINT_T0);
    const __m256i xv = loadu(x[b].qs);
    // (-128) * x summed over 4 bytes: the correction for the +128 offset.
    const __m256i neg = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(static_cast<char>(0x80)),
                                                _mm256_sub_epi8(_mm256_setzero_si256(), xv));
    const float xd = h2f(x[b].d);
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w0[b].d) * xd), _mm256_cvtepi32_ps(dot_i8(loadu(w0[b].qs), xv, neg)), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w1[b].d) * xd), _mm256_cvtepi32_ps(dot_i8(loadu(w1[b].qs), xv, neg)), acc1);
    acc2 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w2[b].d) * xd), _mm256_cvtepi32_ps(dot_i8(loadu(w2[b].qs), xv, neg)), acc2);
    acc3 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w3[b].d) * xd), _mm256_cvtepi32_ps(dot_i8(loadu(w3[b].qs), xv, neg)), acc3);
  }
  y[0] = hsum_ps(acc0);
  y[1] = hsum_ps(acc1);
  y[2] = hsum_ps(acc2);
  y[3] = hsum_ps(acc3);
}

}  // namespace

Dot4Fn avxvnni_dot4_q8_0() { return dot4_q8_0; }

}  // namespace vtc::cpu::detail
