// Decode attention at depth (one query row per sequence over 1024+ cached
// keys; attention.cpp, use_depth_kernel), AVX-512: the keys in tiles of 64
// (32 for heads of 96 or 128 values, 16 above) in sub-tiles of 16, the
// query heads of a GQA group in batches of up to 6, the cache types and
// the head size template arguments.
//
// The reference's one-row loop (ggml_compute_forward_flash_attn_ext_f16)
// updates the running maximum and, for an f16 V, rounds its accumulator to
// f16 at every key: a long dependency chain through a scalar expf and
// conversions per (key, head), which at 16k keys is most of a decode step.
// At this depth issue 43 allows any order whose logits stay within rel-L2
// 1e-3 of llama.cpp's; this one:
//   per head g and tile: s_j = scale * (q_g . k_j), masked keys -inf
//     (softcap: scalar tanh; ALiBi: plus slope_g * distance_j);
//     m' = max(M, max_j s_j); c = exp(M - m'); p_j = exp(s_j - m');
//     S = S c + sum_j p_j; acc = acc c + sum_j p_j v_j (f32);
// with the query converted as the reference converts it for K's dot (f16
// rounding, or q8_0 codes and scales), and K and V rows as the reference
// reads them (f16 widened, q8_0 codes times d):
//  - an f16 K: each 16-value chunk of a K row is widened once, in a
//    register, for the batch's heads, 4 keys at a time (24 FMA chains for
//    6 heads); the first two levels of the 16-key reduction tree run on
//    those 4 keys in registers (sum4), the last two once per 16 keys;
//  - a q8_0 K at head sizes of 64, 128, 192 or 256: the integer dot
//    (vpdpbusd over a transposed tile of codes, 16 keys per instruction:
//    the reference's exact integer sum per block, then the scales), the
//    tile staged once per kv head for all its query heads; other sizes
//    widen the codes and their scale;
//  - 16 scores of a head are exponentiated together by exp_nonpositive
//    (attention_depth_avx2.cpp's degree-5 polynomial at 16 lanes);
//  - V is read from the cache straight into the f32 accumulators of the
//    batch's heads, each chunk converted once; a q8_0 V's block scales are
//    folded into the weights first (p_j d_jb), so a chunk is only widened.
// The split-KV framework around it (chunks per thread, sinks on chunk 0,
// the merge) is attention.cpp's. Types: K and V each f16 or q8_0, head
// sizes equal, a multiple of 32 up to 256, up to 128 query heads per kv
// head; no selection.
//
// On Zen 5 (the 0.56B bench model's shape, 20 query and 4 kv heads of 64,
// one thread, rows in L2; `test_cpu_kernels "[.depth-kernel-bench]"`,
// fastest of 4 runs alternating with the version before) a key costs
// about 50 ns with an f16 cache and 45 with q8_0; before (each tile's f16
// K rows converted to f32 in memory and read back per head, ggml's
// v_expf, the cache types tested in the inner loops, a q8_0 V chunk
// multiplied by its scale) 71 and 47.5.
#include "runtime/cpu/kernels/avx512_common.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/cpu/kernels/attention_depth.h"
#include "runtime/cpu/kernels/attention_internal.h"

namespace vtc::cpu::detail {
namespace {

constexpr int kTile = 16;
constexpr int64_t kMaxDim = 256;
constexpr int64_t kMaxGroup = kAttentionDepthMaxGroup;

// The reduction of 16 vectors a[0..15] to one whose lanes hold their lane
// sums, as a tree of 128-bit-lane and in-lane shuffles (8 + 4 + 2 + 1
// additions). sum4 is its first two levels for 4 consecutive vectors (one
// vector: 4 lanes per input), sum16_finish its last two for 4 such.
inline __m512 sum4(const __m512* a) {
  const __m512 b0 = _mm512_add_ps(_mm512_shuffle_f32x4(a[0], a[1], 0x44), _mm512_shuffle_f32x4(a[0], a[1], 0xEE));
  const __m512 b1 = _mm512_add_ps(_mm512_shuffle_f32x4(a[2], a[3], 0x44), _mm512_shuffle_f32x4(a[2], a[3], 0xEE));
  return _mm512_add_ps(_mm512_shuffle_f32x4(b0, b1, 0x88), _mm512_shuffle_f32x4(b0, b1, 0xDD));
}
inline __m512 sum16_finish(const __m512* c) {
  const __m512 d0 = _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], 0x44), _mm512_shuffle_ps(c[0], c[1], 0xEE));
  const __m512 d1 = _mm512_add_ps(_mm512_shuffle_ps(c[2], c[3], 0x44), _mm512_shuffle_ps(c[2], c[3], 0xEE));
  return _mm512_add_ps(_mm512_shuffle_ps(d0, d1, 0x88), _mm512_shuffle_ps(d0, d1, 0xDD));
}

// lane_of_key[j]: the lane of the tree's raw result that holds a[j]'s sum
// (found once by running the tree on marked inputs); a permutation by it
// puts the 16 sums in key order.
__m512i key_order() {
  alignas(64) int32_t idx[16];
  alignas(64) float out[16];
  __m512 a[16], c[4];
  for (int j = 0; j < 16; ++j) a[j] = _mm512_maskz_mov_ps(1, _mm512_set1_ps(float(j + 1)));
  for (int i = 0; i < 4; ++i) c[i] = sum4(a + 4 * i);
  _mm512_store_ps(out, sum16_finish(c));
  for (int lane = 0; lane < 16; ++lane) idx[int(out[lane]) - 1] = lane;
  return _mm512_load_si512(idx);
}

// exp(x) for x <= 0 (a score minus the running maximum, or -inf for a
// masked key): attention_depth_avx2.cpp's exp_nonpositive at 16 lanes
// (2^round(t) times a degree-5 polynomial for 2^f, 1.4e-7 relative; t
// clamped at -127, where the power of two is +0, so a masked key weighs
// exactly 0). About 13 operations against ggml's v_expf's 20 and its
// branch.
inline __m512 exp_nonpositive(__m512 x) {
  const __m512 t = _mm512_max_ps(_mm512_mul_ps(x, _mm512_set1_ps(0x1.715476p+0f)), _mm512_set1_ps(-127.0f));
  const __m512i n = _mm512_cvtps_epi32(t);  // round to nearest
  const __m512 f = _mm512_sub_ps(t, _mm512_cvtepi32_ps(n));
  __m512 p = _mm512_set1_ps(0x1.5bc922p-10f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0x1.3d0ba4p-7f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0x1.c6b782p-5f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0x1.ebf91ap-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0x1.62e428p-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0x1.000002p+0f));
  const __m512 two_n = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23));
  return _mm512_mul_ps(p, two_n);
}

// The f16 scales of block b of 16 q8_0 rows (row[k] + off + 34 b) as f32
// lanes, inserted into a register (stored as halves and loaded back as one
// vector, the load waits for the stores to retire).
__attribute__((always_inline)) inline __m512 block_scales16(const uint8_t* const* row, size_t off, int b) {
  const auto d = [&](int k) {
    uint16_t h;
    std::memcpy(&h, row[k] + off + size_t(b) * sizeof(BlockQ8_0), sizeof h);
    return static_cast<short>(h);
  };
  return _mm512_cvtph_ps(_mm256_setr_epi16(d(0), d(1), d(2), d(3), d(4), d(5), d(6), d(7), d(8), d(9), d(10), d(11),
                                           d(12), d(13), d(14), d(15)));
}

// Transposes 16 rows of 16 dwords in registers: out[c] lane r = in[r]
// lane c. Within 128-bit lanes (32-bit then 64-bit interleaves), then
// across them (two rounds of 128-bit lane selects): 64 shuffles.
inline void transpose16_epi32(__m512i* r) {
  __m512i t[16], u[16], v[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {  // u[4i + k]: column 4L + k of rows 4i..4i+3 in lane L
    u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    v[k] = _mm512_shuffle_i32x4(u[k], u[4 + k], 0x88);
    v[4 + k] = _mm512_shuffle_i32x4(u[k], u[4 + k], 0xdd);
    v[8 + k] = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0x88);
    v[12 + k] = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0xdd);
  }
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    r[k] = _mm512_shuffle_i32x4(v[k], v[8 + k], 0x88);
    r[8 + k] = _mm512_shuffle_i32x4(v[k], v[8 + k], 0xdd);
  }
}

// The first 64-byte aligned element at or after p (its buffer has room).
template <class T>
T* aligned64(T* p) {
  return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t{63});
}

// The query rows of every head as the reference converts them for K's dot:
// f16-rounded f32 rows D apart (an f16 K, or a q8_0 K the integer path
// does not take: its codes times their scale), or for the integer dot the
// q8_0 codes four to a dword (D / 4 apart), each block's code sum and
// scale (D / 32 apart).
struct Query {
  const float* f;
  const int32_t* codes;
  const int32_t* sums;
  const float* scales;
  __m512i order;  // key_order()
};

// The head size D and the cache types are template arguments, so every
// row and chunk offset below is an immediate, the score chains and the
// accumulators fit the registers (with D at run time the compiler kept the
// row pointers in vector registers and spilled the rest: the step took
// about twice as long) and no inner loop branches on a type.
template <int D, bool KQ8, bool VQ8>
struct DepthTile {
  static constexpr int kNC = D / 16;                           // 16-value chunks of a row
  static constexpr int kSub = D <= 64 ? 4 : D <= 128 ? 2 : 1;  // D * keys <= 4096
  static constexpr int kKeys = kTile * kSub;
  static constexpr bool kIntK = KQ8 && D % 64 == 0;  // the integer path for K
  static_assert(kAttentionDepthSliceRows % kKeys == 0, "a slice of a resumed range is whole tiles");
  static_assert(kNC % 2 == 0, "head sizes are multiples of 32");

  // 16 values of a K or V row (f16 widened, or q8_0 codes widened, without
  // their scale), chunk c.
  template <bool Q8>
  static __m512 chunk(const uint8_t* row, int c) {
    if constexpr (!Q8) return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * c)));
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + c / 2;
    return _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs + 16 * (c % 2)))));
  }
  // A K chunk as the reference reads it: a q8_0 block's codes times its scale.
  static __m512 k_chunk(const uint8_t* row, int c) {
    if constexpr (!KQ8) return chunk<false>(row, c);
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + c / 2;
    return _mm512_mul_ps(chunk<true>(row, c), _mm512_set1_ps(h2f(blk->d)));
  }

  // The unscaled scores of HB query heads (rows D apart from q) against the
  // 16 K rows krow[0..16) of a sub-tile, lane j = key j, into out[0..HB).
  // Each K chunk is converted once, in registers, for the HB heads: KP keys
  // at a time, HB x KP accumulators (HB x KP + KP <= 28 of the 32
  // registers); each 4 keys' first reduction levels in registers, the last
  // two per 16 keys.
  template <int HB>
  static void scores(const float* q, const uint8_t* const* krow, size_t koff, __m512i order, __m512* out) {
    constexpr int KP = HB >= 2 ? 4 : 8;
    __m512 quarter[HB][kTile / 4];
    for (int j0 = 0; j0 < kTile; j0 += KP) {
      // q opaque to GCC here: else it hoists the HB x kNC query chunks out
      // of this loop into a copy on the stack (the FMAs read q from L1
      // either way)
      asm("" : "+r"(q));
      __m512 a[HB][KP];
#pragma GCC unroll 8
      for (int k = 0; k < KP; ++k) {
        const __m512 kv = k_chunk(krow[j0 + k] + koff, 0);
#pragma GCC unroll 6
        for (int g = 0; g < HB; ++g) a[g][k] = _mm512_mul_ps(kv, _mm512_load_ps(q + g * D));
      }
#pragma GCC unroll 16
      for (int c = 1; c < kNC; ++c)
#pragma GCC unroll 8
        for (int k = 0; k < KP; ++k) {
          const __m512 kv = k_chunk(krow[j0 + k] + koff, c);
#pragma GCC unroll 6
          for (int g = 0; g < HB; ++g) a[g][k] = _mm512_fmadd_ps(kv, _mm512_load_ps(q + g * D + 16 * c), a[g][k]);
        }
#pragma GCC unroll 6
      for (int g = 0; g < HB; ++g)
#pragma GCC unroll 2
        for (int k = 0; k < KP; k += 4) quarter[g][(j0 + k) / 4] = sum4(a[g] + k);
    }
#pragma GCC unroll 6
    for (int g = 0; g < HB; ++g) out[g] = _mm512_permutexvar_ps(order, sum16_finish(quarter[g]));
  }

  // A q8_0 K sub-tile for the integer dot: the codes offset to unsigned
  // (k + 128, vpdpbusd's unsigned operand) and transposed so that dword
  // lane j of codes[i] holds dims 4i..4i+3 of key j: one vpdpbusd with the
  // query's 4 codes broadcast adds them for 16 keys at once, with no
  // reduction across lanes. d[b]: the 16 keys' scales of block b.
  struct KTileQ8 {
    __m512i codes[D / 4];
    __m512 d[D / 32];
  };

  // This thread's staging tile: only the integer path's instances have one.
  static KTileQ8& k_tile() {
    thread_local KTileQ8 t;
    return t;
  }

  // The 16 K rows krow[0..16) into t (once per kv head, for all its heads).
  static void stage_q8(const uint8_t* const* krow, size_t koff, KTileQ8& t) {
    const __m512i offset = _mm512_set1_epi8(char(0x80));
#pragma GCC unroll 4
    for (int c = 0; c < D / 64; ++c) {
      __m512i r[kTile];
#pragma GCC unroll 16
      for (int jj = 0; jj < kTile; ++jj) {
        const auto* blk = reinterpret_cast<const BlockQ8_0*>(krow[jj] + koff) + 2 * c;
        const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[0].qs));
        const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[1].qs));
        r[jj] = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), offset);
      }
      transpose16_epi32(r);
#pragma GCC unroll 16
      for (int i = 0; i < kTile; ++i) t.codes[16 * c + i] = r[i];
    }
#pragma GCC unroll 8
    for (int b = 0; b < D / 32; ++b) t.d[b] = block_scales16(krow, koff, b);
  }

  // Scores of the integer path for HB heads (codes D / 4 apart, sums and
  // scales D / 32 apart): per block, (sum - 128 sum(q)) d_q d_k, the
  // reference's vec_dot_q8_0_q8_0 (an exact integer sum, then the scales).
  template <int HB>
  static void scores_q8(const int32_t* qc, const int32_t* qs, const float* qd, const KTileQ8& t, __m512* out) {
    constexpr int kNB = D / 32;
#pragma GCC unroll 6
    for (int g = 0; g < HB; ++g) {
      __m512 res = _mm512_setzero_ps();
#pragma GCC unroll 8
      for (int b = 0; b < kNB; ++b) {
        __m512i a = _mm512_set1_epi32(-128 * qs[g * kNB + b]);
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) a = _mm512_dpbusd_epi32(a, t.codes[8 * b + i], _mm512_set1_epi32(qc[g * (D / 4) + 8 * b + i]));
        res = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), _mm512_mul_ps(_mm512_set1_ps(qd[g * kNB + b]), t.d[b]), res);
      }
      out[g] = res;
    }
  }

  // acc_g = acc_g * corr_g + sum_j p_gj v_j for HB heads over the tile's
  // keys, V read from the cache rows (vrow[j] + voff) in passes of kCP
  // chunks, each converted once for the HB heads (HB x kCP accumulators,
  // kCP chunks; the weight a broadcast memory operand). A q8_0 V's block
  // scales are folded into the weights (p holds p_gj d_jb, kWeightsPerHead
  // apart per head, kKeys apart per block), so a chunk is only widened.
  static constexpr int kWeightBlocks = VQ8 ? D / 32 : 1;
  static constexpr int kWeightsPerHead = kWeightBlocks * kKeys;
  template <int HB>
  static void accumulate(const float* p, const uint8_t* const* vrow, size_t voff, const float* corr, float* acc) {
    constexpr int kCP = kNC % 4 == 0 ? 4 : kNC % 3 == 0 ? 3 : 2;
    static_assert(kNC % kCP == 0, "a pass past the row's last chunk writes the next head's accumulator");
    for (int c0 = 0; c0 < kNC; c0 += kCP) {
      __m512 part[HB][kCP];
#pragma GCC unroll 6
      for (int g = 0; g < HB; ++g)
#pragma GCC unroll 4
        for (int c = 0; c < kCP; ++c)
          part[g][c] = _mm512_mul_ps(_mm512_loadu_ps(acc + g * D + 16 * (c0 + c)), _mm512_set1_ps(corr[g]));
#pragma GCC unroll 4
      for (int j = 0; j < kKeys; ++j) {
        __m512 v[kCP];
#pragma GCC unroll 4
        for (int c = 0; c < kCP; ++c) v[c] = chunk<VQ8>(vrow[j] + voff, c0 + c);
#pragma GCC unroll 6
        for (int g = 0; g < HB; ++g)
#pragma GCC unroll 4
          for (int c = 0; c < kCP; ++c) {
            const int block = VQ8 ? (c0 + c) / 2 : 0;
            part[g][c] = _mm512_fmadd_ps(_mm512_set1_ps(p[g * kWeightsPerHead + block * kKeys + j]), v[c], part[g][c]);
          }
      }
#pragma GCC unroll 6
      for (int g = 0; g < HB; ++g)
#pragma GCC unroll 4
        for (int c = 0; c < kCP; ++c) _mm512_storeu_ps(acc + g * D + 16 * (c0 + c), part[g][c]);
    }
  }

  static constexpr int kMaxBatch = 6;  // heads per batch (depth_head_batches)

  // p_gj d_jb of the tile (p: the G heads' weights, kKeys apart; vrow: the
  // tile's V rows) into w, as accumulate reads a q8_0 V's weights.
  static void fold_v_scales(int64_t G, const float* p, const uint8_t* const* vrow, size_t voff, float* w) {
    for (int s = 0; s < kSub; ++s)
      for (int b = 0; b < kWeightBlocks; ++b) {
        const __m512 d = block_scales16(vrow + s * kTile, voff, b);
        for (int64_t g = 0; g < G; ++g)
          _mm512_store_ps(w + g * kWeightsPerHead + b * kKeys + s * kTile,
                          _mm512_mul_ps(_mm512_load_ps(p + g * kKeys + s * kTile), d));
      }
  }

  // The G query heads of kv head hk over the tile (krow, vrow: the tile's
  // K and V rows in the cache for kv head 0; live[s]: the visible keys of
  // sub-tile s), folded into (M, S, acc). Three passes over the heads
  // (scores, softmax statistics, values), each head independent of the
  // others within a pass, so their latency chains overlap. ALiBi: dist
  // holds the tile's kKeys distances and slopes the G heads' slopes (both
  // null without). sc: room for G x kKeys scores, then (a q8_0 V) G x
  // kWeightsPerHead weights.
  static void heads(const AttentionJob& job, const Query& query, const uint8_t* const* krow, const uint8_t* const* vrow,
                    int64_t hk, const uint32_t* live, const float* dist, const float* slopes, float* sc, float* M,
                    float* S, float* acc, RowPrefetcher& ahead) {
    const int64_t G = job.group, h0 = hk * G;
    const size_t koff = size_t(hk) * size_t(job.k_head_bytes), voff = size_t(hk) * size_t(job.v_head_bytes);
    const __m512 scale = _mm512_set1_ps(job.scale), minus_inf = _mm512_set1_ps(-__builtin_inff());
    // the next tile's rows, spread over this one's sub-tiles and kv heads
    const int64_t ahead_rows = (kKeys + job.n_head_kv * kSub - 1) / (job.n_head_kv * kSub);
    KTileQ8* kq = nullptr;  // the integer path's staged sub-tile
    if constexpr (kIntK) kq = &k_tile();
    for (int s = 0; s < kSub; ++s) {
      ahead.rows(ahead_rows);
      if constexpr (kIntK) stage_q8(krow + s * kTile, koff, *kq);
      depth_head_batches<kMaxBatch>(G, [&](int64_t g0, auto hb) {
        __m512 raw[hb];
        if constexpr (kIntK)
          scores_q8<hb>(query.codes + (h0 + g0) * (D / 4), query.sums + (h0 + g0) * (D / 32),
                        query.scales + (h0 + g0) * (D / 32), *kq, raw);
        else
          scores<hb>(query.f + (h0 + g0) * D, krow + s * kTile, koff, query.order, raw);
        for (int b = 0; b < hb; ++b) {
          const int64_t g = g0 + b;
          __m512 v = _mm512_mul_ps(raw[b], scale);
          if (job.softcap != 0.0f) v = softcapped(v, job.softcap);
          if (dist != nullptr)
            v = _mm512_add_ps(v, _mm512_mul_ps(_mm512_set1_ps(slopes[g]), _mm512_load_ps(dist + s * kTile)));
          _mm512_store_ps(sc + g * kKeys + s * kTile, _mm512_mask_blend_ps(__mmask16(live[s]), minus_inf, v));
        }
      });
    }
    alignas(64) float corr[kMaxGroup];
    for (int64_t g = 0; g < G; ++g) {
      float* pg = sc + g * kKeys;
      __m512 mx = _mm512_load_ps(pg);
      for (int s = 1; s < kSub; ++s) mx = _mm512_max_ps(mx, _mm512_load_ps(pg + s * kTile));
      const float tile_max = _mm512_reduce_max_ps(mx);  // finite: the tile has a live key
      const float m_new = tile_max > M[g] ? tile_max : M[g];  // not std::fmax: a call (NaN rules) spills every zmm
      // exp(M - m'): 1 where the maximum holds (most tiles), 0 on the
      // first live tile (M = -inf)
      corr[g] = m_new == M[g] ? 1.0f : _mm512_cvtss_f32(exp_nonpositive(_mm512_set1_ps(M[g] - m_new)));
      const __m512 mv = _mm512_set1_ps(m_new);
      __m512 sum = _mm512_setzero_ps();
      for (int s = 0; s < kSub; ++s) {
        const __m512 p = exp_nonpositive(_mm512_sub_ps(_mm512_load_ps(pg + s * kTile), mv));
        _mm512_store_ps(pg + s * kTile, p);
        sum = _mm512_add_ps(sum, p);
      }
      S[g] = S[g] * corr[g] + reduce_add(sum);
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

  static __m512 softcapped(__m512 v, float cap) {
    alignas(64) float s[kTile];
    _mm512_store_ps(s, v);
    for (int jj = 0; jj < kTile; ++jj) s[jj] = cap * std::tanh(s[jj]);
    return _mm512_load_ps(s);
  }

  static void prepare_query(const AttentionJob& job, float* f, int32_t* codes, int32_t* sums, float* scales);

  // The kernel over rows [j0, j1) (depth_block_avx512's contract).
  static void run(const AttentionJob& job, int64_t j0, int64_t j1, float* M, float* S, float* acc, bool resume);
};

// Every head's query row (job.q) as Query holds it for this K type.
template <int D, bool KQ8, bool VQ8>
void DepthTile<D, KQ8, VQ8>::prepare_query(const AttentionJob& job, float* f, int32_t* codes, int32_t* sums,
                                           float* scales) {
  for (int64_t h = 0; h < job.n_head; ++h) {
    const float* q = job.q + h * D;
    if constexpr (!KQ8) {
      for (int64_t i = 0; i < D; i += 16)
        _mm512_store_ps(f + h * D + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(q + i), _MM_FROUND_TO_NEAREST_INT)));
      continue;
    }
    BlockQ8_0 blocks[kMaxDim / 32];
    active_quant_kernels().quantize[static_cast<int>(ActType::Q8_0)](q, blocks, D);
    for (int64_t b = 0; b < D / 32; ++b) {
      const float d = h2f(blocks[b].d);
      if constexpr (kIntK) {
        std::memcpy(codes + h * (D / 4) + 8 * b, blocks[b].qs, 32);
        int32_t sum = 0;
        for (int i = 0; i < 32; ++i) sum += blocks[b].qs[i];
        sums[h * (D / 32) + b] = sum, scales[h * (D / 32) + b] = d;
      } else {
        for (int i = 0; i < 32; ++i) f[h * D + 32 * b + i] = float(blocks[b].qs[i]) * d;
      }
    }
  }
}

template <int D, bool KQ8, bool VQ8>
void DepthTile<D, KQ8, VQ8>::run(const AttentionJob& job, int64_t j0, int64_t j1, float* M, float* S, float* acc,
                                 bool resume) {
  const int64_t G = job.group, Hkv = job.n_head_kv;
  // 64-byte aligned: the inner loops read the query rows (and the scores)
  // as memory operands, and a load across a cache line costs two.
  thread_local std::vector<float> qf, qd, sc;
  thread_local std::vector<int32_t> qc, qs;
  qf.resize(size_t(job.n_head * D) + 16);
  qc.resize(size_t(job.n_head * D / 4) + 16);
  qs.resize(size_t(job.n_head * D / 32));
  qd.resize(size_t(job.n_head * D / 32));
  sc.resize(size_t(G * (kKeys + (VQ8 ? kWeightsPerHead : 0))) + 16);
  float* scores = aligned64(sc.data());
  float* query_f = aligned64(qf.data());
  int32_t* query_codes = aligned64(qc.data());
  prepare_query(job, query_f, query_codes, qs.data(), qd.data());
  static const __m512i order = key_order();
  const Query query{query_f, query_codes, qs.data(), qd.data(), order};
  // A resumed range's (M, S, acc) hold the rows before j0: the tiles go on from there.
  if (!resume) start_depth_heads(job.n_head, D, M, S, acc);
  // Every kv head per tile: the tile's rows are read from memory once.
  walk_depth_tiles<kKeys, kTile, true>(job, j0, j1, [&](const DepthTileKeys<kKeys, kTile>& tile, RowPrefetcher& ahead) {
    const uint8_t* krow[kKeys];
    const uint8_t* vrow[kKeys];
    depth_tile_rows(job, tile, krow, vrow);
    for (int64_t hk = 0; hk < Hkv; ++hk) {
      const float* slopes = job.alibi_slopes != nullptr ? job.alibi_slopes + hk * G : nullptr;
      heads(job, query, krow, vrow, hk, tile.live, tile.alibi, slopes, scores, M + hk * G, S + hk * G,
            acc + hk * G * D, ahead);
    }
  });
}

}  // namespace

bool depth_block_avx512(const AttentionJob& job, int64_t j0, int64_t j1, float* M, float* S, float* acc, bool resume) {
  return run_depth_kernel<DepthTile>(job, j0, j1, M, S, acc, resume);
}

}  // namespace vtc::cpu::detail
