// Small AVX2 helpers shared by the AVX2 kernel files (quant_avx2.cpp,
// gemm_avx2.cpp): f16 conversion, horizontal sums, block decoding and the
// K-quant scale unpacking.
//
// Include this only from translation units compiled with -mavx2 -mfma
// -mf16c. Everything is in an anonymous namespace, so each such file gets
// its own copy and the linker can never merge one into code that runs on a
// machine without AVX2 (see internal.h).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "runtime/cpu/kernels/internal.h"

namespace vtc::cpu::detail {
namespace {

// An empty asm that "changes" v: GCC cannot reassociate the adds of an
// integer accumulator chain across it. Without it, GCC turns an unrolled
// chain of adds into a tree, which holds all the products of every token at
// once and spills them (the Q4_K x8 kernel at 4 tokens: 516 stack accesses
// per superblock, 1.36x slower). Call it on each accumulator once per step.
inline void keep_chain(__m256i& v) { asm("" : "+x"(v)); }

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }
inline uint16_t f2h(float f) { return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)); }

inline float hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The largest lane (max_ps order: upper half first, as ggml's quantizers).
inline float hmax_ps(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline int hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

inline __m256i loadu(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Weight streams: how far ahead of the block being multiplied the x8
// kernels prefetch, and the prefetch itself, every line of the block that
// lies kWeightPrefetchBytes past `b` (past a group's last block that is
// the next group's first: groups are contiguous in a chunk).
// Why: a decode step reads each weight once, in calls of a few KiB per
// 8-row group, and the hardware prefetcher alone left the loads waiting on
// DRAM between the compute. Measured with `vtc-bench-kernels --dram`, 2
// threads, Zen 5, against no prefetch: q6_K_x8 32000x1280 at 8 tokens 3.0
// -> 1.9 ms and at 1 token ~1.0 -> 0.6 ms; q4_K_x8 1280x5120 at 8 tokens
// 0.31 -> 0.21 ms; q4_K_x8 and q8_0_x8 at 1 token within the noise. 4 KiB
// did as well at 8 tokens but less at 1; 8 KiB was worse.
// Where the lines go (kWeightPrefetchToL1): into L2 (T1), except for
// Q4_0. On Zen 4 (`vtc-bench-kernels 5120 1280 --dram`, GB/s of weights,
// 1 / 2 threads, 3 rounds alternated), L1 (T0) against L2 (T1):
//   q4_K_x8  1 token 18-20 / 24-28 -> 21-26 / 29-33 (AVX2: 12-17 / 21-26
//            -> 21-22 / 24-30); 4 tokens 11-12 / 19-22 -> 15-16 / 23-28;
//   q6_K_x8  1 token 7.5-9 / 15-17 -> 22-25 / 27-33 (no prefetch 6-7);
//   q8_0_x8  8 tokens 9.4-9.6 / 17-18 -> 10.7-11 / 18-21;
//   q4_0_x8  1 token alike; 8 tokens 7.8-8.1 / 13-15 -> 7.0-7.2 / 12-13.
// End to end on the 0.56B bench model (Q4_K_M, one-row decode step,
// medians of 5 alternated runs): 22.3 -> 17.0 ms on 1 thread, 16.8 -> 14.1
// ms on 2; the Q4_0 model's 8-row step, 31 -> 36 ms with T1, keeps T0.
constexpr size_t kWeightPrefetchBytes = 6144;
template <class Block>
inline constexpr bool kWeightPrefetchToL1 = false;
template <>
inline constexpr bool kWeightPrefetchToL1<BlockQ4_0x8> = true;
template <class Block>
inline void prefetch_weights_ahead(const Block* b) {
  const char* p = reinterpret_cast<const char*>(b) + kWeightPrefetchBytes;
  constexpr auto kHint = kWeightPrefetchToL1<Block> ? _MM_HINT_T0 : _MM_HINT_T1;
#pragma GCC unroll 32
  for (size_t o = 0; o < sizeof(Block); o += 64) _mm_prefetch(p + o, kHint);
}

// One-row dots (AVX2 and AVX-512): decode streams weights from DRAM once
// per token; the next rows of a matmul follow the current one in memory, so
// the dots prefetch this far ahead of their reads (past the end of the row
// into the next one). 4 KiB, not the 1 KiB it was: AVX-512 q6_K 32000x1280
// at 1 token, 2 threads, from DRAM (`vtc-bench-kernels --dram`), 0.87-0.96
// -> 0.68-0.76 ms; 6 KiB no better.
constexpr int64_t kDotPrefetchBytes = 4096;
inline void prefetch_dot_ahead(const void* p) {
  _mm_prefetch(static_cast<const char*>(p) + kDotPrefetchBytes, _MM_HINT_T0);
}

// A tile of Rows weight rows streams the next tile's rows (the Rows rows
// after these, contiguous in a matmul) into the cache while it computes, in
// step with it: at block b, bytes [b, b+1) * Rows blocks of the next tile.
// A tile for several tokens needs it as much as a decode dot: without it a
// batched decode step's Q6_K tiles (the output head) waited on DRAM, 8 tokens
// of 32000x1280 taking 5x one token's time.
template <class Block, int Rows>
struct NextTile {
  static constexpr int64_t kStep = Rows * static_cast<int64_t>(sizeof(Block));
  const char* ahead;
  NextTile(const void* w, int64_t ws) : ahead(static_cast<const char*>(w) + Rows * ws) {}
  void prefetch(int64_t b) const {
    #pragma GCC unroll 32
    for (int64_t o = 0; o < kStep; o += 64) _mm_prefetch(ahead + b * kStep + o, _MM_HINT_T0);
  }
};

// 16 bytes of nibbles -> 32 bytes: low nibbles (values 0..15), then high.
inline __m256i nibbles32(const uint8_t* p) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m256i v = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
  return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
}

// Bit j of qh -> byte j = 0xff if set, 0 if not.
inline __m256i bits32(const uint8_t* qhp) {
  uint32_t qh;
  std::memcpy(&qh, qhp, 4);
  const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                        3, 3, 3, 3, 3, 3);
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)), shuf);
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

// Sum of products of signed bytes x, y (|x|, |y| <= 127), in 8 int32 lanes.
inline __m256i dot_i8(__m256i x, __m256i y) {
  const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}
// Unsigned x (<= 127) times signed y, in 8 int32 lanes.
inline __m256i dot_u8(__m256i x, __m256i y) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1));
}
// A K-quant superblock's 16 sub-block scales as int16 lanes (sc16: scale j
// in lane j), sub-blocks 8h..8h+7 in both 128-bit lanes.
inline __m256i scales_half(__m256i sc16, int h) {
  return h == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00) : _mm256_permute2x128_si256(sc16, sc16, 0x11);
}
// The 16 int16 scale lanes of sub-blocks 8h + 2k (lanes 0..7) and
// 8h + 2k + 1 (lanes 8..15), from scales_half(sc16, h): one vpshufb, where
// building them from two scalar broadcasts took about 6 operations (in the
// Q6_K dot as many as the pair's arithmetic: it held the dot to about 10
// GB/s per Zen 3 core).
inline __m256i pair_scales(__m256i half, int k) {
  const char a0 = char(4 * k), a1 = char(4 * k + 1), b0 = char(4 * k + 2), b1 = char(4 * k + 3);
  const __m256i ctrl = _mm256_setr_epi8(a0, a1, a0, a1, a0, a1, a0, a1, a0, a1, a0, a1, a0, a1, a0, a1,  //
                                        b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1);
  return _mm256_shuffle_epi8(half, ctrl);
}


inline __m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load_bf16(const uint16_t* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
inline float bf2f(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline __m256i iq4_table() {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
}

inline __m256 fmadd_lanes(float d, __m256i lanes, __m256 acc) {
  return _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes), acc);
}
// ggml's 4-lane mins term: lane k = m[2k]*(bs[4k]+bs[4k+1]) + m[2k+1]*(bs[4k+2]+bs[4k+3]).
inline __m128i k4_mins_lanes(__m128i mins16, const int16_t* bsums) {
  const __m128i pairs = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bsums)),
                                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(bsums + 8)));
  return _mm_madd_epi16(mins16, pairs);
}
inline float hsum4_ps(__m128 v) {
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  v = _mm_add_ss(v, _mm_movehdup_ps(v));
  return _mm_cvtss_f32(v);
}

// Q4_K / Q5_K scales with ggml's 32-bit mask trick: 16-bit scales 0..7 in
// both 128-bit halves (for lane16_shuffle), and the 8 mins in `mins`.
inline __m256i k4_scales_x2(const uint8_t* packed, __m128i& mins) {
  constexpr uint32_t kLow6 = 0x3f3f3f3fu, kLow4 = 0x0f0f0f0fu, kLow2 = 0x03030303u;
  uint32_t u[3];
  std::memcpy(u, packed, 12);
  const __m128i r = _mm_setr_epi32(static_cast<int>(u[0] & kLow6),
                                   static_cast<int>((u[2] & kLow4) | (((u[0] >> 6) & kLow2) << 4)),
                                   static_cast<int>(u[1] & kLow6),
                                   static_cast<int>(((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kLow2) << 4)));
  const __m256i sm = _mm256_cvtepu8_epi16(r);  // 16-bit: scales 0..7, mins 0..7
  mins = _mm256_extracti128_si256(sm, 1);
  return _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm));
}
// Shuffle that repeats 16-bit lane k of each 128-bit half.
inline __m256i lane16_shuffle(int k) {
  return _mm256_set1_epi16(static_cast<int16_t>((2 * k) | ((2 * k + 1) << 8)));
}

// Q6_K: the 16 signed sub-block scales of a super-block as int16 lanes
// (scale j in lane j).
inline __m256i q6_k_scales16(const BlockQ6_K& wb) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scales)));
}

// Q6_K: the 6-bit codes (0..63) of half h (128 values) of a super-block,
// as 4 vectors of 32 bytes in ggml's order.
inline void q6_k_codes(const BlockQ6_K& wb, int h, __m256i q[4]) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m256i ql0 = loadu(wb.ql + 64 * h);
  const __m256i ql1 = loadu(wb.ql + 64 * h + 32);
  const __m256i qh = loadu(wb.qh + 32 * h);
  q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
  q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4));
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4));
}

}  // namespace
}  // namespace vtc::cpu::detail
