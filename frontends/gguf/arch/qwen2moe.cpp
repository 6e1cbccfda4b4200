// qwen2moe (Qwen1.5-MoE, Qwen2-57B-A14B), as the reference's
// src/models/qwen2moe.cpp: qwen2's attention, and every FFN a mixture of
// experts plus a shared expert gated per token:
//
//   per layer:
//     h = rms_norm(x) * attn_norm
//     q, k, v = build_qkv(h)                  each * scale + bias
//     x += attention(rope(q), rope(k), v) Wo * scale        neox rope
//     h = rms_norm(x) * ffn_norm
//     x += build_moe_ffn(h)                   softmax router ffn_gate_inp, top
//                                             expert_used_count, NOT renormalized,
//                                             no weight scale, no per-expert scales
//        + sigmoid(h . ffn_gate_inp_shexp) * swiglu_shexp(h)   no scales
//   logits = (rms_norm(x) * output_norm) Woutput * output.scale
//
// The reference computes the shared gate as silu(g) / g, which is
// sigmoid(g) (up to rounding; it is NaN at g = 0, where sigmoid is 1/2).
// ffn_gate_inp_shexp is one [D] row: its dot product with h is mul then
// sum over D.
#include <fmt/format.h>

#include "frontends/gguf/arch/step_graph.h"

namespace vtc::arch {
namespace {

using ir::Value;

class Qwen2Moe final : public Transformer {
 public:
  Qwen2Moe(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o) {
    n_expert_used_ = read_expert_hparams(f, h.arch);
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    const ir::RopeOptions rope = rope_options(h);  // neox
    Value x = ir::Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      Value cur = g.norm(x, blk(l, "attn_norm"));
      auto [q, k, v] = g.qkv(cur, l);
      Value a = g.attention(b.rope(q, g.pos, rope), b.rope(k, g.pos, rope), v, l);
      x = b.add(x, g.linear(b.reshape(a, {g.n, h.n_head * h.head_dim}), blk(l, "attn_output")));
      cur = g.norm(x, blk(l, "ffn_norm"));
      Value moe = g.moe_ffn(cur, l, MoeFfnOptions{.route = {.k = n_expert_used_, .norm = false}, .expert_scales = false});
      Value gate = b.sigmoid(b.sum(b.mul(cur, g.weight(blk(l, "ffn_gate_inp_shexp")))));
      Value shared = b.mul(g.swiglu_ffn(cur, l, "_shexp", FfnTensors{.scales = false}), gate);
      x = ir::Builder::named(b.add(x, b.add(moe, shared)), fmt::format("x{}", l));
    }
    return x;
  }

 private:
  int64_t n_expert_used_ = 0;
};

}  // namespace

ir::Module build_qwen2moe(const gguf::GgufFile& f, const BuildOptions& o) { return build<Qwen2Moe>(f, o); }

}  // namespace vtc::arch
