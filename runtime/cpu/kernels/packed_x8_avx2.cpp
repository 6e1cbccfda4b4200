// AVX2 kernels for interleaved-8 weights (layout and arithmetic: internal.h,
// BlockQ4_0x8 / BlockQ4_Kx8 and PackedFn; why: packed_x8.cpp).
//
// Per 32-byte load of quants (4 values of each of 8 rows, low and high
// nibbles) and per token: two vpmaddubsw against broadcast 4-byte groups of
// the token's int8 activations, added in 16 bits. A sub-block's 16-bit sums
// cannot overflow: 8 loads x 2 products x 15 x 128 = 30720 < 32767. Then one
// vpmaddwd per sub-block turns each row's pair of 16-bit sums into its int32
// lane, multiplied by the row's scale (Q4_K) or by 1 (Q4_0). The 8 rows'
// results end in the 8 lanes of one register, so nothing is summed
// horizontally. The integers are exact and the float steps are those of the
// scalar kernels, so both give the same bits.
#include <immintrin.h>

#include "runtime/cpu/kernels/avx2_common.h"
#include "runtime/cpu/kernels/internal.h"

namespace vtc::cpu::detail {
namespace {

inline __m256i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

inline __m256 load_f16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

template <int NT>
void q4_0_x8_avx2(int64_t n_blocks, const void* vw, const void* vx, int64_t x_stride, const int32_t* block_sums,
                  int64_t sums_stride, float* y, int64_t y_stride) {
  const auto* w = static_cast<const BlockQ4_0x8*>(vw);
  const BlockQ8_0* x[NT];
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) x[t] = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(vx) + t * x_stride);
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[NT];
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ4_0x8& wb = w[b];
    prefetch_weights_ahead(&wb);
    __m256i s16[NT];
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) s16[t] = _mm256_setzero_si256();
#pragma GCC unroll 16
    for (int c = 0; c < 4; ++c) {
      const __m256i q = loadu(wb.qs + 32 * c);
      const __m256i lo = _mm256_and_si256(q, m4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
#pragma GCC unroll 16
      for (int t = 0; t < NT; ++t) {
        s16[t] = _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(lo, bcast4(x[t][b].qs + 4 * c)));
        s16[t] = _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(hi, bcast4(x[t][b].qs + 16 + 4 * c)));
        keep_chain(s16[t]);
      }
    }
    const __m256 dw = load_f16x8(wb.d);
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
      const __m256i offset = _mm256_set1_epi32(8 * block_sums[t * sums_stride + b]);
      const __m256i isum = _mm256_sub_epi32(_mm256_madd_epi16(s16[t], ones), offset);
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(h2f(x[t][b].d))), _mm256_cvtepi32_ps(isum), acc[t]);
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y + t * y_stride, acc[t]);
}

// Signed codes: vpmaddubsw takes |w| and the activations with w's sign
// (dot_i8's trick); one product pair can reach 2 x 128 x 127, so each goes
// to 32 bits at once.
template <int NT>
void q8_0_x8_avx2(int64_t n_blocks, const void* vw, const void* vx, int64_t x_stride, const int32_t*, int64_t,
                  float* y, int64_t y_stride) {
  const auto* w = static_cast<const BlockQ8_0x8*>(vw);
  const BlockQ8_0* x[NT];
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) x[t] = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(vx) + t * x_stride);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[NT];
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ8_0x8& wb = w[b];
    prefetch_weights_ahead(&wb);
    __m256i isum[NT];
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const __m256i q = loadu(wb.qs + 32 * c);
      const __m256i mag = _mm256_sign_epi8(q, q);
#pragma GCC unroll 16
      for (int t = 0; t < NT; ++t) {
        const __m256i p = _mm256_maddubs_epi16(mag, _mm256_sign_epi8(bcast4(x[t][b].qs + 4 * c), q));
        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p, ones));
        keep_chain(isum[t]);
      }
    }
    const __m256 dw = load_f16x8(wb.d);
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t)
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(h2f(x[t][b].d))), _mm256_cvtepi32_ps(isum[t]), acc[t]);
  }
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y + t * y_stride, acc[t]);
}

// Byte j of each 16-bit lane pair: 8 row bytes -> 16 int16, each value twice
// (r0 r0 r1 r1 ...): vpmaddwd then scales row r's pair of 16-bit sums.
inline __m256i dup_rows_epi16(__m128i rows8) { return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(rows8, rows8)); }

// The 8 rows' scales and mins of one Q4_K x8 superblock, unpacked (ggml's
// get_scale_min_k4 on 8 rows at once): sc_lo holds sub-blocks 0..3 as four
// 8-byte row groups, sc_hi 4..7, and likewise mn_lo, mn_hi.
struct ScalesX8 {
  __m256i sc_lo, sc_hi, mn_lo, mn_hi;
};
inline ScalesX8 unpack_scales_x8(const uint8_t* s) {
  const __m256i b0 = loadu(s), b1 = loadu(s + 32), b2 = loadu(s + 64);
  const __m256i m6 = _mm256_set1_epi8(63), m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3);
  const __m256i top0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(b0, 6), m2), 4);
  const __m256i top1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(b1, 6), m2), 4);
  ScalesX8 out;
  out.sc_lo = _mm256_and_si256(b0, m6);
  out.mn_lo = _mm256_and_si256(b1, m6);
  out.sc_hi = _mm256_or_si256(_mm256_and_si256(b2, m4), top0);
  out.mn_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m4), top1);
  return out;
}

// Sub-blocks 2p and 2p+1 of 8 rows (two 8-byte groups of a 16-byte half)
// -> 16 int16 lanes (m[r][2p], m[r][2p+1]) for r = 0..7.
inline __m256i pair_rows_epi16(__m128i two_groups) {
  const __m128i interleave = _mm_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  return _mm256_cvtepu8_epi16(_mm_shuffle_epi8(two_groups, interleave));
}

template <int P>
inline __m256i bcast_pair(__m128i bs) {
  return _mm256_broadcastd_epi32(_mm_shuffle_epi32(bs, P * 0x55));
}

// The token's sub-block sums in pairs: int32 lane p of the result holds
// (bsum_2p, bsum_2p+1) as two int16, bsum_j = bsums[2j] + bsums[2j+1].
inline __m128i bsum_pairs(const BlockQ8_K& xb) {
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.bsums));
  const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.bsums + 8));
  return _mm_hadd_epi16(lo, hi);
}

// Row r's min_2p * bsum_2p + min_2p+1 * bsum_2p+1, exact, in lane r.
inline __m256i q4_k_min_pair_x8(const ScalesX8& s, __m128i pairs, int p) {
  const __m256i v = p < 2 ? s.mn_lo : s.mn_hi;
  const __m128i half = (p & 1) ? _mm256_extracti128_si256(v, 1) : _mm256_castsi256_si128(v);
  const __m256i pair = _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(pairs), _mm256_set1_epi32(p));
  return _mm256_madd_epi16(pair_rows_epi16(half), pair);
}

// Sum of each row's mins times the token's sub-block sums, exact, in the
// row's lane.
inline __m256i q4_k_mins_x8(const ScalesX8& s, const BlockQ8_K& xb) {
  const __m128i pairs = bsum_pairs(xb);
  __m256i m = q4_k_min_pair_x8(s, pairs, 0);
#pragma GCC unroll 3
  for (int p = 1; p < 4; ++p) m = _mm256_add_epi32(m, q4_k_min_pair_x8(s, pairs, p));
  return m;
}

// Sub-block j's 8 row scales as dup_rows_epi16 lanes.
inline __m256i scale_lanes(const ScalesX8& s, int j) {
  const __m256i v = j < 4 ? s.sc_lo : s.sc_hi;
  const __m128i half = (j & 2) ? _mm256_extracti128_si256(v, 1) : _mm256_castsi256_si128(v);
  return dup_rows_epi16((j & 1) ? _mm_srli_si128(half, 8) : half);
}

// One sub-block (the low nibbles, H = 0, or the high, H = 1, of a pair's
// 256 bytes) for NT tokens, times its row scales, into pair[t] (H = 0 sets
// it, H = 1 adds). The halves go one after the other, each reloading the
// quants from L1, so that only NT 16-bit sums are live: both at once
// (2 NT sums) spilled registers at NT = 4.
template <int NT, int H>
inline void q4_k_subblock_x8(const uint8_t* qs, const BlockQ8_K* const* x, int64_t b, int x_off, __m256i sc,
                             __m256i* pair) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  __m256i s16[NT];
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) s16[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) {
    const __m256i q = loadu(qs + 32 * c);
    const __m256i v = H == 0 ? _mm256_and_si256(q, m4) : _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
      s16[t] = _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(v, bcast4(x[t][b].qs + x_off + 4 * c)));
      keep_chain(s16[t]);
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) {
    const __m256i scaled = _mm256_madd_epi16(s16[t], sc);
    pair[t] = H == 0 ? scaled : _mm256_add_epi32(pair[t], scaled);
  }
}

// Groups of 4 tokens take the float steps per pair of sub-blocks, as
// llama.cpp's ggml_gemm_q4_K_8x8_q8_K does; fewer tokens (a matmul's last
// n % 4) take them per superblock, as its gemv (internal.h, PackedFn), and so
// do 4 with kPerPair false (PackedKernels::fn4_each_token).
template <int NT, bool kPerPair = NT == 4>
void q4_k_x8_avx2(int64_t n_blocks, const void* vw, const void* vx, int64_t x_stride, const int32_t*, int64_t,
                  float* y, int64_t y_stride) {
  const auto* w = static_cast<const BlockQ4_Kx8*>(vw);
  const BlockQ8_K* x[NT];
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) x[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(vx) + t * x_stride);
  __m256 acc[NT], acc_min[NT];
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) acc[t] = acc_min[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ4_Kx8& wb = w[b];
    prefetch_weights_ahead(&wb);
    const ScalesX8 sm = unpack_scales_x8(wb.scales);
    const __m256 d = load_f16x8(wb.d), dmin = load_f16x8(wb.dmin);
    __m256i isum[NT];
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      __m256i pair[NT];
      q4_k_subblock_x8<NT, 0>(wb.qs + 256 * p, x, b, 64 * p, scale_lanes(sm, 2 * p), pair);
      q4_k_subblock_x8<NT, 1>(wb.qs + 256 * p, x, b, 64 * p + 32, scale_lanes(sm, 2 * p + 1), pair);
#pragma GCC unroll 16
      for (int t = 0; t < NT; ++t) {
        if constexpr (kPerPair) {
          const __m256 xd = _mm256_set1_ps(x[t][b].d);
          acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(d, xd), _mm256_cvtepi32_ps(pair[t]), acc[t]);
          const __m256i mins = q4_k_min_pair_x8(sm, bsum_pairs(x[t][b]), p);
          acc_min[t] = _mm256_fmadd_ps(_mm256_mul_ps(dmin, xd), _mm256_cvtepi32_ps(mins), acc_min[t]);
        } else {
          isum[t] = _mm256_add_epi32(isum[t], pair[t]);
        }
      }
    }
    if constexpr (kPerPair) continue;
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
      const __m256 xd = _mm256_set1_ps(x[t][b].d);
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(d, xd), _mm256_cvtepi32_ps(isum[t]), acc[t]);
      acc_min[t] = _mm256_fmadd_ps(_mm256_mul_ps(dmin, xd), _mm256_cvtepi32_ps(q4_k_mins_x8(sm, x[t][b])), acc_min[t]);
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y + t * y_stride, _mm256_sub_ps(acc[t], acc_min[t]));
}

// Sub-block s's 8 signed row scales as int16 lanes (sc_r0, sc_r0, sc_r1, ...).
inline __m256i q6_scale_lanes(const int8_t* scales, int s) {
  const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales + 8 * s));
  return _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(v, v));
}

// sum_s sc_s * bsum_s per row, exact: lanes (sc[r][2k], sc[r][2k+1]) times
// the broadcast pair (bsums[2k], bsums[2k+1]).
inline __m256i q6_offsets_x8(const int8_t* scales, const BlockQ8_K& xb) {
  const __m128i interleave = _mm_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  __m256i m = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    const __m128i two = _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 16 * k));
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(two, interleave));
    int32_t pair;
    std::memcpy(&pair, xb.bsums + 2 * k, 4);
    m = _mm256_add_epi32(m, _mm256_madd_epi16(sc, _mm256_set1_epi32(pair)));
  }
  return m;
}

// The codes of chunk c (< 8) of half h for values 128h + 32q + 4c + i
// (Q6_K's ql/qh bit layout, internal.h). Each q reloads its two inputs
// (L1 hits): decoding all four at once spilled registers.
template <int Q>
inline __m256i q6_codes_x8(const BlockQ6_Kx8& b, int h, int c) {
  const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
  const __m256i ql = loadu(b.ql + 512 * h + 32 * (c + 8 * (Q & 1)));
  const __m256i qh = loadu(b.qh + 256 * h + 32 * c);
  const __m256i lo = Q < 2 ? _mm256_and_si256(ql, m4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4);
  const __m256i high = Q == 0 ? _mm256_slli_epi16(qh, 4) : Q == 1 ? _mm256_slli_epi16(qh, 2) : Q == 2 ? qh : _mm256_srli_epi16(qh, 2);
  return _mm256_or_si256(lo, _mm256_and_si256(high, m30));
}

// Sub-block 8h + 2Q + c/4 of chunks c, c+1 for NT tokens, scaled.
template <int Q, int NT>
inline void q6_pair_x8(const BlockQ6_Kx8& wb, const BlockQ8_K* const* x, int64_t b, int h, int c, __m256i* isum) {
  const __m256i va = q6_codes_x8<Q>(wb, h, c), vb = q6_codes_x8<Q>(wb, h, c + 1);
  const __m256i sc = q6_scale_lanes(wb.scales, 8 * h + 2 * Q + c / 4);
  const int off = 128 * h + 32 * Q + 4 * c;
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) {
    const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(va, bcast4(x[t][b].qs + off)),
                                       _mm256_maddubs_epi16(vb, bcast4(x[t][b].qs + off + 4)));
    isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p, sc));
    keep_chain(isum[t]);
  }
}

// Codes are 0..63, so two vpmaddubsw products add in 16 bits (2 x 2 x 63 x
// 128 = 32256); each pair of chunks then goes through its sub-block's scale.
template <int NT>
void q6_k_x8_avx2(int64_t n_blocks, const void* vw, const void* vx, int64_t x_stride, const int32_t*, int64_t,
                  float* y, int64_t y_stride) {
  const auto* w = static_cast<const BlockQ6_Kx8*>(vw);
  const BlockQ8_K* x[NT];
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) x[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(vx) + t * x_stride);
  __m256 acc[NT];
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ6_Kx8& wb = w[b];
    prefetch_weights_ahead(&wb);
    __m256i isum[NT];
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h)
      for (int c = 0; c < 8; c += 2) {
        q6_pair_x8<0, NT>(wb, x, b, h, c, isum);
        q6_pair_x8<1, NT>(wb, x, b, h, c, isum);
        q6_pair_x8<2, NT>(wb, x, b, h, c, isum);
        q6_pair_x8<3, NT>(wb, x, b, h, c, isum);
      }
    const __m256 d = load_f16x8(wb.d);
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
      const __m256i offset = _mm256_slli_epi32(q6_offsets_x8(wb.scales, x[t][b]), 5);
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(x[t][b].d)),
                               _mm256_cvtepi32_ps(_mm256_sub_epi32(isum[t], offset)), acc[t]);
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y + t * y_stride, acc[t]);
}

template <template <int> class K>
PackedKernels make_packed() {
  PackedKernels k{};
  k.toks = kMaxGemmToks;
  k.fn[1] = K<1>::fn;
  k.fn[2] = K<2>::fn;
  k.fn[3] = K<3>::fn;
  k.fn[4] = K<4>::fn;
  return k;
}
template <int NT>
struct Q4_0Avx2 {
  static constexpr PackedFn fn = q4_0_x8_avx2<NT>;
};
template <int NT>
struct Q4_KAvx2 {
  static constexpr PackedFn fn = q4_k_x8_avx2<NT>;
};
template <int NT>
struct Q8_0Avx2 {
  static constexpr PackedFn fn = q8_0_x8_avx2<NT>;
};
template <int NT>
struct Q6_KAvx2 {
  static constexpr PackedFn fn = q6_k_x8_avx2<NT>;
};
static_assert(kMaxGemmToks == 4, "make_packed fills fn[1..4]");

}  // namespace

void add_avx2_x8_kernels(QuantKernels& t) {
  t.x8[kSlotQ4_0] = make_packed<Q4_0Avx2>();
  t.x8[kSlotQ4_K] = make_packed<Q4_KAvx2>();
  t.x8[kSlotQ4_K].fn4_each_token = q4_k_x8_avx2<4, false>;
  t.x8[kSlotQ6_K] = make_packed<Q6_KAvx2>();
  t.x8[kSlotQ8_0] = make_packed<Q8_0Avx2>();
}

}  // namespace vtc::cpu::detail
