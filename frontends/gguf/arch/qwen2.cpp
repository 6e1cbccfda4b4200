// qwen and qwen2, as the reference's src/models/qwen.cpp and qwen2.cpp:
// llama's layer with neox rope, q/k/v from build_qkv (qwen: the merged
// attn_qkv with its bias; qwen2: merged or split, optional biases), no
// output-projection or FFN biases (the reference loads none), FFN scales
// loaded but not applied (their build_ffn passes none):
//
//   per layer:
//     h = rms_norm(x) * attn_norm
//     q, k, v = build_qkv(h)              each * scale + bias
//     x += attention(rope(q), rope(k), v) Wo * scale
//     x += swiglu(rms_norm(x) * ffn_norm)
//   logits = (rms_norm(x) * output_norm) Woutput * output.scale
//            (+ output.bias: qwen2 only)
//
// qwen's output matrix is required (not tied) and it loads no output.bias.
#include <fmt/format.h>

#include "frontends/gguf/arch/step_graph.h"

namespace vtc::arch {
namespace {

using ir::Value;

class Qwen2 final : public Transformer {
 public:
  using Transformer::Transformer;

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    const ir::RopeOptions rope = rope_options(h);
    Value x = ir::Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      Value cur = g.norm(x, blk(l, "attn_norm"));
      auto [q, k, v] = g.qkv(cur, l);
      Value a = g.attention(b.rope(q, g.pos, rope), b.rope(k, g.pos, rope), v, l);
      x = b.add(x, g.linear(b.reshape(a, {g.n, h.n_head * h.head_dim}), blk(l, "attn_output")));
      Value ffn = g.swiglu_ffn(g.norm(x, blk(l, "ffn_norm")), l, "", FfnTensors{.scales = false});
      x = ir::Builder::named(b.add(x, ffn), fmt::format("x{}", l));
    }
    return x;
  }

  Value head(StepGraph& g, Value rows) const override {
    Value x = g.norm(rows, "output_norm");
    return h.arch == "qwen" ? g.linear(x, "output") : g.output(x, /*bias=*/true);
  }
};

}  // namespace

ir::Module build_qwen2(const gguf::GgufFile& f, const BuildOptions& o) { return build<Qwen2>(f, o); }

}  // namespace vtc::arch
