// What the decode-at-depth kernels (attention_depth_avx512.cpp,
// attention_depth_avx2.cpp) share besides their arithmetic: the page table
// walk and the cache-row prefetcher. Plain C++ plus an SSE prefetch, so
// each kernel file may include it whatever its instruction set; the
// anonymous namespace keeps each copy in its own file (see internal.h).
#pragma once

#include <xmmintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "runtime/cpu/kernels/attention_internal.h"

namespace vtc::cpu::detail {
namespace {

// rows[i] = the physical row of cache position t0 + i, i < n: one page
// table lookup per page, not a division per position.
inline void physical_rows(const AttentionJob& job, int64_t t0, int n, int64_t* rows) {
  for (int i = 0; i < n;) {
    const int64_t first = attention_physical_row(job, t0 + i);
    const int64_t run = job.page_table == nullptr ? n - i : job.page_size - (t0 + i) % job.page_size;
    for (int64_t r = 0; r < run && i < n; ++r, ++i) rows[i] = first + r;
  }
}

// Prefetches cache rows [next, end) into L2, or into L1 and L2 (into_l1),
// K and V of every kv head, a row's whole lines, a few rows at a time,
// spread through the compute of the tile before them. Issued all at once
// at the start of a tile (1024 lines on the bench model), they waited in
// the load queue for miss buffers and stalled the compute behind them: the
// step read its rows at about 8 GB/s per thread, half what one core
// streams. Into L1 suits the AVX-512 kernel on Zen 5 (its attention alone
// at 16384 keys from DRAM, 2 threads, 12 pairs alternated: f16 12.0-15.2
// ms against 13.2-17.8 into L2, q8_0 8.6-11.7 against 8.6-14.4); the AVX2
// kernel there was even, and it keeps L2 (its Zen 3 figures were taken so).
struct RowPrefetcher {
  const AttentionJob& job;
  int64_t next, end;
  bool into_l1 = false;
  int64_t phys = 0, run = 0;  // the physical row of `next`, and the positions left on its page
  void rows(int64_t n) {
    const int64_t k_bytes = job.n_head_kv * job.k_head_bytes, v_bytes = job.n_head_kv * job.v_head_bytes;
    for (; n > 0 && next < end; --n, ++next, ++phys, --run) {
      if (run == 0) {
        phys = attention_physical_row(job, next);
        run = job.page_table == nullptr ? end - next : job.page_size - next % job.page_size;
      }
      const char* k = reinterpret_cast<const char*>(job.k) + phys * k_bytes;
      const char* v = reinterpret_cast<const char*>(job.v) + phys * v_bytes;
      if (into_l1) {
        for (int64_t b = 0; b < k_bytes; b += 64) _mm_prefetch(k + b, _MM_HINT_T0);
        for (int64_t b = 0; b < v_bytes; b += 64) _mm_prefetch(v + b, _MM_HINT_T0);
      } else {
        for (int64_t b = 0; b < k_bytes; b += 64) _mm_prefetch(k + b, _MM_HINT_T1);
        for (int64_t b = 0; b < v_bytes; b += 64) _mm_prefetch(v + b, _MM_HINT_T1);
      }
    }
  }
};

// The running (M, S, acc) of n_head heads of `d` values, empty: before the
// first of a range's rows (a resumed range keeps the ones it is given).
inline void start_depth_heads(int64_t n_head, int64_t d, float* M, float* S, float* acc) {
  std::fill(M, M + n_head, -__builtin_inff());
  std::fill(S, S + n_head, 0.0f);
  std::fill(acc, acc + n_head * d, 0.0f);
}

// One tile of the depth kernels' walk over the cache: positions
// [t0, t0 + n), n <= Keys; live[s] bit i: key i of sub-tile s (Lanes keys
// each) is visible; rows: their physical rows; alibi: their ALiBi
// distances (dist), or null without ALiBi.
template <int Keys, int Lanes>
struct DepthTileKeys {
  int64_t t0 = 0;
  int n = 0;
  uint32_t live[Keys / Lanes];
  int64_t rows[Keys];
  alignas(64) float dist[Keys];
  const float* alibi = nullptr;
};

// Walks cache rows [j0, j1) in tiles of Keys positions and calls
// visit(tile, ahead) for each tile with a visible key. The next tile's
// rows (whole, every kv head) are prefetched (RowPrefetcher) while visit computes
// this one (it advances `ahead` a row at a time): each head reads its
// slice of a row at the row stride, a pattern the hardware prefetcher does
// not follow well.
template <int Keys, int Lanes, bool IntoL1 = false, class Visit>
void walk_depth_tiles(const AttentionJob& job, int64_t j0, int64_t j1, Visit&& visit) {
  RowPrefetcher ahead{job, j0, std::min(j1, j0 + Keys), IntoL1};
  ahead.rows(Keys);
  DepthTileKeys<Keys, Lanes> tile;
  for (int64_t t0 = j0; t0 < j1; t0 += Keys) {
    ahead.rows(Keys);  // the rest of this tile's, where the last one's compute did not reach
    ahead.end = std::min(j1, t0 + 2 * Keys);
    ahead.run = 0;  // `end` moved: a run without a page table ended at the old one
    tile.t0 = t0;
    tile.n = int(std::min<int64_t>(Keys, j1 - t0));
    std::fill(tile.live, tile.live + Keys / Lanes, 0u);
    for (int jj = 0; jj < tile.n; ++jj) tile.live[jj / Lanes] |= uint32_t(job.visible[t0 + jj] != 0) << (jj % Lanes);
    uint32_t any = 0;
    for (uint32_t l : tile.live) any |= l;
    if (any == 0) continue;
    physical_rows(job, t0, tile.n, tile.rows);
    std::fill(tile.dist, tile.dist + Keys, 0.0f);
    if (job.alibi_dist != nullptr)
      for (int jj = 0; jj < tile.n; ++jj) tile.dist[jj] = job.alibi_dist[t0 + jj];
    tile.alibi = job.alibi_dist != nullptr ? tile.dist : nullptr;
    visit(tile, ahead);
  }
}

// The tile's K and V rows for kv head 0 (head hk's are hk head sizes
// further) into krow[0..Keys) and vrow[0..Keys). A short last tile repeats
// its last row: masked, so its weight is exactly 0 (the kernels' exp of
// -inf), and read in bounds for every kv head.
template <int Keys, int Lanes>
void depth_tile_rows(const AttentionJob& job, const DepthTileKeys<Keys, Lanes>& tile, const uint8_t** krow,
                     const uint8_t** vrow) {
  for (int jj = 0; jj < Keys; ++jj) {
    const int64_t row = tile.rows[std::min(jj, tile.n - 1)] * job.n_head_kv;
    krow[jj] = job.k + size_t(row) * size_t(job.k_head_bytes);
    vrow[jj] = job.v + size_t(row) * size_t(job.v_head_bytes);
  }
}

// f(g, batch) for the heads [g, g + batch) of a group of G, in batches of
// at most MaxBatch, as even as they go (7 heads at most 6 a batch are 4 +
// 3, not 6 + 1: a batch of one head has the fewest independent chains);
// the batch size is a std::integral_constant, for the kernels' templates.
template <int N, class F>
void depth_call_batch(int hb, int64_t g, F& f) {
  if constexpr (N > 1)
    if (hb < N) return depth_call_batch<N - 1>(hb, g, f);
  f(g, std::integral_constant<int, N>{});
}
template <int MaxBatch, class F>
void depth_head_batches(int64_t G, F&& f) {
  const int64_t n = (G + MaxBatch - 1) / MaxBatch;
  for (int64_t b = 0, g = 0; b < n; ++b) {
    const int hb = int((G - g) / (n - b));
    depth_call_batch<MaxBatch>(hb, g, f);
    g += hb;
  }
}

// The depth kernels' entry (depth_block_avx512's contract): runs
// Tile<D, K is q8_0, V is q8_0>::run for the job's head size and cache
// types, or returns false where no instance takes the job (other types,
// unequal head sizes, several tokens, too large a group).
template <template <int, bool, bool> class Tile, int D>
void run_depth_types(const AttentionJob& job, int64_t j0, int64_t j1, float* M, float* S, float* acc, bool resume) {
  const bool k_q8 = job.k_type == GgmlType::Q8_0, v_q8 = job.v_type == GgmlType::Q8_0;
  if (k_q8 && v_q8) return Tile<D, true, true>::run(job, j0, j1, M, S, acc, resume);
  if (k_q8) return Tile<D, true, false>::run(job, j0, j1, M, S, acc, resume);
  if (v_q8) return Tile<D, false, true>::run(job, j0, j1, M, S, acc, resume);
  Tile<D, false, false>::run(job, j0, j1, M, S, acc, resume);
}
template <template <int, bool, bool> class Tile>
bool run_depth_kernel(const AttentionJob& job, int64_t j0, int64_t j1, float* M, float* S, float* acc, bool resume) {
  const bool k_q8 = job.k_type == GgmlType::Q8_0, v_q8 = job.v_type == GgmlType::Q8_0;
  if ((!k_q8 && job.k_type != GgmlType::F16) || (!v_q8 && job.v_type != GgmlType::F16)) return false;
  if (job.dv != job.dk || job.n_tokens != 1 || job.group > kAttentionDepthMaxGroup) return false;
  switch (job.dk) {
    case 32: run_depth_types<Tile, 32>(job, j0, j1, M, S, acc, resume); return true;
    case 64: run_depth_types<Tile, 64>(job, j0, j1, M, S, acc, resume); return true;
    case 96: run_depth_types<Tile, 96>(job, j0, j1, M, S, acc, resume); return true;
    case 128: run_depth_types<Tile, 128>(job, j0, j1, M, S, acc, resume); return true;
    case 160: run_depth_types<Tile, 160>(job, j0, j1, M, S, acc, resume); return true;
    case 192: run_depth_types<Tile, 192>(job, j0, j1, M, S, acc, resume); return true;
    case 224: run_depth_types<Tile, 224>(job, j0, j1, M, S, acc, resume); return true;
    case 256: run_depth_types<Tile, 256>(job, j0, j1, M, S, acc, resume); return true;
    default: return false;
  }
}

}  // namespace
}  // namespace vtc::cpu::detail
