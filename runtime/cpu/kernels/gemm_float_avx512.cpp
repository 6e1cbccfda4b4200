// AVX-512 F16 matmul in the summation orders of the reference's AVX-512
// build (ggml's `zen4` variant: 16-lane vectors, no AVX512-FP16). See
// internal.h for the rules of this file.
//
// llama.cpp computes an F16 mul_mat along one of two paths, and the two sum
// differently:
//  - 2 or more tokens (ne11 >= 2), k % 16 == 0 and rows % 4 == 0: llamafile's
//    tinyBLAS<16, __m512, __m512, ggml_fp16_t, ggml_fp16_t> (llamafile/
//    sgemm.cpp). Per output one 16-lane accumulator,
//    c = fma(f32(w[l..l+16)), f32(x[l..l+16)), c) for l = 0, 16, ..., then
//    _mm512_reduce_add_ps(c). The tiles below (`gemm_f16`).
//  - otherwise ggml_vec_dot_f16 (vec.cpp, GGML_F16_EPR 16): 4 accumulators
//    of 16 lanes over 64-value steps (accumulator j takes values
//    16j..16j+15), (acc0 + acc2) + (acc1 + acc3), _mm512_reduce_add_ps, the
//    last n % 64 products (f32 products) added one by one in double, rounded
//    to float at the end. `dot_f16`; attention's K.q uses the same order
//    (float_avx2.cpp dot_f16_l16).
// matmul takes the tiles for 2 or more tokens and the dot for one token
// (widened_x and one_token off: the tiles read the f16 activation rows and
// convert them as tinyBLAS does), so both choices follow the reference's; a
// tile whose rows have n % 16 != 0 values computes dot_f16's sums, as the
// reference does then. Only a matrix with rows % 4 != 0 differs: the
// reference then takes vec_dot for all its rows, vtc the tiles for all but
// the last few. On the development machine (Zen 5) a 0.56B llama's logits
// came out bit-identical to llama.cpp's for an 8-token prompt and for one
// token (docs/numerics-parity.md).
//
// The AVX2 level's F16 matmul sums in an order of its own (8-lane
// accumulators, float tail), so from this level up F16 results differ from
// the AVX2 level's in the last bits. Where reference_lanes() is 8 (the
// reference would load its AVX2 build: 8-lane tinyBLAS and vec_dot), this
// level keeps the AVX2 kernels.
//
// Tiles: 4 rows x 4 tokens, 16 zmm accumulators; per 16-value step 16 FMAs
// for 8 conversions.
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

// _mm512_reduce_add_ps's order, spelled out: the upper 8 lanes plus the
// lower 8, then 4 + 4, then (0 + 2) + (1 + 3) (GCC's and Clang's expansion).
inline float reduce_add(__m512 v) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// ggml_vec_dot_f16 with 16-lane vectors.
float dot_f16(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* x = static_cast<const uint16_t*>(vx);
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  const int64_t np = n & ~int64_t{63};
  for (int64_t i = 0; i < np; i += 64)
    #pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[j] = _mm512_fmadd_ps(load16_f16(w + i + 16 * j), load16_f16(x + i + 16 * j), acc[j]);
  double sum = reduce_add(_mm512_add_ps(_mm512_add_ps(acc[0], acc[2]), _mm512_add_ps(acc[1], acc[3])));
  for (int64_t i = np; i < n; ++i) sum += static_cast<double>(h2f(w[i]) * h2f(x[i]));
  return static_cast<float>(sum);
}

// RM rows x NT tokens in tinyBLAS's order (x: f16 activation rows).
template <int RM, int NT>
void gemm_f16(int64_t n, const void* vw, int64_t ws, const void* vx, int64_t xs, float* y, int64_t ys) {
  const uint16_t* w[RM];
  const uint16_t* x[NT];
  #pragma GCC unroll 16
  for (int r = 0; r < RM; ++r)
    w[r] = reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(vw) + r * ws);
  #pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) x[t] = reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(vx) + t * xs);
  if (n % 16 != 0) {  // the reference's vec_dot path
    for (int t = 0; t < NT; ++t)
      for (int r = 0; r < RM; ++r) y[t * ys + r] = dot_f16(n, w[r], x[t]);
    return;
  }
  __m512 acc[RM][NT];
  #pragma GCC unroll 16
  for (int r = 0; r < RM; ++r)
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    __m512 wv[RM];
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) wv[r] = load16_f16(w[r] + i);
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
      const __m512 xv = load16_f16(x[t] + i);
      #pragma GCC unroll 16
      for (int r = 0; r < RM; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  #pragma GCC unroll 16
  for (int t = 0; t < NT; ++t)
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) y[t * ys + r] = reduce_add(acc[r][t]);
}

constexpr int kRows = 4;
constexpr int kToks = 4;
static_assert(kToks <= kMaxGemmToks);

}  // namespace

void add_avx512_float_tiles(QuantKernels& t) {
  if (reference_lanes() != 16) return;
  t.dot[kSlotF16] = dot_f16;
  GemmKernels g{};
  g.rows = kRows;
  g.toks = kToks;
  g.widened_x = false;  // f16 rows; one token takes dot_f16, as the reference's vec_dot
  g.fn[1] = gemm_f16<kRows, 1>;
  g.fn[2] = gemm_f16<kRows, 2>;
  g.fn[3] = gemm_f16<kRows, 3>;
  g.fn[4] = gemm_f16<kRows, 4>;
  t.gemm[kSlotF16] = g;
}

}  // namespace vtc::cpu::detail
