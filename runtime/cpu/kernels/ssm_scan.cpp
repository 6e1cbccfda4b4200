// The selective scan (ssm_scan.h), after ggml_compute_forward_ssm_scan_f32.
//
// Work split: one state row (sequence s, head h, row p) depends only on its
// own previous value and the token's dt, x, B and C, so the S*H*P rows are
// independent; a worker takes a range of rows and runs each row's tokens in
// batch order. softplus(dt) and, for Mamba-2, the head's decay
// exp(softplus(dt) * A[h]) are computed once per (token, head) first.
//
// Arithmetic, per state element: the decayed state and the input term are
// rounded products added unfused (this file is built with
// -ffp-contract=off), as the reference's vector path does
// (GGML_F32_VEC_MUL, MUL, ADD), so the state matches it bit for bit given
// the same decay (softplus and expf are the reference's expressions).
// Mamba-2's output y = sum_i S[i] * C[i] is the reference's own sum: its
// loop accumulates exactly as ggml_vec_dot_f32 (4 x L fused lanes, the same
// reduction, then the leftovers), which linear_attention.cpp emulates for
// the active ISA (detail::vec_dot_f32_ref), so a Mamba-2 layer gives the
// reference's bits. Mamba-1's per-element decay exp(d * A[h, i]) is
// computed per element with expf, as the reference's scalar loop does, and
// its state and y follow that loop's order and fused operations (see
// scan_row_element_decay).
#include "runtime/cpu/kernels/ssm_scan.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/cpu/kernels/internal.h"
#include "runtime/cpu/kernels/kernels.h"
#include "support/error.h"
#include "support/mutation.h"

namespace vtc::cpu {
namespace {


float softplus_ref(float v) { return v > 20.0f ? v : std::log(1.0f + std::exp(v)); }

// One token's update of one state row (n elements) with a scalar decay;
// returns the row's dot product with c in the reference's order
// (ggml_vec_dot_f32's, which its Mamba-2 loop shares).
// The update runs 4 elements at a time in GCC vector types: -O2's cheap
// vectorizer leaves the plain loop scalar (s and b may alias, n is not a
// constant), and it was a quarter of a Mamba-2 decode step. Every element
// is still its own rounded multiply, multiply and add (this file is built
// with -ffp-contract=off), so the bits are the scalar loop's.
float scan_row_scalar_decay(float* s, float decay, const float* b, float xd, const float* c, int64_t n) {
  using f32x4 = float __attribute__((vector_size(16)));
  const f32x4 vdecay = {decay, decay, decay, decay}, vxd = {xd, xd, xd, xd};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    f32x4 sv, bv;
    std::memcpy(&sv, s + i, sizeof sv);
    std::memcpy(&bv, b + i, sizeof bv);
    sv = sv * vdecay + bv * vxd;
    std::memcpy(s + i, &sv, sizeof sv);
  }
  for (; i < n; ++i) s[i] = s[i] * decay + b[i] * xd;
  return detail::vec_dot_f32_ref(s, c, n);
}

// The same with a decay per element: exp(d * a[i]). The reference's loop
// cannot be vectorised (expf) and runs in order; its FMA builds (GCC
// contracting) compute state = fma(s, exp(d a), b * xd) and
// sum = fma(state, c, sum); a build without FMA (vtc's scalar ISA) rounds
// every product.
float scan_row_element_decay(float* s, float d, const float* a, const float* b, float xd, const float* c, int64_t n,
                             bool fused) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float decay = std::exp(d * a[i]);
    const float st = fused ? std::fma(s[i], decay, b[i] * xd) : s[i] * decay + b[i] * xd;
    s[i] = st;
    sum = fused ? std::fma(st, c[i], sum) : sum + st * c[i];
  }
  return sum;
}

}  // namespace

void ssm_scan(const float* x, const float* dt, const float* a, const float* b, const float* c, const int32_t* seq,
              float* const* states, const SsmScanParams& p, float* y, ThreadPool& pool) {
  const int64_t n_h = p.n_heads, n_p = p.head_dim, n_n = p.state_size, n_g = p.n_groups;
  if (n_h <= 0 || n_p <= 0 || n_n <= 0 || n_g <= 0 || n_h % n_g != 0)
    throw Error(fmt::format("ssm_scan: bad sizes: {} heads of {} rows, state size {}, {} groups", n_h, n_p, n_n, n_g));
  const auto members = detail::tokens_by_sequence(seq, p.n_tokens, p.n_seqs, "ssm_scan");
  const int64_t heads_per_group = n_h / n_g;
  // softplus(dt) and (Mamba-2) the head's decay, per (token, head).
  std::vector<float> soft(size_t(p.n_tokens * n_h)), decay(p.per_element_decay ? 0 : soft.size());
  const float decay_step = mutated(Mutation::SsmScanDecay) ? 0.5f : 1.0f;  // support/mutation.h
  for (int64_t th = 0; th < p.n_tokens * n_h; ++th) {
    soft[size_t(th)] = softplus_ref(dt[th]);
    if (!p.per_element_decay) decay[size_t(th)] = std::exp(decay_step * soft[size_t(th)] * a[th % n_h]);
  }
  const int64_t rows_per_seq = n_h * n_p;
  const bool fused = active_isa() != Isa::Scalar;
  pool.parallel_for(p.n_seqs * rows_per_seq, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t s = item / rows_per_seq, row = item % rows_per_seq, h = row / n_p;
      const int64_t g = h / heads_per_group;
      float* st = states[s] + row * n_n;
      for (int64_t t : members[size_t(s)]) {
        const int64_t th = t * n_h + h;
        const float* bt = b + (t * n_g + g) * n_n;
        const float* ct = c + (t * n_g + g) * n_n;
        const float xd = x[t * rows_per_seq + row] * soft[size_t(th)];
        y[t * rows_per_seq + row] =
            p.per_element_decay ? scan_row_element_decay(st, decay_step * soft[size_t(th)], a + h * n_n, bt, xd, ct, n_n, fused)
                                : scan_row_scalar_decay(st, decay[size_t(th)], bt, xd, ct, n_n);
      }
    }
  });
}

}  // namespace vtc::cpu
