// The QSA lightning indexer of qwen4exp (docs/ir.md: indexer_select): per
// query token, the cached positions its attention may read. See indexer.cpp
// for the algorithm and how it follows llama.cpp.
#pragma once

#include <cstdint>

#include "runtime/cpu/kernels/kernels.h"
#include "runtime/cpu/thread_pool.h"

namespace vtc::cpu {

// One step of libstdc++'s __adjust_heap followed by its __push_heap
// (bits/stl_heap.h, GCC 12) on the heap h[0, len) ordered by
// comp(a, b) = value[a] > value[b]: the hole at `hole` sinks to a leaf along
// the "smaller" children, then `item` rises from there, no higher than `hole`.
inline void heap_adjust_top(const float* value, int32_t* h, int64_t hole, int64_t len, int32_t item) {
  const int64_t top = hole;
  int64_t child = hole;
  while (child < (len - 1) / 2) {
    child = 2 * (child + 1);
    if (value[h[child]] > value[h[child - 1]]) child--;
    h[hole] = h[child];
    hole = child;
  }
  if ((len & 1) == 0 && child == (len - 2) / 2) {
    child = 2 * (child + 1);
    h[hole] = h[child - 1];
    hole = child - 1;
  }
  int64_t parent = (hole - 1) / 2;
  while (hole > top && value[h[parent]] > value[item]) {
    h[hole] = h[parent];
    hole = parent;
    parent = (hole - 1) / 2;
  }
  h[hole] = item;
}

// The first half of std::partial_sort(idx, idx + width, idx + n,
// [&](int a, int b) { return value[a] > value[b]; }) with libstdc++ (its
// __heap_select: make_heap on [0, width), then every later candidate that
// beats the heap's root replaces it). Afterwards idx[0, width) holds the
// same candidates, in heap order, as that partial_sort leaves sorted: ties
// resolve exactly as in the reference's CPU top_k. Plain loops only, so the
// CUDA kernel can mirror it line by line. idx holds candidate ids (usually
// 0..n-1) on entry; 1 <= width <= n.
inline void heap_select_top(const float* value, int32_t* idx, int64_t width, int64_t n) {
  if (width >= 2) {
    for (int64_t parent = (width - 2) / 2;; --parent) {
      heap_adjust_top(value, idx, parent, width, idx[parent]);
      if (parent == 0) break;
    }
  }
  for (int64_t i = width; i < n; ++i) {
    if (value[idx[i]] > value[idx[0]]) {  // __pop_heap(first, middle, i)
      const int32_t item = idx[i];
      idx[i] = idx[0];
      heap_adjust_top(value, idx, 0, width, item);
    }
  }
}

struct IndexerParams {
  int64_t n_tokens = 0;
  int64_t n_head = 0;    // indexer query heads
  int64_t head_dim = 0;  // D
  int64_t ratio = 4;     // r, positions per pooled block
  int64_t top_k = 0;     // the result has top_k + ratio - 1 columns
  float eps = 1e-6f;     // of the pooled keys' rms_norm
  RopeParams rope;       // applied to each pooled key at its block's start
  // The side cache: one row of D values per position, of a KV cache type
  // (support/kv_cache_type.h),
  // row j of a sequence at physical row page_table[j / page_size] *
  // page_size + j % page_size of `cache`.
  const void* cache = nullptr;
  GgmlType cache_type = GgmlType::F32;
  int64_t page_size = 0;
};

// One sequence's page table (n_pages pages of page_size positions).
struct IndexerTable {
  const int32_t* pages = nullptr;
  int64_t n_pages = 0;
};

// q [n_tokens][n_head][D] f32 (normed, roped), k_norm [D], pos and seq
// [n_tokens]; tables[s] is sequence s's page table (s < n_seqs). Reads the
// keys already in the cache (the caller stores the step's rows first) and
// writes out [n_tokens][top_k + ratio - 1]: per token the selected positions
// ascending, then -1. Throws vtc::Error for a bad sequence index, position
// or shape, or a table too short for a position.
void indexer_select(const float* q, const float* k_norm, const int32_t* pos, const int32_t* seq,
                    const IndexerTable* tables, int64_t n_seqs, const IndexerParams& params, int32_t* out,
                    ThreadPool& pool);

}  // namespace vtc::cpu
