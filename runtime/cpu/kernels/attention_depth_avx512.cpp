// Decode attention at depth (one query row per sequence over 1024+ cached
// keys; attention.cpp, use_depth_kernel), AVX-512: the keys in tiles of 16,
// each K and V row converted to f32 once for every query head of its GQA
// group, the tile's 16 scores of a head exponentiated together
// (ggml_v_expf, 16 lanes), the V accumulator in f32.
//
// The reference's one-row loop (ggml_compute_forward_flash_attn_ext_f16)
// updates the running maximum and, for an f16 V, rounds its accumulator to
// f16 at every key: a long dependency chain through a scalar expf and
// conversions per (key, head), which at 16k keys is most of a decode step.
// At this depth issue 43 allows any order whose logits stay within rel-L2
// 1e-3 of llama.cpp's; this one:
//   per head g and tile: s_j = scale * (q_g . k_j) (f32 FMAs in 16-lane
//     chunks, then reduce_add), masked keys -inf (softcap: scalar tanh);
//     m' = max(M, max_j s_j); c = exp(M - m'); p_j = exp(s_j - m');
//     S = S c + sum_j p_j; acc = acc c + sum_j p_j v_j (f32);
// with the query converted as the reference converts it for K's dot (f16
// rounding, or q8_0 codes times their scale: an f32 dot of those codes
// with K's codes is their exact integer sum before the scales), and K and V
// rows as the reference reads them (f16 widened, q8_0 codes times d).
// The split-KV framework around it (chunks per thread, sinks on chunk 0,
// the merge) is attention.cpp's. Types: K and V each f16 or q8_0, head
// sizes equal, a multiple of 16 up to 256; no selection.
#include "runtime/cpu/kernels/avx512_common.h"

#include <cmath>
#include <vector>

#include "runtime/cpu/kernels/attention_internal.h"

namespace vtc::cpu::detail {
namespace {

constexpr int kTile = 16;
constexpr int64_t kMaxDim = 256;

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
  __m512 b[8], c[4], d[2];
  for (int i = 0; i < 8; ++i)
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44), _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE));
  for (int i = 0; i < 4; ++i)
    c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88), _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xDD));
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

// acc = acc * corr + sum_j p_j v_j over a tile, D = 16 * NC: every 16-value
// chunk of the row in its own register, and the keys in two halves with
// their own accumulators, so the FMAs form 2 * NC independent chains of 8
// (one chain per chunk through 16 keys would wait on the FMA latency at
// every key: most of the step at depth).
template <int NC>
void accumulate_values_n(const float* pj, const float* vt, float corr, float* ag) {
  constexpr int D = 16 * NC;
  constexpr int kHalves = NC <= 8 ? 2 : 1;
  __m512 part[kHalves][NC];
  const __m512 cv = _mm512_set1_ps(corr);
#pragma GCC unroll 16
  for (int c = 0; c < NC; ++c) {
    part[0][c] = _mm512_mul_ps(_mm512_loadu_ps(ag + 16 * c), cv);
    if constexpr (kHalves == 2) part[1][c] = _mm512_setzero_ps();
  }
#pragma GCC unroll 16
  for (int jj = 0; jj < kTile; ++jj) {
    const __m512 p = _mm512_set1_ps(pj[jj]);
    __m512* into = part[jj * kHalves / kTile];
#pragma GCC unroll 16
    for (int c = 0; c < NC; ++c) into[c] = _mm512_fmadd_ps(p, _mm512_loadu_ps(vt + jj * D + 16 * c), into[c]);
  }
#pragma GCC unroll 16
  for (int c = 0; c < NC; ++c)
    _mm512_storeu_ps(ag + 16 * c, kHalves == 2 ? _mm512_add_ps(part[0][c], part[kHalves - 1][c]) : part[0][c]);
}

void accumulate_values(int64_t d, const float* pj, const float* vt, float corr, float* ag) {
  switch (d / 16) {
    case 2: return accumulate_values_n<2>(pj, vt, corr, ag);
    case 4: return accumulate_values_n<4>(pj, vt, corr, ag);
    case 6: return accumulate_values_n<6>(pj, vt, corr, ag);
    case 8: return accumulate_values_n<8>(pj, vt, corr, ag);
    case 10: return accumulate_values_n<10>(pj, vt, corr, ag);
    case 12: return accumulate_values_n<12>(pj, vt, corr, ag);
    case 14: return accumulate_values_n<14>(pj, vt, corr, ag);
    default: return accumulate_values_n<16>(pj, vt, corr, ag);  // depth_block_avx512 takes d <= 256, d % 32 == 0
  }
}

// The 16 scores of query row qg against a tile's K rows (kt, f32),
// scaled, soft-capped, the keys outside `live` -inf.
__m512 tile_scores(const AttentionJob& job, const float* qg, const float* kt, uint32_t live) {
  static const __m512i order = key_order();
  const int64_t D = job.dk;
  __m512 a[kTile];
#pragma GCC unroll 16
  for (int jj = 0; jj < kTile; ++jj) a[jj] = _mm512_setzero_ps();
  for (int64_t i = 0; i < D; i += 16) {
    const __m512 qv = _mm512_loadu_ps(qg + i);
#pragma GCC unroll 16
    for (int jj = 0; jj < kTile; ++jj) a[jj] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(kt + jj * D + i), a[jj]);
  }
  __m512 scores = _mm512_mul_ps(_mm512_permutexvar_ps(order, sum16(a)), _mm512_set1_ps(job.scale));
  if (job.softcap != 0.0f) {
    alignas(64) float s[kTile];
    _mm512_store_ps(s, scores);
    for (int jj = 0; jj < kTile; ++jj) s[jj] = job.softcap * std::tanh(s[jj]);
    scores = _mm512_load_ps(s);
  }
  return _mm512_mask_blend_ps(__mmask16(live), _mm512_set1_ps(-__builtin_inff()), scores);
}

constexpr int kHeadBatch = 8;

// The G query heads of kv head hk over one tile (kt, vt: its 16 K and V
// rows as f32, `live` the visible ones), folded into (M, S, acc). In three
// passes over up to 8 heads, each pass's heads independent of each other:
// the scores, the softmax statistics, the values. Head by head, every head
// would wait out one chain of latencies (the reduction tree, max, exp,
// then the value FMAs) before the next began.
void tile_heads(const AttentionJob& job, const float* qf, const float* kt, const float* vt, uint32_t live, float* M,
                float* S, float* acc) {
  const int64_t G = job.group, D = job.dk;
  for (int64_t g0 = 0; g0 < G; g0 += kHeadBatch) {
    const int n = int(std::min<int64_t>(kHeadBatch, G - g0));
    __m512 scores[kHeadBatch];
    alignas(64) float pj[kHeadBatch][kTile];
    float corr[kHeadBatch];
    for (int g = 0; g < n; ++g) scores[g] = tile_scores(job, qf + (g0 + g) * D, kt, live);
    for (int g = 0; g < n; ++g) {
      float& m = M[g0 + g];
      const float m_new = std::fmax(m, _mm512_reduce_max_ps(scores[g]));
      corr[g] = std::exp(m - m_new);  // 0 for the first live tile
      const __m512 p = v_expf_l16(_mm512_sub_ps(scores[g], _mm512_set1_ps(m_new)));
      _mm512_store_ps(pj[g], p);
      S[g0 + g] = S[g0 + g] * corr[g] + reduce_add(p);
      m = m_new;
    }
    for (int g = 0; g < n; ++g) accumulate_values(D, pj[g], vt, corr[g], acc + (g0 + g) * D);
  }
}

// Prefetches the K and V rows (every kv head) of the tile at t0.
void prefetch_tile(const AttentionJob& job, int64_t t0, int64_t j1) {
  const int64_t k_bytes = job.n_head_kv * job.k_head_bytes, v_bytes = job.n_head_kv * job.v_head_bytes;
  for (int64_t j = t0; j < std::min(j1, t0 + kTile); ++j) {
    const int64_t row = attention_physical_row(job, j);
    const char* k = reinterpret_cast<const char*>(job.k) + row * k_bytes;
    const char* v = reinterpret_cast<const char*>(job.v) + row * v_bytes;
    for (int64_t b = 0; b < k_bytes; b += 64) _mm_prefetch(k + b, _MM_HINT_T1);
    for (int64_t b = 0; b < v_bytes; b += 64) _mm_prefetch(v + b, _MM_HINT_T1);
  }
}

}  // namespace

bool depth_block_avx512(const AttentionJob& job, int64_t j0, int64_t j1, float* M, float* S, float* acc) {
  const bool k_q8 = job.k_type == GgmlType::Q8_0, v_q8 = job.v_type == GgmlType::Q8_0;
  if ((!k_q8 && job.k_type != GgmlType::F16) || (!v_q8 && job.v_type != GgmlType::F16)) return false;
  const int64_t G = job.group, D = job.dk, Hkv = job.n_head_kv;
  if (job.dv != D || D % 32 != 0 || D > kMaxDim || job.n_tokens != 1) return false;
  thread_local std::vector<float> qf, kt, vt;
  qf.resize(size_t(job.n_head * D));
  kt.resize(size_t(kTile * D));
  vt.resize(size_t(kTile * D));
  for (int64_t h = 0; h < job.n_head; ++h) {
    query_for_k(job.q + h * D, k_q8, D, qf.data() + h * D);
    M[h] = -__builtin_inff(), S[h] = 0.0f;
    for (int64_t i = 0; i < D; ++i) acc[h * D + i] = 0.0f;
  }
  const uint8_t* vis = job.visible;
  // Tiles of 16 positions, every kv head per tile: the rows of a tile (all
  // heads side by side) are read from memory once. Each head reads 128 of
  // a row's bytes at the row stride, a pattern the hardware prefetcher
  // does not follow well: the next tile's rows (whole, every head) are
  // prefetched into L2 (the conversions alone, 20 layers of the bench
  // model at 4096 keys, f16: 5.8 ms without, 3.9 ms with).
  prefetch_tile(job, j0, j1);
  for (int64_t t0 = j0; t0 < j1; t0 += kTile) {
    prefetch_tile(job, t0 + kTile, j1);
    const int n = int(std::min<int64_t>(kTile, j1 - t0));
    uint32_t live = 0;
    int64_t rows[kTile];
    for (int jj = 0; jj < n; ++jj) {
      live |= uint32_t(vis[t0 + jj] != 0) << jj;
      rows[jj] = attention_physical_row(job, t0 + jj);
    }
    if (live == 0) continue;
    // A short last tile: zero rows, masked (their weights are 0), so every
    // loop runs over 16 keys in registers.
    if (n < kTile) {
      std::fill(kt.begin() + n * D, kt.end(), 0.0f);
      std::fill(vt.begin() + n * D, vt.end(), 0.0f);
    }
    for (int64_t hk = 0; hk < Hkv; ++hk) {
      for (int jj = 0; jj < n; ++jj) {
        row_to_f32(job.k + size_t(rows[jj] * Hkv + hk) * size_t(job.k_head_bytes), k_q8, D, kt.data() + jj * D);
        row_to_f32(job.v + size_t(rows[jj] * Hkv + hk) * size_t(job.v_head_bytes), v_q8, D, vt.data() + jj * D);
      }
      tile_heads(job, qf.data() + hk * G * D, kt.data(), vt.data(), live, M + hk * G, S + hk * G, acc + hk * G * D);
    }
  }
  return true;
}

}  // namespace vtc::cpu::detail
