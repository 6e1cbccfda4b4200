// falcon-h1 (Falcon-H1), as the reference's src/models/falcon-h1.cpp: every
// layer runs attention and a Mamba-2 mixer side by side on the same normed
// input, adds both to the residual stream, then a SwiGLU FFN:
//
//   per layer:
//     h = rms_norm(x) * attn_norm
//     q, k, v = build_qkv(h)                    each * scale + bias
//     a = attention(rope(q), rope(k), v; attention.scale, else 1/sqrt(head_dim))
//         Wo * attn_output.scale                 (no bias: the graph passes none)
//     x += a + mamba2_layer(h)                   (arch/ssm.h; conv bias and
//                                                 ssm_norm optional)
//     x += swiglu(rms_norm(x) * ffn_norm)        with biases, without scales
//   logits = (rms_norm(x) * output_norm) Woutput * output.scale
//
// The checkpoint's MuP multipliers are folded into the weights by the
// converter: the reference's graph reads none, and neither does this one.
// Rope is neox. Each layer has both a KV state and the two recurrent states.
#include <fmt/format.h>

#include <cmath>

#include "frontends/gguf/arch/ssm.h"

namespace vtc::arch {
namespace {

using ir::Builder;
using ir::Value;

class FalconH1 final : public Architecture {
 public:
  FalconH1(const gguf::GgufFile& f, const BuildOptions& o) : Architecture(f), o_(o) {
    ssm_ = read_ssm_hparams(f, h.arch, /*mamba2=*/true);
    ssm_.conv_bias_optional = true;
    const double attention_scale = f.get_float(h.arch + ".attention.scale").value_or(0.0);
    kq_scale_ = attention_scale != 0.0 ? attention_scale : double(1.0f / std::sqrt(float(h.head_dim)));
  }

  void declare_states(ir::Module& m) const override {
    for (int64_t l = 0; l < h.n_layer; ++l) {
      declare_ssm_states(m, ssm_, l);
      declare_kv_state(m, o_, h, l);
    }
  }

  Value forward(StepGraph& g) const override {
    Builder& b = g.b;
    Value x = Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      Value normed = g.norm(x, blk(l, "attn_norm"));
      Value mixed = b.add(attention(g, normed, l), mamba_layer(g, ssm_, normed, l));
      x = b.add(mixed, x);
      Value ffn = g.swiglu_ffn(g.norm(x, blk(l, "ffn_norm")), l, "", FfnTensors{.biases = true, .scales = false});
      x = Builder::named(b.add(ffn, x), fmt::format("x{}", l));
    }
    return x;
  }

  Value head(StepGraph& g, Value rows) const override { return g.output(embedding(g, rows)); }
  Value embedding(StepGraph& g, Value x) const override { return g.norm(x, "output_norm"); }

 private:
  Value attention(StepGraph& g, Value normed, int64_t l) const {
    Builder& b = g.b;
    const ir::RopeOptions rope = rope_options(h);
    auto [q, k, v] = g.qkv(normed, l);
    ir::AttentionOptions attn{.state = fmt::format("kv.{}", l), .scale = kq_scale_};
    Value a = b.attention(b.rope(q, g.pos, rope), b.rope(k, g.pos, rope), v, g.pos, g.seq, attn);
    return g.linear(b.reshape(a, {g.n, h.n_head * h.head_dim}), blk(l, "attn_output"));
  }

  const BuildOptions& o_;
  SsmHparams ssm_;
  double kq_scale_ = 1.0;
};

}  // namespace

ir::Module build_falcon_h1(const gguf::GgufFile& f, const BuildOptions& o) { return build<FalconH1>(f, o); }

}  // namespace vtc::arch
