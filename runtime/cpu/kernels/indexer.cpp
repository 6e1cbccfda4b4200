// The QSA lightning indexer (indexer.h; docs/ir.md: indexer_select),
// following llama.cpp's qwen4exp (src/models/qwen4exp.cpp, build_qsa_top_k,
// and set_input_qsa in src/llama-memory-hybrid-idx.cpp) on its CPU backend.
//
// Per sequence of the batch (its tokens may be interleaved with others'):
//   n_blocks = max over its tokens of floor((pos + 1) / r)
//   for each complete block b < n_blocks (computed once, not per query):
//     key_b = (((row[b r] + row[b r + 1]) + ...) + row[b r + r - 1]) * (1/r)
//             (the cached raw rows as f32; ggml_add of slices, ggml_scale)
//     key_b = rms_norm(key_b, eps) * k_norm      (the rms_norm op's kernel)
//     key_b = rope(key_b, position b r)          (every multi-rope component b r)
//   for each of its tokens t (position p):
//     score_b = relu(q[t,0]·key_b) + relu(q[t,1]·key_b) + ...   (heads in order)
//     candidate c < L = max(W, p + 1), W = top_k + r - 1, has the value
//       score_{c/r}   for c < floor((p+1)/r) r   (a complete block)
//       +inf          for the rest up to p       (the unfinished tail: kept)
//       -inf          after p                    (not visible)
//     the first W candidates of libstdc++'s partial_sort by "greater value"
//     (heap_select_top: the reference's CPU top_k, ties included), minus
//     those at -inf, ascending, padded with -1.
// The reference adds a finite 1e9 to tail cells where this uses +inf: the
// tail (at most r - 1 <= W cells) is always selected either way, and the
// order among complete blocks is the same.
//
// The dot products follow ggml_vec_dot_f32 (the reference's f32 mul_mat
// without llamafile), through detail::vec_dot_f32_ref, the same reference
// order the delta rule uses. Compiled with -ffp-contract=off so the sums
// written here stay unfused.
#include "runtime/cpu/kernels/indexer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "frontends/gguf/dequant.h"
#include "runtime/cpu/kernels/internal.h"
#include "support/error.h"
#include "support/kv_cache_type.h"

namespace vtc::cpu {

namespace {

// Cached row `position` of one sequence, as f32 (the reference reads it
// with get_rows, which converts f16/bf16 exactly and dequantizes a KV cache
// type's blocks).
void load_row(const IndexerParams& p, const IndexerTable& table, int64_t position, float* dst) {
  const int64_t row = int64_t(table.pages[position / p.page_size]) * p.page_size + position % p.page_size;
  const uint64_t row_bytes = *ggml_bytes_for(p.cache_type, uint64_t(p.head_dim));
  const uint8_t* src = static_cast<const uint8_t*>(p.cache) + uint64_t(row) * row_bytes;
  if (p.cache_type == GgmlType::F16) {
    const float* tab = detail::fp16_table();
    for (int64_t i = 0; i < p.head_dim; ++i) dst[i] = tab[reinterpret_cast<const uint16_t*>(src)[i]];
    return;
  }
  dequantize_row(p.cache_type, src, dst, p.head_dim);
}

// keys [n_blocks][D]: block b pooled, normed and roped at position b r.
void pool_block_keys(const IndexerParams& p, const IndexerTable& table, const float* k_norm, int64_t n_blocks,
                     float* keys, ThreadPool& pool) {
  const int64_t d = p.head_dim, r = p.ratio;
  const bool multi = p.rope.mode == RopeMode::Multi || p.rope.mode == RopeMode::IMulti;
  pool.parallel_for(n_blocks, [&](int64_t begin, int64_t end) {
    std::vector<float> row(size_t(d), 0.0f);
    std::vector<int32_t> positions;
    for (int64_t b = begin; b < end; ++b) {
      float* key = keys + b * d;
      load_row(p, table, b * r, key);
      for (int64_t i = 1; i < r; ++i) {
        load_row(p, table, b * r + i, row.data());
        add(key, row.data(), key, d);
      }
      scale(key, 1.0f / float(r), key, d);
      positions.insert(positions.end(), multi ? 4 : 1, int32_t(b * r));
    }
    float* first = keys + begin * d;
    rms_norm(first, k_norm, p.eps, end - begin, d, first);
    rope(first, end - begin, 1, d, positions.data(), p.rope, first);
  });
}

struct Scratch {
  std::vector<float> score, value;
  std::vector<int32_t> idx;
};

// score[b] = sum over heads of relu(q_h · key_b), b < n_full.
void block_scores(const float* q, const float* keys, int64_t n_full, const IndexerParams& p, Scratch& s) {
  s.score.resize(size_t(n_full));
  for (int64_t b = 0; b < n_full; ++b) {
    float sum = 0.0f;
    for (int64_t h = 0; h < p.n_head; ++h) {
      const float x = detail::vec_dot_f32_ref(q + h * p.head_dim, keys + b * p.head_dim, p.head_dim);
      const float relu = x > 0.0f ? x : 0.0f;  // ggml_vec_relu_f32
      sum = h == 0 ? relu : sum + relu;
    }
    s.score[size_t(b)] = sum;
  }
}

// One token's row of the result (see the file comment).
void select_one(const float* q, int64_t position, const float* keys, const IndexerParams& p, Scratch& s,
                int32_t* row) {
  const int64_t r = p.ratio, width = p.top_k + r - 1;
  const int64_t n_full = (position + 1) / r, n = std::max(width, position + 1);
  block_scores(q, keys, n_full, p, s);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  s.value.resize(size_t(n));
  s.idx.resize(size_t(n));
  for (int64_t c = 0; c < n; ++c) {
    s.value[size_t(c)] = c < n_full * r ? s.score[size_t(c / r)] : c <= position ? kInf : -kInf;
    s.idx[size_t(c)] = int32_t(c);
  }
  heap_select_top(s.value.data(), s.idx.data(), width, n);
  int64_t kept = 0;
  for (int64_t i = 0; i < width; ++i)
    if (s.value[size_t(s.idx[size_t(i)])] > -kInf) row[kept++] = s.idx[size_t(i)];
  std::sort(row, row + kept);
  std::fill(row + kept, row + width, -1);
}

void check_params(const IndexerParams& p) {
  if (p.n_tokens < 0 || p.n_head <= 0 || p.head_dim <= 0 || p.ratio < 1 || p.top_k < 1 || p.page_size <= 0)
    throw Error(fmt::format("indexer_select: bad shape (tokens {}, heads {}, head dim {}, ratio {}, top_k {}, page {})",
                            p.n_tokens, p.n_head, p.head_dim, p.ratio, p.top_k, p.page_size));
  if (!is_kv_cache_type(p.cache_type) || !ggml_bytes_for(p.cache_type, uint64_t(p.head_dim)))
    throw Error(fmt::format("indexer_select: cache type {} is not a KV cache type whose blocks tile the head size {} ({})",
                            ggml_type_name(p.cache_type), p.head_dim, kv_cache_type_list()));
}

}  // namespace

void indexer_select(const float* q, const float* k_norm, const int32_t* pos, const int32_t* seq,
                    const IndexerTable* tables, int64_t n_seqs, const IndexerParams& p, int32_t* out,
                    ThreadPool& pool) {
  check_params(p);
  for (int64_t t = 0; t < p.n_tokens; ++t)
    if (pos[t] < 0) throw Error(fmt::format("indexer_select: negative position {}", pos[t]));
  const auto members = detail::tokens_by_sequence(seq, p.n_tokens, n_seqs, "indexer_select");
  const int64_t q_row = p.n_head * p.head_dim, width = p.top_k + p.ratio - 1;
  std::vector<float> keys;
  for (size_t s = 0; s < members.size(); ++s) {
    const std::vector<int64_t>& tokens = members[s];
    if (tokens.empty()) continue;
    int64_t n_blocks = 0;
    for (int64_t t : tokens) n_blocks = std::max<int64_t>(n_blocks, (int64_t(pos[t]) + 1) / p.ratio);
    if (n_blocks * p.ratio > tables[s].n_pages * p.page_size)
      throw Error(fmt::format("indexer_select: sequence {} maps {} pages, too few for position {}", s,
                              tables[s].n_pages, n_blocks * p.ratio - 1));
    keys.resize(size_t(n_blocks * p.head_dim));
    pool_block_keys(p, tables[s], k_norm, n_blocks, keys.data(), pool);
    pool.parallel_for(int64_t(tokens.size()), [&](int64_t begin, int64_t end) {
      Scratch scratch;
      for (int64_t i = begin; i < end; ++i) {
        const int64_t t = tokens[size_t(i)];
        select_one(q + t * q_row, pos[t], keys.data(), p, scratch, out + t * width);
      }
    });
  }
}

}  // namespace vtc::cpu
