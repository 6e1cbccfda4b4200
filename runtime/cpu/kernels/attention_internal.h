// Internal interface between attention.cpp (dispatch, masks, the portable
// kernels, the split-KV reduction) and attention_avx2.cpp / attention_avx512.cpp
// (the AVX2 and AVX-512 kernels).
// Plain declarations and POD structs only, for the reason given in
// internal.h; the one helper defined here has internal linkage.
#pragma once

#include <cmath>
#include <cstdint>

#include "runtime/cpu/kernels/kernels.h"

namespace vtc::cpu::detail {

// One attention call, resolved: shapes, cache layout and the visibility of
// every (query token, cache row) pair.
struct AttentionJob {
  const float* q = nullptr;    // [n_tokens][n_head][dk]
  const uint8_t* k = nullptr;  // physical rows of [n_head_kv][dk], f16 or f32
  const uint8_t* v = nullptr;  // physical rows of [n_head_kv][dv]
  float* out = nullptr;        // [n_tokens][n_head][dv]
  int64_t n_tokens = 0, n_head = 0, n_head_kv = 0, group = 1, dk = 0, dv = 0, n_kv = 0;
  bool f16 = true;    // K/V element type: f16, else f32 (when !typed)
  // Any other pair of cache types (a quantized or bf16 half, or f16 beside
  // f32): only the portable one-row loop runs (every SIMD entry point below
  // returns false), as the reference takes its generic one-chunk kernel.
  bool typed = false;
  GgmlType k_type = GgmlType::F16, v_type = GgmlType::F16;
  int64_t k_head_bytes = 0, v_head_bytes = 0;  // one kv head's K row, V row
  bool acc16 = true;  // one-row kernel: the V accumulator rounds to f16
  float scale = 1.0f;    // divided by softcap already when softcap != 0
  float softcap = 0.0f;
  const int32_t* page_table = nullptr;  // null: dense
  int64_t page_size = 0;
  // visible[t * n_kv + j] != 0 iff query token t may read cache row j;
  // first_visible[t] / last_visible[t] bound those rows (first > last: none).
  const uint8_t* visible = nullptr;
  const int64_t* first_visible = nullptr;
  const int64_t* last_visible = nullptr;
  int ref_lanes = 8;  // the reference build's SIMD width (8 or 16)
  const float* sinks = nullptr;  // [n_head] sink logits, or null
  bool depth_kernel = true;       // AttentionParams::depth_kernel
  // ALiBi (null without): slopes[n_head], and alibi_dist[t * n_kv + j] =
  // f16(-|q_pos[t] - k_pos[j]|); the score of (t, h, j) gains
  // slopes[h] * alibi_dist[t * n_kv + j] after the scale and softcap.
  const float* alibi_slopes = nullptr;
  const float* alibi_dist = nullptr;
};

// ALiBi: query token t's distance row (indexed by cache row), or null.
static inline const float* attention_alibi_row(const AttentionJob& job, int64_t t) {
  return job.alibi_dist == nullptr ? nullptr : job.alibi_dist + t * job.n_kv;
}
static inline float attention_alibi_slope(const AttentionJob& job, int64_t h) {
  return job.alibi_slopes == nullptr ? 0.0f : job.alibi_slopes[h];
}
// The score of (token t, head h, cache row j) plus its ALiBi bias (s itself
// without ALiBi), as the reference adds its mask: s + slope * mask.
static inline float attention_add_alibi(const AttentionJob& job, float s, int64_t t, int64_t h, int64_t j) {
  return job.alibi_slopes == nullptr ? s : s + job.alibi_slopes[h] * job.alibi_dist[t * job.n_kv + j];
}

static inline int64_t attention_physical_row(const AttentionJob& job, int64_t j) {
  return job.page_table == nullptr ? j : int64_t(job.page_table[j / job.page_size]) * job.page_size + j % job.page_size;
}

// Folds head h's sink logit into one row's running (M, S, acc) before the
// normalisation, as ggml's flash attention does after its loop over the
// cache rows: the sink joins the denominator with no value. A sink above
// the running maximum rescales acc and S (M becomes the sink); otherwise it
// adds exp(sink - M) to S.
static inline void attention_apply_sink(float sink, float& M, float& S, float* acc, int64_t dv) {
  float ms = 1.0f, vs = 1.0f;
  if (sink > M) {
    ms = std::exp(M - sink);
    M = sink;
    for (int64_t d = 0; d < dv; ++d) acc[d] *= ms;
  } else {
    vs = std::exp(sink - M);
  }
  S = S * ms + vs;
}

// The one-row (online softmax, row by row) kernel over cache rows [j0, j1)
// for a block of query rows: tokens [t0, t1) times the `group` query heads
// of kv head hk, row r = (t - t0) * group + g. It leaves each row's running
// maximum M[r], sum S[r] and unnormalised accumulator acc[r * dv ...]
// (f16 values as floats when acc16). Bit-identical to the per-row loop of
// ggml_compute_forward_flash_attn_ext_f16_one_chunk with the active
// FloatKernels. The AVX2 version handles f16 caches only (returns false
// otherwise, and when the TU is not built).
bool one_row_block_avx2(const AttentionJob& job, int64_t hk, int64_t t0, int64_t t1, int64_t j0, int64_t j1,
                        float* M, float* S, float* acc);

// The tiled f32 kernel (ggml_compute_forward_flash_attn_ext_tiled) for
// tokens [t0, t1) (at most kAttentionTileQ) of every query head of kv head
// hk; writes the normalised output rows. Returns false where not built.
bool tiled_block_avx2(const AttentionJob& job, int64_t hk, int64_t t0, int64_t t1);

// The AVX-512 kernels (attention_avx512.cpp): the same contracts and bits as
// the AVX2 ones above, for either reference width; attention.cpp calls them
// from Isa::Avx512Vnni up. Return false where not built (or, one-row: for
// an f32 cache). one_row_block_avx512 with resume continues from the given
// M, S and acc (the state after the rows before j0) instead of starting
// afresh; whole_rows prefetches the rows' K/V slices of every kv head (for
// a caller that runs the other heads over the same rows next).
bool one_row_block_avx512(const AttentionJob& job, int64_t hk, int64_t t0, int64_t t1, int64_t j0, int64_t j1,
                          float* M, float* S, float* acc, bool resume = false, bool whole_rows = false);
bool tiled_block_avx512(const AttentionJob& job, int64_t hk, int64_t t0, int64_t t1);

// Decode at depth (attention_depth_avx512.cpp): every query head (one query
// token) over cache rows [j0, j1) in f32, leaving (M, S, acc) per head
// ([n_head], [n_head][dv]) as one_row_block does per row. False where not
// built or for types it does not take (K and V each f16 or q8_0, equal
// head sizes a multiple of 32 up to 256).
// With resume it continues from the given (M, S, acc), the state after the
// rows before j0: a range cut at a multiple of kAttentionDepthSliceRows
// from its start gives the same tiles, and so the bits of one call.
bool depth_block_avx512(const AttentionJob& job, int64_t j0, int64_t j1, float* M, float* S, float* acc,
                        bool resume = false);
// The same contract at 8 lanes (attention_depth_avx2.cpp), for AVX2
// levels below Avx512Vnni.
bool depth_block_avx2(const AttentionJob& job, int64_t j0, int64_t j1, float* M, float* S, float* acc,
                      bool resume = false);
constexpr int64_t kAttentionDepthSliceRows = 256;  // a multiple of every head size's tile
// Cache rows from which a one-token decode takes that kernel.
constexpr int64_t kAttentionDepthMinKV = 1024;
// Query heads per kv head it takes (its softmax buffer).
constexpr int64_t kAttentionDepthMaxGroup = 128;

constexpr int64_t kAttentionTileQ = 64;   // GGML_FA_TILE_Q: query rows per tile, and the tiled-path threshold
constexpr int64_t kAttentionTileKV = 64;  // GGML_FA_TILE_KV: cache rows per tile
constexpr int64_t kAttentionSplitMinKV = 512;  // the reference's split-KV threshold on its padded cache view
constexpr int64_t kAttentionRefKVPad = 256;    // llama.cpp pads the cache view to 256 rows

// attention() with an explicit reference SIMD width (tests: both orders).
void attention_with_lanes(const float* q, const void* k, const void* v, const int32_t* q_pos, const int32_t* kv_pos,
                          const AttentionParams& p, float* out, ThreadPool& pool, int ref_lanes);

}  // namespace vtc::cpu::detail
