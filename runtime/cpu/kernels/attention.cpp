// Causal attention for one sequence, following ggml's CPU flash-attention
// kernel (ggml_compute_forward_flash_attn_ext_f16), which llama.cpp uses on
// the CPU by default:
//
//   for each query row (token t, head h), with kv head h / (n_head/n_head_kv):
//     q is converted to the K storage type (f16 for an f16 cache);
//     M = -inf, S = 0, acc = 0   (acc is f16 when V is f16, else f32)
//     for each cache row j in order, skipping masked ones:
//       s = dot(k_j, q) * scale        (softcap: scale/softcap, then softcap*tanh)
//       if s > M: ms = exp(M - s), M = s, acc *= ms, vs = 1  else vs = exp(s - M)
//       acc += v_j * vs;  S = S*ms + vs
//     out = acc / S   (0 when no key is visible)
//
// The f16 accumulator rounds after every update; f16_accumulator=false keeps
// it in f32 instead. Work is split over (token, head) rows. With a page
// table, cache row j is read from page table[j / page], row j % page: the
// arithmetic, and so the result, is the same as on a dense copy.
// With params.selected (sparse attention), a key whose position is not in
// the query's selected row is skipped like a causally masked one: the
// reference's mask holds -inf there, and ggml skips -inf mask entries.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "runtime/cpu/kernels/internal.h"
#include "runtime/cpu/kernels/kernels.h"
#include "support/error.h"

namespace vtc::cpu {

namespace {

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

}  // namespace

void attention(const float* q, const void* k, const void* v, const int32_t* q_pos, const int32_t* kv_pos,
               const AttentionParams& p, float* out, ThreadPool& pool) {
  const int64_t dk = p.head_dim;
  const int64_t dv = p.head_dim_v > 0 ? p.head_dim_v : p.head_dim;
  if (p.n_tokens < 0 || p.n_kv < 0 || dk <= 0 || p.n_head <= 0 || p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0)
    throw Error(fmt::format("attention: bad shape (n_head {}, n_head_kv {}, head_dim {})", p.n_head, p.n_head_kv, dk));
  if (p.kv_type != GgmlType::F16 && p.kv_type != GgmlType::F32)
    throw Error(fmt::format("attention: KV type {} is not supported (f16 or f32)", ggml_type_name(p.kv_type)));
  const bool f16 = p.kv_type == GgmlType::F16;
  const bool acc16 = f16 && p.f16_accumulator;
  const int64_t group = p.n_head / p.n_head_kv;
  const size_t esize = f16 ? 2 : 4;
  const auto* kb = static_cast<const uint8_t*>(k);
  const auto* vb = static_cast<const uint8_t*>(v);
  float scale = p.scale;
  if (p.softcap != 0.0f) scale /= p.softcap;
  const detail::FloatKernels& fk = detail::active_float_kernels();
  if (p.page_table != nullptr && p.page_size <= 0) throw Error("attention: a page table needs a page size");
  auto physical_row = [&](int64_t j) {
    return p.page_table == nullptr ? j : int64_t(p.page_table[j / p.page_size]) * p.page_size + j % p.page_size;
  };
  if (p.selected != nullptr && p.selected_width <= 0) throw Error("attention: selected rows need a positive width");
  const int64_t n_pos = p.selected != nullptr ? key_position_span(kv_pos, p.n_kv) : 0;

  pool.parallel_for(p.n_tokens * p.n_head, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> acc32;
    thread_local std::vector<uint16_t> acc16v, q16;
    acc32.resize(static_cast<size_t>(dv));
    acc16v.resize(static_cast<size_t>(dv));
    q16.resize(static_cast<size_t>(dk));
    SelectedMask selected(p, n_pos);
    for (int64_t row = begin; row < end; ++row) {
      const int64_t t = row / p.n_head;
      const int64_t h = row % p.n_head;
      const int64_t hkv = h / group;
      selected.use_query(t);
      const float* qr = q + row * dk;
      if (f16) fk.f32_to_f16(qr, q16.data(), dk);
      if (acc16) std::fill(acc16v.begin(), acc16v.end(), uint16_t{0});
      else std::fill(acc32.begin(), acc32.end(), 0.0f);
      float M = -std::numeric_limits<float>::infinity();
      float S = 0.0f;
      const int32_t qp = q_pos[t];
      for (int64_t j = 0; j < p.n_kv; ++j) {
        const int32_t kp = kv_pos != nullptr ? kv_pos[j] : static_cast<int32_t>(j);
        if (kp > qp) continue;
        if (p.n_swa > 0 && static_cast<int64_t>(qp) - kp >= p.n_swa) continue;
        if (!selected.allows(kp)) continue;
        const int64_t r = physical_row(j);
        const size_t k_off = static_cast<size_t>((r * p.n_head_kv + hkv) * dk) * esize;
        const size_t v_off = static_cast<size_t>((r * p.n_head_kv + hkv) * dv) * esize;
        float s = f16 ? fk.dot_f16(reinterpret_cast<const uint16_t*>(kb + k_off), q16.data(), dk)
                      : fk.dot_f32(reinterpret_cast<const float*>(kb + k_off), qr, dk);
        s *= scale;
        if (p.softcap != 0.0f) s = p.softcap * std::tanh(s);
        float ms = 1.0f, vs = 1.0f;
        if (s > M) {
          const float m_old = M;
          M = s;
          ms = std::exp(m_old - M);
          if (acc16) fk.scale_f16(acc16v.data(), ms, dv);
          else fk.scale(acc32.data(), ms, acc32.data(), dv);
        } else {
          vs = std::exp(s - M);
        }
        if (acc16) fk.mad_f16(acc16v.data(), reinterpret_cast<const uint16_t*>(vb + v_off), vs, dv);
        else if (f16) fk.mad_f32_f16(acc32.data(), reinterpret_cast<const uint16_t*>(vb + v_off), vs, dv);
        else fk.mad_f32(acc32.data(), reinterpret_cast<const float*>(vb + v_off), vs, dv);
        S = S * ms + vs;
      }
      if (acc16) {
        const float* tab = detail::fp16_table();
        for (int64_t d = 0; d < dv; ++d) acc32[static_cast<size_t>(d)] = tab[acc16v[static_cast<size_t>(d)]];
      }
      const float inv = S == 0.0f ? 0.0f : 1.0f / S;
      fk.scale(acc32.data(), inv, out + row * dv, dv);
    }
  });
}

}  // namespace vtc::cpu
