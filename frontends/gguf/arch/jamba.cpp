// jamba (Jamba, AI21), as the reference's src/models/jamba.cpp: Mamba-1
// layers where head_count_kv[l] is 0, attention without rope elsewhere,
// and an FFN (dense SwiGLU or routed experts) after every mixer:
//
//   h = rms_norm(x) * attn_norm
//   x += head_count_kv[l] == 0
//          ? mamba1_layer(h)                  (arch/ssm.h, with the dt/B/C norms)
//          : attention(build_qkv(h); 1/sqrt(head_dim)) Wo * attn_output.scale
//   h = rms_norm(x) * ffn_norm
//   x += expert_count == 0 or no ffn_gate_inp in the layer
//          ? swiglu(h)                        no biases, no scales
//          : build_moe_ffn(h)                 softmax, top expert_used_count, not
//                                             renormalized, times expert_weights_scale
//   logits = (rms_norm(x) * output_norm) Woutput * output.scale
#include <fmt/format.h>

#include <cmath>

#include "frontends/gguf/arch/ssm.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Builder;
using ir::Value;

class Jamba final : public Transformer {
 public:
  Jamba(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o) {
    ssm_ = read_ssm_hparams(f, h.arch, /*mamba2=*/false);
    ssm_.bc_norms = true;
    recurrent_ = layers_without_kv_heads(f, h.arch, h.n_layer);
    if (f.get_int(h.arch + ".expert_count").value_or(0) > 0) {
      n_expert_used_ = read_expert_hparams(f, h.arch);
      expert_weights_scale_ = f.get_float(h.arch + ".expert_weights_scale").value_or(0.0);
    }
  }

  void declare_states(ir::Module& m) const override { declare_hybrid_states(m, o_, h, ssm_, recurrent_); }

  Value forward(StepGraph& g) const override {
    Builder& b = g.b;
    Value x = Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      Value normed = g.norm(x, blk(l, "attn_norm"));
      x = b.add(x, recurrent_[size_t(l)] ? mamba_layer(g, ssm_, normed, l) : attention(g, normed, l));
      x = Builder::named(b.add(x, ffn(g, g.norm(x, blk(l, "ffn_norm")), l)), fmt::format("x{}", l));
    }
    return x;
  }

 private:
  Value attention(StepGraph& g, Value normed, int64_t l) const {
    Builder& b = g.b;
    auto [q, k, v] = g.qkv(normed, l);
    ir::AttentionOptions attn{.state = fmt::format("kv.{}", l), .scale = double(1.0f / std::sqrt(float(h.head_dim)))};
    Value a = b.reshape(b.attention(q, k, v, g.pos, g.seq, attn), {g.n, h.n_head * h.head_dim});
    return g.linear(a, blk(l, "attn_output"));
  }

  Value ffn(StepGraph& g, Value normed, int64_t l) const {
    if (n_expert_used_ == 0 || !g.has(blk(l, "ffn_gate_inp")))
      return g.swiglu_ffn(normed, l, "", FfnTensors{.biases = false, .scales = false});
    return g.moe_ffn(normed, l,
                     MoeFfnOptions{.route = {.k = n_expert_used_, .norm = false, .scale = expert_weights_scale_},
                                   .expert_scales = false});
  }

  SsmHparams ssm_;
  std::vector<bool> recurrent_;
  int64_t n_expert_used_ = 0;
  double expert_weights_scale_ = 0.0;
};

}  // namespace

ir::Module build_jamba(const gguf::GgufFile& f, const BuildOptions& o) { return build<Jamba>(f, o); }

}  // namespace vtc::arch
