// granite (Granite 3.x dense and, with experts, Granite MoE under the same
// architecture name) and granitemoe (Granite MoE's own name, dense or with
// experts), as the reference's src/models/granite.cpp (granite-moe.cpp
// loads the same tensors and builds granite's graph): llama's layer with
// Granite's four scalars:
//
//   x = token_embd[ids] * embedding_scale          (when the key is non-zero)
//   per layer:
//     h = rms_norm(x) * attn_norm
//     q, k, v = build_qkv(h)                       each * scale + bias
//     q, k = rope(q, k, pos, rope_freqs)           normal rope, when rope.scaling.finetuned
//                                                  (default true: Granite's rope switch;
//                                                  granitemoe reads no switch and always ropes)
//     x += residual_scale * (attention(q, k, v; scale attention.scale, else
//          1/sqrt(head_dim)) Wo * scale + attn_output.bias)
//     h = rms_norm(x) * ffn_norm
//     x += residual_scale * (expert_count == 0
//            ? swiglu(h), each projection + bias, no scales
//            : build_moe_ffn(h) (softmax, top expert_used_count, renormalized,
//              no weight scale, no per-expert scales)
//              + swiglu_shexp(h) when expert_shared_feed_forward_length > 0)
//   logits = ((rms_norm(x) * output_norm) Woutput * output.scale) / logit_scale
//
// residual_scale 0 (absent) means none, as the reference tests it.
//
// granitehybrid (Granite 4.0, src/models/granite-hybrid.cpp) is the same
// layer with Mamba-2 token mixers on the layers whose head_count_kv is 0
// (arch/ssm.h: x += residual_scale * mamba2_layer(rms_norm(x) * attn_norm),
// states @ssm_conv.l and @ssm_state.l instead of @kv.l), and logit_scale
// optional (0 or absent: no scaling).
#include <fmt/format.h>

#include <cmath>

#include "frontends/gguf/arch/ssm.h"
#include "frontends/gguf/arch/step_graph.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Value;

class Granite final : public Transformer {
 public:
  Granite(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o) {
    const std::string& a = h.arch;
    const bool hybrid = a == "granitehybrid";
    const auto logit_scale = f.get_float(a + ".logit_scale");
    if (!hybrid && (!logit_scale || *logit_scale == 0.0))
      throw Error(fmt::format("{}: missing or zero hparam '{}.logit_scale'", f.path(), a));
    logit_scale_ = logit_scale.value_or(0.0);
    recurrent_ = layers_without_kv_heads(f, a, h.n_layer);
    if (hybrid) ssm_ = read_ssm_hparams(f, a, /*mamba2=*/true);
    residual_scale_ = f.get_float(a + ".residual_scale").value_or(0.0);
    embedding_scale_ = f.get_float(a + ".embedding_scale").value_or(0.0);
    const double attention_scale = f.get_float(a + ".attention.scale").value_or(0.0);
    kq_scale_ = attention_scale != 0.0 ? attention_scale : 1.0 / std::sqrt(double(h.head_dim));
    // granitemoe's loader never reads the key: its layers always rope.
    if (const gguf::Value* finetuned = f.find(a + ".rope.scaling.finetuned"); finetuned && a == "granite")
      has_rope_ = finetuned->as_bool().value_or(true);
    if (f.get_int(a + ".expert_count").value_or(0) > 0) {
      n_expert_used_ = read_expert_hparams(f, a);
      shared_expert_ = f.get_int(a + ".expert_shared_feed_forward_length").value_or(0) > 0;
      // granite-hybrid.cpp passes expert_weights_scale to build_moe_ffn; granite.cpp passes none.
      if (hybrid) expert_weights_scale_ = f.get_float(a + ".expert_weights_scale").value_or(0.0);
    }
  }

  void declare_states(ir::Module& m) const override { declare_hybrid_states(m, o_, h, ssm_, recurrent_); }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    ir::RopeOptions rope = rope_options(h);
    rope.mode = ir::RopeMode::Normal;
    Value x = b.embed(g.weight("token_embd"), g.ids);
    if (embedding_scale_ != 0.0) x = b.scale(x, embedding_scale_);
    x = ir::Builder::named(x, "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      Value normed = g.norm(x, blk(l, "attn_norm"));
      x = b.add(x, residual(b, recurrent(l) ? mamba_layer(g, ssm_, normed, l) : attention(g, normed, rope, l)));
      x = ir::Builder::named(b.add(x, residual(b, ffn(g, g.norm(x, blk(l, "ffn_norm")), l))), fmt::format("x{}", l));
    }
    return x;
  }

  Value head(StepGraph& g, Value rows) const override {
    Value logits = g.output(g.norm(rows, "output_norm"));
    return logit_scale_ != 0.0 ? g.b.scale(logits, 1.0 / logit_scale_) : logits;
  }

 private:
  bool recurrent(int64_t l) const { return recurrent_[size_t(l)]; }

  Value attention(StepGraph& g, Value normed, const ir::RopeOptions& rope, int64_t l) const {
    ir::Builder& b = g.b;
    auto [q, k, v] = g.qkv(normed, l);
    if (has_rope_) {
      Value freqs = g.optional("rope_freqs");
      q = b.rope(q, g.pos, rope, freqs);
      k = b.rope(k, g.pos, rope, freqs);
    }
    ir::AttentionOptions attn{.state = fmt::format("kv.{}", l), .scale = kq_scale_};
    Value a = b.reshape(b.attention(q, k, v, g.pos, g.seq, attn), {g.n, h.n_head * h.head_dim});
    return g.linear_bias(a, blk(l, "attn_output"));
  }

  Value residual(ir::Builder& b, Value y) const { return residual_scale_ != 0.0 ? b.scale(y, residual_scale_) : y; }

  Value ffn(StepGraph& g, Value cur, int64_t l) const {
    if (n_expert_used_ == 0) return g.swiglu_ffn(cur, l, "", FfnTensors{.biases = true, .scales = false});
    Value moe = g.moe_ffn(
        cur, l, MoeFfnOptions{.route = {.k = n_expert_used_, .scale = expert_weights_scale_}, .expert_scales = false});
    if (!shared_expert_) return moe;
    return g.b.add(moe, g.swiglu_ffn(cur, l, "_shexp", FfnTensors{.scales = false}));
  }

  double logit_scale_ = 1.0, residual_scale_ = 0.0, embedding_scale_ = 0.0, kq_scale_ = 1.0, expert_weights_scale_ = 0.0;
  bool has_rope_ = true, shared_expert_ = false;
  int64_t n_expert_used_ = 0;
  std::vector<bool> recurrent_;  // granitehybrid's Mamba-2 layers
  SsmHparams ssm_;
};

}  // namespace

ir::Module build_granite(const gguf::GgufFile& f, const BuildOptions& o) { return build<Granite>(f, o); }

}  // namespace vtc::arch
