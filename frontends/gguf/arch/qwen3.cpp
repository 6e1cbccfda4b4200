// qwen3, qwen3moe and qwen3vl, as the reference's src/models/qwen3.cpp,
// qwen3moe.cpp and qwen3vl.cpp: qwen2's layer with QK-norm (required: these
// architectures always load attn_q_norm and attn_k_norm), no output bias,
// and for qwen3moe every FFN a mixture of experts:
//
//   per layer:
//     h = rms_norm(x) * attn_norm
//     q, k, v = build_qkv(h)                  each * scale + bias
//     q, k = rms_norm over head_dim * attn_q_norm, attn_k_norm
//     x += attention(rope(q), rope(k), v) Wo * scale        neox rope
//     h = rms_norm(x) * ffn_norm
//     x += qwen3:    swiglu(h), each projection * scale
//          qwen3vl:  swiglu(h), no scales (its build_ffn passes none)
//          qwen3moe: build_moe_ffn(h): softmax router ffn_gate_inp, top
//                    expert_used_count renormalized, split gate/up experts
//                    with per-expert scales (no shared expert)
//   logits = (rms_norm(x) * output_norm) Woutput * output.scale
//
// qwen3vl (the text tower of Qwen3-VL) ropes with interleaved M-RoPE (rope
// mode imulti, rope.dimension_sections) over the text positions
// [pos, pos, pos, 0] (StepGraph::text_mrope_positions). Its deepstack
// (n_deepstack_layers) adds to the first layers' outputs the slices of the
// input embedding past n_embd, which the reference pads with zeros for text
// tokens: nothing for a text-only model.
#include <fmt/format.h>

#include "frontends/gguf/arch/step_graph.h"

namespace vtc::arch {
namespace {

using ir::Value;

class Qwen3 final : public Transformer {
 public:
  Qwen3(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o) {
    if (h.arch == "qwen3moe") n_expert_used_ = read_expert_hparams(f, h.arch);
    if (h.arch == "qwen3vl") sections_ = rope_sections(f, h);
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    ir::RopeOptions rope = rope_options(h);
    Value pos = g.pos;
    if (!sections_.empty()) {
      rope.mode = ir::RopeMode::IMulti;
      rope.sections = sections_;
      pos = g.text_mrope_positions();
    }
    Value x = ir::Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      Value cur = g.norm(x, blk(l, "attn_norm"));
      auto [q, k, v] = g.qkv(cur, l);
      q = b.rope(g.norm(q, blk(l, "attn_q_norm")), pos, rope);
      k = b.rope(g.norm(k, blk(l, "attn_k_norm")), pos, rope);
      Value a = b.reshape(g.attention(q, k, v, l), {g.n, h.n_head * h.head_dim});
      x = b.add(x, g.linear(a, blk(l, "attn_output")));
      cur = g.norm(x, blk(l, "ffn_norm"));
      Value ffn = n_expert_used_ > 0 ? g.moe_ffn(cur, l, {.route = {.k = n_expert_used_}})
                                     : g.swiglu_ffn(cur, l, "", FfnTensors{.scales = h.arch != "qwen3vl"});
      x = ir::Builder::named(b.add(x, ffn), fmt::format("x{}", l));
    }
    return x;
  }

 private:
  int64_t n_expert_used_ = 0;
  std::vector<int64_t> sections_;  // qwen3vl's M-RoPE sections
};

}  // namespace

ir::Module build_qwen3(const gguf::GgufFile& f, const BuildOptions& o) { return build<Qwen3>(f, o); }

}  // namespace vtc::arch
