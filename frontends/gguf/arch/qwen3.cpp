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

class Qwen3 final : public Architecture {
 public:
  Qwen3(const gguf::GgufFile& f, const BuildOptions& o) : h_(read_dense_hparams(f)), o_(o) {
    if (h_.arch == "qwen3moe") n_expert_used_ = read_expert_hparams(f, h_.arch);
  }
  const DenseHparams& hparams() const { return h_; }

  void declare_states(ir::Module& m) const override {
    for (int64_t l = 0; l < h_.n_layer; ++l) declare_kv_state(m, o_, h_, l);
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    const ir::RopeOptions rope = rope_options(h_);
    Value x = ir::Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h_.n_layer; ++l) {
      Value h = g.norm(x, blk(l, "attn_norm"));
      auto [q, k, v] = g.qkv(h, l);
      q = b.rope(g.norm(q, blk(l, "attn_q_norm")), g.pos, rope);
      k = b.rope(g.norm(k, blk(l, "attn_k_norm")), g.pos, rope);
      Value a = b.reshape(g.attention(q, k, v, l), {g.n, h_.n_head * h_.head_dim});
      x = b.add(x, g.linear(a, blk(l, "attn_output")));
      h = g.norm(x, blk(l, "ffn_norm"));
      Value ffn = n_expert_used_ > 0 ? g.moe_ffn(h, l, n_expert_used_)
                                     : g.swiglu_ffn(h, l);
      x = ir::Builder::named(b.add(x, ffn), fmt::format("x{}", l));
    }
    return x;
  }

  Value head(StepGraph& g, Value rows) const override { return g.output(g.norm(rows, "output_norm")); }

 private:
  DenseHparams h_;
  const BuildOptions& o_;
  int64_t n_expert_used_ = 0;
};

}  // namespace

ir::Module build_qwen3(const gguf::GgufFile& f, const BuildOptions& o) {
  const Qwen3 arch(f, o);
  return build_architecture(f, arch.hparams(), arch, o);
}

}  // namespace vtc::arch
