// CPU kernels for mixture-of-experts layers (docs/ir.md: moe_route,
// moe_ffn), with the reference's numerics (llama-graph.cpp build_moe_ffn).
#pragma once

#include <cstdint>

#include "runtime/cpu/thread_pool.h"
#include "support/ggml_type.h"

namespace vtc::cpu {

enum class MoeGating : uint8_t { Softmax, Sigmoid };

// Per token: probs = softmax or sigmoid of logits[t] (n_expert values);
// ids[t] = the k largest probs, largest first, ties to the lower index;
// weights[t] = probs[ids], divided by max(sum, 6.103515625e-5) when `norm`,
// then times `scale` unless it is 0 or 1.
// logits [n_tokens][n_expert]; weights, ids [n_tokens][k].
void moe_route(const float* logits, int64_t n_tokens, int64_t n_expert, int64_t k, MoeGating gating, bool norm,
               float scale, float* weights, int32_t* ids);

// One stack of expert matrices: n_expert matrices of rows x cols of `type`,
// each laid out as a matmul weight. Expert e's matrix starts at row
// e * stride_rows + first_row of `data` (stride_rows 0 means `rows`), so
// the gate and up halves of a merged [E][2F][D] gate_up stack are two views
// of it (first_row 0 and F, stride_rows 2F) without a copy. `scale`, when
// set, holds n_expert f32 factors: expert e's matmul result times scale[e].
struct ExpertStack {
  GgmlType type = GgmlType::F32;
  const uint8_t* data = nullptr;
  int64_t n_expert = 0, rows = 0, cols = 0;
  int64_t first_row = 0, stride_rows = 0;
  const float* scale = nullptr;
};

// out[t] = sum over j < k (in order) of weights[t][j] * swiglu-FFN of x[t]
// through expert ids[t][j]: gate, up [E][F][D], down [E][D][F], each result
// scaled right after its matmul when the stack has a scale.
// x [n_tokens][D], out [n_tokens][D] (must not alias x). Throws vtc::Error
// for an id outside [0, E).
void moe_ffn(const ExpertStack& gate, const ExpertStack& up, const ExpertStack& down, const float* x,
             int64_t n_tokens, const float* weights, const int32_t* ids, int64_t k, float* out, ThreadPool& pool);

}  // namespace vtc::cpu
