// olmoe (OLMoE), as the reference's src/models/olmoe.cpp: QK-norm over the
// whole projection width before the head split, and every FFN a mixture of
// experts:
//
//   per layer:
//     h = rms_norm(x) * attn_norm
//     q, k, v = h Wq, h Wk, h Wv              no scale, no bias (the graph passes none)
//     q, k = rms_norm over n_head * head_dim * attn_q_norm, attn_k_norm
//     x += attention(rope(q), rope(k), v) Wo * scale        neox rope, per-head split after the norm
//     h = rms_norm(x) * ffn_norm
//     x += build_moe_ffn(h)                   softmax router ffn_gate_inp, top
//                                             expert_used_count, NOT renormalized
//                                             (the graph passes norm_w = false;
//                                             olmoe reads no expert_weights_norm),
//                                             no weight scale, no per-expert scales
//   logits = (rms_norm(x) * output_norm) Woutput * output.scale
#include <fmt/format.h>

#include "frontends/gguf/arch/step_graph.h"

namespace vtc::arch {
namespace {

using ir::Value;

class Olmoe final : public Transformer {
 public:
  Olmoe(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o) {
    n_expert_used_ = read_expert_hparams(f, h.arch);
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    const ir::RopeOptions rope = rope_options(h);  // neox
    auto heads = [&](Value y, int64_t count) { return b.reshape(y, {g.n, count, h.head_dim}); };
    Value x = ir::Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      Value cur = g.norm(x, blk(l, "attn_norm"));
      Value q = heads(g.norm(g.linear_plain(cur, blk(l, "attn_q")), blk(l, "attn_q_norm")), h.n_head);
      Value k = heads(g.norm(g.linear_plain(cur, blk(l, "attn_k")), blk(l, "attn_k_norm")), h.n_head_kv);
      Value v = heads(g.linear_plain(cur, blk(l, "attn_v")), h.n_head_kv);
      Value a = g.attention(b.rope(q, g.pos, rope), b.rope(k, g.pos, rope), v, l);
      x = b.add(x, g.linear(b.reshape(a, {g.n, h.n_head * h.head_dim}), blk(l, "attn_output")));
      cur = g.norm(x, blk(l, "ffn_norm"));
      Value moe = g.moe_ffn(cur, l, MoeFfnOptions{.route = {.k = n_expert_used_, .norm = false}, .expert_scales = false});
      x = ir::Builder::named(b.add(x, moe), fmt::format("x{}", l));
    }
    return x;
  }

 private:
  int64_t n_expert_used_ = 0;
};

}  // namespace

ir::Module build_olmoe(const gguf::GgufFile& f, const BuildOptions& o) { return build<Olmoe>(f, o); }

}  // namespace vtc::arch
