// AVX-512 F16 and BF16 matmul in the summation orders of the reference's
// AVX-512 builds (ggml's `icelake` and `zen4` variants: 16-lane vectors, no
// AVX512-FP16). BF16 here is the build without AVX512-BF16 (`icelake`):
// bf16 widened to f32 and FMAs; the AVX512-BF16 level replaces it with
// vdpbf16ps (gemm_bf16_avx512.cpp). See internal.h for the rules of this
// file.
//
// llama.cpp computes an F16 mul_mat along one of two paths, and the two sum
// differently:
//  - 2 or more tokens (ne11 >= 2), k % 16 == 0 and rows % 4 == 0: llamafile's
//    tinyBLAS<16, __m512, __m512, ggml_fp16_t, ggml_fp16_t> (llamafile/
//    sgemm.cpp). Per output one 16-lane accumulator,
//    c = fma(f32(w[l..l+16)), f32(x[l..l+16)), c) for l = 0, 16, ..., then
//    _mm512_reduce_add_ps(c). The tiles below (tinyblas_tile with F16Step).
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
// BF16 on the same two paths, as the reference's AVX-512F build without
// AVX512-BF16 computes it (its compiler contracts vec_dot's mul + add into
// one FMA; checked in the `icelake` library's disassembly):
//  - tinyBLAS<16, __m512, __m512, ggml_bf16_t, ggml_bf16_t>: F16's tile
//    with bf16 widened by a 16-bit shift. `Bf16WideStep`.
//  - ggml_vec_dot_bf16: two 16-lane accumulators over 32-value steps
//    (values 0..15 of a step into c1, 16..31 into c2), c1 and c2 reduced
//    one by one and summed in double, the last n % 32 products added one by
//    one in double. `dot_bf16_wide`.
//
// The AVX2 level's F16 and BF16 matmuls sum in an order of its own (8-lane
// accumulators, float tail), so from this level up F16 results differ from
// the AVX2 level's in the last bits. Where reference_lanes() is 8 (the
// reference would load its AVX2 build: 8-lane tinyBLAS and vec_dot), this
// level keeps the AVX2 kernels.
//
// Tiles: 4 rows x 4 tokens, 16 zmm accumulators; per 16-value step 16 FMAs
// for 8 conversions.
//
#include "runtime/cpu/kernels/avx512_common.h"

namespace vtc::cpu::detail {
namespace {

inline __m512 load16_f16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

inline __m512 load16_bf16(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
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

// ggml_vec_dot_bf16, AVX-512F build without AVX512-BF16.
float dot_bf16_wide(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* x = static_cast<const uint16_t*>(vx);
  __m512 c1 = _mm512_setzero_ps(), c2 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    _mm_prefetch(reinterpret_cast<const char*>(w + i + kDotPrefetchValues), _MM_HINT_T0);
    c1 = _mm512_fmadd_ps(load16_bf16(w + i), load16_bf16(x + i), c1);
    c2 = _mm512_fmadd_ps(load16_bf16(w + i + 16), load16_bf16(x + i + 16), c2);
  }
  double sum = 0.0;
  sum += static_cast<double>(reduce_add(c1));
  sum += static_cast<double>(reduce_add(c2));
  for (; i < n; ++i) sum += static_cast<double>(bf2f(w[i]) * bf2f(x[i]));
  return static_cast<float>(sum);
}

// tinyblas_tile's element policy for 16-bit values widened to f32
// (tinyBLAS<16, __m512, __m512, ggml_fp16_t or ggml_bf16_t>; BF16 on the
// build without AVX512-BF16): 16 values widened per step, one FMA.
template <__m512 (*kLoad)(const uint16_t*), float (*kDot)(int64_t, const void*, const void*)>
struct WidenedStep {
  static constexpr int64_t kValues = 16;
  using Vec = __m512;
  static Vec load(const uint16_t* p) { return kLoad(p); }
  static __m512 madd(__m512 acc, Vec w, Vec x) { return _mm512_fmadd_ps(w, x, acc); }
  static float dot(int64_t n, const uint16_t* w, const uint16_t* x) { return kDot(n, w, x); }
};
using F16Step = WidenedStep<load16_f16, dot_f16>;
using Bf16WideStep = WidenedStep<load16_bf16, dot_bf16_wide>;

constexpr int kRows = 4;

}  // namespace

void add_avx512_float_tiles(QuantKernels& t) {
  if (reference_lanes() != 16) return;
  t.dot[kSlotF16] = dot_f16;
  // f16 rows; one token takes dot_f16, as the reference's vec_dot
  t.gemm[kSlotF16] = tinyblas_tiles<F16Step, kRows>();
  // bf16 rows the same way; AVX512-BF16 replaces both (add_avx512bf16_kernels)
  t.dot[kSlotBF16] = dot_bf16_wide;
  t.gemm[kSlotBF16] = tinyblas_tiles<Bf16WideStep, kRows>();
}

}  // namespace vtc::cpu::detail
