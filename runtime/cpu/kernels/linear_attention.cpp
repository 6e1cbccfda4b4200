// Linear-attention kernels (linear_attention.h), following llama.cpp's CPU
// backend (ggml-cpu/ops.cpp) bit for bit where the build allows:
//
// - l2_norm is ggml_compute_forward_l2_norm_f32: the float squares summed
//   in double in order, scale = 1/fmaxf(sqrtf((float)sum), eps), y = x*scale.
// - causal_conv1d is ggml_compute_forward_ssm_conv_f32 applied to the
//   reference's concat(conv_state, x) window (delta-net-base.cpp,
//   build_conv_state), read through per-token row pointers instead of a
//   copy: per channel, sum over taps k ascending in float, starting at 0.
// - delta_rule is ggml_compute_forward_gated_delta_net_one_chunk (K = 1):
//   per token, ggml_vec_scale_f32 by expf(g) (the KDA form: each row
//   ggml_vec_mul_f32 by the vector expf(g[i]), plain products too), then
//   ggml_vec_dot_f32 rows against k, ggml_vec_mad_f32 rank-1 updates,
//   ggml_vec_dot_f32 rows against q.
//
// The last bits depend on how the reference was compiled (see
// docs/numerics-parity.md). Its scalar sum loops (`sum += a*b`) are
// vectorized by GCC with -ffp-contract=fast: products in blocks of L lanes
// (then one block of L/2) are rounded and added one by one in order, and
// the remaining < L/2 products are fused into the sum (vfmadd231ss), with
// L = 8 on AVX2 builds and 16 on AVX-512 builds (read from the disassembly
// of the prebuilt haswell and sapphirerapids backends, and the results
// checked bit for bit against them: l2_norm, ssm_conv with K = 2..30,
// gated_delta_net with head sizes 8..128). ggml_vec_dot_f32 first runs 4
// accumulators of L lanes as FMA chains over the leading multiple of 4L,
// reduces them (acc0+acc2, acc1+acc3, their sum, then a horizontal sum in
// the order of the AVX2 hadd / AVX-512 reduce_add), and adds the leftovers
// as above; ggml_vec_mad_f32 is fused throughout.
// vtc reproduces both with L = detail::reference_lanes() when the active
// ISA has FMA; on the scalar ISA (standing for the reference's builds
// without FMA) every sum is plain in-order float, unfused, which is not
// exactly the SSE build's order. This file is compiled with
// -ffp-contract=off so the compiler cannot fuse what is written unfused.
#include "runtime/cpu/kernels/linear_attention.h"

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

// How many leading products of an n-term in-order sum the reference rounds
// before adding (whole blocks of L, then one of L/2); the rest are fused.
int64_t unfused_products(int64_t n, int lanes) {
  if (lanes == 0) return n;
  const int64_t full = n / lanes * lanes;
  return full + (n - full >= lanes / 2 ? lanes / 2 : 0);
}

// acc + a[0]*b[0] + ... + a[n-1]*b[n-1], in order, as the reference's
// compiled `sum += a[i]*b[i]` loop rounds it.
float add_products(float acc, const float* a, const float* b, int64_t n, int lanes) {
  const int64_t m = unfused_products(n, lanes);
  for (int64_t i = 0; i < m; ++i) acc += a[i] * b[i];
  for (int64_t i = m; i < n; ++i) acc = std::fma(a[i], b[i], acc);
  return acc;
}

// ggml_vec_dot_f32 with L-lane vectors (L = 8 or 16), emulated lane by lane.
float dot_ref(const float* a, const float* b, int64_t n, int lanes) {
  if (lanes == 0) return add_products(0.0f, a, b, n, 0);
  const int64_t step = 4 * int64_t(lanes), np = n / step * step;
  // The active AVX2 table has the reference's lane count (reference_lanes).
  if (const auto blocks = detail::active_float_kernels().dot_f32_blocks)
    return add_products(np ? blocks(a, b, np) : 0.0f, a + np, b + np, n - np, lanes);
  float acc[4][16] = {};
  for (int64_t i = 0; i < np; i += step)
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < lanes; ++l) acc[j][l] = std::fma(a[i + j * lanes + l], b[i + j * lanes + l], acc[j][l]);
  float r[16];
  for (int l = 0; l < lanes; ++l) r[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
  float sum;
  if (lanes == 8) {
    float t[4];  // AVX2: 8 -> 4, then two hadds
    for (int l = 0; l < 4; ++l) t[l] = r[l] + r[l + 4];
    sum = (t[0] + t[1]) + (t[2] + t[3]);
  } else {
    float t8[8], t4[4];  // _mm512_reduce_add_ps: 16 -> 8 -> 4 -> (0+2) + (1+3)
    for (int l = 0; l < 8; ++l) t8[l] = r[l] + r[l + 8];
    for (int l = 0; l < 4; ++l) t4[l] = t8[l] + t8[l + 4];
    sum = (t4[0] + t4[2]) + (t4[1] + t4[3]);
  }
  return add_products(sum, a + np, b + np, n - np, lanes);
}

// The history after a sequence's n new inputs: its last `width` rows of
// x' (old history, then the new rows), oldest first.
void roll_history(float* hist, int64_t width, const float* x, int64_t channels, const std::vector<int64_t>& rows) {
  const int64_t n = int64_t(rows.size());
  const int64_t kept = width > n ? width - n : 0;  // old rows that stay
  const size_t row_bytes = size_t(channels) * sizeof(float);
  if (kept > 0) std::memmove(hist, hist + n * channels, size_t(kept) * row_bytes);
  for (int64_t r = kept; r < width; ++r)
    std::memcpy(hist + r * channels, x + rows[size_t(n - width + r)] * channels, row_bytes);
}

}  // namespace

namespace detail {

float vec_dot_f32_ref(const float* a, const float* b, int64_t n) {
  return dot_ref(a, b, n, detail::reference_vector_width());
}

std::vector<std::vector<int64_t>> tokens_by_sequence(const int32_t* seq, int64_t n_tokens, int64_t n_seqs,
                                                     const char* op) {
  std::vector<std::vector<int64_t>> members(size_t(n_seqs > 0 ? n_seqs : 0));
  for (int64_t t = 0; t < n_tokens; ++t) {
    if (seq[t] < 0 || seq[t] >= n_seqs)
      throw Error(fmt::format("{}: token {} has sequence index {}, outside [0, {})", op, t, seq[t], n_seqs));
    members[size_t(seq[t])].push_back(t);
  }
  return members;
}

}  // namespace detail

void l2_norm(const float* x, float eps, int64_t n_rows, int64_t n_cols, float* y) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * n_cols;
    float* yr = y + r * n_cols;
    double sum = 0.0;
    for (int64_t i = 0; i < n_cols; ++i) sum += static_cast<double>(xr[i] * xr[i]);
    // sqrtf of the sum rounded to float, as the reference's sqrtf(sum).
    const float scale = 1.0f / std::fmax(std::sqrt(static_cast<float>(sum)), eps);
    for (int64_t i = 0; i < n_cols; ++i) yr[i] = xr[i] * scale;
  }
}

void causal_conv1d(const float* x, const float* w, const int32_t* seq, float* const* states,
                   const CausalConvParams& p, float* y, ThreadPool& pool) {
  const int64_t n_k = p.kernel, n_c = p.channels, width = (n_k - 1) * p.dilation;
  if (n_k < 1 || p.dilation < 1)
    throw Error(fmt::format("causal_conv1d: bad kernel width {} or dilation {}", n_k, p.dilation));
  const auto members = detail::tokens_by_sequence(seq, p.n_tokens, p.n_seqs, "causal_conv1d");
  const int64_t unfused = unfused_products(n_k, detail::reference_vector_width());
  for (size_t s = 0; s < members.size(); ++s) {
    const auto& rows = members[s];
    if (rows.empty()) continue;
    const float* hist = states[s];
    pool.parallel_for(n_c, [&](int64_t c0, int64_t c1) {
      std::vector<const float*> taps(static_cast<size_t>(n_k));
      for (int64_t i = 0; i < int64_t(rows.size()); ++i) {
        // Tap k reads x'[i - (K-1-k)*dilation]: this step's row, or the
        // history row for indices before the step (history row width + j).
        for (int64_t k = 0; k < n_k; ++k) {
          const int64_t j = i - (n_k - 1 - k) * p.dilation;
          taps[size_t(k)] = j >= 0 ? x + rows[size_t(j)] * n_c : hist + (width + j) * n_c;
        }
        float* yr = y + rows[size_t(i)] * n_c;
        for (int64_t c = c0; c < c1; ++c) {
          const float* wc = w + c * n_k;
          float acc = 0.0f;
          for (int64_t k = 0; k < unfused; ++k) acc += wc[k] * taps[size_t(k)][c];
          for (int64_t k = unfused; k < n_k; ++k) acc = std::fma(wc[k], taps[size_t(k)][c], acc);
          yr[c] = acc;
        }
      }
    });
    if (mutated(Mutation::ConvRingShift) && rows.size() > 1)  // support/mutation.h: the ring one row late
      roll_history(states[s], width, x, n_c, std::vector<int64_t>(rows.begin(), rows.end() - 1));
    else
      roll_history(states[s], width, x, n_c, rows);
  }
}

namespace {

// One token of the recurrence on one head's matrix m (dv rows of dk); g is
// the head's decay, or its dk per-key decays with p.gate_per_key. decay is
// dk floats of scratch.
void delta_rule_token(float* m, const float* q, const float* k, const float* v, const float* g, float beta,
                      const DeltaRuleParams& p, int lanes, float* out, float* delta, float* decay) {
  const auto& fk = detail::active_float_kernels();
  const int64_t dk = p.dk, dv = p.dv;
  // Plain products, exact on every ISA.
  if (p.gate_per_key) {
    for (int64_t i = 0; i < dk; ++i) decay[i] = std::exp(g[i]);
    for (int64_t j = 0; j < dv; ++j) fk.mul(m + j * dk, decay, m + j * dk, dk);
  } else {
    fk.scale(m, std::exp(g[0]), m, dv * dk);
  }
  for (int64_t j = 0; j < dv; ++j) delta[j] = (v[j] - dot_ref(m + j * dk, k, dk, lanes)) * beta;
  for (int64_t j = 0; j < dv; ++j) {
    float* row = m + j * dk;
    if (lanes != 0) {
      fk.mad_f32(row, k, delta[j], dk);  // fused, as ggml_vec_mad_f32 on FMA builds
    } else {
      for (int64_t i = 0; i < dk; ++i) row[i] = row[i] + k[i] * delta[j];
    }
  }
  for (int64_t j = 0; j < dv; ++j) out[j] = dot_ref(m + j * dk, q, dk, lanes) * p.scale;
}

}  // namespace

void delta_rule(const float* q, const float* k, const float* v, const float* g, const float* beta,
                const int32_t* seq, float* const* states, const DeltaRuleParams& p, float* out,
                ThreadPool& pool) {
  const auto members = detail::tokens_by_sequence(seq, p.n_tokens, p.n_seqs, "delta_rule");
  const int64_t n_h = p.n_heads, dk = p.dk, dv = p.dv;
  const int lanes = detail::reference_vector_width();
  // (sequence, head) pairs are independent; the tokens of one pair are a
  // recurrence and run in order on one worker.
  pool.parallel_for(p.n_seqs * n_h, [&](int64_t begin, int64_t end) {
    std::vector<float> delta(static_cast<size_t>(dv)), decay(static_cast<size_t>(dk));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t s = item / n_h, h = item % n_h;
      float* m = states[s] + h * dv * dk;
      for (int64_t t : members[size_t(s)]) {
        const int64_t th = t * n_h + h;
        const float* gate = p.gate_per_key ? g + th * dk : g + th;
        delta_rule_token(m, q + th * dk, k + th * dk, v + th * dv, gate, beta[th], p, lanes, out + th * dv,
                         delta.data(), decay.data());
      }
    }
  });
}

}  // namespace vtc::cpu
