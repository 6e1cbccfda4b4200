// command-r (Command-R, Command-R+), as the reference's
// src/models/command-r.cpp: layer norms with a gain and no bias, and a
// parallel block where attention and FFN read the same normed input:
//
//   x = token_embd[ids]
//   per layer:
//     h = layer_norm(x) * attn_norm              eps attention.layer_norm_epsilon
//     q, k, v = build_qkv(h)                     each * scale + bias
//     (n_layer >= 64 only) q, k = layer_norm over head_dim * attn_q_norm, attn_k_norm [H, head_dim]
//     x = x + swiglu(h) + attention(rope(q), rope(k), v) Wo * scale
//                                                normal rope; no FFN scales (the graph passes none)
//   logits = ((layer_norm(x) * output_norm) token_embd) * logit_scale   (when non-zero)
//
// The output matrix is always token_embd: the loader takes no output.weight.
// The q/k norms exist only for the 64+-layer models (Command-R+), as the
// loader creates them only there.
#include <fmt/format.h>

#include "frontends/gguf/arch/step_graph.h"

namespace vtc::arch {
namespace {

using ir::Value;

constexpr int64_t kQkNormMinLayers = 64;

class CommandR final : public Transformer {
 public:
  CommandR(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o) {
    norm_eps_ = f.get_float(h.arch + ".attention.layer_norm_epsilon").value_or(1e-5);
    logit_scale_ = f.get_float(h.arch + ".logit_scale").value_or(0.0);
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    ir::RopeOptions rope = rope_options(h);
    rope.mode = ir::RopeMode::Normal;
    const bool qk_norm = h.n_layer >= kQkNormMinLayers;
    Value x = ir::Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      Value cur = norm(g, x, blk(l, "attn_norm"));
      auto [q, k, v] = g.qkv(cur, l);
      if (qk_norm) {
        q = per_head_norm(g, q, blk(l, "attn_q_norm"));
        k = per_head_norm(g, k, blk(l, "attn_k_norm"));
      }
      Value a = g.attention(b.rope(q, g.pos, rope), b.rope(k, g.pos, rope), v, l);
      Value attn_out = g.linear(b.reshape(a, {g.n, h.n_head * h.head_dim}), blk(l, "attn_output"));
      Value ffn = g.swiglu_ffn(cur, l, "", FfnTensors{.scales = false});
      x = ir::Builder::named(b.add(b.add(ffn, x), attn_out), fmt::format("x{}", l));
    }
    return x;
  }

  Value head(StepGraph& g, Value rows) const override {
    Value logits = g.b.matmul(norm(g, rows, "output_norm"), g.weight("token_embd"));
    return logit_scale_ != 0.0 ? g.b.scale(logits, logit_scale_) : logits;
  }
  Value embedding(StepGraph& g, Value x) const override { return norm(g, x, "output_norm"); }

 private:
  Value norm(StepGraph& g, Value x, std::string_view gain) const {
    return g.layer_norm(x, gain, norm_eps_, Need::kNever);
  }
  // x [n, H, head_dim]; the gain is one row per head [H, head_dim].
  Value per_head_norm(StepGraph& g, Value x, std::string_view gain) const {
    return g.b.mul(g.b.layer_norm(x, Value(), Value(), norm_eps_), g.weight(gain));
  }

  double norm_eps_ = 1e-5, logit_scale_ = 0.0;
};

}  // namespace

ir::Module build_command_r(const gguf::GgufFile& f, const BuildOptions& o) { return build<CommandR>(f, o); }

}  // namespace vtc::arch
