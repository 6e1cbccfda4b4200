// Mixture-of-experts kernels.
//
// moe_route follows build_moe_ffn: softmax (sum in double, as ggml) or
// sigmoid over all experts, top-k on the probabilities (ties to the lower
// index), the selected probabilities as weights, renormalized by their sum
// (summed in double as ggml_sum_rows, clamped at the smallest f16 normal).
//
// moe_ffn is the reference's mul_mat_id: (token, slot) pairs are grouped by
// expert, each expert's rows are gathered into one batch and run through
// that expert's gate/up/down matrices with the ordinary matmul kernel (so
// the quantized dot products, and the activation quantization per row, are
// the dense path's). Outputs land in a [T][k][D] scratch, then each token
// sums weight * expert output in slot order, as the reference multiplies
// the [D, k, T] expert tensor by the weights and adds the k views in order.
// A merged gate_up stack runs as two matmuls over its gate and up row
// halves: each output value is one row's dot product either way, so the
// values are those of the reference's one 2F-row matmul. Per-expert scales
// multiply the batch's matmul result before swiglu (gate, up) or before
// the scatter into the scratch (down), as build_lora_mm_id multiplies the
// mul_mat_id result; an unscaled stack skips the multiply.
#include "runtime/cpu/kernels/moe.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/cpu/kernels/kernels.h"
#include "support/error.h"

namespace vtc::cpu {

void moe_route(const float* logits, int64_t n_tokens, int64_t n_expert, int64_t k, MoeGating gating, bool norm,
               float scale, float* weights, int32_t* ids) {
  std::vector<float> probs(static_cast<size_t>(n_expert));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* row = logits + t * n_expert;
    if (gating == MoeGating::Softmax) softmax(row, 1, n_expert, 1.0f, probs.data());
    else sigmoid(row, probs.data(), n_expert);
    int32_t* id = ids + t * k;
    float* w = weights + t * k;
    top_k(probs.data(), n_expert, k, id);
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += double(w[j] = probs[size_t(id[j])]);
    if (norm) {
      const float denom = std::max(float(sum), 6.103515625e-5f);
      for (int64_t j = 0; j < k; ++j) w[j] /= denom;
    }
    if (scale != 0.0f && scale != 1.0f)
      for (int64_t j = 0; j < k; ++j) w[j] *= scale;
  }
}

namespace {

const uint8_t* expert_matrix(const ExpertStack& s, int64_t e) {
  const uint64_t row_bytes = ggml_bytes_for(s.type, uint64_t(s.cols)).value_or(0);
  const int64_t stride = s.stride_rows ? s.stride_rows : s.rows;
  return s.data + (uint64_t(e) * uint64_t(stride) + uint64_t(s.first_row)) * row_bytes;
}

// One expert's batch result [n][rows] times its scale, if the stack has one.
void apply_scale(const ExpertStack& s, int64_t e, float* v, int64_t n) {
  if (!s.scale) return;
  const float f = s.scale[e];
  for (int64_t i = 0; i < n; ++i) v[i] *= f;
}

}  // namespace

void moe_ffn(const ExpertStack& gate, const ExpertStack& up, const ExpertStack& down, const float* x,
             int64_t n_tokens, const float* weights, const int32_t* ids, int64_t k, float* out, ThreadPool& pool) {
  const int64_t n_expert = gate.n_expert, d = gate.cols, f = gate.rows;
  // Rows (t * k + j) routed to each expert, in token order.
  std::vector<std::vector<int64_t>> routed(static_cast<size_t>(n_expert));
  for (int64_t r = 0; r < n_tokens * k; ++r) {
    const int32_t e = ids[r];
    if (e < 0 || e >= n_expert)
      throw Error(fmt::format("moe_ffn: expert id {} (token {}, slot {}) is out of range [0, {})", e, r / k, r % k,
                              n_expert));
    routed[size_t(e)].push_back(r);
  }
  std::vector<float> y(static_cast<size_t>(n_tokens * k * d));
  std::vector<float> xs, g, u, ys;
  for (int64_t e = 0; e < n_expert; ++e) {
    const auto& rows = routed[size_t(e)];
    if (rows.empty()) continue;
    const int64_t n = int64_t(rows.size());
    xs.resize(size_t(n * d));
    for (int64_t i = 0; i < n; ++i) std::memcpy(&xs[size_t(i * d)], x + (rows[size_t(i)] / k) * d, size_t(d) * 4);
    g.resize(size_t(n * f));
    u.resize(size_t(n * f));
    ys.resize(size_t(n * d));
    matmul(gate.type, expert_matrix(gate, e), f, d, xs.data(), n, g.data(), pool);
    apply_scale(gate, e, g.data(), n * f);
    matmul(up.type, expert_matrix(up, e), f, d, xs.data(), n, u.data(), pool);
    apply_scale(up, e, u.data(), n * f);
    swiglu(g.data(), u.data(), g.data(), n * f);
    matmul(down.type, expert_matrix(down, e), d, f, g.data(), n, ys.data(), pool);
    apply_scale(down, e, ys.data(), n * d);
    for (int64_t i = 0; i < n; ++i) std::memcpy(&y[size_t(rows[size_t(i)] * d)], &ys[size_t(i * d)], size_t(d) * 4);
  }
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* o = out + t * d;
    for (int64_t j = 0; j < k; ++j) {
      const float w = weights[t * k + j];
      const float* yj = &y[size_t((t * k + j) * d)];
      if (j == 0) {
        for (int64_t i = 0; i < d; ++i) o[i] = yj[i] * w;
      } else {
        for (int64_t i = 0; i < d; ++i) o[i] += yj[i] * w;
      }
    }
  }
}

}  // namespace vtc::cpu
