// Attention for one sequence (causal, or bidirectional for an encoder:
// params.causal), following ggml's CPU flash attention
// (ggml_compute_forward_flash_attn_ext_f16 and the kernels it picks), which
// llama.cpp uses on the CPU by default. Three paths, chosen as the reference
// chooses them:
//
// * one-row kernel (fewer than 64 query rows; decode with a short cache):
//     for each query row (token t, head h), with kv head h / (n_head/n_head_kv):
//       q is converted to the K storage type (f16 for an f16 cache);
//       M = -inf, S = 0, acc = 0   (acc is f16 when V is f16, else f32)
//       for each cache row j in order, skipping masked ones:
//         s = dot(k_j, q) * scale        (softcap: scale/softcap, then softcap*tanh)
//         if s > M: ms = exp(M - s), M = s, acc *= ms, vs = 1  else vs = exp(s - M)
//         acc += v_j * vs;  S = S*ms + vs
//       out = acc / S   (0 when no key is visible)
//   The f16 accumulator rounds after every update; f16_accumulator=false
//   keeps it in f32. Work items are blocks of query rows that share a kv
//   head (a GQA group's heads times a few tokens), so the AVX2 kernel
//   converts each K/V row once per block; per row the arithmetic is the
//   loop above, bit for bit.
// * split-KV (one query row; the reference's padded cache view, n_kv rounded
//   up to 256, has 512+ rows): the view is cut into one chunk per thread
//   (ceil(view / threads) rows each, as ggml does), each chunk runs the
//   one-row loop and leaves (M, S, acc as f32); the chunks are then merged in
//   order: M' = max(M, Mc), acc = acc*exp(M - M') + acc_c*exp(Mc - M'),
//   S likewise, and out = acc / S. Like the reference, the result depends on
//   the thread count. A step of 2 to 63 query rows at such a depth runs
//   each row so, as the one-token step at its position would (its own n_kv):
//   a speculative verify row then has the bits of plain decoding's.
// * tiled f32 (64+ query rows, and V rows a multiple of the reference's SIMD
//   width on SIMD builds): ggml_compute_forward_flash_attn_ext_tiled, q in
//   f32, K and V converted to f32 per tile of 64 cache rows, scores by an f32
//   GEMM, online softmax per tile, f32 accumulator; see attention_avx2.cpp
//   for the exact order. Work items are (kv head, tile of 64 tokens).
//
// With a page table, cache row j is read from page table[j / page], row
// j % page: the arithmetic, and so the result, is the same as on a dense
// copy. With params.selected (sparse attention), a key whose position is not
// in the query's selected row is skipped like a causally masked one: the
// reference's mask holds -inf there, and ggml skips -inf mask entries.
//
// ALiBi (params.alibi_max_bias > 0): every path adds slope(h) * f16(-|q_pos -
// k_pos|) (support/alibi.h) to each visible score after the scale and
// softcap, as ggml adds slope * mask there; the distances are built once
// per call beside the visibility matrix.
//
// Sinks (params.sinks, one logit per query head) join each softmax's
// denominator with no value, as ggml folds them in after its loop over the
// cache rows: sink > M rescales acc and S by exp(M - sink) and M becomes
// the sink, else S += exp(sink - M); then out = acc / S. The one-row path
// folds them into the range that starts at row 0 (in split-KV, chunk 0's
// partial, before the merge), the tiled path into each row after its last
// tile. A query that sees no key still gets zeros (acc is 0).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "runtime/cpu/kernels/attention_internal.h"
#include "runtime/cpu/kernels/internal.h"
#include "runtime/cpu/kernels/kernels.h"
#include "frontends/gguf/dequant.h"
#include "support/alibi.h"
#include "support/error.h"
#include "support/kv_cache_type.h"
#include "support/mutation.h"

namespace vtc::cpu {

namespace {

using detail::AttentionJob;
using detail::kAttentionTileKV;
using detail::kAttentionTileQ;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The key positions one query may read under AttentionParams::selected: a
// flag per position in [0, n_pos). Switching queries clears only the
// previous query's flags, so a row costs O(selected_width), not O(n_pos).
class SelectedMask {
 public:
  SelectedMask(const AttentionParams& p, int64_t n_pos) : p_(p), flags_(p.selected ? size_t(n_pos) : 0, 0) {}
  void use_query(int64_t t) {
    if (p_.selected == nullptr || t == query_) return;
    if (query_ >= 0) mark(query_, 0);
    mark(t, 1);
    query_ = t;
  }
  bool allows(int32_t kp) const {
    return p_.selected == nullptr || (kp >= 0 && kp < static_cast<int64_t>(flags_.size()) && flags_[size_t(kp)] != 0);
  }

 private:
  void mark(int64_t t, uint8_t on) {
    const int32_t* row = p_.selected + t * p_.selected_width;
    for (int64_t i = 0; i < p_.selected_width; ++i)
      if (row[i] >= 0 && row[i] < static_cast<int64_t>(flags_.size())) flags_[size_t(row[i])] = on;
  }
  const AttentionParams& p_;
  std::vector<uint8_t> flags_;
  int64_t query_ = -1;
};

// Key positions lie in [0, span): the cache rows, or their listed positions.
int64_t key_position_span(const int32_t* kv_pos, int64_t n_kv) {
  if (kv_pos == nullptr) return n_kv;
  int64_t span = 0;
  for (int64_t j = 0; j < n_kv; ++j) span = std::max<int64_t>(span, static_cast<int64_t>(kv_pos[j]) + 1);
  return span;
}


// Which cache rows each query token may read, and their bounds.
struct Visibility {
  std::vector<uint8_t> visible;  // [n_tokens][n_kv]
  std::vector<int64_t> first, last;
  std::vector<float> alibi_dist, alibi_slopes;  // ALiBi only: [n_tokens][n_kv], [n_head]
};

// ALiBi's tables (support/alibi.h): each head's slope and each (token,
// cache row) pair's f16 distance, so that every kernel adds
// slopes[h] * dist[t][j] as the reference adds slope * mask.
void build_alibi(const AttentionParams& p, const int32_t* q_pos, const int32_t* kv_pos, Visibility& vis) {
  vis.alibi_slopes.resize(size_t(p.n_head));
  for (int64_t h = 0; h < p.n_head; ++h) vis.alibi_slopes[size_t(h)] = alibi_slope(p.alibi_max_bias, p.n_head, h);
  vis.alibi_dist.resize(size_t(p.n_tokens * p.n_kv));
  for (int64_t t = 0; t < p.n_tokens; ++t)
    for (int64_t j = 0; j < p.n_kv; ++j)
      vis.alibi_dist[size_t(t * p.n_kv + j)] = alibi_distance(q_pos[t], kv_pos != nullptr ? kv_pos[j] : j);
}

// Fills vis (kept by the caller between calls: a fresh 256 KiB matrix costs
// a page fault per 4 KiB on every call). Without listed key positions or
// selected keys a token's visible rows are one range, filled directly.
void build_visibility(const AttentionParams& p, const int32_t* q_pos, const int32_t* kv_pos, Visibility& vis) {
  vis.visible.resize(size_t(p.n_tokens * p.n_kv));
  vis.first.assign(size_t(p.n_tokens), p.n_kv);
  vis.last.assign(size_t(p.n_tokens), -1);
  if (kv_pos == nullptr && p.selected == nullptr) {
    for (int64_t t = 0; t < p.n_tokens; ++t) {
      const int64_t qp = q_pos[t];
      int64_t lo = 0, hi = p.n_kv - 1;
      if (p.causal) hi = std::min(hi, qp);
      if (p.n_swa > 0) lo = std::max(lo, qp - p.n_swa + 1);
      if (p.n_chunk > 0) lo = std::max<int64_t>(lo, (q_pos[t] / p.n_chunk) * p.n_chunk);
      uint8_t* row = vis.visible.data() + t * p.n_kv;
      std::memset(row, 0, size_t(p.n_kv));
      if (lo > hi) continue;
      std::memset(row + lo, 1, size_t(hi - lo + 1));
      vis.first[size_t(t)] = lo;
      vis.last[size_t(t)] = hi;
    }
    return;
  }
  std::fill(vis.visible.begin(), vis.visible.end(), uint8_t{0});
  SelectedMask selected(p, p.selected != nullptr ? key_position_span(kv_pos, p.n_kv) : 0);
  for (int64_t t = 0; t < p.n_tokens; ++t) {
    selected.use_query(t);
    const int32_t qp = q_pos[t];
    uint8_t* row = vis.visible.data() + t * p.n_kv;
    for (int64_t j = 0; j < p.n_kv; ++j) {
      const int32_t kp = kv_pos != nullptr ? kv_pos[j] : static_cast<int32_t>(j);
      if (p.causal && kp > qp) continue;
      if (p.n_swa > 0 && static_cast<int64_t>(qp) - kp >= p.n_swa) continue;
      if (p.n_chunk > 0 && kp < (qp / p.n_chunk) * p.n_chunk) continue;
      if (!selected.allows(kp)) continue;
      row[j] = 1;
      vis.first[size_t(t)] = std::min(vis.first[size_t(t)], j);
      vis.last[size_t(t)] = j;
    }
  }
}

const detail::FloatKernels& float_kernels_for(int ref_lanes) {
  if (active_isa() >= Isa::Avx2)
    return ref_lanes == 16 ? *detail::avx2_float_kernels_l16() : *detail::avx2_float_kernels();
  return detail::scalar_float_kernels();
}

// One key's online-softmax step (ggml's one-row update) on the key's dot
// product: s = dot * scale (then softcapped, then plus the ALiBi bias of
// token t, head h, row j where the job has one); a new maximum rescales the
// accumulator (f16 or f32 as job.acc16 says) by ms = exp(M_old - M) and the
// key weighs vs = 1, else it weighs vs = exp(s - M); S = S * ms + vs.
// Returns vs, the weight of the key's V row.
float online_step(const AttentionJob& job, const detail::FloatKernels& fk, float dot, int64_t t, int64_t h, int64_t j,
                  float& M, float& S, uint16_t* acc16, float* acc) {
  float s = dot * job.scale;
  if (job.softcap != 0.0f) s = job.softcap * std::tanh(s);
  s = detail::attention_add_alibi(job, s, t, h, j);
  float ms = 1.0f, vs = 1.0f;
  if (s > M) {
    const float m_old = M;
    M = s;
    ms = std::exp(m_old - M);
    if (job.acc16) fk.scale_f16(acc16, ms, job.dv);
    else fk.scale(acc, ms, acc, job.dv);
  } else {
    vs = std::exp(s - M);
  }
  S = S * ms + vs;
  return vs;
}

// The one-row loop for one query row over cache rows [j0, j1), through the
// FloatKernels (any ISA, f16 or f32 cache). Leaves M, S and acc (as f32).
void one_row_generic(const AttentionJob& job, const detail::FloatKernels& fk, int64_t t, int64_t h, int64_t j0,
                     int64_t j1, float& M, float& S, float* acc) {
  const int64_t dk = job.dk, dv = job.dv, hkv = h / job.group;
  const size_t esize = job.f16 ? 2 : 4;
  thread_local std::vector<uint16_t> acc16v, q16;
  acc16v.assign(size_t(dv), 0);
  q16.resize(size_t(dk));
  const float* qr = job.q + (t * job.n_head + h) * dk;
  if (job.f16) fk.f32_to_f16(qr, q16.data(), dk);
  std::fill(acc, acc + dv, 0.0f);
  M = kNegInf;
  S = 0.0f;
  const uint8_t* vis = job.visible + t * job.n_kv;
  for (int64_t j = j0; j < j1; ++j) {
    if (vis[j] == 0) continue;
    const int64_t r = detail::attention_physical_row(job, j);
    const uint8_t* kr = job.k + size_t((r * job.n_head_kv + hkv) * dk) * esize;
    const uint8_t* vr = job.v + size_t((r * job.n_head_kv + hkv) * dv) * esize;
    const float dot = job.f16 ? fk.dot_f16(reinterpret_cast<const uint16_t*>(kr), q16.data(), dk)
                              : fk.dot_f32(reinterpret_cast<const float*>(kr), qr, dk);
    const float vs = online_step(job, fk, dot, t, h, j, M, S, acc16v.data(), acc);
    if (job.acc16) fk.mad_f16(acc16v.data(), reinterpret_cast<const uint16_t*>(vr), vs, dv);
    else if (job.f16) fk.mad_f32_f16(acc, reinterpret_cast<const uint16_t*>(vr), vs, dv);
    else fk.mad_f32(acc, reinterpret_cast<const float*>(vr), vs, dv);
  }
  if (job.acc16) {
    const float* tab = detail::fp16_table();
    for (int64_t d = 0; d < dv; ++d) acc[d] = tab[acc16v[size_t(d)]];
  }
}

// ggml's vec_dot_type of a cache's K type, as a QuantKernels activation slot.
detail::ActType k_dot_type(GgmlType k_type) {
  switch (matmul_activation_type(k_type)) {
    case GgmlType::F32: return detail::ActType::F32;
    case GgmlType::F16: return detail::ActType::F16;
    case GgmlType::BF16: return detail::ActType::BF16;
    case GgmlType::Q8_0: return detail::ActType::Q8_0;
    case GgmlType::Q8_1: return detail::ActType::Q8_1;
    default: break;
  }
  throw Error(fmt::format("attention: no dot product for a {} cache", ggml_type_name(k_type)));
}

// The one-row loop for any pair of cache types (job.typed), as the
// reference's generic one-chunk kernel: q converted once to K's vec_dot
// type (f16 K: dot_f16 as in the f16 path), one dot per cache row with the
// matmul's kernel for that type; V accumulated in f16 when V is f16 (and
// f16_accumulator), else in f32 from each row converted to f32.
void one_row_typed(const AttentionJob& job, const detail::FloatKernels& fk, int64_t t, int64_t h, int64_t j0,
                   int64_t j1, float& M, float& S, float* acc) {
  const int64_t dk = job.dk, dv = job.dv, hkv = h / job.group;
  const detail::QuantKernels& qk = detail::active_quant_kernels();
  const bool k16 = job.k_type == GgmlType::F16, k32 = job.k_type == GgmlType::F32;
  const bool v16 = job.v_type == GgmlType::F16, v32 = job.v_type == GgmlType::F32;
  // iq4_nl: the reference's vec_dot order, which differs from the matmul's.
  const detail::DotFn dot = job.k_type == GgmlType::IQ4_NL ? detail::kv_dot_iq4_nl : qk.dot[static_cast<int>(job.k_type)];
  thread_local std::vector<uint8_t> q_conv;
  thread_local std::vector<uint16_t> acc16v;
  thread_local std::vector<float> v_row;
  q_conv.resize(size_t(dk) * 4 + 64);
  acc16v.assign(size_t(dv), 0);
  v_row.resize(size_t(dv));
  const float* qr = job.q + (t * job.n_head + h) * dk;
  if (!k32) qk.quantize[static_cast<int>(k_dot_type(job.k_type))](qr, q_conv.data(), dk);
  std::fill(acc, acc + dv, 0.0f);
  M = kNegInf;
  S = 0.0f;
  const uint8_t* vis = job.visible + t * job.n_kv;
  for (int64_t j = j0; j < j1; ++j) {
    if (vis[j] == 0) continue;
    const int64_t r = detail::attention_physical_row(job, j);
    const uint8_t* kr = job.k + size_t(r * job.n_head_kv + hkv) * size_t(job.k_head_bytes);
    const uint8_t* vr = job.v + size_t(r * job.n_head_kv + hkv) * size_t(job.v_head_bytes);
    const float d = k16   ? fk.dot_f16(reinterpret_cast<const uint16_t*>(kr), reinterpret_cast<const uint16_t*>(q_conv.data()), dk)
                    : k32 ? fk.dot_f32(reinterpret_cast<const float*>(kr), qr, dk)
                          : dot(dk, kr, q_conv.data());
    const float vs = online_step(job, fk, d, t, h, j, M, S, acc16v.data(), acc);
    if (job.acc16) {
      fk.mad_f16(acc16v.data(), reinterpret_cast<const uint16_t*>(vr), vs, dv);
    } else if (v16) {
      fk.mad_f32_f16(acc, reinterpret_cast<const uint16_t*>(vr), vs, dv);
    } else if (v32) {
      fk.mad_f32(acc, reinterpret_cast<const float*>(vr), vs, dv);
    } else {
      dequantize_row(job.v_type, vr, v_row.data(), dv);
      fk.mad_f32(acc, v_row.data(), vs, dv);
    }
  }
  if (job.acc16) {
    const float* tab = detail::fp16_table();
    for (int64_t d = 0; d < dv; ++d) acc[d] = tab[acc16v[size_t(d)]];
  }
}

// A block of query rows (tokens [t0, t1) x the heads of kv head hk) over
// cache rows [j0, j1): the AVX2 kernel where it applies, else row by row.
// With sinks, the range that starts at row 0 folds them in after its loop
// (ggml applies them on the first KV chunk only).
void one_row_block(const AttentionJob& job, const detail::FloatKernels& fk, int64_t hk, int64_t t0, int64_t t1,
                   int64_t j0, int64_t j1, float* M, float* S, float* acc) {
  const bool simd = (active_isa() >= Isa::Avx512Vnni && detail::one_row_block_avx512(job, hk, t0, t1, j0, j1, M, S, acc)) ||
                    (active_isa() >= Isa::Avx2 && detail::one_row_block_avx2(job, hk, t0, t1, j0, j1, M, S, acc));
  if (!simd)
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t g = 0; g < job.group; ++g) {
        const int64_t r = (t - t0) * job.group + g;
        (job.typed ? one_row_typed : one_row_generic)(job, fk, t, hk * job.group + g, j0, j1, M[r], S[r],
                                                      acc + r * job.dv);
      }
  if (job.sinks == nullptr || j0 != 0) return;
  for (int64_t r = 0; r < (t1 - t0) * job.group; ++r)
    detail::attention_apply_sink(job.sinks[hk * job.group + r % job.group], M[r], S[r], acc + r * job.dv, job.dv);
}

// A finished row's output: acc / S (0 where no key was visible).
void write_normalized(const detail::FloatKernels& fk, float S, const float* acc, float* out, int64_t dv) {
  fk.scale(acc, S == 0.0f ? 0.0f : 1.0f / S, out, dv);
}

// Tokens per one-row work item: about 16 query rows per item.
int64_t one_row_tokens_per_block(const AttentionJob& job) { return std::max<int64_t>(1, 16 / job.group); }

void run_one_row(const AttentionJob& job, ThreadPool& pool) {
  const detail::FloatKernels& fk = float_kernels_for(job.ref_lanes);
  const int64_t tb = one_row_tokens_per_block(job);
  const int64_t n_blocks = (job.n_tokens + tb - 1) / tb;
  pool.parallel_for(job.n_head_kv * n_blocks, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> M, S, acc;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t hk = item % job.n_head_kv, t0 = (item / job.n_head_kv) * tb;
      const int64_t t1 = std::min(job.n_tokens, t0 + tb), rows = (t1 - t0) * job.group;
      M.resize(size_t(rows));
      S.resize(size_t(rows));
      acc.resize(size_t(rows * job.dv));
      one_row_block(job, fk, hk, t0, t1, 0, job.n_kv, M.data(), S.data(), acc.data());
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t t = t0 + r / job.group, h = hk * job.group + r % job.group;
        write_normalized(fk, S[size_t(r)], acc.data() + r * job.dv, job.out + (t * job.n_head + h) * job.dv, job.dv);
      }
    }
  });
}
// The reference's cache view: llama.cpp pads it to 256 rows.
int64_t reference_view_rows(int64_t n_kv) {
  return (n_kv + detail::kAttentionRefKVPad - 1) / detail::kAttentionRefKVPad * detail::kAttentionRefKVPad;
}

bool use_split_kv(const AttentionJob& job) {
  return job.n_tokens == 1 && reference_view_rows(job.n_kv) >= detail::kAttentionSplitMinKV;
}

// Merges the chunks' (M, S, acc) of one head in chunk order, as
// ggml_flash_attn_ext_reduce_partials (products rounded, then added).
void merge_partials(const float* partials, int64_t n_chunks, int64_t dv, const detail::FloatKernels& fk,
                    float* acc, float* out) {
  float M = kNegInf, S = 0.0f;
  std::fill(acc, acc + dv, 0.0f);
  for (int64_t c = 0; c < n_chunks; ++c) {
    const float* part = partials + c * (2 + dv);
    const float Mc = part[0], Sc = part[1];
    if (Sc == 0.0f) continue;
    const float m_new = std::fmax(M, Mc);
    const float scale_old = std::exp(M - m_new), scale_new = std::exp(Mc - m_new);
    for (int64_t d = 0; d < dv; ++d) {
      const float kept = acc[d] * scale_old, added = part[2 + d] * scale_new;
      acc[d] = kept + added;
    }
    const float s_kept = S * scale_old, s_added = Sc * scale_new;
    S = s_kept + s_added;
    M = m_new;
  }
  if (S != 0.0f) fk.scale(acc, 1.0f / S, acc, dv);
  std::memcpy(out, acc, size_t(dv) * 4);
}

// The AVX-512 split-KV chunk: its rows in slices of kSplitSliceRows, every
// kv head per slice, so that the K/V rows (all heads' slices side by side)
// are read from memory once and sequentially, not once per head with a
// stride; each head's chain of operations over the chunk is unchanged.
constexpr int64_t kSplitSliceRows = 256;

// One chunk's (M, S, acc) of heads [h0, h0 + n) into partials
// ([head][chunk][M, S, acc], part_size = 2 + dv), for merge_all_heads.
void store_partials(float* partials, int64_t n_chunks, int64_t c, int64_t dv, int64_t h0, int64_t n, const float* M,
                    const float* S, const float* acc) {
  for (int64_t i = 0; i < n; ++i) {
    float* part = partials + ((h0 + i) * n_chunks + c) * (2 + dv);
    part[0] = M[i];
    part[1] = S[i];
    std::memcpy(part + 2, acc + i * dv, size_t(dv) * 4);
  }
}

void merge_all_heads(const AttentionJob& job, const float* partials, int64_t n_chunks,
                     const detail::FloatKernels& fk) {
  std::vector<float> merged(static_cast<size_t>(job.dv));
  for (int64_t h = 0; h < job.n_head; ++h)
    merge_partials(partials + h * n_chunks * (2 + job.dv), n_chunks, job.dv, fk, merged.data(),
                   job.out + h * job.dv);
}

bool split_chunk_avx512(const AttentionJob& job, int64_t j0, int64_t j1, float* M, float* S, float* acc) {
  const int64_t G = job.group, dv = job.dv;
  for (int64_t s0 = j0;; s0 += kSplitSliceRows) {
    const int64_t s1 = std::min(j1, s0 + kSplitSliceRows);
    for (int64_t hk = 0; hk < job.n_head_kv; ++hk)
      if (!detail::one_row_block_avx512(job, hk, 0, 1, s0, s1, M + hk * G, S + hk * G, acc + hk * G * dv, s0 != j0,
                                        hk == 0))
        return false;
    if (s1 >= j1) break;
  }
  if (job.sinks != nullptr && j0 == 0)
    for (int64_t h = 0; h < job.n_head; ++h) detail::attention_apply_sink(job.sinks[h], M[h], S[h], acc + h * dv, dv);
  return true;
}

// Decode at depth takes the f32 tile kernel (attention_depth_avx512.cpp,
// attention_depth_avx2.cpp below AVX-512) where it is built and takes the
// types: at 1024+ cached keys the
// reference's one-row order is not kept (issue 43 allows any order within
// 1e-3 there). VTC_CPU_ATTN_DEPTH=0 keeps the one-row loop (before/after
// figures, parity checks).
bool depth_kernel_takes(const AttentionJob& job) {
  static const bool off = [] {
    const char* v = std::getenv("VTC_CPU_ATTN_DEPTH");
    return v != nullptr && std::string(v) == "0";
  }();
  const bool types = (job.k_type == GgmlType::F16 || job.k_type == GgmlType::Q8_0) &&
                     (job.v_type == GgmlType::F16 || job.v_type == GgmlType::Q8_0);
  return !off && job.depth_kernel && types && job.n_kv >= detail::kAttentionDepthMinKV && job.dk == job.dv &&
         job.dk % 32 == 0 && job.dk <= 256 && job.group <= detail::kAttentionDepthMaxGroup &&
         active_isa() >= Isa::Avx2;
}

// The depth kernel of the active level over rows [j0, j1) (the contract of
// depth_block_avx512, attention_internal.h).
void depth_block(const AttentionJob& job, int64_t j0, int64_t j1, float* M, float* S, float* acc, bool resume) {
  const bool done = active_isa() >= Isa::Avx512Vnni ? detail::depth_block_avx512(job, j0, j1, M, S, acc, resume)
                                                    : detail::depth_block_avx2(job, j0, j1, M, S, acc, resume);
  if (!done) throw Error("attention: the depth kernel is not built");
}

bool use_depth_kernel(const AttentionJob& job) { return job.n_tokens == 1 && depth_kernel_takes(job); }

// Rows [j0, j1) through the depth kernel for every head, the sinks folded
// in where the range is the first (or only) one, as one_row_block folds
// them on chunk 0.
void depth_chunk(const AttentionJob& job, int64_t j0, int64_t j1, bool first, float* M, float* S, float* acc) {
  depth_block(job, j0, j1, M, S, acc, false);
  if (job.sinks == nullptr || !first) return;
  for (int64_t h = 0; h < job.n_head; ++h) detail::attention_apply_sink(job.sinks[h], M[h], S[h], acc + h * job.dv, job.dv);
}

void run_split_kv(const AttentionJob& job, ThreadPool& pool) {
  const detail::FloatKernels& fk = float_kernels_for(job.ref_lanes);
  const int64_t n_chunks = pool.size(), G = job.group, dv = job.dv;
  const int64_t chunk_rows = (reference_view_rows(job.n_kv) + n_chunks - 1) / n_chunks;
  const int64_t part_size = 2 + dv;
  std::vector<float> partials(size_t(job.n_head * n_chunks * part_size));  // [head][chunk][M, S, acc]
  if (use_depth_kernel(job)) {
    pool.parallel_for(n_chunks, [&](int64_t begin, int64_t end) {
      thread_local std::vector<float> M, S, acc;
      M.resize(size_t(job.n_head));
      S.resize(size_t(job.n_head));
      acc.resize(size_t(job.n_head * dv));
      for (int64_t c = begin; c < end; ++c) {
        const int64_t j0 = std::min(job.n_kv, c * chunk_rows), j1 = std::min(job.n_kv, j0 + chunk_rows);
        depth_chunk(job, j0, j1, j0 == 0, M.data(), S.data(), acc.data());
        store_partials(partials.data(), n_chunks, c, dv, 0, job.n_head, M.data(), S.data(), acc.data());
      }
    });
    merge_all_heads(job, partials.data(), n_chunks, fk);
    return;
  }
  if (active_isa() >= Isa::Avx512Vnni && job.f16 && !job.typed) {
    pool.parallel_for(n_chunks, [&](int64_t begin, int64_t end) {
      thread_local std::vector<float> M, S, acc;
      M.resize(size_t(job.n_head));
      S.resize(size_t(job.n_head));
      acc.resize(size_t(job.n_head * dv));
      for (int64_t c = begin; c < end; ++c) {
        const int64_t j0 = std::min(job.n_kv, c * chunk_rows), j1 = std::min(job.n_kv, j0 + chunk_rows);
        if (!split_chunk_avx512(job, j0, j1, M.data(), S.data(), acc.data()))
          throw Error("attention: the AVX-512 kernel is not built");
        store_partials(partials.data(), n_chunks, c, dv, 0, job.n_head, M.data(), S.data(), acc.data());
      }
    });
    merge_all_heads(job, partials.data(), n_chunks, fk);
    return;
  }
  pool.parallel_for(n_chunks * job.n_head_kv, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> M, S, acc;
    M.resize(size_t(G));
    S.resize(size_t(G));
    acc.resize(size_t(G * dv));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t c = item / job.n_head_kv, hk = item % job.n_head_kv;
      const int64_t j0 = std::min(job.n_kv, c * chunk_rows), j1 = std::min(job.n_kv, j0 + chunk_rows);
      one_row_block(job, fk, hk, 0, 1, j0, j1, M.data(), S.data(), acc.data());
      store_partials(partials.data(), n_chunks, c, dv, hk * G, G, M.data(), S.data(), acc.data());
    }
  });
  merge_all_heads(job, partials.data(), n_chunks, fk);
}

// The tiled algorithm without SIMD, row by row, as the reference's scalar
// build: scores and V sums as plain multiply-adds in order, libm expf, the
// tile's weights summed in order in double.
void tiled_row_scalar(const AttentionJob& job, int64_t t, int64_t h, float* acc) {
  const int64_t dk = job.dk, dv = job.dv, hkv = h / job.group;
  const float* tab = detail::fp16_table();
  auto value = [&](const uint8_t* base, int64_t row, int64_t width, int64_t d) {
    const size_t i = size_t((detail::attention_physical_row(job, row) * job.n_head_kv + hkv) * width + d);
    return job.f16 ? tab[reinterpret_cast<const uint16_t*>(base)[i]] : reinterpret_cast<const float*>(base)[i];
  };
  const float* qr = job.q + (t * job.n_head + h) * dk;
  const uint8_t* vis = job.visible + t * job.n_kv;
  float M = kNegInf, S = 0.0f, w[kAttentionTileKV];
  std::fill(acc, acc + dv, 0.0f);
  for (int64_t ic = 0; ic < job.n_kv; ic += kAttentionTileKV) {
    const int64_t n_rows = std::min<int64_t>(kAttentionTileKV, job.n_kv - ic);
    float tile_max = kNegInf;
    for (int64_t c = 0; c < n_rows; ++c) {
      float s = 0.0f;
      for (int64_t d = 0; d < dk; ++d) s += qr[d] * value(job.k, ic + c, dk, d);
      s *= job.scale;
      if (job.softcap != 0.0f) s = std::tanh(s) * job.softcap;
      w[c] = vis[ic + c] != 0 ? detail::attention_add_alibi(job, s, t, h, ic + c) : kNegInf;
      tile_max = std::max(tile_max, w[c]);
    }
    if (tile_max == kNegInf) continue;
    const float m_new = std::fmax(M, tile_max);
    if (m_new > M) {
      const float ms = std::exp(M - m_new);
      for (int64_t d = 0; d < dv; ++d) acc[d] *= ms;
      S *= ms;
    }
    M = m_new;
    double sum = 0.0;
    for (int64_t c = 0; c < n_rows; ++c) sum += static_cast<double>(w[c] = std::exp(w[c] - m_new));
    S += sum;
    for (int64_t d = 0; d < dv; ++d) {
      float a = acc[d];
      for (int64_t c = 0; c < n_rows; ++c) a += w[c] * value(job.v, ic + c, dv, d);
      acc[d] = a;
    }
  }
  if (job.sinks != nullptr) detail::attention_apply_sink(job.sinks[h], M, S, acc, dv);
  const float inv = S == 0.0f ? 0.0f : 1.0f / S;
  for (int64_t d = 0; d < dv; ++d) acc[d] *= inv;
}

void tiled_block(const AttentionJob& job, int64_t hk, int64_t t0, int64_t t1) {
  if (active_isa() >= Isa::Avx512Vnni && detail::tiled_block_avx512(job, hk, t0, t1)) return;
  if (active_isa() >= Isa::Avx2 && detail::tiled_block_avx2(job, hk, t0, t1)) return;
  thread_local std::vector<float> acc;
  acc.resize(size_t(job.dv));
  for (int64_t t = t0; t < t1; ++t)
    for (int64_t g = 0; g < job.group; ++g) {
      const int64_t h = hk * job.group + g;
      tiled_row_scalar(job, t, h, acc.data());
      std::memcpy(job.out + (t * job.n_head + h) * job.dv, acc.data(), size_t(job.dv) * 4);
    }
}

bool use_tiled(const AttentionJob& job) {
  if (job.n_tokens < kAttentionTileQ || job.typed) return false;
  return active_isa() < Isa::Avx2 || job.dv % job.ref_lanes == 0;
}

// Query tile i of n, taken from both ends in turn (0, n-1, 1, n-2, ...): with
// a causal mask late tiles cost more, so neighbouring items balance.
int64_t balanced_tile(int64_t i, int64_t n) { return i % 2 == 0 ? i / 2 : n - 1 - i / 2; }

void run_tiled(const AttentionJob& job, ThreadPool& pool) {
  const int64_t n_tiles = (job.n_tokens + kAttentionTileQ - 1) / kAttentionTileQ;
  pool.parallel_for(n_tiles * job.n_head_kv, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t0 = balanced_tile(item / job.n_head_kv, n_tiles) * kAttentionTileQ;
      tiled_block(job, item % job.n_head_kv, t0, std::min(job.n_tokens, t0 + kAttentionTileQ));
    }
  });
}

// Several query tokens at depth where the tiled path does not take them (a
// quantized cache, whose reference is the one-row loop, or fewer than
// kAttentionTileQ tokens): each token's visible rows through the depth
// kernel in one range, the tokens spread over the threads from both ends
// in turn (with a causal mask late tokens read more rows). The one-row
// loop for a q8_0 cache spent a scalar exp and a dot call per (token,
// head, row): a 16k-token prompt took minutes.
bool use_depth_rows(const AttentionJob& job) { return job.n_tokens > 1 && !use_tiled(job) && depth_kernel_takes(job); }

void run_depth_rows(const AttentionJob& job, ThreadPool& pool) {
  const detail::FloatKernels& fk = float_kernels_for(job.ref_lanes);
  const int64_t q_row = job.n_head * job.dk, dv = job.dv;
  pool.parallel_for(job.n_tokens, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> M, S, acc;
    M.resize(size_t(job.n_head));
    S.resize(size_t(job.n_head));
    acc.resize(size_t(job.n_head * dv));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = balanced_tile(item, job.n_tokens);
      AttentionJob one = job;
      one.n_tokens = 1;
      one.q = job.q + t * q_row;
      one.visible = job.visible + t * job.n_kv;
      one.alibi_dist = detail::attention_alibi_row(job, t);
      const int64_t j0 = job.first_visible[t], j1 = job.last_visible[t] + 1;
      float* out = job.out + t * job.n_head * dv;
      if (j0 >= j1) {
        std::fill(out, out + job.n_head * dv, 0.0f);
        continue;
      }
      depth_chunk(one, j0, j1, true, M.data(), S.data(), acc.data());
      for (int64_t h = 0; h < job.n_head; ++h) write_normalized(fk, S[size_t(h)], acc.data() + h * dv, out + h * dv, dv);
    }
  });
}

// A step of a few query tokens of one sequence at a depth where a single
// token takes split-KV (a speculative verify chunk: the pending token and
// up to 16 drafts): each row runs as the one-token step at its position
// runs it, with that step's n_kv (its position + 1), chunks and merge, so
// its output has the bits of plain decoding's (docs/speculative.md, "The
// guarantee"); without this a verify row at depth 300 differed from
// decode in most logits and greedy tokens flipped on near-ties. Shallower,
// the one-row path is already the one-token arithmetic row by row; from
// kAttentionTileQ tokens on (prompts) the tiled path runs, as the
// reference's. Needs the cache rows to be the positions (kv_pos null).
bool use_rows_as_decode(const AttentionJob& job, const int32_t* kv_pos) {
  if (mutated(Mutation::SpecVerifyRowsOnePass)) return false;
  return kv_pos == nullptr && job.n_tokens > 1 && job.n_tokens < kAttentionTileQ &&
         reference_view_rows(job.n_kv) >= detail::kAttentionSplitMinKV;
}

// The row's n_kv as its one-token step sees it (its position + 1).
int64_t decode_kv_rows(const AttentionJob& job, const int32_t* q_pos, int64_t t) {
  return std::min<int64_t>(job.n_kv, int64_t(q_pos[t]) + 1);
}

// The split-KV partials of a group of tokens [t0, t1) run as their one-token
// steps (below): per token, run_split_kv's [head][chunk][M, S, acc], stored
// and merged as there.
struct GroupPartials {
  const AttentionJob& job;
  int64_t t0, n_tok, n_chunks;
  std::vector<float> data;
  GroupPartials(const AttentionJob& j, int64_t first, int64_t end, int64_t chunks)
      : job(j), t0(first), n_tok(end - first), n_chunks(chunks),
        data(size_t(n_tok * j.n_head * chunks * (2 + j.dv))) {}
  float* token(int64_t t) { return data.data() + t * job.n_head * n_chunks * (2 + job.dv); }
  // Token t's (of the group) head h, chunk c; sinks folded in on chunk 0.
  void store(int64_t t, int64_t h, int64_t c, bool first_chunk, float M, float S, float* acc) {
    if (job.sinks != nullptr && first_chunk) detail::attention_apply_sink(job.sinks[h], M, S, acc, job.dv);
    store_partials(token(t), n_chunks, c, job.dv, h, 1, &M, &S, acc);
  }
  void merge() {
    const detail::FloatKernels& fk = float_kernels_for(job.ref_lanes);
    for (int64_t t = 0; t < n_tok; ++t) {
      AttentionJob one = job;
      one.out = job.out + (t0 + t) * job.n_head * job.dv;
      merge_all_heads(one, token(t), n_chunks, fk);
    }
  }
};

// Token t alone, as its one-token step's attention call sees it (n_kv: the
// cache rows it may read, at least its own).
AttentionJob token_job(const AttentionJob& job, const int32_t* q_pos, int64_t t, int64_t n_kv) {
  AttentionJob one = job;
  one.n_tokens = 1;
  one.n_kv = n_kv > 0 ? n_kv : decode_kv_rows(job, q_pos, t);
  one.q = job.q + t * job.n_head * job.dk;
  one.out = job.out + t * job.n_head * job.dv;
  one.visible = job.visible + t * job.n_kv;
  one.first_visible = job.first_visible + t;
  one.last_visible = job.last_visible + t;
  one.alibi_dist = detail::attention_alibi_row(job, t);
  return one;
}

// Tokens [t0, t1) whose one-token steps share one split (the same padded
// view, so the same chunk bounds) and take the AVX-512 one-row kernel in
// it: per (kv head, chunk) work item, one block of every token's query
// rows over the chunk's cache rows (in slices, resumed), so K and V are
// converted once for all of them instead of once per token. A row's keys
// past its own position are masked, which the one-row loop skips exactly
// as the shorter cache of its decode step would not hold them. Per row the
// operations, chunks and merge are the one-token step's.
void run_one_row_group(const AttentionJob& job, int64_t n_kv, int64_t t0, int64_t t1, ThreadPool& pool) {
  const int64_t n_chunks = pool.size(), G = job.group, dv = job.dv, rows = (t1 - t0) * G;
  const int64_t chunk_rows = (reference_view_rows(n_kv) + n_chunks - 1) / n_chunks;
  GroupPartials partials(job, t0, t1, n_chunks);
  // Item -> (kv head, chunk) with the chunks innermost: a thread's share of
  // items holds every chunk, so the short last chunk does not idle a thread.
  pool.parallel_for(job.n_head_kv * n_chunks, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> M, S, acc;
    M.assign(size_t(rows), kNegInf);
    S.assign(size_t(rows), 0.0f);
    acc.resize(size_t(rows * dv));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t hk = item / n_chunks, c = item % n_chunks;
      const int64_t j0 = std::min(n_kv, c * chunk_rows), j1 = std::min(n_kv, j0 + chunk_rows);
      if (j0 == j1) std::fill(M.begin(), M.end(), kNegInf), std::fill(S.begin(), S.end(), 0.0f);
      for (int64_t s0 = j0; s0 < j1; s0 += kSplitSliceRows)
        if (!detail::one_row_block_avx512(job, hk, t0, t1, s0, std::min(j1, s0 + kSplitSliceRows), M.data(), S.data(),
                                          acc.data(), s0 != j0))
          throw Error("attention: the AVX-512 kernel is not built");
      for (int64_t r = 0; r < rows; ++r)
        partials.store(r / G, hk * G + r % G, c, j0 == 0 && j1 > 0, M[size_t(r)], S[size_t(r)], acc.data() + r * dv);
    }
  });
  partials.merge();
}

// The same for tokens whose one-token steps take the depth kernel (1024+
// keys): per chunk, slices of kAttentionDepthSliceRows cache rows, every
// token over a slice before the next slice, so the slice's K and V come
// from memory once and from cache for the other tokens. The kernel resumes
// each token's (M, S, acc) slice after slice over the same tiles as one
// call over the chunk (attention_internal.h).
void run_depth_group(const AttentionJob& job, const int32_t* q_pos, int64_t n_kv, int64_t t0, int64_t t1,
                     ThreadPool& pool) {
  const int64_t n_chunks = pool.size(), H = job.n_head, dv = job.dv, n_tok = t1 - t0;
  const int64_t chunk_rows = (reference_view_rows(n_kv) + n_chunks - 1) / n_chunks;
  GroupPartials partials(job, t0, t1, n_chunks);
  std::vector<AttentionJob> tokens;
  for (int64_t t = t0; t < t1; ++t) tokens.push_back(token_job(job, q_pos, t, n_kv));
  pool.parallel_for(n_chunks, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> M, S, acc;
    M.resize(size_t(n_tok * H));
    S.resize(size_t(n_tok * H));
    acc.resize(size_t(n_tok * H * dv));
    for (int64_t c = begin; c < end; ++c) {
      const int64_t j0 = std::min(n_kv, c * chunk_rows), j1 = std::min(n_kv, j0 + chunk_rows);
      std::fill(M.begin(), M.end(), kNegInf);
      std::fill(S.begin(), S.end(), 0.0f);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t s0 = j0; s0 < j1; s0 += detail::kAttentionDepthSliceRows)
        for (int64_t t = 0; t < n_tok; ++t)
          depth_block(tokens[size_t(t)], s0, std::min(j1, s0 + detail::kAttentionDepthSliceRows), M.data() + t * H,
                      S.data() + t * H, acc.data() + t * H * dv, s0 != j0);
      for (int64_t t = 0; t < n_tok; ++t)
        for (int64_t h = 0; h < H; ++h)
          partials.store(t, h, c, j0 == 0 && j1 > 0, M[size_t(t * H + h)], S[size_t(t * H + h)],
                         acc.data() + (t * H + h) * dv);
    }
  });
  partials.merge();
}

// How token t's one-token step attends, where a group of tokens can share
// its split: None (run it alone), the one-row kernel or the depth kernel.
enum class RowGroup { None, OneRow, Depth };
RowGroup row_group(const AttentionJob& job, const int32_t* q_pos, int64_t t) {
  const AttentionJob one = token_job(job, q_pos, t, 0);
  if (!use_split_kv(one)) return RowGroup::None;
  if (use_depth_kernel(one)) return RowGroup::Depth;
  return active_isa() >= Isa::Avx512Vnni && job.f16 && !job.typed ? RowGroup::OneRow : RowGroup::None;
}

void run_rows_as_decode(const AttentionJob& job, const int32_t* q_pos, ThreadPool& pool) {
  for (int64_t t = 0; t < job.n_tokens;) {
    const RowGroup kind = row_group(job, q_pos, t);
    if (kind == RowGroup::None) {
      const AttentionJob one = token_job(job, q_pos, t, 0);
      if (use_split_kv(one)) run_split_kv(one, pool);
      else run_one_row(one, pool);
      ++t;
      continue;
    }
    // The run of tokens after t with the same kind and padded view.
    const int64_t view = reference_view_rows(decode_kv_rows(job, q_pos, t));
    int64_t t1 = t + 1;
    while (t1 < job.n_tokens && row_group(job, q_pos, t1) == kind &&
           reference_view_rows(decode_kv_rows(job, q_pos, t1)) == view)
      ++t1;
    const int64_t n_kv = decode_kv_rows(job, q_pos, t1 - 1);  // the group's longest
    if (kind == RowGroup::OneRow) run_one_row_group(job, n_kv, t, t1, pool);
    else run_depth_group(job, q_pos, n_kv, t, t1, pool);
    t = t1;
  }
}

}  // namespace

namespace detail {

#if !defined(VTC_HAVE_AVX2_TU)
bool one_row_block_avx2(const AttentionJob&, int64_t, int64_t, int64_t, int64_t, int64_t, float*, float*, float*) {
  return false;
}
bool tiled_block_avx2(const AttentionJob&, int64_t, int64_t, int64_t) { return false; }
bool depth_block_avx2(const AttentionJob&, int64_t, int64_t, float*, float*, float*, bool) { return false; }
#endif
#if !defined(VTC_HAVE_AVX512_TU)
bool one_row_block_avx512(const AttentionJob&, int64_t, int64_t, int64_t, int64_t, int64_t, float*, float*, float*, bool,
                          bool) {
  return false;
}
bool tiled_block_avx512(const AttentionJob&, int64_t, int64_t, int64_t) { return false; }
bool depth_block_avx512(const AttentionJob&, int64_t, int64_t, float*, float*, float*, bool) { return false; }
#endif

void attention_with_lanes(const float* q, const void* k, const void* v, const int32_t* q_pos, const int32_t* kv_pos,
                          const AttentionParams& p, float* out, ThreadPool& pool, int ref_lanes) {
  const int64_t dk = p.head_dim;
  const int64_t dv = p.head_dim_v > 0 ? p.head_dim_v : p.head_dim;
  if (p.n_tokens < 0 || p.n_kv < 0 || dk <= 0 || p.n_head <= 0 || p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0)
    throw Error(fmt::format("attention: bad shape (n_head {}, n_head_kv {}, head_dim {})", p.n_head, p.n_head_kv, dk));
  for (GgmlType t : {p.k_type, p.v_type})
    if (!is_kv_cache_type(t))
      throw Error(fmt::format("attention: {} is not a KV cache type (one of: {})", ggml_type_name(t), kv_cache_type_list()));
  const auto k_head_bytes = ggml_bytes_for(p.k_type, uint64_t(dk)), v_head_bytes = ggml_bytes_for(p.v_type, uint64_t(dv));
  if (!k_head_bytes || !v_head_bytes)
    throw Error(fmt::format("attention: head sizes {} (K) and {} (V) are not whole {} / {} blocks", dk, dv,
                            ggml_type_name(p.k_type), ggml_type_name(p.v_type)));
  if (p.page_table != nullptr && p.page_size <= 0) throw Error("attention: a page table needs a page size");
  if (p.selected != nullptr && p.selected_width <= 0) throw Error("attention: selected rows need a positive width");
  if (p.n_tokens == 0) return;
  thread_local Visibility vis;
  build_visibility(p, q_pos, kv_pos, vis);
  if (p.alibi_max_bias < 0.0f) throw Error(fmt::format("attention: negative ALiBi max bias {}", p.alibi_max_bias));
  if (p.alibi_max_bias > 0.0f) build_alibi(p, q_pos, kv_pos, vis);
  AttentionJob job;
  job.q = q;
  job.k = static_cast<const uint8_t*>(k);
  job.v = static_cast<const uint8_t*>(v);
  job.out = out;
  job.n_tokens = p.n_tokens;
  job.n_head = p.n_head;
  job.n_head_kv = p.n_head_kv;
  job.group = p.n_head / p.n_head_kv;
  job.dk = dk;
  job.dv = dv;
  job.n_kv = p.n_kv;
  job.f16 = p.k_type == GgmlType::F16;
  job.typed = p.k_type != p.v_type || (p.k_type != GgmlType::F16 && p.k_type != GgmlType::F32);
  job.k_type = p.k_type;
  job.v_type = p.v_type;
  job.k_head_bytes = int64_t(*k_head_bytes);
  job.v_head_bytes = int64_t(*v_head_bytes);
  job.acc16 = p.v_type == GgmlType::F16 && p.f16_accumulator;
  job.scale = p.softcap != 0.0f ? p.scale / p.softcap : p.scale;
  job.softcap = p.softcap;
  job.page_table = p.page_table;
  job.page_size = p.page_size;
  job.visible = vis.visible.data();
  job.first_visible = vis.first.data();
  job.last_visible = vis.last.data();
  job.ref_lanes = ref_lanes;
  job.sinks = p.sinks;
  job.depth_kernel = p.depth_kernel;
  if (p.alibi_max_bias > 0.0f) {
    job.alibi_slopes = vis.alibi_slopes.data();
    job.alibi_dist = vis.alibi_dist.data();
  }
  if (use_tiled(job)) run_tiled(job, pool);
  else if (use_rows_as_decode(job, kv_pos)) run_rows_as_decode(job, q_pos, pool);
  else if (use_split_kv(job)) run_split_kv(job, pool);
  else if (use_depth_rows(job)) run_depth_rows(job, pool);
  else run_one_row(job, pool);
  if (vis.visible.capacity() > (size_t{64} << 20) || vis.alibi_dist.capacity() > (size_t{64} << 20))
    vis = Visibility();  // a long prefill's matrices are not kept
}

}  // namespace detail

void attention(const float* q, const void* k, const void* v, const int32_t* q_pos, const int32_t* kv_pos,
               const AttentionParams& p, float* out, ThreadPool& pool) {
  detail::attention_with_lanes(q, k, v, q_pos, kv_pos, p, out, pool, detail::reference_lanes());
}

}  // namespace vtc::cpu
