// AVX-512 VNNI dot kernels and multi-token tiles for weights in ggml's Rows
// layout: Q8_0, Q4_0, Q5_0, IQ4_NL (q8_0 activations), Q4_K, Q5_K, Q6_K
// (q8_K activations).
//
// Compiled with -mavx512f/bw/vl/dq/vnni (and AVX2, FMA, F16C) and reached
// only through the avx512vnni level's table (isa.cpp). Same rules as the
// AVX2 files: anonymous namespace, only C headers.
//
// Same bits as the AVX2 table's dot kernels (quant_avx2.cpp), which follow
// ggml's x86 kernels: the integer parts are exact, and the float operations
// are the AVX2 kernels' own, lane for lane and in the same order. The wider
// registers only carry more integer work, or two independent outputs:
//
//   32-value blocks (dot and tiles): each output keeps 8 float lanes,
//     acc = fma(f16(w.d) * f16(x.d), float(lanes of block b), acc), block
//     after block, and a final hsum_ps. A dot forms the integer lanes of
//     two consecutive blocks in one zmm (lanes 0-7 block b, 8-15 block b+1)
//     and then takes the two 8-lane fmas one after the other, as AVX2 does;
//     a tile holds two weight rows per zmm (lanes 0-7 row 2p, 8-15 row
//     2p+1), so one 16-lane multiply and fma serve two outputs, each in its
//     own lanes. The integer lanes come from vpdpbusd, which needs an
//     unsigned operand: w ^ 0x80 is w + 128 as an unsigned byte, so
//       lanes = dpbusd(neg, w ^ 0x80, x),  neg = dpbusd(0, 0x80.., -x)
//     (quant_avxvnni.cpp's trick): exactly the sum of the 4 products of
//     bytes 4i..4i+3 in lane i, which is what AVX2's maddubs/madd give
//     (|x| <= 127 for quantized activations; w = -128 is exact both ways).
//   Super-blocks (Q4_K, Q5_K, Q6_K): the int32 lane sums of a super-block
//     are formed 64 bytes at a time (lanes 0-7 for one 32-byte chunk, 8-15
//     for the next, vpdpwssd applying the sub-block scales) and folded to 8
//     lanes (lane l + lane l+8) before the one float step per super-block:
//     lane l then holds bytes 4l..4l+3 of every 32-byte chunk, ggml's
//     layout, and integer sums do not depend on the order they are added
//     in. The float steps (mins, Q6_K's offset, hsums) are quant_avx2.cpp's.
//
// Tiles are bit-identical to the dots by the same construction (every
// output has its own accumulators and the same operations); tests:
// test_quant_avx512.cpp, test_matmul.cpp, test_kquant_order.cpp.
//
// Tile shapes: 32-value blocks 8 rows (4 zmm row pairs) x up to 4 tokens;
// K-quants 4 rows x up to 4 tokens (Q6_K 2). A 32-value dot is bound by
// its one fma chain (one dependent 8-lane fma per block) and its code
// decoding, so Q4_0, Q5_0 and IQ4_NL also take single tokens (decode)
// through their 8-row tile (GemmKernels::one_token): 4 independent chains,
// with a software prefetch of the next tile's rows, which the hardware
// prefetchers do not follow as 8 interleaved streams. Q8_0's dot, with no
// decoding, streams faster than its tile (add_avx512_row_kernels). The
// K-quant dots have one fma per 256-value super-block and stay one row at
// a time.
#include "runtime/cpu/kernels/avx512_common.h"

#include <type_traits>

#include "runtime/cpu/kernels/avx2_common.h"

namespace vtc::cpu::detail {
namespace {

template <typename Block>
const Block& block_at(const void* row_base, int64_t stride, int r, int64_t b) {
  return reinterpret_cast<const Block*>(static_cast<const uint8_t*>(row_base) + r * stride)[b];
}

inline __m512i pair512(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
inline __m512 pair512(__m256 lo, __m256 hi) { return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1); }
inline __m256 lo256(__m512 v) { return _mm512_castps512_ps256(v); }
inline __m256 hi256(__m512 v) { return _mm512_extractf32x8_ps(v, 1); }
inline __m256i lo256(__m512i v) { return _mm512_castsi512_si256(v); }
inline __m256i hi256(__m512i v) { return _mm512_extracti64x4_epi64(v, 1); }
inline __m512i loadu512(const void* p) { return _mm512_loadu_si512(p); }

// ----- 32-value blocks with q8_0 activations --------------------------------
// Each weight type gives its block's signed codes (|q| <= 128) as 32 bytes.

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

// One row against one token: two blocks per step, their integer lanes in
// one zmm, then the AVX2 kernel's two fmas in block order.
template <class Codes>
float dot_q8_family(int64_t n, const void* vw, const void* vx) {
  using Block = typename Codes::Block;
  const auto* w = static_cast<const Block*>(vw);
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  const int64_t nb = n / 32;
  __m256 acc = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    prefetch_dot_ahead(&w[b]);
    const __m512i wu = _mm512_xor_si512(pair512(Codes::codes(w[b]), Codes::codes(w[b + 1])), bias);
    const __m512i xv = pair512(loadu(x[b].qs), loadu(x[b + 1].qs));
    const __m512i neg = _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, _mm512_sub_epi8(_mm512_setzero_si512(), xv));
    const __m512 f = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(neg, wu, xv));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[b].d) * h2f(x[b].d)), lo256(f), acc);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[b + 1].d) * h2f(x[b + 1].d)), hi256(f), acc);
  }
  if (b < nb) {
    const __m256i bias8 = _mm256_set1_epi8(static_cast<char>(0x80));
    const __m256i wu = _mm256_xor_si256(Codes::codes(w[b]), bias8);
    const __m256i xv = loadu(x[b].qs);
    const __m256i neg = _mm256_dpbusd_epi32(_mm256_setzero_si256(), bias8, _mm256_sub_epi8(_mm256_setzero_si256(), xv));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[b].d) * h2f(x[b].d)),
                          _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(neg, wu, xv)), acc);
  }
  return hsum_ps(acc);
}

// 2*RP rows x NT tokens; rows 2p and 2p+1 share a zmm (lanes 0-7, 8-15).
template <class Codes, int RP, int NT>
void gemm_q8_family(int64_t n, const void* w, int64_t ws, const void* x, int64_t xs, float* y, int64_t ys) {
  using Block = typename Codes::Block;
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc[RP][NT];
  #pragma GCC unroll 16
  for (int p = 0; p < RP; ++p)
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) acc[p][t] = _mm512_setzero_ps();
  const NextTile<Block, 2 * RP> next(w, ws);
  for (int64_t b = 0; b < n / 32; ++b) {
    next.prefetch(b);
    __m512i wu[RP];
    __m512 dw[RP];
    #pragma GCC unroll 16
    for (int p = 0; p < RP; ++p) {
      const Block& b0 = block_at<Block>(w, ws, 2 * p, b);
      const Block& b1 = block_at<Block>(w, ws, 2 * p + 1, b);
      wu[p] = _mm512_xor_si512(pair512(Codes::codes(b0), Codes::codes(b1)), bias);
      // f16 d of the two rows broadcast as halves, then widened (exact).
      dw[p] = _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(b1.d)),
                                               _mm_set1_epi16(static_cast<int16_t>(b0.d))));
    }
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_0& xb = block_at<BlockQ8_0>(x, xs, t, b);
      const __m512i xv = _mm512_broadcast_i64x4(loadu(xb.qs));
      const __m512i neg = _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, _mm512_sub_epi8(_mm512_setzero_si512(), xv));
      const __m512 dx = _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<int16_t>(xb.d)));
      #pragma GCC unroll 16
      for (int p = 0; p < RP; ++p) {
        const __m512i lanes = _mm512_dpbusd_epi32(neg, wu[p], xv);
        acc[p][t] = _mm512_fmadd_ps(_mm512_mul_ps(dw[p], dx), _mm512_cvtepi32_ps(lanes), acc[p][t]);
      }
    }
  }
  #pragma GCC unroll 16
  for (int t = 0; t < NT; ++t)
    #pragma GCC unroll 16
    for (int p = 0; p < RP; ++p) {
      y[t * ys + 2 * p] = hsum_ps(lo256(acc[p][t]));
      y[t * ys + 2 * p + 1] = hsum_ps(hi256(acc[p][t]));
    }
}

// ----- super-blocks with q8_K activations ----------------------------------

inline __m256i fold(__m512i v) { return _mm256_add_epi32(lo256(v), hi256(v)); }

// Q4_K / Q5_K: the 12 packed scale bytes -> bytes 0..7 the scales, 8..15
// the mins (unpack_k4_scales' arithmetic, in registers).
inline __m128i k4_unpack(const uint8_t* packed) {
  constexpr uint32_t kLow6 = 0x3f3f3f3fu, kLow4 = 0x0f0f0f0fu, kLow2 = 0x03030303u;
  uint32_t u[3];
  std::memcpy(u, packed, 12);
  return _mm_setr_epi32(static_cast<int>(u[0] & kLow6), static_cast<int>((u[2] & kLow4) | (((u[0] >> 6) & kLow2) << 4)),
                        static_cast<int>(u[1] & kLow6),
                        static_cast<int>(((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kLow2) << 4)));
}
// int16 lanes 0..15 = scale 2j, 16..31 = scale 2j+1, from the 8 scales as
// int16 lanes 0..7 of sc16.
inline __m512i k4_scale_pair(__m512i sc16, int j) {
  const __m512i idx = pair512(_mm256_set1_epi16(static_cast<int16_t>(2 * j)), _mm256_set1_epi16(static_cast<int16_t>(2 * j + 1)));
  return _mm512_permutexvar_epi16(idx, sc16);
}

// Q4_K / Q5_K: the codes of 64 bytes of a super-block (chunk j: sub-blocks
// 2j, 2j+1) as one zmm: the low nibbles of qs[32j..32j+31] (+ qh bit 2j),
// then the high nibbles (+ qh bit 2j+1).
template <bool kFive>
inline __m512i k45_codes(const uint8_t* qs, const uint8_t* qh, int j) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512i shift = pair512(_mm256_setzero_si256(), _mm256_set1_epi16(4));
  __m512i c = _mm512_and_si512(_mm512_srlv_epi16(_mm512_broadcast_i64x4(loadu(qs + 32 * j)), shift), m4);
  if constexpr (kFive) {
    const __m512i hs = pair512(_mm256_set1_epi16(static_cast<int16_t>(2 * j)), _mm256_set1_epi16(static_cast<int16_t>(2 * j + 1)));
    const __m512i h = _mm512_and_si512(_mm512_srlv_epi16(_mm512_broadcast_i64x4(loadu(qh)), hs), _mm512_set1_epi8(1));
    c = _mm512_or_si512(c, _mm512_slli_epi16(h, 4));
  }
  return c;
}

template <bool kFive>
float dot_q45_k(int64_t n, const void* vw, const void* vx) {
  using Block = typename std::conditional<kFive, BlockQ5_K, BlockQ4_K>::type;
  const auto* w = static_cast<const Block*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  __m256 acc = _mm256_setzero_ps();
  __m128 acc_m = _mm_setzero_ps();  // Q4_K
  float summs = 0.0f;               // Q5_K
  for (int64_t b = 0; b < n / 256; ++b) {
    const Block& wb = w[b];
    const BlockQ8_K& xb = x[b];
    prefetch_dot_ahead(&wb);
    if constexpr (kFive) prefetch_dot_ahead(reinterpret_cast<const uint8_t*>(&wb) + 64);
    const float d = xb.d * h2f(wb.d);
    const float dmin = -(xb.d * h2f(wb.dmin));
    const __m128i sm = k4_unpack(wb.scales);
    const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(sm));
    const __m128i mins = k4_mins_lanes(_mm_cvtepu8_epi16(_mm_unpackhi_epi64(sm, sm)), xb.bsums);
    if constexpr (kFive) {
      const __m128i t = _mm_add_epi32(mins, _mm_shuffle_epi32(mins, _MM_SHUFFLE(1, 0, 3, 2)));
      const int summ = _mm_cvtsi128_si32(_mm_add_epi32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(2, 3, 0, 1))));
      summs = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(dmin), _mm_set_ss(static_cast<float>(summ)), _mm_set_ss(summs)));
    } else {
      acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(mins), acc_m);
    }
    const uint8_t* qh = nullptr;
    if constexpr (kFive) qh = wb.qh;
    __m512i isum = _mm512_setzero_si512();
    #pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512i p = _mm512_maddubs_epi16(k45_codes<kFive>(wb.qs, qh, j), loadu512(xb.qs + 64 * j));
      isum = _mm512_dpwssd_epi32(isum, p, k4_scale_pair(sc16, j));
    }
    acc = fmadd_lanes(d, fold(isum), acc);
  }
  if constexpr (kFive) return hsum_ps(acc) + summs;
  return hsum_ps(acc) + hsum4_ps(acc_m);
}

// Q6_K: the codes (0..63) of half h of a super-block as two zmm: q[0]|q[1]
// and q[2]|q[3] of q6_k_codes (x bytes 128h..128h+63, 128h+64..128h+127).
inline void q6_codes512(const BlockQ6_K& wb, int h, __m512i& c01, __m512i& c23) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512i m3 = _mm512_set1_epi8(3);
  const __m512i ql = loadu512(wb.ql + 64 * h);
  const __m256i qh = loadu(wb.qh + 32 * h);
  const __m512i qh2 = pair512(qh, _mm256_srli_epi16(qh, 2));
  c01 = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_slli_epi16(_mm512_and_si512(qh2, m3), 4));
  c23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                        _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh2, 4), m3), 4));
}
// int16 lanes 8i..8i+7 = scale 4g + i (i < 4): the scales of the 4
// sub-blocks of one q6_codes512 vector (g = 2h or 2h + 1).
inline __m512i q6_scales(__m512i sc16, int g) {
  const __m512i idx = _mm512_add_epi16(_mm512_set1_epi16(static_cast<int16_t>(4 * g)),
                                       _mm512_srli_epi16(_mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20,
                                                                          19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8,
                                                                          7, 6, 5, 4, 3, 2, 1, 0),
                                                         3));
  return _mm512_permutexvar_epi16(idx, sc16);
}

float dot_q6_k(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ6_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b) {
    const BlockQ6_K& wb = w[b];
    const BlockQ8_K& xb = x[b];
    prefetch_dot_ahead(&wb);
    prefetch_dot_ahead(reinterpret_cast<const uint8_t*>(&wb) + 64);
    prefetch_dot_ahead(reinterpret_cast<const uint8_t*>(&wb) + 128);
    const __m256i sc16 = q6_k_scales16(wb);
    const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(sc16, loadu(xb.bsums)), 5);
    const __m512i scz = _mm512_castsi256_si512(sc16);
    __m512i isum = _mm512_setzero_si512();
    #pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m512i c01, c23;
      q6_codes512(wb, h, c01, c23);
      isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(c01, loadu512(xb.qs + 128 * h)), q6_scales(scz, 2 * h));
      isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(c23, loadu512(xb.qs + 128 * h + 64)),
                                 q6_scales(scz, 2 * h + 1));
    }
    acc = fmadd_lanes(xb.d * h2f(wb.d), _mm256_sub_epi32(fold(isum), offset), acc);
  }
  return hsum_ps(acc);
}

// The K-quant dot kernels' one float step per super-block, for each output.
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
    __m512i isum[RM][NT];
    __m256i lanes[RM][NT];
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) {
      wb[r] = &block_at<BlockQ6_K>(w, ws, r, b);
      #pragma GCC unroll 16
      for (int t = 0; t < NT; ++t) isum[r][t] = _mm512_setzero_si512();
    }
    #pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      #pragma GCC unroll 16
      for (int r = 0; r < RM; ++r) {
        const __m512i scz = _mm512_castsi256_si512(
            q6_k_scales16(*wb[r]));
        __m512i c01, c23;
        q6_codes512(*wb[r], h, c01, c23);
        const __m512i s01 = q6_scales(scz, 2 * h), s23 = q6_scales(scz, 2 * h + 1);
        #pragma GCC unroll 16
        for (int t = 0; t < NT; ++t) {
          isum[r][t] = _mm512_dpwssd_epi32(isum[r][t], _mm512_maddubs_epi16(c01, loadu512(xb[t]->qs + 128 * h)), s01);
          isum[r][t] =
              _mm512_dpwssd_epi32(isum[r][t], _mm512_maddubs_epi16(c23, loadu512(xb[t]->qs + 128 * h + 64)), s23);
        }
      }
    }
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) {
      const __m256i sc16 = q6_k_scales16(*wb[r]);
      #pragma GCC unroll 16
      for (int t = 0; t < NT; ++t)
        lanes[r][t] = _mm256_sub_epi32(fold(isum[r][t]), _mm256_slli_epi32(_mm256_madd_epi16(sc16, loadu(xb[t]->bsums)), 5));
    }
    add_superblock<RM, NT>(wb, xb, lanes, acc);
  }
  #pragma GCC unroll 16
  for (int t = 0; t < NT; ++t)
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) y[t * ys + r] = hsum_ps(acc[r][t]);
}

template <bool kFive, int RM, int NT>
void gemm_q45_k(int64_t n, const void* w, int64_t ws, const void* x, int64_t xs, float* y, int64_t ys) {
  using Block = typename std::conditional<kFive, BlockQ5_K, BlockQ4_K>::type;
  __m256 acc[RM][NT];
  __m128 acc_m[RM][NT];  // Q4_K
  float summs[RM][NT];   // Q5_K
  #pragma GCC unroll 16
  for (int r = 0; r < RM; ++r)
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps(), acc_m[r][t] = _mm_setzero_ps(), summs[r][t] = 0.0f;
  const NextTile<Block, RM> next(w, ws);
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
    const Block* wb[RM];
    __m512i sc16[RM];
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) {
      wb[r] = &block_at<Block>(w, ws, r, b);
      const __m128i sm = k4_unpack(wb[r]->scales);
      sc16[r] = _mm512_castsi128_si512(_mm_cvtepu8_epi16(sm));
      const __m128i mins16 = _mm_cvtepu8_epi16(_mm_unpackhi_epi64(sm, sm));
      const float wdmin = h2f(wb[r]->dmin);
      #pragma GCC unroll 16
      for (int t = 0; t < NT; ++t) {
        const float dmin = -(xb[t]->d * wdmin);
        const __m128i mins = _mm_madd_epi16(mins16, bpairs[t]);
        if constexpr (kFive) {
          const __m128i s = _mm_add_epi32(mins, _mm_shuffle_epi32(mins, _MM_SHUFFLE(1, 0, 3, 2)));
          const int summ = _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1))));
          summs[r][t] =
              _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(dmin), _mm_set_ss(static_cast<float>(summ)), _mm_set_ss(summs[r][t])));
        } else {
          acc_m[r][t] = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(mins), acc_m[r][t]);
        }
      }
    }
    __m512i isum[RM][NT];
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r)
      #pragma GCC unroll 16
      for (int t = 0; t < NT; ++t) isum[r][t] = _mm512_setzero_si512();
    #pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      #pragma GCC unroll 16
      for (int r = 0; r < RM; ++r) {
        const uint8_t* qh = nullptr;
        if constexpr (kFive) qh = wb[r]->qh;
        const __m512i c = k45_codes<kFive>(wb[r]->qs, qh, j);
        const __m512i sc = k4_scale_pair(sc16[r], j);
        #pragma GCC unroll 16
        for (int t = 0; t < NT; ++t)
          isum[r][t] = _mm512_dpwssd_epi32(isum[r][t], _mm512_maddubs_epi16(c, loadu512(xb[t]->qs + 64 * j)), sc);
      }
    }
    __m256i lanes[RM][NT];
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r)
      #pragma GCC unroll 16
      for (int t = 0; t < NT; ++t) lanes[r][t] = fold(isum[r][t]);
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) {
      const float wd = h2f(wb[r]->d);
      #pragma GCC unroll 16
      for (int t = 0; t < NT; ++t) acc[r][t] = fmadd_lanes(xb[t]->d * wd, lanes[r][t], acc[r][t]);
    }
  }
  #pragma GCC unroll 16
  for (int t = 0; t < NT; ++t)
    #pragma GCC unroll 16
    for (int r = 0; r < RM; ++r)
      y[t * ys + r] = kFive ? hsum_ps(acc[r][t]) + summs[r][t] : hsum_ps(acc[r][t]) + hsum4_ps(acc_m[r][t]);
}

// ----- tables ----------------------------------------------------------------

template <template <int> class K, int Rows, int NT>
GemmKernels make_gemm() {
  static_assert(NT >= 1 && NT <= kMaxGemmToks);
  GemmKernels g{};
  g.rows = Rows;
  g.toks = NT;
  g.fn[1] = K<1>::fn;
  if constexpr (NT >= 2) g.fn[2] = K<2>::fn;
  if constexpr (NT >= 3) g.fn[3] = K<3>::fn;
  if constexpr (NT >= 4) g.fn[4] = K<4>::fn;
  return g;
}

template <class Codes, int RP>
struct Q8Family {
  template <int NT>
  struct K {
    static constexpr GemmFn fn = gemm_q8_family<Codes, RP, NT>;
  };
};
template <int RM>
struct Q6K {
  template <int NT>
  struct K {
    static constexpr GemmFn fn = gemm_q6_k<RM, NT>;
  };
};
template <bool kFive, int RM>
struct Q45K {
  template <int NT>
  struct K {
    static constexpr GemmFn fn = gemm_q45_k<kFive, RM, NT>;
  };
};

constexpr int kQ8RowPairs = 4;  // 8 rows x 4 tokens: 16 accumulators
constexpr int kKRows = 4;
// Q6_K: 2 rows, not 4 (4 x 4 outputs hold 16 zmm sums and 16 ymm
// accumulators, all 32 registers): 4 and 8 tokens of 5120x1280 ~5% faster.
constexpr int kQ6Rows = 2;

}  // namespace

void add_avx512_row_kernels(QuantKernels& t) {
  t.dot[kSlotQ8_0] = dot_q8_family<CodesQ8_0>;
  t.dot[kSlotQ4_0] = dot_q8_family<CodesQ4_0>;
  t.dot[kSlotQ5_0] = dot_q8_family<CodesQ5_0>;
  t.dot[kSlotIQ4_NL] = dot_q8_family<CodesIQ4_NL>;
  t.dot[kSlotQ4_K] = dot_q45_k<false>;
  t.dot[kSlotQ5_K] = dot_q45_k<true>;
  t.dot[kSlotQ6_K] = dot_q6_k;
  t.gemm[kSlotQ8_0] = make_gemm<Q8Family<CodesQ8_0, kQ8RowPairs>::K, 2 * kQ8RowPairs, 4>();
  t.gemm[kSlotQ4_0] = make_gemm<Q8Family<CodesQ4_0, kQ8RowPairs>::K, 2 * kQ8RowPairs, 4>();
  t.gemm[kSlotQ5_0] = make_gemm<Q8Family<CodesQ5_0, kQ8RowPairs>::K, 2 * kQ8RowPairs, 4>();
  t.gemm[kSlotIQ4_NL] = make_gemm<Q8Family<CodesIQ4_NL, kQ8RowPairs>::K, 2 * kQ8RowPairs, 4>();
  // The 32-value dots are bound by their one fma chain per row (4 cycles a
  // block, about the DRAM rate of one core); the tiles run 2*RP chains.
  // Not Q8_0: its codes need no decoding, and its dot (one sequential
  // stream, prefetched ahead) decoded the 0.56B Q8_0 model at 38.6 tok/s
  // on one thread and 52 on two, against 31.6 and 44 through the tile
  // (same run, alternated; same bits either way). Q4_0, Q5_0 and IQ4_NL
  // stay on the tiles: their dots were 1.4-1.8x slower from DRAM.
  for (int slot : {kSlotQ4_0, kSlotQ5_0, kSlotIQ4_NL}) t.gemm[slot].one_token = true;
  t.gemm[kSlotQ6_K] = make_gemm<Q6K<kQ6Rows>::K, kQ6Rows, 4>();
  t.gemm[kSlotQ4_K] = make_gemm<Q45K<false, kKRows>::K, kKRows, 4>();
  t.gemm[kSlotQ5_K] = make_gemm<Q45K<true, kKRows>::K, kKRows, 4>();
}

}  // namespace vtc::cpu::detail
