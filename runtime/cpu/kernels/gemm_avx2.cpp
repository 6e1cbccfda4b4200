// AVX2 register-blocked matmul tiles: RM weight rows x NT tokens at once.
//
// A decode step multiplies each weight row with one activation row, and
// the 1-row and 4-row dot kernels (quant_avx2.cpp) are the right tool. A
// prefill or a batched decode step multiplies each weight row with many
// activation rows; there, decoding a weight block (nibbles, scales, signs)
// once per token is most of the work. A tile decodes each weight block
// once for NT tokens and loads each activation block once for RM rows:
//
//   for each block b of the row (32 or 256 values):
//     decode block b of rows 0..RM-1                 (once per tile)
//     for each token t: load block b of x[t]        (once per tile)
//       for each row r: acc[r][t] += d[r][t] * lanes(w[r][b] . x[t][b])
//   y[t][r] = reduce(acc[r][t])
//
// Bit-identical to the table's dot kernel, by construction: every output
// keeps its own accumulators, and the per-block float operations (the
// scale products, fmadd into 8 float lanes, the final horizontal sums) are
// the dot kernel's, in the same order. Only integer lane sums are formed
// differently (exact), and they keep ggml's lane layout. So the result of a
// matmul does not depend on whether a tile or a dot kernel computed it, nor
// on the thread count; tests/cpu_kernels/test_matmul.cpp checks this bit
// for bit.
//
// Tile shapes (AVX2 has 16 ymm registers): 32-value blocks 2 x 4, Q4_K
// 2 x 4, Q6_K 2 x 4, F16/BF16 1 x 3 (each output has 4 accumulators there;
// they read the activations widened to f32, see gemm_16bit).
// The instantiations for fewer tokens (NT = 1..max) cover the token tails.
// Every loop over rows, tokens and sub-blocks is unrolled (#pragma GCC
// unroll): left as loops, GCC keeps the accumulator arrays on the stack and
// the tiles run at half speed.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "runtime/cpu/kernels/avx2_common.h"
#include "runtime/cpu/kernels/internal.h"

namespace vtc::cpu::detail {
namespace {

template <typename Block>
const Block& block_at(const void* row_base, int64_t stride, int r, int64_t b) {
  return reinterpret_cast<const Block*>(static_cast<const uint8_t*>(row_base) + r * stride)[b];
}

// ----- 32-value blocks with q8_0 activations --------------------------------
// Each weight type gives its block's signed codes (|q| <= 127) and f16
// scale; the product is dot_i8's sign trick, as in every dot_q*_0 kernel.

struct CodesQ8_0 {
  using Block = BlockQ8_0W;
  static __m256i codes(const Block& b) { return loadu(b.qs); }
};
struct CodesQ4_0 {
  using Block = BlockQ4_0;
  static __m256i codes(const Block& b) { return _mm256_sub_epi8(nibbles32(b.qs), _mm256_set1_epi8(8)); }
};
struct CodesQ5_0 {
  using Block = BlockQ5_0;
  static __m256i codes(const Block& b) {
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    const __m256i q = _mm256_or_si256(nibbles32(b.qs), _mm256_and_si256(bits32(b.qh), bit4));
    return _mm256_sub_epi8(q, bit4);
  }
};
struct CodesIQ4_NL {
  using Block = BlockIQ4_NL;
  static __m256i codes(const Block& b) { return _mm256_shuffle_epi8(iq4_table(), nibbles32(b.qs)); }
};

template <class Codes, int RM, int NT>
void gemm_q8_family(int64_t n, const void* w, int64_t ws, const void* x, int64_t xs, float* y, int64_t ys) {
  using Block = typename Codes::Block;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[RM][NT];
  #pragma GCC unroll 16
  for (int r = 0; r < RM; ++r)
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
  const NextTile<Block, RM> next(w, ws);
  for (int64_t b = 0; b < n / 32; ++b) {
    next.prefetch(b);
    // The scale product dw * dx, formed in every lane by a vector multiply
    // (the same rounding as the dot kernel's scalar product, broadcast).
    __m256i mag[RM], sgn[RM];
    __m256 dw[RM];
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) {
      const Block& blk = block_at<Block>(w, ws, r, b);
      sgn[r] = Codes::codes(blk);
      mag[r] = _mm256_sign_epi8(sgn[r], sgn[r]);
      dw[r] = _mm256_set1_ps(h2f(blk.d));
    }
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_0& xb = block_at<BlockQ8_0>(x, xs, t, b);
      const __m256i xv = loadu(xb.qs);
      const __m256 dx = _mm256_set1_ps(h2f(xb.d));
      #pragma GCC unroll 16
      for (int r = 0; r < RM; ++r) {
        const __m256i lanes = _mm256_madd_epi16(_mm256_maddubs_epi16(mag[r], _mm256_sign_epi8(xv, sgn[r])), ones);
        acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw[r], dx), _mm256_cvtepi32_ps(lanes), acc[r][t]);
      }
    }
  }
  #pragma GCC unroll 16
  for (int t = 0; t < NT; ++t)
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) y[t * ys + r] = hsum_ps(acc[r][t]);
}

// The K-quant dot kernels' one float step per super-block, for each output:
// acc += (x d * w d) * float(lanes).
template <int RM, int NT, class Block>
inline void add_superblock(const Block* const* wb, const BlockQ8_K* const* xb, const __m256i (&isum)[RM][NT],
                           __m256 (&acc)[RM][NT]) {
  #pragma GCC unroll 16
  for (int r = 0; r < RM; ++r) {
    const float wd = h2f(wb[r]->d);
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) acc[r][t] = fmadd_lanes(xb[t]->d * wd, isum[r][t], acc[r][t]);
  }
}

// ----- Q4_K with q8_K activations ------------------------------------------
// dot4_q4_k's arithmetic per output: an 8-lane accumulator of
// d * lanes and a 4-lane accumulator of -dmin * mins lanes.

template <int RM, int NT>
void gemm_q4_k(int64_t n, const void* w, int64_t ws, const void* x, int64_t xs, float* y, int64_t ys) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  __m256 acc[RM][NT];
  __m128 acc_m[RM][NT];
  #pragma GCC unroll 16
  for (int r = 0; r < RM; ++r)
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps(), acc_m[r][t] = _mm_setzero_ps();
  const NextTile<BlockQ4_K, RM> next(w, ws);
  for (int64_t b = 0; b < n / 256; ++b) {
    next.prefetch(b);
    const BlockQ8_K* xb[NT];
    __m128i bpairs[NT];
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
      xb[t] = &block_at<BlockQ8_K>(x, xs, t, b);
      bpairs[t] = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb[t]->bsums)),
                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb[t]->bsums + 8)));
    }
    const BlockQ4_K* wb[RM];
    __m256i sc[RM];
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) {
      wb[r] = &block_at<BlockQ4_K>(w, ws, r, b);
      __m128i mins;
      sc[r] = k4_scales_x2(wb[r]->scales, mins);
      const float wdmin = h2f(wb[r]->dmin);
      #pragma GCC unroll 16
      for (int t = 0; t < NT; ++t) {
        const float dmin = -(xb[t]->d * wdmin);
        acc_m[r][t] = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(_mm_madd_epi16(mins, bpairs[t])), acc_m[r][t]);
      }
    }
    __m256i isum[RM][NT];
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r)
      #pragma GCC unroll 16
      for (int t = 0; t < NT; ++t) isum[r][t] = _mm256_setzero_si256();
    #pragma GCC unroll 16
    for (int j = 0; j < 4; ++j) {
      const __m256i shl = lane16_shuffle(2 * j), shh = lane16_shuffle(2 * j + 1);
      #pragma GCC unroll 16
      for (int r = 0; r < RM; ++r) {
        const __m256i q = loadu(wb[r]->qs + 32 * j);
        const __m256i lo = _mm256_and_si256(q, m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        const __m256i scl = _mm256_shuffle_epi8(sc[r], shl), sch = _mm256_shuffle_epi8(sc[r], shh);
        #pragma GCC unroll 16
        for (int t = 0; t < NT; ++t) {
          const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, loadu(xb[t]->qs + 64 * j)), scl);
          const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, loadu(xb[t]->qs + 64 * j + 32)), sch);
          isum[r][t] = _mm256_add_epi32(isum[r][t], _mm256_add_epi32(p_lo, p_hi));
          keep_chain(isum[r][t]);
        }
      }
    }
    add_superblock<RM, NT>(wb, xb, isum, acc);
  }
  #pragma GCC unroll 16
  for (int t = 0; t < NT; ++t)
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) y[t * ys + r] = hsum_ps(acc[r][t]) + hsum4_ps(acc_m[r][t]);
}

// ----- Q6_K with q8_K activations ------------------------------------------
// dot4_q6_k's arithmetic per output: lanes minus 32 * madd(scales, bsums),
// then one fmadd per super-block.

template <int RM, int NT>
void gemm_q6_k(int64_t n, const void* w, int64_t ws, const void* x, int64_t xs, float* y, int64_t ys) {
  __m256 acc[RM][NT];
  #pragma GCC unroll 16
  for (int r = 0; r < RM; ++r)
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
  const NextTile<BlockQ6_K, RM> next(w, ws);
  for (int64_t b = 0; b < n / 256; ++b) {
    next.prefetch(b);
    const BlockQ8_K* xb[NT];
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) xb[t] = &block_at<BlockQ8_K>(x, xs, t, b);
    const BlockQ6_K* wb[RM];
    __m256i isum[RM][NT];
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) {
      wb[r] = &block_at<BlockQ6_K>(w, ws, r, b);
      const __m256i sc16 = q6_k_scales16(*wb[r]);
      #pragma GCC unroll 16
      for (int t = 0; t < NT; ++t)
        isum[r][t] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                      _mm256_slli_epi32(_mm256_madd_epi16(sc16, loadu(xb[t]->bsums)), 5));
    }
    #pragma GCC unroll 16
    for (int h = 0; h < 2; ++h) {
      #pragma GCC unroll 16
      for (int r = 0; r < RM; ++r) {
        __m256i q[4];
        q6_k_codes(*wb[r], h, q);
        // The scales are reloaded (L1), not kept from above: at 2 x 4 the
        // isum tile, codes and products fill the 16 registers.
        const __m256i half = scales_half(q6_k_scales16(*wb[r]), h);
        #pragma GCC unroll 16
        for (int k = 0; k < 4; ++k) {
          const __m256i scale = pair_scales(half, k);
          #pragma GCC unroll 16
          for (int t = 0; t < NT; ++t) {
            const __m256i p = _mm256_maddubs_epi16(q[k], loadu(xb[t]->qs + 128 * h + 32 * k));
            isum[r][t] = _mm256_add_epi32(isum[r][t], _mm256_madd_epi16(p, scale));
            keep_chain(isum[r][t]);
          }
        }
      }
    }
    add_superblock<RM, NT>(wb, xb, isum, acc);
  }
  #pragma GCC unroll 16
  for (int t = 0; t < NT; ++t)
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) y[t * ys + r] = hsum_ps(acc[r][t]);
}

// ----- F16 / BF16 with activations of the same type -------------------------
// dot_16bit's arithmetic per output: 4 accumulators over 32-value steps,
// one over the 8-value steps after them, then the scalar tail. The tile
// reads the activations already rounded to the weight's type and widened
// to f32 (GemmKernels::widened_x): the same values dot_16bit converts on
// every load, so the products are the same, without converting each
// activation once per weight row.

template <bool kBf16, int NT>
void gemm_16bit(int64_t n, const void* vw, int64_t /*ws*/, const void* vx, int64_t xs, float* y, int64_t ys) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const float* x[NT];
  #pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) x[t] = reinterpret_cast<const float*>(static_cast<const uint8_t*>(vx) + t * xs);
  auto load = [](const uint16_t* p) { return kBf16 ? load_bf16(p) : load_f16(p); };
  __m256 acc[NT][4];
  #pragma GCC unroll 16
  for (int t = 0; t < NT; ++t)
    #pragma GCC unroll 16
    for (int k = 0; k < 4; ++k) acc[t][k] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    #pragma GCC unroll 16
    for (int k = 0; k < 4; ++k) {
      const __m256 wv = load(w + i + 8 * k);
      #pragma GCC unroll 16
      for (int t = 0; t < NT; ++t) acc[t][k] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x[t] + i + 8 * k), acc[t][k]);
    }
  for (; i + 8 <= n; i += 8) {
    const __m256 wv = load(w + i);
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) acc[t][0] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x[t] + i), acc[t][0]);
  }
  #pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) {
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[t][0], acc[t][1]), _mm256_add_ps(acc[t][2], acc[t][3])));
    for (int64_t k = i; k < n; ++k) sum += (kBf16 ? bf2f(w[k]) : h2f(w[k])) * x[t][k];
    y[t * ys] = sum;
  }
}

// ----- tables ----------------------------------------------------------------

template <template <int, int> class K, int RM, int NT>
GemmKernels make_gemm() {
  GemmKernels g{};
  g.rows = RM;
  g.toks = NT;
  static_assert(NT >= 1 && NT <= 4 && NT <= kMaxGemmToks);
  g.fn[1] = K<RM, 1>::fn;
  if constexpr (NT >= 2) g.fn[2] = K<RM, 2>::fn;
  if constexpr (NT >= 3) g.fn[3] = K<RM, 3>::fn;
  if constexpr (NT >= 4) g.fn[4] = K<RM, 4>::fn;
  return g;
}

template <class Codes>
struct Q8Family {
  template <int RM, int NT>
  struct K {
    static constexpr GemmFn fn = gemm_q8_family<Codes, RM, NT>;
  };
};
template <int RM, int NT>
struct Q4K {
  static constexpr GemmFn fn = gemm_q4_k<RM, NT>;
};
template <int RM, int NT>
struct Q6K {
  static constexpr GemmFn fn = gemm_q6_k<RM, NT>;
};
template <bool kBf16>
struct Half {
  template <int RM, int NT>
  struct K {
    static_assert(RM == 1);
    static constexpr GemmFn fn = gemm_16bit<kBf16, NT>;
  };
};

}  // namespace

void add_avx2_gemm_kernels(QuantKernels& t) {
  t.gemm[kSlotQ8_0] = make_gemm<Q8Family<CodesQ8_0>::K, 2, 4>();
  t.gemm[kSlotQ4_0] = make_gemm<Q8Family<CodesQ4_0>::K, 2, 4>();
  t.gemm[kSlotQ5_0] = make_gemm<Q8Family<CodesQ5_0>::K, 2, 4>();
  t.gemm[kSlotIQ4_NL] = make_gemm<Q8Family<CodesIQ4_NL>::K, 2, 4>();
  t.gemm[kSlotQ4_K] = make_gemm<Q4K, 2, 4>();
  t.gemm[kSlotQ6_K] = make_gemm<Q6K, 2, 4>();
  t.gemm[kSlotF16] = make_gemm<Half<false>::K, 1, 3>();
  t.gemm[kSlotBF16] = make_gemm<Half<true>::K, 1, 3>();
  t.gemm[kSlotF16].widened_x = t.gemm[kSlotBF16].widened_x = true;
}

}  // namespace vtc::cpu::detail
