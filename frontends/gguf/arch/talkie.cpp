// talkie, as the reference's src/models/talkie.cpp: a llama-like decoder
// whose norms carry no gain, with a per-head query gain, a skip connection
// from the normed embedding into every layer's output, and scaled logits:
//
//   x = e = rms_norm(token_embd[ids])                 (no gain)
//   per layer:
//     h = rms_norm(x)                                 (no gain)
//     q, k, v = build_qkv(h)                          each * scale + bias
//     q = rms_norm(rope(q)) * attn_q_norm[head]       neox rope, then the norm over
//     k = rms_norm(rope(k))                           head_dim; one gain per head
//     x += attention(q, k, v) Wo * attn_output.scale  scale 1/sqrt(head_dim)
//     h = rms_norm(x)
//     x += (silu(h Wgate) * (h Wup)) Wdown * ffn_down.scale
//     x += e * layer_output_scale                     (a scalar per layer)
//   logits = (rms_norm(x) Woutput) * logit_scale      (no gain, no output scale)
//
// The loader requires every tensor above (attn_q_norm has shape {1, n_head}:
// the reference's build_norm broadcasts it over each head's values). The
// FFN's gate and up scales are loaded by the generic scale pass but the
// graph's build_ffn call passes only the down scale.
#include <fmt/format.h>

#include "frontends/gguf/arch/step_graph.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Value;

class Talkie final : public Transformer {
 public:
  Talkie(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o) {
    const std::string& a = h.arch;
    const auto logit_scale = f.get_float(a + ".logit_scale");
    if (!logit_scale) throw Error(fmt::format("{}: missing hparam '{}.logit_scale'", f.path(), a));
    logit_scale_ = *logit_scale;
    // The reference asserts both (its graph ropes the whole head).
    if (h.n_rot != h.head_dim)
      throw Error(fmt::format("{}: talkie needs rope.dimension_count ({}) = the head size ({})", f.path(), h.n_rot,
                              h.head_dim));
    if (f.get_int(a + ".attention.value_length").value_or(h.head_dim) != h.head_dim)
      throw Error(fmt::format("{}: talkie needs attention.value_length = key_length", f.path()));
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    const ir::RopeOptions rope = rope_options(h);
    const Value e = ir::Builder::named(g.unit_norm(b.embed(g.weight("token_embd"), g.ids)), "x");
    Value x = e;
    for (int64_t l = 0; l < h.n_layer; ++l) {
      auto [q, k, v] = g.qkv(g.unit_norm(x), l);
      // attn_q_norm [H, 1]: one gain per head.
      q = b.mul(g.unit_norm(b.rope(q, g.pos, rope)), g.weight(blk(l, "attn_q_norm")));
      k = g.unit_norm(b.rope(k, g.pos, rope));
      Value a = b.reshape(g.attention(q, k, v, l), {g.n, h.n_head * h.head_dim});
      x = b.add(x, g.linear(a, blk(l, "attn_output")));
      Value cur = g.unit_norm(x);
      Value gated = b.mul(b.silu(g.linear_plain(cur, blk(l, "ffn_gate"))), g.linear_plain(cur, blk(l, "ffn_up")));
      x = b.add(x, g.linear(gated, blk(l, "ffn_down")));
      x = ir::Builder::named(b.add(x, b.mul(e, g.weight(blk(l, "layer_output_scale")))), fmt::format("x{}", l));
    }
    return x;
  }

  Value head(StepGraph& g, Value rows) const override {
    return g.b.scale(g.linear_plain(g.unit_norm(rows), "output"), logit_scale_);
  }
  Value embedding(StepGraph& g, Value x) const override { return g.unit_norm(x); }

 private:
  double logit_scale_ = 1.0;
};

}  // namespace

ir::Module build_talkie(const gguf::GgufFile& f, const BuildOptions& o) { return build<Talkie>(f, o); }

}  // namespace vtc::arch
