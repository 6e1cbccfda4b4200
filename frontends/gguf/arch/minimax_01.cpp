// minimax-01 (MiniMax-Text-01), as the reference's src/models/minimax-01.cpp:
// a hybrid of lightning-attention layers (linear attention with a per-head
// scalar decay) and softmax-attention layers, every layer with routed
// experts, and post-norm residuals: what each sublayer adds to is its own
// normalized input scaled by residual_scale, not the residual stream.
//
//   x = token_embd[ids]
//   per layer:
//     h = rms_norm(x) * attn_norm
//     a = lightning(h, l) or softmax_attention(h, l)
//     u = a + h * residual_scale
//     h2 = rms_norm(u) * ffn_norm
//     x = build_moe_ffn(h2) + h2 * residual_scale     softmax gating,
//                                                     renormalized, no
//                                                     weight scale, no
//                                                     per-expert scales
//   logits = (rms_norm(x) * output_norm) Woutput      (token_embd when tied)
//
// Which layers are lightning: attention.recurrent_layers when the file has
// it, else (l + 1) % full_attention_interval != 0 (default interval 8).
//
// Softmax attention: build_qkv (merged or split, scales and biases), neox
// rope over rope.dimension_count, attention / sqrt(head_dim), Wo * scale.
//
// Lightning attention, H = head_count heads of P = key_length:
//   qkv = silu(h Wqkv) [n, H, 3P]: per head q | k | v
//   per head, with decay s = slope(h) * slope_scale(l):
//     S_t = exp(-s) S_{t-1} + k_t v_t^T      ([P, P], state @la_state.l)
//     o_t = q_t S_t
//   out = ((rms_norm(o over all H * P) * attn_norm_2) * sigmoid(h Wgate)) Wo
// The reference computes the same in chunked form per batch (with i the
// token's index in the batch of T): o_i = exp(-s (i + 1)) q_i S_old +
// sum_{j <= i} exp(-s (i - j)) (q_i . k_j) v_j, and the new state
// exp(-s T) S_old + sum_j exp(-s (T - 1 - j)) k_j v_j^T, which is the
// recurrence unrolled (the old state decays once more before the first
// token reads it). Its Wqkv, Wgate and Wo take no scale.
//   slope(h) = start^(h + 1), start = 2^(-2^(-(log2(H) - 3)))   in float
//   slope_scale(l) = 1 - l / (n_layer - 1) + 1e-5
// The reference also keeps a conv state per lightning layer that it only
// copies along (its size, from ssm.conv_kernel, which this loader never
// reads, is 0): nothing reads it, so vtc keeps none.
#include <fmt/format.h>

#include <cmath>

#include "frontends/gguf/arch/step_graph.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Builder;
using ir::Value;

// The lightning slopes as the reference's set_input writes them, in float
// and in its order. Not support/alibi.h's alibi_slope: for a power-of-two
// head count it is the same geometric series with max_bias 8, but it has no
// second series for other head counts and rounds its steps differently.
float lightning_slope(int64_t n_head, int64_t h) {
  const float start = std::pow(2.0f, -std::pow(2.0f, -(std::log2(float(n_head)) - 3.0f)));
  return start * std::pow(start, float(h));
}

class Minimax01 final : public Transformer {
 public:
  Minimax01(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o) {
    const std::string& a = h.arch;
    const auto residual_scale = f.get_float(a + ".residual_scale");
    if (!residual_scale) throw Error(fmt::format("{}: missing hparam '{}.residual_scale'", f.path(), a));
    residual_scale_ = *residual_scale;
    // The lightning state is [P, P]: the reference asserts equal key and value head sizes.
    if (const int64_t v = f.get_int(a + ".attention.value_length").value_or(h.head_dim); v != h.head_dim)
      throw Error(fmt::format("{}: attention.value_length {} differs from the key head size {}", f.path(), v, h.head_dim));
    const std::vector<int64_t> marks = int_array(f, a + ".attention.recurrent_layers");
    const int64_t interval = f.get_int(a + ".full_attention_interval").value_or(8);
    if (interval <= 0) throw Error(fmt::format("{}: full_attention_interval must be positive", f.path()));
    for (int64_t l = 0; l < h.n_layer; ++l)
      lightning_.push_back(marks.empty() ? (l + 1) % interval != 0 : size_t(l) < marks.size() && marks[size_t(l)] != 0);
    // slope_scale divides by n_layer - 1: the reference's decays are NaN for one layer.
    if (h.n_layer < 2 && lightning_[0])
      throw Error(fmt::format("{}: a one-layer minimax-01 with a lightning-attention layer has no decay", f.path()));
    n_expert_used_ = read_expert_hparams(f, a);
  }

  void declare_states(ir::Module& m) const override {
    const ir::Dim S = ir::Dim::symbol("S");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      if (!lightning_[size_t(l)]) {
        declare_kv_state(m, o_, h, l);
        continue;
      }
      m.add_state(fmt::format("la_state.{}", l), ir::StateKind::Plain,
                  {ir::ElemType::F32, {S, h.n_head, h.head_dim, h.head_dim}, ir::Placement::Device});
    }
  }

  Value forward(StepGraph& g) const override {
    Builder& b = g.b;
    const Decay decay = step_decay(g);
    Value x = Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      Value normed = g.norm(x, blk(l, "attn_norm"));
      Value a = lightning_[size_t(l)] ? lightning(g, normed, decay, l) : softmax_attention(g, normed, l);
      Value ffn_in = g.norm(b.add(a, b.scale(normed, residual_scale_)), blk(l, "ffn_norm"));
      Value moe = g.moe_ffn(ffn_in, l, MoeFfnOptions{.route = {.k = n_expert_used_}, .expert_scales = false});
      x = Builder::named(b.add(moe, b.scale(ffn_in, residual_scale_)), fmt::format("x{}", l));
    }
    return x;
  }

 private:
  // The scan's constant inputs, built once per step. The IR has no
  // constant tensors: a 1 is exp(0 * p) of a token position p (cast to
  // f32, always finite), and the slopes are 1 * slope(h).
  struct Decay {
    Value slopes;  // [H, 1]
    Value dt;      // [n, H], all kDt
  };

  // ssm_scan decays its state by exp(d * A) and adds B (x d), with d =
  // softplus(dt), or dt itself above 20 (docs/ir.md). dt = 32, A = -s / 32
  // and x = v / 32 (powers of two: exact in float) make that exactly
  // S = exp(-s) S + k v^T with B = k and C = q (one group per head, N = P).
  static constexpr double kDt = 32.0;

  Decay step_decay(StepGraph& g) const {
    Builder& b = g.b;
    Value ones = b.reshape(b.exp(b.scale(b.cast(g.pos, ir::ElemType::F32), 0.0)), {g.n, 1});
    Value one = b.reshape(b.slice(ones, 0, 0, 1), {1, 1});
    std::vector<Value> slopes, columns;
    for (int64_t head = 0; head < h.n_head; ++head) {
      slopes.push_back(b.scale(one, double(lightning_slope(h.n_head, head))));
      columns.push_back(ones);
    }
    return {b.concat(slopes, 0), b.scale(b.concat(columns, 1), kDt)};
  }

  Value lightning(StepGraph& g, Value normed, const Decay& decay, int64_t l) const {
    Builder& b = g.b;
    const int64_t H = h.n_head, P = h.head_dim;
    Value qkv = b.reshape(b.silu(g.linear_plain(normed, blk(l, "attn_qkv"))), {g.n, H, 3 * P});
    Value q = b.slice(qkv, 2, 0, P), k = b.slice(qkv, 2, P, P), v = b.slice(qkv, 2, 2 * P, P);
    // The reference scales the float slopes by the float slope_scale; the
    // further / 32 is exact.
    const float slope_scale = float(1.0 - 1.0 * double(l) / double(h.n_layer - 1) + 1e-5);
    Value a = b.scale(decay.slopes, -double(slope_scale) / kDt);
    Value o = b.ssm_scan(b.scale(v, 1.0 / kDt), decay.dt, a, k, q, g.seq, fmt::format("la_state.{}", l));
    Value normed_o = g.norm(b.reshape(o, {g.n, H * P}), blk(l, "attn_norm_2"));
    Value gate = b.sigmoid(g.linear_plain(normed, blk(l, "attn_gate")));
    return g.linear_plain(b.mul(gate, normed_o), blk(l, "attn_output"));
  }

  Value softmax_attention(StepGraph& g, Value normed, int64_t l) const {
    Builder& b = g.b;
    auto [q, k, v] = g.qkv(normed, l);
    const ir::RopeOptions rope = rope_options(h);
    q = b.rope(q, g.pos, rope);
    k = b.rope(k, g.pos, rope);
    Value a = b.reshape(g.attention(q, k, v, l), {g.n, h.n_head * h.head_dim});
    return g.linear(a, blk(l, "attn_output"));
  }

  double residual_scale_ = 1.0;
  std::vector<bool> lightning_;
  int64_t n_expert_used_ = 0;
};

}  // namespace

ir::Module build_minimax_01(const gguf::GgufFile& f, const BuildOptions& o) { return build<Minimax01>(f, o); }

}  // namespace vtc::arch
