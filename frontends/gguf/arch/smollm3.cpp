// smollm3 (SmolLM3), as the reference's src/models/smollm3.cpp: llama's
// layer where every fourth layer has no rope (NoPE):
//
//   per layer l:
//     h = rms_norm(x) * attn_norm
//     q, k, v = build_qkv(h)                  each * scale + bias
//     if (l + 1) % 4 != 0: q, k = rope(q), rope(k)          normal rope
//     x += attention(q, k, v) Wo * scale      scale 1/sqrt(head_dim)
//     x += swiglu(rms_norm(x) * ffn_norm)     no FFN scales (the graph passes none), no biases
//                                             (the loader takes no FFN or Wo bias)
//   logits = (rms_norm(x) * output_norm) Woutput * output.scale   (token_embd when tied)
//
// The step 4 is fixed in the reference (n_no_rope_layer_step = 4, read from
// no key). smollm3 reads no attention.scale, so the key is ignored here too.
#include <fmt/format.h>

#include "frontends/gguf/arch/step_graph.h"

namespace vtc::arch {
namespace {

using ir::Value;

constexpr int64_t kNoRopeLayerStep = 4;

class SmolLm3 final : public Transformer {
 public:
  using Transformer::Transformer;

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    ir::RopeOptions rope = rope_options(h);
    rope.mode = ir::RopeMode::Normal;
    Value x = ir::Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      auto [q, k, v] = g.qkv(g.norm(x, blk(l, "attn_norm")), l);
      if ((l + 1) % kNoRopeLayerStep != 0) {
        q = b.rope(q, g.pos, rope);
        k = b.rope(k, g.pos, rope);
      }
      Value a = b.reshape(g.attention(q, k, v, l), {g.n, h.n_head * h.head_dim});
      x = b.add(x, g.linear(a, blk(l, "attn_output")));
      Value ffn = g.swiglu_ffn(g.norm(x, blk(l, "ffn_norm")), l, "", FfnTensors{.scales = false});
      x = ir::Builder::named(b.add(x, ffn), fmt::format("x{}", l));
    }
    return x;
  }
};

}  // namespace

ir::Module build_smollm3(const gguf::GgufFile& f, const BuildOptions& o) { return build<SmolLm3>(f, o); }

}  // namespace vtc::arch
