// AVX-512 VNNI kernels for interleaved-8 weights (layout and arithmetic:
// internal.h, BlockQ4_0x8 ... and PackedFn; why: packed_x8.cpp).
//
// Compiled with -mavx512f/bw/vl/dq/vnni (and AVX2, FMA, F16C) and reached
// only through the avx512vnni level's table (isa.cpp). Same rules as the
// AVX2 files: anonymous namespace, only C headers.
//
// Same bits as the scalar x8 kernels (packed_x8.cpp), as the AVX2 ones:
// the integer dot of each block (Q4_K, Q6_K: of each superblock, or of each
// pair of sub-blocks in a 4-token call) is exact, and every output lane
// takes the scalar kernel's float steps in its order.
//
// A call has 8 rows, and a zmm 16 int32 lanes, so each lane pair (2k,
// 2k+1) holds row k twice: lane 2k the values of one 32-byte chunk of the
// x8 block (4 per row), lane 2k+1 those of the next chunk. One 64-byte load
// of quants is two consecutive chunks; one vpermd (shared by all the
// call's tokens) puts row k's two dwords side by side, and a broadcast of
// the 8 matching activation bytes (vpbroadcastq: a load, no shuffle) feeds
// lane 2k the first 4 and lane 2k+1 the next 4. So each vpdpbusd does 64
// multiply-adds with no activation shuffle: the nibbles (or 6-bit codes,
// or |w| for Q8_0) are the unsigned operand, the int8 activations the
// signed one, and a lane's 4 products add up in 32 bits.
//
// The two halves of a row are added once per block (per sub-block pair for
// Q4_K / Q6_K, where vpackssdw + vpmaddwd add them and apply the row's
// scale in one step: a lane's sum over one sub-block half fits int16), and
// that reduction also packs two tokens into one register: the float steps
// then run 16 lanes wide for two tokens (one token twice in an odd call's
// last pair), each lane with its row's and its token's operands.
//
// The 16-row calls (PackedKernels::fn16; matmul gives them each pair of
// consecutive groups) take one row per lane instead: lanes 0..7 the first
// group's rows, 8..15 the second's, one 32-byte chunk of each per zmm and a
// dword broadcast of 4 activations per vpdpbusd, so no vpermd and no pair
// sums, and the float steps one token per register. Only Q4_0 has them,
// for 2..4 tokens: against two 8-row calls (kernel alone, one core) 1.1x at
// 4 tokens and 1.25x at 16 (5120x1280, in cache), 1.15x at 2 and 1.3x at 3
// (8192x8192, from DRAM), but 0.9x at 1 token from DRAM. Tried and left
// out, no gain: Q8_0 (~1.0x at 4 tokens, 0.9x at 1-2) and Q4_K (vpmulld for
// the scales, since a lane's sum over a whole sub-block does not fit int16:
// ~1.0x at 4 tokens, 1.05x at 16, 0.85x at 1-2; pp512 of a Q4_K_M model
// unchanged).
#include "runtime/cpu/kernels/avx512_common.h"

namespace vtc::cpu::detail {
namespace {

inline __m512i load64(const void* p) { return _mm512_loadu_si512(p); }

// 8 activation bytes in every qword: lane 2k gets bytes 0..3, 2k+1 bytes 4..7.
inline __m512i bcast8(const int8_t* p) {
  int64_t v;
  std::memcpy(&v, p, 8);
  return _mm512_set1_epi64(v);
}

// Two chunks of an x8 block (dwords 0..7: rows 0..7 of the first, 8..15 of
// the second) -> lane 2k row k's dword of the first, 2k+1 of the second.
inline __m512i pair_chunks(__m512i v) {
  return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15), v);
}

inline __m256 load_f16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// ---- Lane layout "2": lane 2k + h holds row k of token h (Q4_0, Q8_0).

// a, b: one token each, row k's two partial sums in lanes 2k, 2k+1.
// Result: lane 2k row k of a, lane 2k+1 row k of b (exact).
inline __m512i pair_tokens2(__m512i a, __m512i b) {
  const __m512i lo = _mm512_mask_shuffle_epi32(a, 0xAAAA, b, _MM_PERM_CDAB);
  const __m512i hi = _mm512_mask_shuffle_epi32(b, 0x5555, a, _MM_PERM_CDAB);
  return _mm512_add_epi32(lo, hi);
}
// The 8 rows' f16 scales: lane l gets row l / 2.
inline __m512 rows2(const uint16_t* d) {
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7),
                               _mm512_castps256_ps512(load_f16x8(d)));
}
// Two tokens' f16 scales: lane l gets token l % 2's.
inline __m512 tokens2_f16(uint16_t a, uint16_t b) {
  const __m128i h = _mm_cvtsi32_si128(static_cast<int>(a | (static_cast<uint32_t>(b) << 16)));
  return _mm512_broadcast_f32x2(_mm_cvtph_ps(h));
}
inline void store2(__m512 v, float* y0, float* y1) {
  const __m512 s =
      _mm512_permutexvar_ps(_mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15), v);
  _mm256_storeu_ps(y0, _mm512_castps512_ps256(s));
  if (y1 != nullptr) _mm256_storeu_ps(y1, _mm512_extractf32x8_ps(s, 1));
}

// ---- Lane layout "4": lane 4L + 2h + m holds row 2L + m of token h
// (Q4_K, Q6_K: what vpmaddwd over vpackssdw of two layout-2 sums leaves).

// a, b: one token each, row 2L+m's two parts in lanes 4L+m and 4L+2+m.
// Result: lane 4L+m row 2L+m of a, 4L+2+m of b (exact).
inline __m512i pair_tokens4(__m512i a, __m512i b) {
  const __m512i lo = _mm512_mask_shuffle_epi32(a, 0xCCCC, b, _MM_PERM_BADC);
  const __m512i hi = _mm512_mask_shuffle_epi32(b, 0x3333, a, _MM_PERM_BADC);
  return _mm512_add_epi32(lo, hi);
}
inline __m512 rows4(const uint16_t* d) {
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7),
                               _mm512_castps256_ps512(load_f16x8(d)));
}
inline __m512 tokens4(float a, float b) { return _mm512_mask_blend_ps(0xCCCC, _mm512_set1_ps(a), _mm512_set1_ps(b)); }
inline void store4(__m512 v, float* y0, float* y1) {
  const __m512 s =
      _mm512_permutexvar_ps(_mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15), v);
  _mm256_storeu_ps(y0, _mm512_castps512_ps256(s));
  if (y1 != nullptr) _mm256_storeu_ps(y1, _mm512_extractf32x8_ps(s, 1));
}
// Int32 lane 4L+2h+m <- int32 lane `base + 8h` of v (two tokens' 8-lane
// vectors side by side).
template <int Base>
inline __m512i tokens4_pick(__m512i v) {
  return _mm512_permutexvar_epi32(_mm512_setr_epi32(Base, Base, Base + 8, Base + 8, Base, Base, Base + 8, Base + 8,
                                                    Base, Base, Base + 8, Base + 8, Base, Base, Base + 8, Base + 8),
                                  v);
}
// Two 8-row groups of bytes (rows of sub-block a at p[0..7], of b at
// p[8..15]) -> int16 pairs (a_row, b_row) in layout-4 lanes: the operand of
// vpmaddwd against (sum_a, sum_b) pairs of a token.
inline __m256i pairs4_bytes(const uint8_t* p) {
  const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_shuffle_epi8(v, _mm256_setr_epi8(0, 8, 1, 9, 0, 8, 1, 9, 2, 10, 3, 11, 2, 10, 3, 11, 4, 12, 5, 13, 4, 12,
                                                 5, 13, 6, 14, 7, 15, 6, 14, 7, 15));
}

template <int V>
struct IntC {
  static constexpr int value = V;
};

template <int NT>
struct Tokens {
  static constexpr int kPairs = (NT + 1) / 2;
  static constexpr int first(int p) { return 2 * p; }
  static constexpr int second(int p) { return 2 * p + 1 < NT ? 2 * p + 1 : 2 * p; }
};

// Q4_0: acc = fma(d_r * x.d, float(isum - 8 * block_sum), acc) per block;
// the -8 * block_sum goes into the even lanes before the dot.
template <int NT>
void q4_0_x8_avx512(int64_t n_blocks, const void* vw, const void* vx, int64_t x_stride, const int32_t* block_sums,
                    int64_t sums_stride, float* y, int64_t y_stride) {
  using T = Tokens<NT>;
  const auto* w = static_cast<const BlockQ4_0x8*>(vw);
  const BlockQ8_0* x[NT];
  const int32_t* bs[NT];
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) {
    x[t] = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(vx) + t * x_stride);
    bs[t] = block_sums + t * sums_stride;
  }
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  __m512 acc[T::kPairs];
#pragma GCC unroll 2
  for (int p = 0; p < T::kPairs; ++p) acc[p] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ4_0x8& wb = w[b];
    prefetch_weights_ahead(&wb);
    const __m512i q0 = pair_chunks(load64(wb.qs)), q1 = pair_chunks(load64(wb.qs + 64));
    const __m512i lo0 = _mm512_and_si512(q0, m4), hi0 = _mm512_and_si512(_mm512_srli_epi16(q0, 4), m4);
    const __m512i lo1 = _mm512_and_si512(q1, m4), hi1 = _mm512_and_si512(_mm512_srli_epi16(q1, 4), m4);
    __m512i s[NT];
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      const int8_t* q = x[t][b].qs;
      s[t] = _mm512_maskz_set1_epi32(0x5555, -8 * bs[t][b]);
      s[t] = _mm512_dpbusd_epi32(s[t], lo0, bcast8(q));
      s[t] = _mm512_dpbusd_epi32(s[t], lo1, bcast8(q + 8));
      s[t] = _mm512_dpbusd_epi32(s[t], hi0, bcast8(q + 16));
      s[t] = _mm512_dpbusd_epi32(s[t], hi1, bcast8(q + 24));
    }
    const __m512 d = rows2(wb.d);
#pragma GCC unroll 2
    for (int p = 0; p < T::kPairs; ++p) {
      const int t0 = T::first(p), t1 = T::second(p);
      const __m512i isum = pair_tokens2(s[t0], s[t1]);
      acc[p] = _mm512_fmadd_ps(_mm512_mul_ps(d, tokens2_f16(x[t0][b].d, x[t1][b].d)), _mm512_cvtepi32_ps(isum), acc[p]);
    }
  }
#pragma GCC unroll 2
  for (int p = 0; p < T::kPairs; ++p)
    store2(acc[p], y + T::first(p) * y_stride, T::second(p) != T::first(p) ? y + T::second(p) * y_stride : nullptr);
}

// ---- 16 rows per call (PackedKernels::fn16): two consecutive x8 groups,
// lane r = row r (rows 8..15 from the second group), one token per
// register. One zmm of quants is chunk c of both groups (two 32-byte
// loads), and one dword broadcast of 4 activations feeds all 16 lanes: no
// vpermd, no lane-pair sums, and the float steps one token per register.

// Chunk `off` of block a (lanes 0..7) and of block b (lanes 8..15).
inline __m512i chunks16(const uint8_t* a, const uint8_t* b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a))),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)), 1);
}
inline __m512i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}
// The 16 rows' f16 scales (8 at a, 8 at b), as f32.
inline __m512 rows16(const uint16_t* a, const uint16_t* b) {
  return _mm512_cvtph_ps(_mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1));
}
inline float f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }

template <int NT>
void q4_0_x16_avx512(int64_t n_blocks, const void* vw, const void* vx, int64_t x_stride, const int32_t* block_sums,
                     int64_t sums_stride, float* y, int64_t y_stride) {
  const auto* wa = static_cast<const BlockQ4_0x8*>(vw);
  const BlockQ4_0x8* wb = wa + n_blocks;
  const BlockQ8_0* x[NT];
  const int32_t* bs[NT];
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) {
    x[t] = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(vx) + t * x_stride);
    bs[t] = block_sums + t * sums_stride;
  }
  const __m512i m4 = _mm512_set1_epi8(0x0f), zero = _mm512_setzero_si512();
  __m512 acc[NT];
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    prefetch_weights_ahead(wa + b);
    prefetch_weights_ahead(wb + b);
    __m512i lo[4], hi[4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512i q = chunks16(wa[b].qs + 32 * c, wb[b].qs + 32 * c);
      lo[c] = _mm512_and_si512(q, m4);
      hi[c] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
    }
    const __m512 d = rows16(wa[b].d, wb[b].d);
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      const int8_t* q = x[t][b].qs;
      __m512i sl = _mm512_set1_epi32(-8 * bs[t][b]), sh = zero;
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        sl = _mm512_dpbusd_epi32(sl, lo[c], bcast4(q + 4 * c));
        sh = _mm512_dpbusd_epi32(sh, hi[c], bcast4(q + 16 + 4 * c));
      }
      const __m512i isum = _mm512_add_epi32(sl, sh);
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(f16_to_f32(x[t][b].d))), _mm512_cvtepi32_ps(isum),
                               acc[t]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y + t * y_stride, acc[t]);
}

// Q8_0: signed codes; vpdpbusd takes |w| and the activations with w's sign
// (exact: |x| <= 127, and w = -128 gives 128 * -x).
template <int NT>
void q8_0_x8_avx512(int64_t n_blocks, const void* vw, const void* vx, int64_t x_stride, const int32_t*, int64_t,
                    float* y, int64_t y_stride) {
  using T = Tokens<NT>;
  const auto* w = static_cast<const BlockQ8_0x8*>(vw);
  const BlockQ8_0* x[NT];
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) x[t] = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(vx) + t * x_stride);
  const __m512i zero = _mm512_setzero_si512();
  __m512 acc[T::kPairs];
#pragma GCC unroll 2
  for (int p = 0; p < T::kPairs; ++p) acc[p] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ8_0x8& wb = w[b];
    prefetch_weights_ahead(&wb);
    __m512i mag[4];
    __mmask64 neg[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m512i q = pair_chunks(load64(wb.qs + 64 * k));
      neg[k] = _mm512_movepi8_mask(q);
      mag[k] = _mm512_abs_epi8(q);
    }
    __m512i s[NT];
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      s[t] = zero;
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m512i xv = bcast8(x[t][b].qs + 8 * k);
        s[t] = _mm512_dpbusd_epi32(s[t], mag[k], _mm512_mask_sub_epi8(xv, neg[k], zero, xv));
      }
    }
    const __m512 d = rows2(wb.d);
#pragma GCC unroll 2
    for (int p = 0; p < T::kPairs; ++p) {
      const int t0 = T::first(p), t1 = T::second(p);
      const __m512i isum = pair_tokens2(s[t0], s[t1]);
      acc[p] = _mm512_fmadd_ps(_mm512_mul_ps(d, tokens2_f16(x[t0][b].d, x[t1][b].d)), _mm512_cvtepi32_ps(isum), acc[p]);
    }
  }
#pragma GCC unroll 2
  for (int p = 0; p < T::kPairs; ++p)
    store2(acc[p], y + T::first(p) * y_stride, T::second(p) != T::first(p) ? y + T::second(p) * y_stride : nullptr);
}

// The 8 rows' Q4_K scales and mins of one x8 superblock, unpacked (ggml's
// get_scale_min_k4): out[8j + r] = row r's scale of sub-block j, out[64 +
// 8j + r] its min.
inline void q4_k_unpack_x8(const uint8_t* s, uint8_t* out) {
  const __m512i b01 = load64(s);  // packed bytes 0..7 of the 8 rows
  const __m256i b2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 64));  // bytes 8..11
  const __m512i m6 = _mm512_set1_epi8(63), m4 = _mm512_set1_epi8(0x0f);
  const __m512i low = _mm512_and_si512(b01, m6);  // scales 0..3 | mins 0..3
  const __m512i top = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(b01, 6), _mm512_set1_epi8(3)), 4);
  const __m512i b2x =
      _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(b2), _mm256_srli_epi16(b2, 4), 1), m4);
  const __m512i high = _mm512_or_si512(b2x, top);  // scales 4..7 | mins 4..7
  auto* o = reinterpret_cast<__m256i*>(out);
  _mm256_storeu_si256(o, _mm512_castsi512_si256(low));
  _mm256_storeu_si256(o + 1, _mm512_castsi512_si256(high));
  _mm256_storeu_si256(o + 2, _mm512_extracti64x4_epi64(low, 1));
  _mm256_storeu_si256(o + 3, _mm512_extracti64x4_epi64(high, 1));
}

// Q4_K, per pair p of sub-blocks (2p: low nibbles, 2p+1: high): each token's
// two sub-block sums (lanes of at most 16 products of 15 x 127: int16) go
// through vpackssdw and vpmaddwd with the rows' scales, which leaves row
// 2L+m's scaled sub-block 2p in lane 4L+m and 2p+1 in lane 4L+2+m; then
// two tokens are paired into layout 4. A 4-token call takes the float
// steps per pair p, a shorter one (or one with kPerPair false) per
// superblock (internal.h, PackedFn).
template <int NT, bool kPerPair = NT == 4>
void q4_k_x8_avx512(int64_t n_blocks, const void* vw, const void* vx, int64_t x_stride, const int32_t*, int64_t,
                    float* y, int64_t y_stride) {
  using T = Tokens<NT>;
  const auto* w = static_cast<const BlockQ4_Kx8*>(vw);
  const BlockQ8_K* x[NT];
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) x[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(vx) + t * x_stride);
  const __m512i m4 = _mm512_set1_epi8(0x0f), zero = _mm512_setzero_si512();
  // vpmaddwd operand for the scales: per 128-bit lane L, rows 2L, 2L+1 of
  // sub-block a (each twice), then of b.
  const __m256i sc_shuffle = _mm256_setr_epi8(0, 0, 1, 1, 8, 8, 9, 9, 2, 2, 3, 3, 10, 10, 11, 11, 4, 4, 5, 5, 12, 12, 13,
                                              13, 6, 6, 7, 7, 14, 14, 15, 15);
  __m512 acc[T::kPairs], acc_min[T::kPairs];
#pragma GCC unroll 2
  for (int p = 0; p < T::kPairs; ++p) acc[p] = acc_min[p] = _mm512_setzero_ps();
  alignas(64) uint8_t sm[128];
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ4_Kx8& wb = w[b];
    prefetch_weights_ahead(&wb);
    q4_k_unpack_x8(wb.scales, sm);
    // Each token's bsum pairs (bsum_2p, bsum_2p+1) in int32 lane p; a pair of
    // tokens' side by side (lanes 0..3, 8..11).
    __m512i bsum_pairs[T::kPairs];
#pragma GCC unroll 2
    for (int p = 0; p < T::kPairs; ++p) {
      auto pairs = [&](int t) {
        const auto* bsums = reinterpret_cast<const __m128i*>(x[t][b].bsums);
        return _mm_hadd_epi16(_mm_loadu_si128(bsums), _mm_loadu_si128(bsums + 1));
      };
      bsum_pairs[p] = _mm512_inserti32x4(_mm512_castsi128_si512(pairs(T::first(p))), pairs(T::second(p)), 2);
    }
    const __m512 d = rows4(wb.d), dmin = rows4(wb.dmin);
    __m512 dx[T::kPairs], dmx[T::kPairs];
#pragma GCC unroll 2
    for (int p = 0; p < T::kPairs; ++p) {
      const __m512 xd = tokens4(x[T::first(p)][b].d, x[T::second(p)][b].d);
      dx[p] = _mm512_mul_ps(d, xd);
      dmx[p] = _mm512_mul_ps(dmin, xd);
    }
    __m512i isum[NT], msum[T::kPairs];
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) isum[t] = zero;
#pragma GCC unroll 2
    for (int p = 0; p < T::kPairs; ++p) msum[p] = zero;
    auto pair_step = [&](auto pc) {
      constexpr int P = decltype(pc)::value;
      const uint8_t* qs = wb.qs + 256 * P;
      __m512i lo[4], hi[4];
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m512i q = pair_chunks(load64(qs + 64 * k));
        lo[k] = _mm512_and_si512(q, m4);
        hi[k] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
      }
      const __m512i sc = _mm512_cvtepu8_epi16(_mm256_shuffle_epi8(
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sm + 16 * P))), sc_shuffle));
      const __m512i mn = _mm512_cvtepu8_epi16(pairs4_bytes(sm + 64 + 16 * P));
      __m512i v[NT];
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        const int8_t* xq = x[t][b].qs + 64 * P;
        __m512i sl = _mm512_dpbusd_epi32(zero, lo[0], bcast8(xq));
        __m512i sh = _mm512_dpbusd_epi32(zero, hi[0], bcast8(xq + 32));
#pragma GCC unroll 3
        for (int k = 1; k < 4; ++k) {
          sl = _mm512_dpbusd_epi32(sl, lo[k], bcast8(xq + 8 * k));
          sh = _mm512_dpbusd_epi32(sh, hi[k], bcast8(xq + 32 + 8 * k));
        }
        v[t] = _mm512_madd_epi16(_mm512_packs_epi32(sl, sh), sc);
      }
#pragma GCC unroll 2
      for (int p = 0; p < T::kPairs; ++p) {
        const __m512i mins = _mm512_madd_epi16(mn, tokens4_pick<P>(bsum_pairs[p]));
        if constexpr (kPerPair) {
          const __m512i s = pair_tokens4(v[T::first(p)], v[T::second(p)]);
          acc[p] = _mm512_fmadd_ps(dx[p], _mm512_cvtepi32_ps(s), acc[p]);
          acc_min[p] = _mm512_fmadd_ps(dmx[p], _mm512_cvtepi32_ps(mins), acc_min[p]);
        } else {
          msum[p] = _mm512_add_epi32(msum[p], mins);
        }
      }
      if constexpr (!kPerPair) {
#pragma GCC unroll 4
        for (int t = 0; t < NT; ++t) isum[t] = _mm512_add_epi32(isum[t], v[t]);
      }
    };
    pair_step(IntC<0>{});
    pair_step(IntC<1>{});
    pair_step(IntC<2>{});
    pair_step(IntC<3>{});
    if constexpr (!kPerPair) {
#pragma GCC unroll 2
      for (int p = 0; p < T::kPairs; ++p) {
        const __m512i s = pair_tokens4(isum[T::first(p)], isum[T::second(p)]);
        acc[p] = _mm512_fmadd_ps(dx[p], _mm512_cvtepi32_ps(s), acc[p]);
        acc_min[p] = _mm512_fmadd_ps(dmx[p], _mm512_cvtepi32_ps(msum[p]), acc_min[p]);
      }
    }
  }
#pragma GCC unroll 2
  for (int p = 0; p < T::kPairs; ++p)
    store4(_mm512_sub_ps(acc[p], acc_min[p]), y + T::first(p) * y_stride,
           T::second(p) != T::first(p) ? y + T::second(p) * y_stride : nullptr);
}

// Q6_K: codes 0..63 (unsigned operand). A chunk pair's lanes (4 products of
// 63 x 127) fit int16, so the two chunk pairs of a sub-block go through
// vpackssdw and vpmaddwd with the rows' signed scales (layout 4, as Q4_K);
// the offset term sum_s sc_s * bsum_s is a vpmaddwd of scale pairs and
// bsums pairs, per token pair.
template <int NT>
void q6_k_x8_avx512(int64_t n_blocks, const void* vw, const void* vx, int64_t x_stride, const int32_t*, int64_t,
                    float* y, int64_t y_stride) {
  using T = Tokens<NT>;
  const auto* w = static_cast<const BlockQ6_Kx8*>(vw);
  const BlockQ8_K* x[NT];
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) x[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(vx) + t * x_stride);
  const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30), zero = _mm512_setzero_si512();
  // Sub-block s's 8 row scales (qword) -> per 128-bit lane L (a, a, b, b,
  // a, a, b, b) with a, b rows 2L, 2L+1.
  const __m256i sc_shuffle = _mm256_setr_epi8(0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3, 4, 4, 5, 5, 4, 4, 5, 5, 6,
                                              6, 7, 7, 6, 6, 7, 7);
  __m512 acc[T::kPairs];
#pragma GCC unroll 2
  for (int p = 0; p < T::kPairs; ++p) acc[p] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ6_Kx8& wb = w[b];
    prefetch_weights_ahead(&wb);
    __m512i isum[NT];
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) isum[t] = zero;
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 2
      for (int kk = 0; kk < 4; kk += 2) {
        // Chunk pairs kk and kk+1: codes of quarters q = 0..3.
        __m512i c[2][4];
#pragma GCC unroll 2
        for (int j = 0; j < 2; ++j) {
          const int k = kk + j;
          const __m512i qla = pair_chunks(load64(wb.ql + 512 * h + 64 * k));
          const __m512i qlb = pair_chunks(load64(wb.ql + 512 * h + 256 + 64 * k));
          const __m512i qh = pair_chunks(load64(wb.qh + 256 * h + 64 * k));
          c[j][0] = _mm512_or_si512(_mm512_and_si512(qla, m4), _mm512_and_si512(_mm512_slli_epi16(qh, 4), m30));
          c[j][1] = _mm512_or_si512(_mm512_and_si512(qlb, m4), _mm512_and_si512(_mm512_slli_epi16(qh, 2), m30));
          c[j][2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(qla, 4), m4), _mm512_and_si512(qh, m30));
          c[j][3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(qlb, 4), m4),
                                    _mm512_and_si512(_mm512_srli_epi16(qh, 2), m30));
        }
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          const int s = 8 * h + 2 * q + kk / 2;
          int64_t sc8;
          std::memcpy(&sc8, wb.scales + 8 * s, 8);
          const __m512i sc = _mm512_cvtepi8_epi16(_mm256_shuffle_epi8(_mm256_set1_epi64x(sc8), sc_shuffle));
#pragma GCC unroll 4
          for (int t = 0; t < NT; ++t) {
            const int8_t* xq = x[t][b].qs + 128 * h + 32 * q + 8 * kk;
            const __m512i v0 = _mm512_dpbusd_epi32(zero, c[0][q], bcast8(xq));
            const __m512i v1 = _mm512_dpbusd_epi32(zero, c[1][q], bcast8(xq + 8));
            isum[t] = _mm512_add_epi32(isum[t], _mm512_madd_epi16(_mm512_packs_epi32(v0, v1), sc));
          }
        }
      }
    }
    const __m512 d = rows4(wb.d);
#pragma GCC unroll 2
    for (int p = 0; p < T::kPairs; ++p) {
      const int t0 = T::first(p), t1 = T::second(p);
      const __m512i bsums = _mm512_inserti64x4(
          _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t0][b].bsums))),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t1][b].bsums)), 1);
      __m512i off = zero;
      auto offset_step = [&](auto kc) {
        constexpr int K = decltype(kc)::value;
        const __m512i scp = _mm512_cvtepi8_epi16(pairs4_bytes(reinterpret_cast<const uint8_t*>(wb.scales) + 16 * K));
        off = _mm512_add_epi32(off, _mm512_madd_epi16(scp, tokens4_pick<K>(bsums)));
      };
      offset_step(IntC<0>{});
      offset_step(IntC<1>{});
      offset_step(IntC<2>{});
      offset_step(IntC<3>{});
      offset_step(IntC<4>{});
      offset_step(IntC<5>{});
      offset_step(IntC<6>{});
      offset_step(IntC<7>{});
      const __m512i s = _mm512_sub_epi32(pair_tokens4(isum[t0], isum[t1]), _mm512_slli_epi32(off, 5));
      acc[p] = _mm512_fmadd_ps(_mm512_mul_ps(d, tokens4(x[t0][b].d, x[t1][b].d)), _mm512_cvtepi32_ps(s), acc[p]);
    }
  }
#pragma GCC unroll 2
  for (int p = 0; p < T::kPairs; ++p)
    store4(acc[p], y + T::first(p) * y_stride, T::second(p) != T::first(p) ? y + T::second(p) * y_stride : nullptr);
}

template <template <int> class K>
PackedKernels make_packed() {
  PackedKernels k{};
  k.toks = kMaxGemmToks;
  k.fn[1] = K<1>::fn;
  k.fn[2] = K<2>::fn;
  k.fn[3] = K<3>::fn;
  k.fn[4] = K<4>::fn;
  if constexpr (requires { K<1>::fn16; }) {
    // From K::kFn16From tokens on (fewer take fn, matmul's fallback).
    if constexpr (K<1>::kFn16From <= 1) k.fn16[1] = K<1>::fn16;
    if constexpr (K<2>::kFn16From <= 2) k.fn16[2] = K<2>::fn16;
    if constexpr (K<3>::kFn16From <= 3) k.fn16[3] = K<3>::fn16;
    k.fn16[4] = K<4>::fn16;
  }
  return k;
}
template <int NT>
struct Q4_0Avx512 {
  static constexpr PackedFn fn = q4_0_x8_avx512<NT>;
  static constexpr PackedFn fn16 = q4_0_x16_avx512<NT>;
  // One token (decode, weights from DRAM): two 8-row calls, which measured
  // ~1.1x the 16-row call there (one weight stream per call instead of two).
  static constexpr int kFn16From = 2;
};
template <int NT>
struct Q4_KAvx512 {
  static constexpr PackedFn fn = q4_k_x8_avx512<NT>;
};
template <int NT>
struct Q8_0Avx512 {
  static constexpr PackedFn fn = q8_0_x8_avx512<NT>;
};
template <int NT>
struct Q6_KAvx512 {
  static constexpr PackedFn fn = q6_k_x8_avx512<NT>;
};
static_assert(kMaxGemmToks == 4, "make_packed fills fn[1..4]");

}  // namespace

void add_avx512_x8_kernels(QuantKernels& t) {
  t.x8[kSlotQ4_0] = make_packed<Q4_0Avx512>();
  t.x8[kSlotQ4_K] = make_packed<Q4_KAvx512>();
  t.x8[kSlotQ4_K].fn4_each_token = q4_k_x8_avx512<4, false>;
  t.x8[kSlotQ6_K] = make_packed<Q6_KAvx512>();
  t.x8[kSlotQ8_0] = make_packed<Q8_0Avx512>();
}

}  // namespace vtc::cpu::detail
