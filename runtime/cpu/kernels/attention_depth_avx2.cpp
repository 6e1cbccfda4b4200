// Decode attention at depth on AVX2 (no AVX-512): the algorithm of
// attention_depth_avx512.cpp (read its header: the order, the tolerance
// issue 43 allows at depth, the contract) at 8 lanes.
//
//   per head g and tile: s_j = scale * (q_g . k_j) (f32 FMAs in 8-lane
//     chunks, then a reduction over 8 keys), masked keys -inf (softcap:
//     scalar tanh; ALiBi: plus slope_g * distance_j);
//     m' = max(M, max_j s_j); c = exp(M - m'); p_j = exp(s_j - m');
//     S = S c + sum_j p_j; acc = acc c + sum_j p_j v_j (f32);
//
// Tiles of 64 keys (32 for heads of 96 or 128 values, 16 above) in
// sub-tiles of 8; the softmax statistics are paid once per tile. The query
// heads of a GQA group go in batches of up to 5 (as even as they go):
//  - scores: each K chunk is converted from the cache into a register once
//    for the batch's heads, 2 keys at a time (10 FMA chains for 5 heads),
//    and each head's 8 lane sums reduced together (sum8);
//  - 8 scores of a head are exponentiated together by exp_nonpositive (a
//    degree-5 polynomial, 1.4e-7 relative: cheaper than ggml's v_expf,
//    which the reference's one-row loop does not use here anyway);
//  - V is read from the cache straight into the f32 accumulators of the
//    batch's heads, each chunk converted once; a q8_0 V's block scales are
//    folded into the weights first (p_j d_jb), so a chunk is only widened.
// The cache types and the head size are template arguments. The query is
// converted as the reference converts it for K's dot: f16 rounding, or
// q8_0 codes and scales. A q8_0 K takes the reference's integer dot per
// 32-value block (vpsignb, vpmaddubsw, vpmaddwd; AVX2 has no vpdpbusd),
// its int32 lanes reduced over 8 keys in integers, then one FMA per block
// and 8 keys for the two scales (scores_q8).
//
// On Zen 3 (the 0.56B bench model's shape, 20 query and 4 kv heads of 64,
// one thread, rows in L2; `test_cpu_kernels "[.depth-kernel-bench]"`,
// fastest of 6-8 runs alternating with the version before) this computes
// a key in about 100 ns with an f16 cache and 96 with q8_0. Before: 109
// and 131 (the q8_0 K as an f32 dot of codes times scales, and the query
// rows' loads hoisted by GCC into a copy on the stack per 8 keys); before
// that (each tile's K rows converted to f32 in memory, then read back per
// head; ggml's v_expf; the row types tested in the inner loops) 147 and 200.
//
// Why: without it an AVX2 machine ran decode at depth through the
// reference's one-row loop (a scalar expf and an f16 rounding of the
// accumulator per key and head): on Zen 3, the 0.56B bench model's Q8_0
// decode step at 4096 cached tokens took 2.34x its bandwidth floor.
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/cpu/kernels/attention_depth.h"
#include "runtime/cpu/kernels/attention_internal.h"
#include "runtime/cpu/kernels/avx2_common.h"

namespace vtc::cpu::detail {
namespace {

constexpr int kTile = 8;
constexpr int64_t kMaxDim = 256;
constexpr int64_t kMaxGroup = kAttentionDepthMaxGroup;

// Lane j = a[j]'s lane sum, in key order: two rounds of horizontal adds
// within 128-bit halves, then the halves' partial sums added.
inline __m256 sum8(const __m256* a) {
  const __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 lo = _mm256_hadd_ps(h01, h23), hi = _mm256_hadd_ps(h45, h67);  // keys 0-3 | 4-7, per half
  return _mm256_add_ps(_mm256_permute2f128_ps(lo, hi, 0x20), _mm256_permute2f128_ps(lo, hi, 0x31));
}

// Query row q (f32) as the reference converts it for K's dot: f16-rounded
// into out (an f16 K), or quantized to q8_0 (a q8_0 K): its codes into
// codes[0..d) and its block scales into scales[0..d/32).
void query_for_k(const float* q, bool k_q8, int64_t d, float* out, int8_t* codes, float* scales) {
  if (!k_q8) {
    for (int64_t i = 0; i < d; i += 8)
      _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(q + i), _MM_FROUND_TO_NEAREST_INT)));
    return;
  }
  BlockQ8_0 blocks[kMaxDim / 32];
  active_quant_kernels().quantize[static_cast<int>(ActType::Q8_0)](q, blocks, d);
  for (int64_t b = 0; b < d / 32; ++b) {
    std::memcpy(codes + 32 * b, blocks[b].qs, 32);
    scales[b] = h2f(blocks[b].d);
  }
}

// The f16 scales of block b of 8 q8_0 rows (row[k] + 34 b), as f32 lanes.
// Inserted into a register (vpinsrw): stored to memory as 8 halves and
// loaded back as one vector, the load could not take its value from the
// stores and waited for them to retire (8% of the q8_0 kernel's time).
__attribute__((always_inline)) inline __m256 block_scales8(const uint8_t* const* row, size_t off, int b) {
  const auto d = [&](int k) {
    uint16_t h;
    std::memcpy(&h, row[k] + off + size_t(b) * sizeof(BlockQ8_0), sizeof h);
    return static_cast<short>(h);
  };
  return _mm256_cvtph_ps(_mm_setr_epi16(d(0), d(1), d(2), d(3), d(4), d(5), d(6), d(7)));
}

// Lane j = the sum of a[j]'s int32 lanes, where l1[i] = hadd(a[2i],
// a[2i+1]) (sum8's tree, in integers: exact).
inline __m256i sum8_epi32(const __m256i* l1) {
  const __m256i lo = _mm256_hadd_epi32(l1[0], l1[1]), hi = _mm256_hadd_epi32(l1[2], l1[3]);
  return _mm256_add_epi32(_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31));
}

// Values 8c..8c+7 of a V row without their scale: f16 as f32, or q8_0
// codes as f32 (the accumulate folds the block's scale into the weight).
template <bool Q8>
inline __m256 v_chunk(const uint8_t* row, int64_t c) {
  if (!Q8) return load_f16(reinterpret_cast<const uint16_t*>(row) + 8 * c);
  const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + c / 4;
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk->qs + 8 * (c % 4)))));
}

// exp(x) for x <= 0 (a score minus the running maximum, or -inf for a
// masked key): 2^t, t = x log2(e), as 2^round(t) times a degree-5
// polynomial for 2^f, f = t - round(t) in [-1/2, 1/2] (least squares in
// relative error on Chebyshev nodes: 1.4e-7 at most, near f32's own
// rounding). t is clamped at -127, where the power of two is +0, so a
// masked key weighs exactly 0. About 13 operations against ggml's
// v_expf's 20 and its branch: the softmax was a fifth of a step at depth,
// and issue 43 allows any order within rel-L2 1e-3 of the reference's logits.
inline __m256 exp_nonpositive(__m256 x) {
  const __m256 t = _mm256_max_ps(_mm256_mul_ps(x, _mm256_set1_ps(0x1.715476p+0f)), _mm256_set1_ps(-127.0f));
  const __m256i n = _mm256_cvtps_epi32(t);  // round to nearest
  const __m256 f = _mm256_sub_ps(t, _mm256_cvtepi32_ps(n));
  __m256 p = _mm256_set1_ps(0x1.5bc922p-10f);
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0x1.3d0ba4p-7f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0x1.c6b782p-5f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0x1.ebf91ap-3f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0x1.62e428p-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0x1.000002p+0f));
  const __m256 two_n = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
  return _mm256_mul_ps(p, two_n);
}

// The first 32-byte aligned element at or after p (its buffer has room).
template <class T>
T* aligned32(T* p) {
  return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(p) + 31) & ~uintptr_t{31});
}

// Lanes of the keys whose bit is set in `live` all ones, the others zero.
inline __m256 live_lanes(uint32_t live) {
  const __m256i bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(int(live)), bits), bits));
}

// The head size D and the cache types are template arguments, so every
// offset below is an immediate, the accumulators fit the registers (as in
// the AVX-512 kernel, where D at run time doubled the step's time) and no
// inner loop branches on a type.
template <int D, bool KQ8, bool VQ8>
struct DepthTile {
  static constexpr int kNC = D / 8;                             // 8-value chunks of a row
  static constexpr int kSub = D <= 64 ? 8 : D <= 128 ? 4 : 2;  // D * keys <= 4096
  static constexpr int kKeys = kTile * kSub;
  static_assert(kAttentionDepthSliceRows % kKeys == 0, "a slice of a resumed range is whole tiles");
  static_assert(kNC % 4 == 0, "head sizes are multiples of 32");

  // The unscaled scores of HB query heads (rows D apart from q) against the
  // 8 K rows krow[0..8) of a sub-tile, lane j = key j, into out[0..HB).
  // Each K chunk is converted once, in registers, for the HB heads: KP keys
  // at a time, HB x KP accumulators (HB x KP + KP <= 12 of AVX2's 16
  // registers, and at least 8 independent FMA chains where HB allows).
  // The lane sums wait in `part` (memory) for one reduction per 8 keys.
  template <int HB>
  static void scores(const float* q, const uint8_t* const* krow, size_t koff, __m256* out) {
    constexpr int KP = HB >= 3 ? 2 : HB == 2 ? 4 : 8;
    __m256 part[HB][kTile];
    for (int j0 = 0; j0 < kTile; j0 += KP) {
      // q opaque to GCC here: else it hoists the HB x kNC query chunks out
      // of this loop into a copy on the stack, 2 memory operations per
      // chunk per call for nothing (the FMAs read q from L1 either way)
      asm("" : "+r"(q));
      __m256 a[HB][KP];
#pragma GCC unroll 8
      for (int k = 0; k < KP; ++k) {
        const __m256 kv = load_f16(reinterpret_cast<const uint16_t*>(krow[j0 + k] + koff));
#pragma GCC unroll 5
        for (int g = 0; g < HB; ++g) a[g][k] = _mm256_mul_ps(kv, _mm256_loadu_ps(q + g * D));
      }
#pragma GCC unroll 32
      for (int c = 1; c < kNC; ++c)
#pragma GCC unroll 8
        for (int k = 0; k < KP; ++k) {
          const __m256 kv = load_f16(reinterpret_cast<const uint16_t*>(krow[j0 + k] + koff) + 8 * c);
#pragma GCC unroll 5
          for (int g = 0; g < HB; ++g) a[g][k] = _mm256_fmadd_ps(kv, _mm256_loadu_ps(q + g * D + 8 * c), a[g][k]);
        }
#pragma GCC unroll 5
      for (int g = 0; g < HB; ++g)
#pragma GCC unroll 8
        for (int k = 0; k < KP; ++k) part[g][j0 + k] = a[g][k];
    }
#pragma GCC unroll 5
    for (int g = 0; g < HB; ++g) out[g] = sum8(part[g]);
  }

  // The same scores against a q8_0 K, from the query's q8_0 codes (qc, rows
  // D apart) and block scales (qd, D / 32 apart), as the reference's
  // vec_dot_q8_0_q8_0 forms them: per 32-value block an exact integer dot
  // (vpsignb, vpmaddubsw, vpmaddwd: |k| x sign(q, k), pairs of products at
  // most 2 x 127 x 127 in int16), then scaled by the two blocks' scales.
  // The int32 lanes of 8 keys are reduced in integers (sum8_epi32), so a
  // block costs 3 integer operations per (key, head) and its scale an FMA
  // per 8 keys; the f32 dot it replaces took 4 FMAs and the conversion of
  // 32 codes times their scale per block (1.5x the time per key, Zen 3).
  template <int HB>
  static void scores_q8(const int8_t* qc, const float* qd, const uint8_t* const* krow, size_t koff, __m256* out) {
    constexpr int kNB = D / 32;
    __m256i l1[HB][kNB][kTile / 2];
    const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 8
    for (int b = 0; b < kNB; ++b)
#pragma GCC unroll 4
      for (int k = 0; k < kTile; k += 2) {
        const auto codes = [&](int key) {
          return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
              reinterpret_cast<const BlockQ8_0*>(krow[key] + koff)[b].qs));
        };
        const __m256i k0 = codes(k), k1 = codes(k + 1);
        const __m256i a0 = _mm256_sign_epi8(k0, k0), a1 = _mm256_sign_epi8(k1, k1);
#pragma GCC unroll 5
        for (int g = 0; g < HB; ++g) {
          const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qc + g * D + 32 * b));
          const __m256i d0 = _mm256_madd_epi16(_mm256_maddubs_epi16(a0, _mm256_sign_epi8(q, k0)), ones);
          const __m256i d1 = _mm256_madd_epi16(_mm256_maddubs_epi16(a1, _mm256_sign_epi8(q, k1)), ones);
          l1[g][b][k / 2] = _mm256_hadd_epi32(d0, d1);
        }
      }
    __m256 dk[kNB];
#pragma GCC unroll 8
    for (int b = 0; b < kNB; ++b) dk[b] = block_scales8(krow, koff, b);
#pragma GCC unroll 5
    for (int g = 0; g < HB; ++g) {
      __m256 dot = _mm256_setzero_ps();
#pragma GCC unroll 8
      for (int b = 0; b < kNB; ++b)
        dot = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum8_epi32(l1[g][b])),
                              _mm256_mul_ps(dk[b], _mm256_set1_ps(qd[g * kNB + b])), dot);
      out[g] = dot;
    }
  }

  // acc_g = acc_g * corr_g + sum_j p_gj v_j for HB heads over the tile's
  // keys, V read from the cache rows (vrow[j]) in passes of 2 chunks, each
  // converted once for the HB heads: HB x 2 accumulators, 2 chunks and the
  // broadcast weight fit AVX2's 16 registers for HB up to 5 (a GQA group of
  // 5 in one pass: its V chunks converted once, not once per 2 heads).
  // A q8_0 V's block scales are folded into the weights (p holds p_gj
  // d_jb, kWeightsPerHead apart per head, kKeys apart per block), so a
  // chunk costs a widening and a conversion.
  static constexpr int kWeightBlocks = VQ8 ? D / 32 : 1;
  static constexpr int kWeightsPerHead = kWeightBlocks * kKeys;
  template <int HB>
  static void accumulate(const float* p, const uint8_t* const* vrow, size_t voff, const float* corr, float* acc) {
    constexpr int kCP = 2;
    for (int c0 = 0; c0 < kNC; c0 += kCP) {
      __m256 part[HB][kCP];
#pragma GCC unroll 5
      for (int g = 0; g < HB; ++g)
#pragma GCC unroll 2
        for (int c = 0; c < kCP; ++c)
          part[g][c] = _mm256_mul_ps(_mm256_loadu_ps(acc + g * D + 8 * (c0 + c)), _mm256_set1_ps(corr[g]));
#pragma GCC unroll 4
      for (int j = 0; j < kKeys; ++j) {
        __m256 v[kCP];
#pragma GCC unroll 2
        for (int c = 0; c < kCP; ++c) v[c] = v_chunk<VQ8>(vrow[j] + voff, c0 + c);
#pragma GCC unroll 5
        for (int g = 0; g < HB; ++g) {
          const __m256 pg = _mm256_set1_ps(p[g * kWeightsPerHead + (VQ8 ? c0 / 4 : 0) * kKeys + j]);
#pragma GCC unroll 2
          for (int c = 0; c < kCP; ++c) part[g][c] = _mm256_fmadd_ps(pg, v[c], part[g][c]);
        }
      }
#pragma GCC unroll 5
      for (int g = 0; g < HB; ++g)
#pragma GCC unroll 2
        for (int c = 0; c < kCP; ++c) _mm256_storeu_ps(acc + g * D + 8 * (c0 + c), part[g][c]);
    }
  }

  static constexpr int kMaxBatch = 5;  // heads per batch (depth_head_batches)

  // The query rows of every head as query_for_k converts them for K: f32
  // rows D apart (an f16 K), or q8_0 codes D apart and their block scales
  // D / 32 apart (a q8_0 K).
  struct Query {
    const float* f;
    const int8_t* codes;
    const float* scales;
  };

  // p_gj d_jb of the tile (p: the G heads' weights, kKeys apart; vrow: the
  // tile's V rows) into w, as accumulate reads a q8_0 V's weights.
  static void fold_v_scales(int64_t G, const float* p, const uint8_t* const* vrow, size_t voff, float* w) {
    for (int s = 0; s < kSub; ++s)
      for (int b = 0; b < kWeightBlocks; ++b) {
        const __m256 d = block_scales8(vrow + s * kTile, voff, b);
        for (int64_t g = 0; g < G; ++g)
          _mm256_store_ps(w + g * kWeightsPerHead + b * kKeys + s * kTile,
                          _mm256_mul_ps(_mm256_load_ps(p + g * kKeys + s * kTile), d));
      }
  }

  // The G query heads of kv head hk over the tile (krow, vrow: the tile's
  // K and V rows in the cache; live[s]: the visible keys of sub-tile s),
  // folded into (M, S, acc). Three passes over the heads (scores, softmax
  // statistics, values), each head independent of the others within a
  // pass, so their latency chains overlap. ALiBi: dist holds the tile's
  // kKeys distances and slopes the G heads' slopes (both null without).
  // sc: room for G x kKeys scores, then (a q8_0 V) G x kWeightsPerHead
  // weights.
  static void heads(const AttentionJob& job, const Query& query, const uint8_t* const* krow, const uint8_t* const* vrow,
                    int64_t hk, const __m256* live, const float* dist, const float* slopes, float* sc, float* M,
                    float* S, float* acc, RowPrefetcher& ahead) {
    const int64_t G = job.group, h0 = hk * G;
    const size_t koff = size_t(hk) * size_t(job.k_head_bytes), voff = size_t(hk) * size_t(job.v_head_bytes);
    const __m256 scale = _mm256_set1_ps(job.scale), minus_inf = _mm256_set1_ps(-__builtin_inff());
    for (int s = 0; s < kSub; ++s)
      depth_head_batches<kMaxBatch>(G, [&](int64_t g0, auto hb) {
        // 2 rows of the next tile per sub-tile and batch: its 64 rows spread
        // over the whole tile's compute for a group of 5 (4 per call measured
        // 10-20% slower at 16384 keys from DRAM: the prefetches came in bursts)
        ahead.rows(2);
        __m256 raw[hb];
        if constexpr (KQ8)
          scores_q8<hb>(query.codes + (h0 + g0) * D, query.scales + (h0 + g0) * (D / 32), krow + s * kTile, koff, raw);
        else
          scores<hb>(query.f + (h0 + g0) * D, krow + s * kTile, koff, raw);
        for (int b = 0; b < hb; ++b) {
          const int64_t g = g0 + b;
          __m256 v = _mm256_mul_ps(raw[b], scale);
          if (job.softcap != 0.0f) v = softcapped(v, job.softcap);
          if (dist != nullptr)
            v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_set1_ps(slopes[g]), _mm256_load_ps(dist + s * kTile)));
          _mm256_store_ps(sc + g * kKeys + s * kTile, _mm256_blendv_ps(minus_inf, v, live[s]));
        }
      });
    alignas(32) float corr[kMaxGroup];
    for (int64_t g = 0; g < G; ++g) {
      float* pg = sc + g * kKeys;
      __m256 mx = _mm256_load_ps(pg);
      for (int s = 1; s < kSub; ++s) mx = _mm256_max_ps(mx, _mm256_load_ps(pg + s * kTile));
      const float tile_max = hmax_ps(mx);  // finite: the tile has a live key
      const float m_new = tile_max > M[g] ? tile_max : M[g];
      // exp(M - m'): 1 where the maximum holds (most tiles), 0 on the
      // first live tile (M = -inf)
      corr[g] = m_new == M[g] ? 1.0f : _mm256_cvtss_f32(exp_nonpositive(_mm256_set1_ps(M[g] - m_new)));
      const __m256 mv = _mm256_set1_ps(m_new);
      __m256 sum = _mm256_setzero_ps();
      for (int s = 0; s < kSub; ++s) {
        const __m256 p = exp_nonpositive(_mm256_sub_ps(_mm256_load_ps(pg + s * kTile), mv));
        _mm256_store_ps(pg + s * kTile, p);
        sum = _mm256_add_ps(sum, p);
      }
      S[g] = S[g] * corr[g] + hsum_ps(sum);
      M[g] = m_new;
    }
    float* weights = sc;
    if constexpr (VQ8) {
      weights = sc + G * kKeys;
      fold_v_scales(G, sc, vrow, voff, weights);
    }
    depth_head_batches<kMaxBatch>(G, [&](int64_t g0, auto hb) {
      accumulate<hb>(weights + g0 * kWeightsPerHead, vrow, voff, corr + g0, acc + g0 * D);
    });
  }

  static __m256 softcapped(__m256 v, float cap) {
    alignas(32) float s[kTile];
    _mm256_store_ps(s, v);
    for (int jj = 0; jj < kTile; ++jj) s[jj] = cap * std::tanh(s[jj]);
    return _mm256_load_ps(s);
  }

  // The kernel over rows [j0, j1) (depth_block_avx2's contract).
  static void run(const AttentionJob& job, int64_t j0, int64_t j1, float* M, float* S, float* acc, bool resume);
};

template <int D, bool KQ8, bool VQ8>
void DepthTile<D, KQ8, VQ8>::run(const AttentionJob& job, int64_t j0, int64_t j1, float* M, float* S, float* acc,
                                 bool resume) {
  const int64_t G = job.group, Hkv = job.n_head_kv;
  // 32-byte aligned: the inner loops read the query rows (and the scores)
  // as memory operands, and a 32-byte load across a cache line costs two.
  thread_local std::vector<float> qf, qd, sc;
  thread_local std::vector<int8_t> qc;
  qf.resize(size_t(job.n_head * D) + 8);
  qc.resize(size_t(job.n_head * D) + 32);
  qd.resize(size_t(job.n_head * D / 32));
  sc.resize(size_t(G * (kKeys + (VQ8 ? kWeightsPerHead : 0))) + 8);
  float* scores = aligned32(sc.data());
  float* query_f = aligned32(qf.data());
  int8_t* query_codes = aligned32(qc.data());
  for (int64_t h = 0; h < job.n_head; ++h)
    query_for_k(job.q + h * D, KQ8, D, query_f + h * D, query_codes + h * D, qd.data() + h * (D / 32));
  const Query query{query_f, query_codes, qd.data()};
  // A resumed range's (M, S, acc) hold the rows before j0: the tiles go on from there.
  if (!resume) start_depth_heads(job.n_head, D, M, S, acc);
  // Every kv head per tile: the tile's rows are read from memory once.
  walk_depth_tiles<kKeys, kTile>(job, j0, j1, [&](const DepthTileKeys<kKeys, kTile>& tile, RowPrefetcher& ahead) {
    const uint8_t* krow[kKeys];
    const uint8_t* vrow[kKeys];
    depth_tile_rows(job, tile, krow, vrow);
    __m256 live[kSub];
    for (int s = 0; s < kSub; ++s) live[s] = live_lanes(tile.live[s]);
    for (int64_t hk = 0; hk < Hkv; ++hk) {
      const float* slopes = job.alibi_slopes != nullptr ? job.alibi_slopes + hk * G : nullptr;
      heads(job, query, krow, vrow, hk, live, tile.alibi, slopes, scores, M + hk * G, S + hk * G, acc + hk * G * D,
            ahead);
    }
  });
}

}  // namespace

bool depth_block_avx2(const AttentionJob& job, int64_t j0, int64_t j1, float* M, float* S, float* acc, bool resume) {
  return run_depth_kernel<DepthTile>(job, j0, j1, M, S, acc, resume);
}

}  // namespace vtc::cpu::detail
