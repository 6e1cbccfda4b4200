// Decode attention at depth (one query row per sequence over 1024+ cached
// keys; attention.cpp, use_depth_kernel), AVX-512: the keys in tiles of 64
// (32 for heads of 96 or 128 values, 16 above), each K row converted to f32
// once for every query head of its GQA group, each 16 scores of a head
// exponentiated together (ggml_v_expf, 16 lanes), and V read from the
// cache straight into the f32 accumulators of up to 6 heads at a time.
//
// The reference's one-row loop (ggml_compute_forward_flash_attn_ext_f16)
// updates the running maximum and, for an f16 V, rounds its accumulator to
// f16 at every key: a long dependency chain through a scalar expf and
// conversions per (key, head), which at 16k keys is most of a decode step.
// At this depth issue 43 allows any order whose logits stay within rel-L2
// 1e-3 of llama.cpp's; this one:
//   per head g and tile: s_j = scale * (q_g . k_j) (f32 FMAs in 16-lane
//     chunks, then a reduction tree over 16 keys), masked keys -inf
//     (softcap: scalar tanh; ALiBi: plus slope_g * distance_j);
//     m' = max(M, max_j s_j); c = exp(M - m'); p_j = exp(s_j - m');
//     S = S c + sum_j p_j; acc = acc c + sum_j p_j v_j (f32);
// with the query converted as the reference converts it for K's dot (f16
// rounding, or q8_0 codes and scales), and K and V rows as the reference
// reads them (f16 widened, q8_0 codes times d). A q8_0 K at head sizes of
// 64, 128, 192 or 256 takes the integer dot (vpdpbusd over a transposed
// tile of codes, 16 keys per instruction: the reference's exact integer
// sum per block, then the scales); other sizes an f32 dot of the codes
// times their scales.
// The split-KV framework around it (chunks per thread, sinks on chunk 0,
// the merge) is attention.cpp's. Types: K and V each f16 or q8_0, head
// sizes equal, a multiple of 32 up to 256, up to 128 query heads per kv
// head; no selection.
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

// One row of `d` values of a cache half (f16 or q8_0 blocks) as f32.
inline void row_to_f32(const uint8_t* src, bool q8, int64_t d, float* dst) {
  if (!q8) {
    for (int64_t i = 0; i < d; i += 16)
      _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * i))));
    return;
  }
  for (int64_t b = 0; b < d / 32; ++b) {
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(src) + b;
    const __m512 scale = _mm512_set1_ps(h2f(blk->d));
    for (int h = 0; h < 2; ++h) {
      const __m128i codes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs + 16 * h));
      _mm512_storeu_ps(dst + 32 * b + 16 * h, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(codes)), scale));
    }
  }
}

// The 16 lane sums of a[0..15] as one vector, lane j = sum of a[j]'s lanes:
// a tree of 128-bit-lane and in-lane shuffles (8 + 4 + 2 + 1 additions),
// then one permutation into key order (found once by running the tree on
// marked inputs).
inline __m512 sum16(const __m512* a) {
  __m512 b[8], c[4], d[2];  // unrolled: as loops (-O2) the arrays went through the stack
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i)
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44), _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE));
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i)
    c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88), _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xDD));
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i)
    d[i] = _mm512_add_ps(_mm512_shuffle_ps(c[2 * i], c[2 * i + 1], 0x44), _mm512_shuffle_ps(c[2 * i], c[2 * i + 1], 0xEE));
  return _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], 0x88), _mm512_shuffle_ps(d[0], d[1], 0xDD));
}

// lane_of_key[j]: the lane of sum16's raw result that holds a[j]'s sum.
__m512i key_order() {
  alignas(64) int32_t idx[16];
  alignas(64) float out[16];
  __m512 a[16];
  for (int j = 0; j < 16; ++j) a[j] = _mm512_maskz_mov_ps(1, _mm512_set1_ps(float(j + 1)));
  _mm512_store_ps(out, sum16(a));
  for (int lane = 0; lane < 16; ++lane) idx[int(out[lane]) - 1] = lane;
  return _mm512_load_si512(idx);
}

// Query row q (f32) as the reference converts it for K's dot: f16-rounded,
// or q8_0 codes times their f16 scale.
void query_for_k(const float* q, bool k_q8, int64_t d, float* out) {
  if (!k_q8) {
    for (int64_t i = 0; i < d; i += 16)
      _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(q + i), _MM_FROUND_TO_NEAREST_INT)));
    return;
  }
  BlockQ8_0 blocks[kMaxDim / 32];
  active_quant_kernels().quantize[static_cast<int>(ActType::Q8_0)](q, blocks, d);
  row_to_f32(reinterpret_cast<const uint8_t*>(blocks), true, d, out);
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

// A query row for the integer dot with a q8_0 K: its q8_0 codes (the
// reference's vec_dot_type for q8_0) four to a dword, each block's code
// sum and scale.
struct QueryQ8 {
  alignas(64) int32_t codes[kMaxDim / 4];
  int32_t sum[kMaxDim / 32];
  float d[kMaxDim / 32];
};

void quantize_query(const float* q, int64_t dim, QueryQ8& out) {
  BlockQ8_0 blocks[kMaxDim / 32];
  active_quant_kernels().quantize[static_cast<int>(ActType::Q8_0)](q, blocks, dim);
  for (int64_t b = 0; b < dim / 32; ++b) {
    std::memcpy(out.codes + 8 * b, blocks[b].qs, 32);
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) sum += blocks[b].qs[i];
    out.sum[b] = sum, out.d[b] = h2f(blocks[b].d);
  }
}

// The head size D is a template argument, so every row and chunk offset
// below is an immediate and the 16 score chains, the V chunks and the
// pointers fit the registers (with D at run time the compiler kept the 16
// row pointers in vector registers and spilled the rest: the step took
// about twice as long).
//
// A tile is kSub sub-tiles of 16 keys, 4096 values of K and of V as f32
// (16 KiB each: both stay in L1): the softmax statistics (a reduce_max, a
// correction exp, a reduce_add per head) are paid once per tile, not per
// 16 keys.
template <int D>
struct DepthTile {
  static constexpr int kNC = D / 16;                   // 16-value chunks of a row
  static constexpr int kSub = D <= 64 ? 4 : D <= 128 ? 2 : 1;  // D * keys <= 4096
  static constexpr int kKeys = 16 * kSub;
  static_assert(kAttentionDepthSliceRows % kKeys == 0, "a slice of a resumed range is whole tiles");

  // The 16 scores of query row qg against K rows kt[0..16) (f32), unscaled.
  static __m512 scores16(const float* qg, const float* kt) {
    static const __m512i order = key_order();
    __m512 a[kTile];
#pragma GCC unroll 16
    for (int jj = 0; jj < kTile; ++jj) a[jj] = _mm512_mul_ps(_mm512_loadu_ps(qg), _mm512_loadu_ps(kt + jj * D));
#pragma GCC unroll 16
    for (int c = 1; c < kNC; ++c) {
      const __m512 qv = _mm512_loadu_ps(qg + 16 * c);
#pragma GCC unroll 16
      for (int jj = 0; jj < kTile; ++jj) a[jj] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(kt + jj * D + 16 * c), a[jj]);
    }
    return _mm512_permutexvar_ps(order, sum16(a));
  }

  // 16 values of a V row (f16, or q8_0 codes times their block's scale)
  // from the cache, chunk c.
  static __m512 v_chunk(const uint8_t* row, bool q8, int c) {
    if (!q8) return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * c)));
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + c / 2;
    const __m128i codes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs + 16 * (c % 2)));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(codes)), _mm512_set1_ps(h2f(blk->d)));
  }

  // acc_g = acc_g * corr_g + sum_j p_gj v_j for HB heads over the tile's
  // keys, V read from the cache rows (vrow[j]) in passes of up to 4 chunks:
  // each chunk of a row is converted once, in a register, for all HB heads
  // (HB x 4 accumulators: HB x 4 independent FMA chains, p_gj a broadcast
  // operand). Staging V as f32 and accumulating head by head cost a store
  // and a load per value and a third of the kernel's time.
  template <int HB>
  static void accumulate(const float* p, const uint8_t* const* vrow, bool q8, const float* corr, float* acc) {
    // chunks per pass: 4, or a divisor of kNC (even: D % 32 == 0)
    constexpr int kCP = kNC % 4 == 0 ? 4 : kNC % 3 == 0 ? 3 : 2;
    static_assert(kNC % kCP == 0, "a pass past the row's last chunk writes the next head's accumulator");
    for (int c0 = 0; c0 < kNC; c0 += kCP) {
      __m512 part[HB][kCP];
#pragma GCC unroll 8
      for (int g = 0; g < HB; ++g)
#pragma GCC unroll 4
        for (int c = 0; c < kCP; ++c)
          part[g][c] = _mm512_mul_ps(_mm512_loadu_ps(acc + g * D + 16 * (c0 + c)), _mm512_set1_ps(corr[g]));
      for (int j = 0; j < kKeys; ++j) {
        __m512 v[kCP];
#pragma GCC unroll 4
        for (int c = 0; c < kCP; ++c) v[c] = v_chunk(vrow[j], q8, c0 + c);
#pragma GCC unroll 8
        for (int g = 0; g < HB; ++g) {
          const __m512 pg = _mm512_set1_ps(p[g * kKeys + j]);
#pragma GCC unroll 4
          for (int c = 0; c < kCP; ++c) part[g][c] = _mm512_fmadd_ps(pg, v[c], part[g][c]);
        }
      }
#pragma GCC unroll 8
      for (int g = 0; g < HB; ++g)
#pragma GCC unroll 4
        for (int c = 0; c < kCP; ++c) _mm512_storeu_ps(acc + g * D + 16 * (c0 + c), part[g][c]);
    }
  }

  static constexpr int kHeadBatch = 6;  // heads per accumulate pass: 6 x 4 accumulators + 4 chunks + 1

  static void accumulate_heads(int64_t G, const float* p, const uint8_t* const* vrow, bool q8, const float* corr,
                               float* acc) {
    int64_t g = 0;
    for (; g + kHeadBatch <= G; g += kHeadBatch) accumulate<kHeadBatch>(p + g * kKeys, vrow, q8, corr + g, acc + g * D);
    switch (G - g) {
      case 1: return accumulate<1>(p + g * kKeys, vrow, q8, corr + g, acc + g * D);
      case 2: return accumulate<2>(p + g * kKeys, vrow, q8, corr + g, acc + g * D);
      case 3: return accumulate<3>(p + g * kKeys, vrow, q8, corr + g, acc + g * D);
      case 4: return accumulate<4>(p + g * kKeys, vrow, q8, corr + g, acc + g * D);
      case 5: return accumulate<5>(p + g * kKeys, vrow, q8, corr + g, acc + g * D);
      default: return;
    }
  }

  // Scores against K rows staged as f32 (an f16 K, or a q8_0 K at head
  // sizes the integer path does not take).
  struct F32Scores {
    const float* qf;  // the group's query rows, as query_for_k converts them
    const float* kt;  // the tile's K rows
    __m512 operator()(int64_t g, int s) const { return scores16(qf + g * D, kt + s * kTile * D); }
  };

  // A q8_0 K tile for the integer dot (D % 64 == 0): the codes offset to
  // unsigned (k + 128, vpdpbusd's unsigned operand) and transposed so that
  // dword lane j of codes[s][i] holds dims 4i..4i+3 of key j: one vpdpbusd
  // with the query's 4 codes broadcast adds them for 16 keys at once, with
  // no reduction across lanes. d: each key's block scales.
  struct KTileQ8 {
    __m512i codes[kSub][D / 4];
    alignas(64) float d[kSub][D / 32][kTile];
  };

  // The tile's K rows (krow[j], every key; zero rows past the end) into t.
  static void stage_q8(const uint8_t* const* krow, KTileQ8& t) {
    const __m512i offset = _mm512_set1_epi8(char(0x80));
    for (int s = 0; s < kSub; ++s)
      for (int c = 0; c < D / 64; ++c) {
        __m512i r[kTile];
        for (int jj = 0; jj < kTile; ++jj) {
          const auto* blk = reinterpret_cast<const BlockQ8_0*>(krow[s * kTile + jj]) + 2 * c;
          const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[0].qs));
          const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[1].qs));
          r[jj] = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), offset);
          t.d[s][2 * c][jj] = h2f(blk[0].d), t.d[s][2 * c + 1][jj] = h2f(blk[1].d);
        }
        transpose16_epi32(r);
        for (int i = 0; i < kTile; ++i) t.codes[s][16 * c + i] = r[i];
      }
  }

  // Scores of the integer path: per block, (sum - 128 sum(q)) d_q d_k, the
  // reference's vec_dot_q8_0_q8_0 (an exact integer sum, then the scales).
  struct Q8Scores {
    const QueryQ8* q;  // the group's query rows
    const KTileQ8* t;
    __m512 operator()(int64_t g, int s) const {
      const QueryQ8& qg = q[g];
      __m512 res = _mm512_setzero_ps();
#pragma GCC unroll 8
      for (int b = 0; b < D / 32; ++b) {
        __m512i a = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) a = _mm512_dpbusd_epi32(a, t->codes[s][8 * b + i], _mm512_set1_epi32(qg.codes[8 * b + i]));
        a = _mm512_sub_epi32(a, _mm512_set1_epi32(128 * qg.sum[b]));
        res = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), _mm512_mul_ps(_mm512_set1_ps(qg.d[b]), _mm512_load_ps(t->d[s][b])), res);
      }
      return res;
    }
  };

  // The G query heads of one kv head over the tile (score(g, s): head g's
  // scores of sub-tile s, unscaled; vrow: its V rows in the cache;
  // live[s]: the visible keys of sub-tile s), folded into (M, S, acc).
  // Three passes over the heads (scores, softmax statistics, values), each
  // head independent of the others within a pass, so their latency chains
  // (reduction tree, max, exp, FMAs) overlap instead of queueing.
  // ALiBi: dist holds the tile's kKeys distances and slopes the G heads'
  // slopes (both null without).
  template <class Scores>
  static void heads(const AttentionJob& job, const Scores& score, const uint8_t* const* vrow, const uint32_t* live,
                    const float* dist, const float* slopes, float* sc, float* M, float* S, float* acc,
                    RowPrefetcher& ahead) {
    const int64_t G = job.group;
    const __m512 scale = _mm512_set1_ps(job.scale), minus_inf = _mm512_set1_ps(-__builtin_inff());
    for (int64_t g = 0; g < G; ++g)
      for (int s = 0; s < kSub; ++s) {
        ahead.rows(1);
        __m512 v = _mm512_mul_ps(score(g, s), scale);
        if (job.softcap != 0.0f) v = softcapped(v, job.softcap);
        if (dist != nullptr)
          v = _mm512_add_ps(v, _mm512_mul_ps(_mm512_set1_ps(slopes[g]), _mm512_load_ps(dist + s * kTile)));
        _mm512_store_ps(sc + g * kKeys + s * kTile, _mm512_mask_blend_ps(__mmask16(live[s]), minus_inf, v));
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
      corr[g] = m_new == M[g] ? 1.0f : _mm512_cvtss_f32(v_expf_l16(_mm512_set1_ps(M[g] - m_new)));
      const __m512 mv = _mm512_set1_ps(m_new);
      __m512 sum = _mm512_setzero_ps();
      for (int s = 0; s < kSub; ++s) {
        const __m512 p = v_expf_l16(_mm512_sub_ps(_mm512_load_ps(pg + s * kTile), mv));
        _mm512_store_ps(pg + s * kTile, p);
        sum = _mm512_add_ps(sum, p);
      }
      S[g] = S[g] * corr[g] + reduce_add(sum);
      M[g] = m_new;
    }
    accumulate_heads(G, sc, vrow, job.v_type == GgmlType::Q8_0, corr, acc);
  }

  static __m512 softcapped(__m512 v, float cap) {
    alignas(64) float s[kTile];
    _mm512_store_ps(s, v);
    for (int jj = 0; jj < kTile; ++jj) s[jj] = cap * std::tanh(s[jj]);
    return _mm512_load_ps(s);
  }

  // The kernel over rows [j0, j1) (depth_block_avx512's contract).
  static void run(const AttentionJob& job, int64_t j0, int64_t j1, float* M, float* S, float* acc, bool resume);
};

template <int D>
void DepthTile<D>::run(const AttentionJob& job, int64_t j0, int64_t j1, float* M, float* S, float* acc, bool resume) {
  const bool k_q8 = job.k_type == GgmlType::Q8_0;
  const bool int_k = k_q8 && D % 64 == 0;  // the integer path for K
  const int64_t G = job.group, Hkv = job.n_head_kv;
  thread_local std::vector<float> qf, kt, sc;
  thread_local std::vector<QueryQ8> qq;
  thread_local KTileQ8 kq;
  qf.resize(size_t(job.n_head * D));
  kt.resize(size_t(kKeys * D));
  sc.resize(size_t(G * kKeys) + 16);
  float* scores = sc.data() + (16 - (reinterpret_cast<uintptr_t>(sc.data()) / 4) % 16) % 16;  // 64-byte aligned
  if (int_k) qq.resize(size_t(job.n_head));
  for (int64_t h = 0; h < job.n_head; ++h) {
    if (int_k) quantize_query(job.q + h * D, D, qq[size_t(h)]);
    else query_for_k(job.q + h * D, k_q8, D, qf.data() + h * D);
  }
  // A resumed range's (M, S, acc) hold the rows before j0: the tiles go on from there.
  if (!resume) start_depth_heads(job.n_head, D, M, S, acc);
  // Every kv head per tile: the tile's rows are read from memory once.
  walk_depth_tiles<kKeys, kTile>(job, j0, j1, [&](const DepthTileKeys<kKeys, kTile>& tile, RowPrefetcher& ahead) {
    const int n = tile.n;
    // A short last tile: zero rows, masked (their weights are 0), so every
    // loop runs over whole sub-tiles in registers.
    const uint8_t *krow[kKeys], *vrow[kKeys];
    if (n < kKeys) {
      std::fill(kt.begin() + n * D, kt.end(), 0.0f);
      std::fill(krow + n, krow + kKeys, kDepthZeroRow);
      std::fill(vrow + n, vrow + kKeys, kDepthZeroRow);
    }
    for (int64_t hk = 0; hk < Hkv; ++hk) {
      for (int jj = 0; jj < n; ++jj) {
        krow[jj] = job.k + size_t(tile.rows[jj] * Hkv + hk) * size_t(job.k_head_bytes);
        vrow[jj] = job.v + size_t(tile.rows[jj] * Hkv + hk) * size_t(job.v_head_bytes);
      }
      float *Mg = M + hk * G, *Sg = S + hk * G, *accg = acc + hk * G * D;
      const float* slopes = job.alibi_slopes != nullptr ? job.alibi_slopes + hk * G : nullptr;
      if (int_k) {
        stage_q8(krow, kq);
        heads(job, Q8Scores{qq.data() + hk * G, &kq}, vrow, tile.live, tile.alibi, slopes, scores, Mg, Sg, accg, ahead);
      } else {
        for (int jj = 0; jj < n; ++jj) row_to_f32(krow[jj], k_q8, D, kt.data() + jj * D);
        heads(job, F32Scores{qf.data() + hk * G * D, kt.data()}, vrow, tile.live, tile.alibi, slopes, scores, Mg, Sg,
              accg, ahead);
      }
    }
  });
}

}  // namespace

bool depth_block_avx512(const AttentionJob& job, int64_t j0, int64_t j1, float* M, float* S, float* acc, bool resume) {
  const bool k_q8 = job.k_type == GgmlType::Q8_0, v_q8 = job.v_type == GgmlType::Q8_0;
  if ((!k_q8 && job.k_type != GgmlType::F16) || (!v_q8 && job.v_type != GgmlType::F16)) return false;
  if (job.dv != job.dk || job.n_tokens != 1 || job.group > kMaxGroup) return false;
  switch (job.dk) {
    case 32: DepthTile<32>::run(job, j0, j1, M, S, acc, resume); return true;
    case 64: DepthTile<64>::run(job, j0, j1, M, S, acc, resume); return true;
    case 96: DepthTile<96>::run(job, j0, j1, M, S, acc, resume); return true;
    case 128: DepthTile<128>::run(job, j0, j1, M, S, acc, resume); return true;
    case 160: DepthTile<160>::run(job, j0, j1, M, S, acc, resume); return true;
    case 192: DepthTile<192>::run(job, j0, j1, M, S, acc, resume); return true;
    case 224: DepthTile<224>::run(job, j0, j1, M, S, acc, resume); return true;
    case 256: DepthTile<256>::run(job, j0, j1, M, S, acc, resume); return true;
    default: return false;
  }
}

}  // namespace vtc::cpu::detail
