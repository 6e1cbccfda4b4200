// CPU kernels for linear-attention layers (Gated DeltaNet: qwen3-next,
// qwen3.5), with the reference's numerics (docs/ir.md: l2_norm,
// causal_conv1d, delta_rule). See linear_attention.cpp for the summation
// orders and how they follow llama.cpp's CPU backend.
#pragma once

#include <cstdint>

#include "runtime/cpu/thread_pool.h"

namespace vtc::cpu {

// y[r] = x[r] / max(sqrt(sum(x[r]^2)), eps) per row of n_cols (ggml_l2_norm:
// the sum of squares accumulates in double, in order). x and y may alias.
void l2_norm(const float* x, float eps, int64_t n_rows, int64_t n_cols, float* y);

struct CausalConvParams {
  int64_t n_tokens = 0;
  int64_t channels = 0;  // C
  int64_t kernel = 0;    // K, taps per channel
  int64_t dilation = 1;
  int64_t n_seqs = 0;    // sequences of the batch (valid values of seq[t])
};

// Depthwise causal convolution over a batch that mixes sequences:
//   y[t, c] = sum_k w[c, k] * x'[t - (K-1-k)*dilation, c],
// where x' is sequence seq[t]'s inputs in batch order, continued backwards
// into its history states[seq[t]] ([(K-1)*dilation][C], oldest row first).
// Afterwards each history holds the sequence's newest (K-1)*dilation inputs.
// x [n_tokens][C], w [C][K], y [n_tokens][C] (must not alias x). Tokens of
// one sequence must be in position order. Throws vtc::Error for a seq[t]
// outside [0, n_seqs). Channels are split over the pool.
void causal_conv1d(const float* x, const float* w, const int32_t* seq, float* const* states,
                   const CausalConvParams& params, float* y, ThreadPool& pool);

struct DeltaRuleParams {
  int64_t n_tokens = 0;
  int64_t n_heads = 0;  // H (q, k, v, g and beta all have H heads)
  int64_t dk = 0;       // key / query head size
  int64_t dv = 0;       // value head size
  int64_t n_seqs = 0;   // sequences of the batch (valid values of seq[t])
  float scale = 1.0f;   // multiplies every output (usually 1/sqrt(dk))
  bool gate_per_key = false;  // g is [n_tokens][H][dk] (KDA), not [n_tokens][H]
};

// The gated delta rule (ggml_gated_delta_net). Per sequence s and head h,
// M = states[s] + h*dv*dk is a dv x dk matrix (row j is column j of the
// reference's S), updated in place for each token of s in batch order:
//   M *= exp(g); d[j] = (v[j] - M[j].k) * beta; M[j] += d[j] * k;
//   out[j] = scale * M[j].q,
// with one decay per head, or with gate_per_key one per key channel:
// M[j][i] *= exp(g[i]) for every row j.
// q, k [n_tokens][H][dk]; v, out [n_tokens][H][dv]; beta [n_tokens][H];
// g [n_tokens][H] or, with gate_per_key, [n_tokens][H][dk].
// Throws vtc::Error for a seq[t] outside [0, n_seqs). The (sequence, head)
// pairs are split over the pool.
void delta_rule(const float* q, const float* k, const float* v, const float* g, const float* beta,
                const int32_t* seq, float* const* states, const DeltaRuleParams& params, float* out,
                ThreadPool& pool);

}  // namespace vtc::cpu
