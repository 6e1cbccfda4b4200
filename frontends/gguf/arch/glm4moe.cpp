// glm4moe (GLM-4.5, GLM-4.5-Air, Solar Open), as the reference's
// src/models/glm4-moe.cpp:
//
//   per layer (block_count - nextn_predict_layers trunk layers):
//     h = rms_norm(x) * attn_norm
//     q, k, v = build_qkv(h)                each * scale + bias
//     q, k = rms_norm over head_dim * attn_q_norm, attn_k_norm   (when present)
//     q, k = rope(q), rope(k)               neox on the first n_rot dims (partial rotary)
//     x += attention(q, k, v) / sqrt(head_dim) Wo * attn_output.scale
//     h = rms_norm(x) * post_attention_norm
//     x += layer < leading_dense_block_count ? swiglu(h)      (no scales)
//          : build_moe_ffn(h) + swiglu_shexp(h)               (no scales; shared
//            expert when expert_shared_count > 0)
//            router ffn_gate_inp, gating expert_gating_func (default sigmoid),
//            selection bias exp_probs_b (picks only), expert groups,
//            expert_weights_norm, expert_weights_scale; split gate/up experts
//   logits = (rms_norm(x) * output_norm) Woutput * output.scale
//
// With rope.dimension_sections set the reference uses multi-section rope
// (M-RoPE), but a text token carries the same position in all four
// components, which makes it neox rope exactly (docs/ir.md: rope).
// The NextN/MTP block (blk.N for N >= the trunk layers, with its nextn.*
// tensors) is loaded by the reference only for speculative decoding and
// never applied to the logits.
#include <fmt/format.h>

#include "frontends/gguf/arch/step_graph.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Value;

class Glm4Moe final : public Transformer {
 public:
  Glm4Moe(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o) {
    const std::string& a = h.arch;
    n_layer_ = h.n_layer - f.get_int(a + ".nextn_predict_layers").value_or(0);
    if (n_layer_ <= 0) throw Error(fmt::format("{}: no trunk layers (nextn_predict_layers >= block_count)", f.path()));
    n_dense_ = f.get_int(a + ".leading_dense_block_count").value_or(0);
    n_used_ = read_expert_hparams(f, a);
    n_shared_ = f.get_int(a + ".expert_shared_count").value_or(-1);
    if (n_shared_ < 0) throw Error(fmt::format("{}: missing hparam '{}.expert_shared_count'", f.path(), a));
    const int64_t func = f.get_int(a + ".expert_gating_func").value_or(0);
    if (func < 0 || func > 3)
      throw Error(fmt::format("{}: expert_gating_func {} is not supported (softmax, sigmoid, softmax_weight)", f.path(),
                              func));
    gating_ = func == 1 ? ir::MoeGating::Softmax : func == 3 ? ir::MoeGating::SoftmaxWeight : ir::MoeGating::Sigmoid;  // none: sigmoid
    norm_ = f.get_int(a + ".expert_weights_norm").value_or(0) != 0;
    scale_ = f.get_float(a + ".expert_weights_scale").value_or(0.0);
    groups_ = f.get_int(a + ".expert_group_count").value_or(0);
    groups_used_ = f.get_int(a + ".expert_group_used_count").value_or(0);
  }

  void declare_states(ir::Module& m) const override {
    for (int64_t l = 0; l < n_layer_; ++l) declare_kv_state(m, o_, h, l);
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    const ir::RopeOptions rope = rope_options(h);  // neox
    Value x = ir::Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < n_layer_; ++l) {
      Value cur = g.norm(x, blk(l, "attn_norm"));
      auto [q, k, v] = g.qkv(cur, l);
      if (g.has(blk(l, "attn_q_norm"))) q = g.norm(q, blk(l, "attn_q_norm"));
      if (g.has(blk(l, "attn_k_norm"))) k = g.norm(k, blk(l, "attn_k_norm"));
      Value a = g.attention(b.rope(q, g.pos, rope), b.rope(k, g.pos, rope), v, l);
      x = b.add(x, g.linear(b.reshape(a, {g.n, h.n_head * h.head_dim}), blk(l, "attn_output")));
      cur = g.norm(x, blk(l, "post_attention_norm"));
      x = ir::Builder::named(b.add(x, ffn(g, cur, l)), fmt::format("x{}", l));
    }
    return x;
  }

 private:
  Value ffn(StepGraph& g, Value x, int64_t l) const {
    const FfnTensors plain{.biases = false, .scales = false};
    if (l < n_dense_) return g.swiglu_ffn(x, l, "", plain);
    ir::MoeRouteOptions route{.k = n_used_, .gating = gating_, .norm = norm_, .scale = scale_,
                              .selection_bias = g.weight(blk(l, "exp_probs_b.bias")), .groups = groups_,
                              .groups_used = groups_used_};
    Value moe = g.moe_ffn(x, l, {.route = route, .expert_scales = false});
    return n_shared_ > 0 ? g.b.add(moe, g.swiglu_ffn(x, l, "_shexp", plain)) : moe;
  }

  int64_t n_layer_ = 0, n_dense_ = 0, n_used_ = 0, n_shared_ = 0, groups_ = 0, groups_used_ = 0;
  ir::MoeGating gating_ = ir::MoeGating::Sigmoid;
  bool norm_ = false;
  double scale_ = 0.0;
};

}  // namespace

ir::Module build_glm4moe(const gguf::GgufFile& f, const BuildOptions& o) { return build<Glm4Moe>(f, o); }

}  // namespace vtc::arch
