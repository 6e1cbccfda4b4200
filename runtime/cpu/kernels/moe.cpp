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
// mul_mat_id result; an unscaled stack skips the multiply. Per-expert
// biases (gpt-oss) are added after the scale, as ggml_add_id follows the
// matmul; the activation is silu(g) * u or gpt-oss's swiglu_oai.
#include "runtime/cpu/kernels/moe.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/cpu/kernels/kernels.h"
#include "support/error.h"

namespace vtc::cpu {

namespace {

// DeepSeek V3's group limit: each group of consecutive experts scores the
// sum of its two best selection scores (double, best first, as ggml's
// sum_rows over the argsort_top_k rows); all but the groups_used best
// groups (ties to the lower group) are set to -inf.
void mask_groups(float* scores, int64_t n_expert, int64_t groups, int64_t groups_used) {
  const int64_t per_group = n_expert / groups, best = std::min<int64_t>(2, per_group);
  std::vector<float> group_score(static_cast<size_t>(groups));
  std::vector<int32_t> top(static_cast<size_t>(best)), kept(static_cast<size_t>(groups_used));
  for (int64_t g = 0; g < groups; ++g) {
    top_k(scores + g * per_group, per_group, best, top.data());
    double sum = 0;
    for (int64_t j = 0; j < best; ++j) sum += double(scores[g * per_group + top[size_t(j)]]);
    group_score[size_t(g)] = float(sum);
  }
  top_k(group_score.data(), groups, groups_used, kept.data());
  for (int64_t g = 0; g < groups; ++g)
    if (std::find(kept.begin(), kept.end(), int32_t(g)) == kept.end())
      std::fill(scores + g * per_group, scores + (g + 1) * per_group, -std::numeric_limits<float>::infinity());
}

}  // namespace

void moe_route(const float* logits, int64_t n_tokens, int64_t n_expert, const MoeRouteParams& p, float* weights,
               int32_t* ids) {
  const int64_t k = p.k;
  std::vector<float> probs(static_cast<size_t>(n_expert)), scores(static_cast<size_t>(n_expert));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* row = logits + t * n_expert;
    if (p.gating == MoeGating::Softmax) softmax(row, 1, n_expert, 1.0f, probs.data());
    else if (p.gating == MoeGating::Sigmoid) sigmoid(row, probs.data(), n_expert);
    else std::copy(row, row + n_expert, probs.begin());
    const float* selection = probs.data();
    if (p.selection_bias || p.groups > 1) {
      if (p.selection_bias) add(probs.data(), p.selection_bias, scores.data(), n_expert);
      else scores = probs;
      if (p.groups > 1) mask_groups(scores.data(), n_expert, p.groups, p.groups_used);
      selection = scores.data();
    }
    int32_t* id = ids + t * k;
    float* w = weights + t * k;
    top_k(selection, n_expert, k, id);
    for (int64_t j = 0; j < k; ++j) w[j] = probs[size_t(id[j])];
    if (p.gating == MoeGating::SoftmaxWeight) softmax(w, 1, k, 1.0f, w);
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += double(w[j]);
    const bool norm = p.norm;
    const float scale = p.scale;
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

// One expert's batch result [n][rows] times its scale, then plus its bias
// row, for what the stack has.
void apply_scale(const ExpertStack& s, int64_t e, float* v, int64_t n) {
  if (s.scale) {
    const float f = s.scale[e];
    for (int64_t i = 0; i < n * s.rows; ++i) v[i] *= f;
  }
  if (!s.bias) return;
  const float* b = s.bias + e * (s.stride_rows ? s.stride_rows : s.rows) + s.first_row;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < s.rows; ++i) v[r * s.rows + i] += b[i];
}

}  // namespace

void moe_activation(const MoeActivationParams& a, const float* gate, const float* up, float* y, int64_t n) {
  if (a.kind == MoeActivationParams::Kind::Silu) {
    swiglu(gate, up, y, n);
    return;
  }
  // ggml_compute_forward_swiglu_oai_f32, value by value in f32.
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], a.limit);
    const float u = std::clamp(up[i], -a.limit, a.limit);
    const float glu = g / (1.0f + std::exp(a.alpha * (-g)));
    y[i] = glu * (u + 1.0f);
  }
}

void moe_ffn(const ExpertStack& gate, const ExpertStack& up, const ExpertStack& down, const float* x,
             int64_t n_tokens, const float* weights, const int32_t* ids, int64_t k, float* out, ThreadPool& pool,
             const MoeActivationParams& act, bool weight_input) {
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
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = rows[size_t(i)];
      float* xi = &xs[size_t(i * d)];
      std::memcpy(xi, x + (r / k) * d, size_t(d) * 4);
      // ggml_mul of the repeated input by the weights, before the expert matmuls.
      if (weight_input)
        for (int64_t c = 0; c < d; ++c) xi[c] *= weights[r];
    }
    g.resize(size_t(n * f));
    u.resize(size_t(n * f));
    ys.resize(size_t(n * d));
    matmul(gate.type, expert_matrix(gate, e), f, d, xs.data(), n, g.data(), pool);
    apply_scale(gate, e, g.data(), n);
    matmul(up.type, expert_matrix(up, e), f, d, xs.data(), n, u.data(), pool);
    apply_scale(up, e, u.data(), n);
    moe_activation(act, g.data(), u.data(), g.data(), n * f);
    matmul(down.type, expert_matrix(down, e), d, f, g.data(), n, ys.data(), pool);
    apply_scale(down, e, ys.data(), n);
    for (int64_t i = 0; i < n; ++i) std::memcpy(&y[size_t(rows[size_t(i)] * d)], &ys[size_t(i * d)], size_t(d) * 4);
  }
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* o = out + t * d;
    for (int64_t j = 0; j < k; ++j) {
      const float w = weights[t * k + j];
      if (weight_input) {
        // The weights went into the input: the slot outputs add unweighted.
        const float* yj = &y[size_t((t * k + j) * d)];
        if (j == 0) std::memcpy(o, yj, size_t(d) * 4);
        else
          for (int64_t i = 0; i < d; ++i) o[i] += yj[i];
        continue;
      }
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
