// AVX512-BF16 matmul of BF16 weights (vdpbf16ps), in the summation orders
// of the reference's build for this level (ggml's `zen4` variant,
// __AVX512BF16__). See internal.h for the rules of this file.
//
// llama.cpp computes a BF16 mul_mat along one of two paths, and the two sum
// differently:
//  - 2 or more tokens (ne11 >= 2), k % 32 == 0 and rows % 4 == 0: llamafile's
//    tinyBLAS<32, __m512, __m512bh> (llamafile/sgemm.cpp). Per output one
//    16-lane accumulator, c = dpbf16(c, w[l..l+32), x[l..l+32)) for l = 0,
//    32, ..., then _mm512_reduce_add_ps(c). The tiles below (tinyblas_tile with Bf16Step).
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
#include "runtime/cpu/kernels/avx512_common.h"

namespace vtc::cpu::detail {
namespace {

inline __m512bh load32_bf16(const uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }

// ggml_vec_dot_bf16 (AVX512-BF16 build).
float dot_bf16(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* x = static_cast<const uint16_t*>(vx);
  __m512 c1 = _mm512_setzero_ps(), c2 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(w + i + kDotPrefetchValues), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(w + i + kDotPrefetchValues + 32), _MM_HINT_T0);
    c1 = _mm512_dpbf16_ps(c1, load32_bf16(w + i), load32_bf16(x + i));
    c2 = _mm512_dpbf16_ps(c2, load32_bf16(w + i + 32), load32_bf16(x + i + 32));
  }
  double sum = 0.0;
  sum += static_cast<double>(reduce_add(c1));
  sum += static_cast<double>(reduce_add(c2));
  for (; i < n; ++i) sum += static_cast<double>(bf2f(w[i]) * bf2f(x[i]));
  return static_cast<float>(sum);
}

// 4 x 4: 16 accumulators (vdpbf16ps has a latency of several cycles and
// two issue ports), 8 loads per 16 vdpbf16ps (measured 5120x1280, 64
// tokens, one Zen 5 core: 4 x 4 ~200, 8 x 2 and 8 x 3 ~145 GFLOP/s).
// tinyblas_tile's element policy for BF16 (tinyBLAS<32, __m512, __m512bh>):
// 32 values per vdpbf16ps.
struct Bf16Step {
  static constexpr int64_t kValues = 32;
  using Vec = __m512bh;
  static Vec load(const uint16_t* p) { return load32_bf16(p); }
  static __m512 madd(__m512 acc, Vec w, Vec x) { return _mm512_dpbf16_ps(acc, w, x); }
  static float dot(int64_t n, const uint16_t* w, const uint16_t* x) { return dot_bf16(n, w, x); }
};

constexpr int kRows = 4;

}  // namespace

void add_avx512bf16_kernels(QuantKernels& t) {
  t.dot[kSlotBF16] = dot_bf16;
  // bf16 rows; one token takes dot_bf16, as the reference's vec_dot
  t.gemm[kSlotBF16] = tinyblas_tiles<Bf16Step, kRows>();
}

}  // namespace vtc::cpu::detail
