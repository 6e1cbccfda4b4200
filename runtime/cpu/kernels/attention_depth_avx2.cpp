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
// sub-tiles of 8: K and V of a tile, as f32, stay in L1, and the softmax
// statistics are paid once per tile. Each K row is converted to f32 once
// for every query head of its GQA group; 8 scores of a head are
// exponentiated together (ggml's AVX2 v_expf, avx2_expf.h); V is read from
// the cache straight into the f32 accumulators of up to 5 heads a pass. The
// query is converted as the reference converts it for K's dot (f16
// rounding, or q8_0 codes times their scale). A q8_0 K takes the f32 dot
// of its codes times their scales at every head size: AVX2 has no
// vpdpbusd for the AVX-512 kernel's integer dot.
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
#include "runtime/cpu/kernels/avx2_expf.h"

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

// Values 8c..8c+7 of a row of a cache half (f16, or q8_0 codes times
// their block's scale) as f32.
inline __m256 row_chunk(const uint8_t* row, bool q8, int64_t c) {
  if (!q8) return load_f16(reinterpret_cast<const uint16_t*>(row) + 8 * c);
  const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + c / 4;
  const __m128i codes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk->qs + 8 * (c % 4)));
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(codes)), _mm256_set1_ps(h2f(blk->d)));
}

// One row of `d` values of a cache half as f32.
inline void row_to_f32(const uint8_t* src, bool q8, int64_t d, float* dst) {
  for (int64_t c = 0; c < d / 8; ++c) _mm256_storeu_ps(dst + 8 * c, row_chunk(src, q8, c));
}

// Query row q (f32) as the reference converts it for K's dot: f16-rounded,
// or q8_0 codes times their f16 scale.
void query_for_k(const float* q, bool k_q8, int64_t d, float* out) {
  if (!k_q8) {
    for (int64_t i = 0; i < d; i += 8)
      _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(q + i), _MM_FROUND_TO_NEAREST_INT)));
    return;
  }
  BlockQ8_0 blocks[kMaxDim / 32];
  active_quant_kernels().quantize[static_cast<int>(ActType::Q8_0)](q, blocks, d);
  row_to_f32(reinterpret_cast<const uint8_t*>(blocks), true, d, out);
}

// Lanes of the keys whose bit is set in `live` all ones, the others zero.
inline __m256 live_lanes(uint32_t live) {
  const __m256i bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(int(live)), bits), bits));
}

// The head size D is a template argument, so every offset below is an
// immediate and the 8 score chains fit the registers (as in the AVX-512
// kernel, where D at run time doubled the step's time).
template <int D>
struct DepthTile {
  static constexpr int kNC = D / 8;                             // 8-value chunks of a row
  static constexpr int kSub = D <= 64 ? 8 : D <= 128 ? 4 : 2;  // D * keys <= 4096
  static constexpr int kKeys = kTile * kSub;
  static_assert(kAttentionDepthSliceRows % kKeys == 0, "a slice of a resumed range is whole tiles");
  static_assert(kNC % 4 == 0, "head sizes are multiples of 32");

  // The 8 scores of query row qg against K rows kt[0..8) (f32), unscaled.
  static __m256 scores8(const float* qg, const float* kt) {
    __m256 a[kTile];
#pragma GCC unroll 8
    for (int jj = 0; jj < kTile; ++jj) a[jj] = _mm256_mul_ps(_mm256_loadu_ps(qg), _mm256_loadu_ps(kt + jj * D));
#pragma GCC unroll 32
    for (int c = 1; c < kNC; ++c) {
      const __m256 qv = _mm256_loadu_ps(qg + 8 * c);
#pragma GCC unroll 8
      for (int jj = 0; jj < kTile; ++jj) a[jj] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kt + jj * D + 8 * c), a[jj]);
    }
    return sum8(a);
  }

  // acc_g = acc_g * corr_g + sum_j p_gj v_j for HB heads over the tile's
  // keys, V read from the cache rows (vrow[j]) in passes of 2 chunks, each
  // converted once for the HB heads: HB x 2 accumulators, 2 chunks and the
  // broadcast weight fit AVX2's 16 registers for HB up to 5 (a GQA group of
  // 5 in one pass: its V chunks converted once, not once per 2 heads).
  template <int HB>
  static void accumulate(const float* p, const uint8_t* const* vrow, bool q8, const float* corr, float* acc) {
    constexpr int kCP = 2;
    for (int c0 = 0; c0 < kNC; c0 += kCP) {
      __m256 part[HB][kCP];
#pragma GCC unroll 5
      for (int g = 0; g < HB; ++g)
#pragma GCC unroll 2
        for (int c = 0; c < kCP; ++c)
          part[g][c] = _mm256_mul_ps(_mm256_loadu_ps(acc + g * D + 8 * (c0 + c)), _mm256_set1_ps(corr[g]));
      for (int j = 0; j < kKeys; ++j) {
        __m256 v[kCP];
#pragma GCC unroll 2
        for (int c = 0; c < kCP; ++c) v[c] = row_chunk(vrow[j], q8, c0 + c);
#pragma GCC unroll 5
        for (int g = 0; g < HB; ++g) {
          const __m256 pg = _mm256_set1_ps(p[g * kKeys + j]);
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

  static constexpr int kHeadBatch = 5;

  static void accumulate_heads(int64_t G, const float* p, const uint8_t* const* vrow, bool q8, const float* corr,
                               float* acc) {
    int64_t g = 0;
    for (; g + kHeadBatch <= G; g += kHeadBatch) accumulate<kHeadBatch>(p + g * kKeys, vrow, q8, corr + g, acc + g * D);
    switch (G - g) {
      case 1: return accumulate<1>(p + g * kKeys, vrow, q8, corr + g, acc + g * D);
      case 2: return accumulate<2>(p + g * kKeys, vrow, q8, corr + g, acc + g * D);
      case 3: return accumulate<3>(p + g * kKeys, vrow, q8, corr + g, acc + g * D);
      case 4: return accumulate<4>(p + g * kKeys, vrow, q8, corr + g, acc + g * D);
      default: return;
    }
  }

  // The G query heads of one kv head over the tile (qf: their query rows
  // as query_for_k converts them; kt: the tile's K rows as f32; vrow: its V
  // rows in the cache; live[s]: the visible keys of sub-tile s), folded
  // into (M, S, acc). Three passes over the heads (scores, softmax
  // statistics, values), each head independent of the others within a
  // pass, so their latency chains overlap. ALiBi: dist holds the tile's
  // kKeys distances and slopes the G heads' slopes (both null without).
  static void heads(const AttentionJob& job, const float* qf, const float* kt, const uint8_t* const* vrow,
                    const uint32_t* live, const float* dist, const float* slopes, float* sc, float* M, float* S,
                    float* acc, RowPrefetcher& ahead) {
    const int64_t G = job.group;
    const __m256 scale = _mm256_set1_ps(job.scale), minus_inf = _mm256_set1_ps(-__builtin_inff());
    for (int64_t g = 0; g < G; ++g)
      for (int s = 0; s < kSub; ++s) {
        ahead.rows(1);
        __m256 v = _mm256_mul_ps(scores8(qf + g * D, kt + s * kTile * D), scale);
        if (job.softcap != 0.0f) v = softcapped(v, job.softcap);
        if (dist != nullptr)
          v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_set1_ps(slopes[g]), _mm256_load_ps(dist + s * kTile)));
        _mm256_store_ps(sc + g * kKeys + s * kTile, _mm256_blendv_ps(minus_inf, v, live_lanes(live[s])));
      }
    alignas(32) float corr[kMaxGroup];
    for (int64_t g = 0; g < G; ++g) {
      float* pg = sc + g * kKeys;
      __m256 mx = _mm256_load_ps(pg);
      for (int s = 1; s < kSub; ++s) mx = _mm256_max_ps(mx, _mm256_load_ps(pg + s * kTile));
      const float tile_max = hmax_ps(mx);  // finite: the tile has a live key
      const float m_new = tile_max > M[g] ? tile_max : M[g];
      // exp(M - m'): 1 where the maximum holds (most tiles), 0 on the
      // first live tile (M = -inf)
      corr[g] = m_new == M[g] ? 1.0f : _mm256_cvtss_f32(v_expf_avx2(_mm256_set1_ps(M[g] - m_new)));
      const __m256 mv = _mm256_set1_ps(m_new);
      __m256 sum = _mm256_setzero_ps();
      for (int s = 0; s < kSub; ++s) {
        const __m256 p = v_expf_avx2(_mm256_sub_ps(_mm256_load_ps(pg + s * kTile), mv));
        _mm256_store_ps(pg + s * kTile, p);
        sum = _mm256_add_ps(sum, p);
      }
      S[g] = S[g] * corr[g] + hsum_ps(sum);
      M[g] = m_new;
    }
    accumulate_heads(G, sc, vrow, job.v_type == GgmlType::Q8_0, corr, acc);
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

template <int D>
void DepthTile<D>::run(const AttentionJob& job, int64_t j0, int64_t j1, float* M, float* S, float* acc, bool resume) {
  const bool k_q8 = job.k_type == GgmlType::Q8_0;
  const int64_t G = job.group, Hkv = job.n_head_kv;
  thread_local std::vector<float> qf, kt, sc;
  qf.resize(size_t(job.n_head * D));
  kt.resize(size_t(kKeys * D));
  sc.resize(size_t(G * kKeys) + 8);
  float* scores = sc.data() + (8 - (reinterpret_cast<uintptr_t>(sc.data()) / 4) % 8) % 8;  // 32-byte aligned
  for (int64_t h = 0; h < job.n_head; ++h) query_for_k(job.q + h * D, k_q8, D, qf.data() + h * D);
  // A resumed range's (M, S, acc) hold the rows before j0: the tiles go on from there.
  if (!resume) start_depth_heads(job.n_head, D, M, S, acc);
  // Every kv head per tile: the tile's rows are read from memory once.
  walk_depth_tiles<kKeys, kTile>(job, j0, j1, [&](const DepthTileKeys<kKeys, kTile>& tile, RowPrefetcher& ahead) {
    const int n = tile.n;
    const uint8_t* vrow[kKeys];
    if (n < kKeys) {  // a short last tile: zero rows, masked (their weights are 0)
      std::fill(kt.begin() + n * D, kt.end(), 0.0f);
      std::fill(vrow + n, vrow + kKeys, kDepthZeroRow);
    }
    for (int64_t hk = 0; hk < Hkv; ++hk) {
      for (int jj = 0; jj < n; ++jj) {
        const int64_t row = tile.rows[jj] * Hkv + hk;
        row_to_f32(job.k + size_t(row) * size_t(job.k_head_bytes), k_q8, D, kt.data() + jj * D);
        vrow[jj] = job.v + size_t(row) * size_t(job.v_head_bytes);
      }
      const float* slopes = job.alibi_slopes != nullptr ? job.alibi_slopes + hk * G : nullptr;
      heads(job, qf.data() + hk * G * D, kt.data(), vrow, tile.live, tile.alibi, slopes, scores, M + hk * G,
            S + hk * G, acc + hk * G * D, ahead);
    }
  });
}

}  // namespace

bool depth_block_avx2(const AttentionJob& job, int64_t j0, int64_t j1, float* M, float* S, float* acc, bool resume) {
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
