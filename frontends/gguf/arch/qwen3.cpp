// qwen3 and qwen3moe, as the reference's src/models/qwen3.cpp and
// qwen3moe.cpp: qwen2's layer with QK-norm (required: both architectures
// always load attn_q_norm and attn_k_norm), no output bias, and for
// qwen3moe every FFN a mixture of experts:
//
//   per layer:
//     h = rms_norm(x) * attn_norm
//     q, k, v = build_qkv(h)                  each * scale + bias
//     q, k = rms_norm over head_dim * attn_q_norm, attn_k_norm
//     x += attention(rope(q), rope(k), v) Wo * scale        neox rope
//     h = rms_norm(x) * ffn_norm
//     x += qwen3:    swiglu(h), each projection * scale
//          qwen3moe: build_moe_ffn(h): softmax router ffn_gate_inp, top
//                    expert_used_count renormalized, split gate/up experts
//                    with per-expert scales (no shared expert)
//   logits = (rms_norm(x) * output_norm) Woutput * output.scale
#include <fmt/format.h>

#include "frontends/gguf/arch/step_graph.h"

namespace vtc::arch {
namespace {

using ir::Value;

class Qwen3 final : public Transformer {
 public:
  Qwen3(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o) {
    if (h.arch == "qwen3moe") n_expert_used_ = read_expert_hparams(f, h.arch);
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    const ir::RopeOptions rope = rope_options(h);
    Value x = ir::Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      Value cur = g.norm(x, blk(l, "attn_norm"));
      auto [q, k, v] = g.qkv(cur, l);
      q = b.rope(g.norm(q, blk(l, "attn_q_norm")), g.pos, rope);
      k = b.rope(g.norm(k, blk(l, "attn_k_norm")), g.pos, rope);
      Value a = b.reshape(g.attention(q, k, v, l), {g.n, h.n_head * h.head_dim});
      x = b.add(x, g.linear(a, blk(l, "attn_output")));
      cur = g.norm(x, blk(l, "ffn_norm"));
      Value ffn = n_expert_used_ > 0 ? g.moe_ffn(cur, l, {.route = {.k = n_expert_used_}})
                                     : g.swiglu_ffn(cur, l);
      x = ir::Builder::named(b.add(x, ffn), fmt::format("x{}", l));
    }
    return x;
  }

 private:
  int64_t n_expert_used_ = 0;
};

}  // namespace

ir::Module build_qwen3(const gguf::GgufFile& f, const BuildOptions& o) { return build<Qwen3>(f, o); }

}  // namespace vtc::arch
