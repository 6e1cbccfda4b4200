// AVX-VNNI (VEX-encoded vpdpbusd on ymm) Q8_0 matmul tiles.
//
// Compiled with -mavx2 -mfma -mf16c -mavxvnni and reached only through
// the avxvnni level's table (isa.cpp), which needs cpu_has_avxvnni(). Same rules as
// the other AVX2 files: anonymous namespace, only C headers. The tiles are
// gemm_avx2.cpp's Q8_0 tiles (2 rows x up to 4 tokens) with the integer
// product formed by vpdpbusd instead of sign + maddubs + madd:
//   lanes = dpbusd(neg, w ^ 0x80, x),  neg = dpbusd(0, 0x80..., -x)
// w ^ 0x80 is w + 128 as an unsigned byte, so each lane gets the sum of 4
// adjacent w*x products plus 128 * (their x sum), and neg removes the
// latter: exactly the int32 lanes of the AVX2 kernels (no int16
// saturation can differ: |w|, |x| <= 127 there). The float operations are
// unchanged, so the results are bit-identical (test_matmul.cpp checks it
// on machines with AVX-VNNI).
#include <immintrin.h>

#include <cstdint>

#include "runtime/cpu/kernels/avx2_common.h"
#include "runtime/cpu/kernels/internal.h"

namespace vtc::cpu::detail {
namespace {

template <int RM, int NT>
void gemm_q8_0_vnni(int64_t n, const void* w, int64_t ws, const void* x, int64_t xs, float* y, int64_t ys) {
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256 acc[RM][NT];
  #pragma GCC unroll 16
  for (int r = 0; r < RM; ++r)
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 32; ++b) {
    __m256i wu[RM];
    __m256 dw[RM];
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) {
      const auto& blk = reinterpret_cast<const BlockQ8_0W*>(static_cast<const uint8_t*>(w) + r * ws)[b];
      wu[r] = _mm256_xor_si256(loadu(blk.qs), bias);
      dw[r] = _mm256_set1_ps(h2f(blk.d));
    }
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
      const auto& xb = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(x) + t * xs)[b];
      const __m256i xv = loadu(xb.qs);
      const __m256i neg = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), bias, _mm256_sub_epi8(_mm256_setzero_si256(), xv));
      const __m256 dx = _mm256_set1_ps(h2f(xb.d));
      #pragma GCC unroll 16
      for (int r = 0; r < RM; ++r) {
        const __m256i lanes = _mm256_dpbusd_avx_epi32(neg, wu[r], xv);
        acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw[r], dx), _mm256_cvtepi32_ps(lanes), acc[r][t]);
      }
    }
  }
  #pragma GCC unroll 16
  for (int t = 0; t < NT; ++t)
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) y[t * ys + r] = hsum_ps(acc[r][t]);
}

}  // namespace

void add_avxvnni_kernels(QuantKernels& t) {
  GemmKernels& g = t.gemm[kSlotQ8_0];
  g = GemmKernels{};
  g.rows = 2;
  g.toks = 4;
  g.fn[1] = gemm_q8_0_vnni<2, 1>;
  g.fn[2] = gemm_q8_0_vnni<2, 2>;
  g.fn[3] = gemm_q8_0_vnni<2, 3>;
  g.fn[4] = gemm_q8_0_vnni<2, 4>;
}

}  // namespace vtc::cpu::detail
