// plamo (PLaMo 13B), as the reference's src/models/plamo.cpp: attention and
// FFN in parallel on one normed input:
//
//   per layer:
//     h = rms_norm(x) * attn_norm
//     q, k, v = build_qkv(h)                  each * scale + bias
//     a = attention(rope(q), rope(k), v) Wo * attn_output.scale     neox rope
//     x = (swiglu(h) + a) + x                  FFN without biases or scales
//   logits = (rms_norm(x) * output_norm) Woutput * output.scale    (output required)
#include <fmt/format.h>

#include "frontends/gguf/arch/step_graph.h"

namespace vtc::arch {
namespace {

using ir::Value;

class Plamo final : public Transformer {
 public:
  using Transformer::Transformer;

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    const ir::RopeOptions rope = rope_options(h);  // neox
    Value x = ir::Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      Value cur = g.norm(x, blk(l, "attn_norm"));
      auto [q, k, v] = g.qkv(cur, l);
      Value a = g.attention(b.rope(q, g.pos, rope), b.rope(k, g.pos, rope), v, l);
      a = g.linear(b.reshape(a, {g.n, h.n_head * h.head_dim}), blk(l, "attn_output"));
      Value ffn = g.swiglu_ffn(cur, l, "", FfnTensors{.scales = false});
      x = ir::Builder::named(b.add(b.add(ffn, a), x), fmt::format("x{}", l));
    }
    return x;
  }

  Value head(StepGraph& g, Value rows) const override { return g.linear(g.norm(rows, "output_norm"), "output"); }
};

}  // namespace

ir::Module build_plamo(const gguf::GgufFile& f, const BuildOptions& o) { return build<Plamo>(f, o); }

}  // namespace vtc::arch
