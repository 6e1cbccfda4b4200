// AVX512-BF16 matmul of BF16 weights (vdpbf16ps), in the summation orders
// of the reference's build for this level (ggml's `zen4` variant,
// __AVX512BF16__). See internal.h for the rules of this file.
//
// llama.cpp computes a BF16 mul_mat along one of two paths, and the two sum
// differently:
//  - 2 or more tokens (ne11 >= 2), k % 32 == 0 and rows % 4 == 0: llamafile's
//    tinyBLAS<32, __m512, __m512bh> (llamafile/sgemm.cpp). Per output one
//    16-lane accumulator, c = dpbf16(c, w[l..l+32), x[l..l+32)) for l = 0,
//    32, ..., then _mm512_reduce_add_ps(c). The tiles below (`gemm_bf16`).
//  - otherwise ggml_vec_dot_bf16 (vec.cpp): two 16-lane accumulators over
//    64-value steps (values 0..31 of a step into c1, 32..63 into c2), then
//    (double)reduce(c1) + (double)reduce(c2), the last n % 64 products
//    added one by one in double, rounded to float at the end. `dot_bf16`.
// matmul takes the tiles for 2 or more tokens and the dot for one token
// (widened_x is off), so both choices follow the reference's; a tile whose
// rows have n % 32 != 0 values computes dot_bf16's sums, as the reference
// does then. Only a matrix with rows % 4 != 0 differs: the reference then
// takes vec_dot for all its rows, vtc the tiles for all but the last few.
//
// vdpbf16ps per 32-bit lane j (Intel SDM, checked on Zen 5): c = fma(a[2j+1],
// b[2j+1], c), then c = fma(a[2j], b[2j], c), with bf16 denormal inputs read
// as zero, denormal results flushed to zero, round to nearest even.
// _mm512_reduce_add_ps: the upper 8 lanes plus the lower 8, then 4 + 4,
// then (0 + 2) + (1 + 3) (GCC's and Clang's expansion).
//
// The activations are the f32 rows rounded to bf16 (quantize_bf16_scalar,
// as ggml's ggml_cpu_fp32_to_bf16).
// GCC 12's AVX-512 headers initialize their "undefined" registers from
// themselves (__Y = __Y), which -Wuninitialized reports at every inlined
// cast and conversion; nothing here reads an uninitialized value.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "runtime/cpu/kernels/internal.h"

namespace vtc::cpu::detail {
namespace {

inline float bf2f(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline __m512bh load32_bf16(const uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }

// _mm512_reduce_add_ps's order, spelled out.
inline float reduce_add(__m512 v) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// A decode step streams each weight row from DRAM through dot_bf16, whose
// two vdpbf16ps chains leave the loads little to overlap with: prefetching
// 2 KiB ahead took a 4096x4096 one-token matmul on one Zen 5 core from
// ~1.5 to ~1.1 ms (the AVX2 level: ~1.1 ms).
constexpr int64_t kPrefetchValues = 1024;

// ggml_vec_dot_bf16 (AVX512-BF16 build).
float dot_bf16(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* x = static_cast<const uint16_t*>(vx);
  __m512 c1 = _mm512_setzero_ps(), c2 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(w + i + kPrefetchValues), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(w + i + kPrefetchValues + 32), _MM_HINT_T0);
    c1 = _mm512_dpbf16_ps(c1, load32_bf16(w + i), load32_bf16(x + i));
    c2 = _mm512_dpbf16_ps(c2, load32_bf16(w + i + 32), load32_bf16(x + i + 32));
  }
  double sum = 0.0;
  sum += static_cast<double>(reduce_add(c1));
  sum += static_cast<double>(reduce_add(c2));
  for (; i < n; ++i) sum += static_cast<double>(bf2f(w[i]) * bf2f(x[i]));
  return static_cast<float>(sum);
}

// RM rows x NT tokens in tinyBLAS's order (x: bf16 activation rows).
template <int RM, int NT>
void gemm_bf16(int64_t n, const void* vw, int64_t ws, const void* vx, int64_t xs, float* y, int64_t ys) {
  const uint16_t* w[RM];
  const uint16_t* x[NT];
  #pragma GCC unroll 16
  for (int r = 0; r < RM; ++r)
    w[r] = reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(vw) + r * ws);
  #pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) x[t] = reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(vx) + t * xs);
  if (n % 32 != 0) {  // the reference's vec_dot path
    for (int t = 0; t < NT; ++t)
      for (int r = 0; r < RM; ++r) y[t * ys + r] = dot_bf16(n, w[r], x[t]);
    return;
  }
  __m512 acc[RM][NT];
  #pragma GCC unroll 16
  for (int r = 0; r < RM; ++r)
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 32) {
    __m512bh wv[RM];
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) wv[r] = load32_bf16(w[r] + i);
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
      const __m512bh xv = load32_bf16(x[t] + i);
      #pragma GCC unroll 16
      for (int r = 0; r < RM; ++r) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv[r], xv);
    }
  }
  #pragma GCC unroll 16
  for (int t = 0; t < NT; ++t)
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) y[t * ys + r] = reduce_add(acc[r][t]);
}

// 4 x 4: 16 accumulators (vdpbf16ps has a latency of several cycles and
// two issue ports), 8 loads per 16 vdpbf16ps (measured 5120x1280, 64
// tokens, one Zen 5 core: 4 x 4 ~200, 8 x 2 and 8 x 3 ~145 GFLOP/s).
constexpr int kRows = 4;
constexpr int kToks = 4;
static_assert(kToks <= kMaxGemmToks);

}  // namespace

void add_avx512bf16_kernels(QuantKernels& t) {
  t.dot[kSlotBF16] = dot_bf16;
  GemmKernels g{};
  g.rows = kRows;
  g.toks = kToks;
  g.widened_x = false;  // bf16 rows; one token takes dot_bf16, as the reference's vec_dot
  g.fn[1] = gemm_bf16<kRows, 1>;
  g.fn[2] = gemm_bf16<kRows, 2>;
  g.fn[3] = gemm_bf16<kRows, 3>;
  g.fn[4] = gemm_bf16<kRows, 4>;
  t.gemm[kSlotBF16] = g;
}

}  // namespace vtc::cpu::detail
