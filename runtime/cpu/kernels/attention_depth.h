// What the decode-at-depth kernels (attention_depth_avx512.cpp,
// attention_depth_avx2.cpp) share besides their arithmetic: the page table
// walk and the cache-row prefetcher. Plain C++ plus an SSE prefetch, so
// each kernel file may include it whatever its instruction set; the
// anonymous namespace keeps each copy in its own file (see internal.h).
#pragma once

#include <xmmintrin.h>

#include <cstdint>

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

// Prefetches cache rows [next, end) into L2 (K and V of every kv head, a
// row's whole lines) a few rows at a time, spread through the compute of
// the tile before them. Issued all at once at the start of a tile (1024
// lines on the bench model), they waited in the load queue for miss
// buffers and stalled the compute behind them: the step read its rows at
// about 8 GB/s per thread, half what one core streams.
struct RowPrefetcher {
  const AttentionJob& job;
  int64_t next, end;
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
      for (int64_t b = 0; b < k_bytes; b += 64) _mm_prefetch(k + b, _MM_HINT_T1);
      for (int64_t b = 0; b < v_bytes; b += 64) _mm_prefetch(v + b, _MM_HINT_T1);
    }
  }
};

}  // namespace
}  // namespace vtc::cpu::detail
