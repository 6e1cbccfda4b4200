// CPU kernels for mixture-of-experts layers (docs/ir.md: moe_route,
// moe_ffn), with the reference's numerics (llama-graph.cpp build_moe_ffn).
#pragma once

#include <cstdint>

#include "ir/attr_enums.h"
#include "runtime/cpu/thread_pool.h"
#include "support/ggml_type.h"

namespace vtc::cpu {

using MoeGating = ir::MoeGating;  // ir/attr_enums.def

struct MoeRouteParams {
  int64_t k = 1;
  MoeGating gating = MoeGating::Softmax;
  bool norm = true;
  float scale = 0.0f;                     // 0 or 1: none
  const float* selection_bias = nullptr;  // [n_expert], or null
  int64_t groups = 0, groups_used = 0;    // grouped selection when groups > 1
};

// Per token: probs = softmax or sigmoid of logits[t] (n_expert values), or
// the logits themselves (SoftmaxWeight); the selection scores are probs +
// selection_bias when given; with groups > 1 only the groups_used groups
// whose two best scores sum highest stay selectable; ids[t] = the k
// largest scores, largest first, ties to the lower index; weights[t] =
// probs[ids], softmaxed over the k for SoftmaxWeight, divided by max(sum,
// 6.103515625e-5) when `norm`, then times `scale` unless it is 0 or 1.
// logits [n_tokens][n_expert]; weights, ids [n_tokens][k].
void moe_route(const float* logits, int64_t n_tokens, int64_t n_expert, const MoeRouteParams& p, float* weights,
               int32_t* ids);

// One stack of expert matrices: n_expert matrices of rows x cols of `type`,
// each laid out as a matmul weight. Expert e's matrix starts at row
// e * stride_rows + first_row of `data` (stride_rows 0 means `rows`), so
// the gate and up halves of a merged [E][2F][D] gate_up stack are two views
// of it (first_row 0 and F, stride_rows 2F) without a copy. `scale`, when
// set, holds n_expert f32 factors: expert e's matmul result times scale[e].
// `bias`, when set, is an f32 [n_expert][stride_rows or rows] table laid
// out like the matrix rows: expert e adds bias[e * stride + first_row + i]
// to its output row i, after the scale (ggml_add_id).
struct ExpertStack {
  GgmlType type = GgmlType::F32;
  const uint8_t* data = nullptr;
  int64_t n_expert = 0, rows = 0, cols = 0;
  int64_t first_row = 0, stride_rows = 0;
  const float* scale = nullptr;
  const float* bias = nullptr;
};

// The gated activation a(g, u) of the experts (docs/ir.md "### moe_ffn").
// Silu: silu(g) * u. SwigluOai (ggml_swiglu_oai): g' = min(g, limit), u' =
// clamp(u, -limit, limit), g' / (1 + exp(alpha * -g')) * (u' + 1).
struct MoeActivationParams {
  using Kind = ir::MoeActivationKind;
  Kind kind = Kind::Silu;
  float alpha = 1.702f, limit = 7.0f;
};

// y = a(gate, up) over n values, as the reference rounds it.
void moe_activation(const MoeActivationParams& a, const float* gate, const float* up, float* y, int64_t n);

// out[t] = sum over j < k (in order) of weights[t][j] * the gated FFN of
// x[t] through expert ids[t][j]: gate, up [E][F][D], down [E][D][F], each
// result scaled right after its matmul when the stack has a scale, then
// biased when it has a bias; `act` picks the activation. With
// weight_input (llama4's weight_before_ffn) slot j's expert runs on the
// f32 product x[t] * weights[t][j] instead, and out[t] is the plain sum of
// the slot outputs in order.
// x [n_tokens][D], out [n_tokens][D] (must not alias x). Throws vtc::Error
// for an id outside [0, E).
void moe_ffn(const ExpertStack& gate, const ExpertStack& up, const ExpertStack& down, const float* x,
             int64_t n_tokens, const float* weights, const int32_t* ids, int64_t k, float* out, ThreadPool& pool,
             const MoeActivationParams& act = {}, bool weight_input = false);

}  // namespace vtc::cpu
