// deepseek2 (DeepSeek V2/V3, Kimi K2 and the other MLA models in this
// layout) and mistral4 (the reference's llama_model_mistral4 derives from
// llama_model_deepseek2: its hparams, tensors, graph and normal rope type),
// as the reference's src/models/deepseek2.cpp with multi-head
// latent attention in its absorbed form (the MLA layout: the file has
// key_length_mla/value_length_mla and the split attn_k_b/attn_v_b):
//
//   per layer (block_count - nextn_predict_layers trunk layers):
//     h = rms_norm(x) * attn_norm
//     q = q_lora_rank > 0 ? (rms_norm(h Wq_a) * attn_q_a_norm) Wq_b : h Wq
//         [T, H, dk], dk = key_length_mla = nope + rope (n_rot)
//     kv = h Wkv_a_mqa                   [T, kv_lora + rope]: latent | k_pe
//     k_pe = rope(kv[kv_lora:])          one head, normal rope
//     c = rms_norm(kv[:kv_lora]) * attn_kv_a_norm     the latent [T, kv_lora]
//     q_abs[t, h] = q[t, h, :nope] Wk_b[h]^T          [T, H, kv_lora]
//     Q = q_abs | rope(q[:, :, nope:]),  K = c | k_pe  (one kv head), V = c
//     o = attention(Q, K, V) * kq_scale, kq_scale = mscale^2 / sqrt(dk) with
//         the reference's YaRN mscale (1 without rope scaling)
//     x += (o[t, h] Wv_b[h]^T) Wo * attn_output.scale   Wv_b: latent -> value_length_mla
//     h = rms_norm(x) * ffn_norm
//     x += layer < leading_dense_block_count ? swiglu(h)  (no scales)
//          : build_moe_ffn(h) + swiglu_shexp(h)          (no scales)
//            router ffn_gate_inp, gating expert_gating_func (softmax or
//            sigmoid), selection bias exp_probs_b (picks only), expert groups,
//            expert_weights_norm, expert_weights_scale; split or merged
//            gate/up experts
//   logits = (rms_norm(x) * output_norm) Woutput      (no output scale)
//
// The attention op takes k and v of one shape, so K = V = c | k_pe
// [T, 1, kv_lora + rope] is appended to the KV state twice and each head's
// output keeps its first kv_lora values (= softmax . c, as the reference's
// V view of its K cache). That stores V redundantly (kv_lora of every
// kv_lora + rope values); a V-is-a-prefix-of-K attention is the follow-up.
// Scores and values are exactly the reference's absorbed MQA. The block is
// MlaAttention (arch/mla.h), which kimi-linear shares.
//
// Not supported (a clear error): files without the MLA keys (the legacy
// attn_kv_b layout), attention temperature scaling (mistral-large), the
// sqrt_softplus gating. The NextN/MTP block (blk.N for N >= the trunk
// layers) is loaded by the reference only for speculative decoding and
// never applied to the logits.
#include <fmt/format.h>

#include <cmath>

#include "frontends/gguf/arch/mla.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Value;

class Deepseek2 final : public Architecture {
 public:
  Deepseek2(const gguf::GgufFile& f, const BuildOptions& o) : Architecture(f), o_(o) {
    const std::string& a = h.arch;
    n_layer_ = h.n_layer - f.get_int(a + ".nextn_predict_layers").value_or(0);
    if (n_layer_ <= 0) throw Error(fmt::format("{}: no trunk layers (nextn_predict_layers >= block_count)", f.path()));
    dk_ = f.get_int(a + ".attention.key_length_mla").value_or(0);
    dv_ = f.get_int(a + ".attention.value_length_mla").value_or(0);
    if (dk_ <= 0 || dv_ <= 0)
      throw Error(fmt::format("{}: deepseek2 without attention.key_length_mla/value_length_mla (the legacy attn_kv_b "
                              "layout) is not supported",
                              f.path()));
    if (f.get_float(a + ".attention.temperature_scale").value_or(0.0) != 0.0)
      throw Error(fmt::format("{}: attention temperature scaling is not supported", f.path()));
    // The reference's "lite" variants take attn_q without a q_lora_rank key.
    const int64_t vocab = f.get_int(a + ".vocab_size").value_or(h.n_vocab);
    const bool lite = h.n_layer == 27 || h.n_layer == 26 || (h.n_layer == 48 && vocab == 128256);
    q_lora_ = lite ? 0 : require_int(f, a + ".attention.q_lora_rank");
    kv_lora_ = require_int(f, a + ".attention.kv_lora_rank");
    rot_ = h.n_rot;
    if (dk_ - rot_ < 1) throw Error(fmt::format("{}: key_length_mla {} leaves no non-rotary part", f.path(), dk_));
    n_dense_ = f.get_int(a + ".leading_dense_block_count").value_or(0);
    read_moe(f, vocab);
    kq_scale_ = mla_kq_scale(f);
    ir::RopeOptions rope = rope_options(h);
    rope.mode = ir::RopeMode::Normal;  // the reference's rope type for deepseek2
    mla_ = MlaAttention({.n_head = h.n_head, .dk = dk_, .dv = dv_, .kv_lora = kv_lora_, .rot = rot_,
                         .q_lora = q_lora_ > 0, .rope = true, .rope_options = rope, .kq_scale = kq_scale_});
  }

  void declare_states(ir::Module& m) const override {
    for (int64_t l = 0; l < n_layer_; ++l) mla_.declare_state(m, o_, l);
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    Value x = ir::Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < n_layer_; ++l) {
      x = b.add(x, mla_(g, g.norm(x, blk(l, "attn_norm")), l));
      Value cur = g.norm(x, blk(l, "ffn_norm"));
      const FfnTensors plain{.biases = false, .scales = false};
      Value ffn = l < n_dense_ ? g.swiglu_ffn(cur, l, "", plain)
                               : b.add(g.moe_ffn(cur, l, {.route = route(g, l), .merged_allowed = true, .expert_scales = false}), g.swiglu_ffn(cur, l, "_shexp", plain));
      x = ir::Builder::named(b.add(x, ffn), fmt::format("x{}", l));
    }
    return x;
  }

  // The reference multiplies by the output matrix without its scale.
  Value head(StepGraph& g, Value rows) const override {
    return g.linear_plain(g.norm(rows, "output_norm"), g.has("output") ? "output" : "token_embd");
  }

 private:
  void read_moe(const gguf::GgufFile& f, int64_t vocab) {
    const std::string& a = h.arch;
    if (n_dense_ >= n_layer_) return;
    n_used_ = read_expert_hparams(f, a);
    if (!f.get_int(a + ".expert_shared_count")) throw Error(fmt::format("{}: missing hparam '{}.expert_shared_count'", f.path(), a));
    // Old V2/V2.5 files have no gating key: softmax, except GLM 4.7 Lite.
    const bool glm_lite = (h.n_layer == 47 || h.n_layer == 48) && vocab == 154880;
    gating_ = expert_gating(f, f.get_int(a + ".expert_gating_func").value_or(0), glm_lite ? ir::MoeGating::Sigmoid : ir::MoeGating::Softmax);
    norm_ = f.get_int(a + ".expert_weights_norm").value_or(0) != 0;
    scale_ = f.get_float(a + ".expert_weights_scale").value_or(0.0);
    groups_ = f.get_int(a + ".expert_group_count").value_or(0);
    groups_used_ = f.get_int(a + ".expert_group_used_count").value_or(0);
  }

  // kq_scale of the reference's MLA graph: mscale^2 / sqrt(key_length_mla),
  // mscale = attn_factor (1 + 0.1 ln(1/freq_scale)) (1 + 0.1 log_mul ln(1/freq_scale)),
  // which cancels the context's YaRN magnitude adjustment and applies the
  // model's own; attn_factor is what the rope gets (h.yarn_attn_factor).
  double mla_kq_scale(const gguf::GgufFile& f) const {
    const float log_mul = float(f.get_float(h.arch + ".rope.scaling.yarn_log_multiplier").value_or(0.0)) / 0.1f;
    const float inv_scale = 1.0f / h.rope_freq_scale;
    const float attn_factor_org = h.yarn_attn_factor * (1.0f + 0.1f * std::log(inv_scale));
    const float mscale = attn_factor_org * (1.0f + 0.1f * log_mul * std::log(inv_scale));
    return double(1.0f * mscale * mscale / std::sqrt(float(dk_)));
  }

  ir::MoeRouteOptions route(StepGraph& g, int64_t l) const {
    return {.k = n_used_, .gating = gating_, .norm = norm_, .scale = scale_,
            .selection_bias = g.optional(blk(l, "exp_probs_b.bias")), .groups = groups_, .groups_used = groups_used_};
  }

  const BuildOptions& o_;
  int64_t n_layer_ = 0, dk_ = 0, dv_ = 0, q_lora_ = 0, kv_lora_ = 0, rot_ = 0, n_dense_ = 0;
  int64_t n_used_ = 0, groups_ = 0, groups_used_ = 0;
  ir::MoeGating gating_ = ir::MoeGating::Softmax;
  bool norm_ = false;
  double scale_ = 0.0, kq_scale_ = 1.0;
  MlaAttention mla_{MlaShape{}};
};

}  // namespace

ir::Module build_deepseek2(const gguf::GgufFile& f, const BuildOptions& o) { return build<Deepseek2>(f, o); }

}  // namespace vtc::arch
