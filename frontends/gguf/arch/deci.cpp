// deci (Llama-3.1-Nemotron 51B / Ultra, DeciLM), as the reference's
// src/models/deci.cpp: llama's layer with per-layer head counts and FFN
// sizes (attention.head_count, head_count_kv, feed_forward_length arrays:
// Hparams::heads, kv_heads, ff), three kinds of token mixer, and optional
// attn_output and FFN biases:
//
//   per layer l:
//     heads(l) > 0, kv_heads(l) > 0 (attention):
//       h = rms_norm(x) * attn_norm
//       q, k, v = build_qkv(h)                      each * scale + bias
//       q, k = rope(q, k, pos, rope_freqs)          normal rope
//       x += attention(q, k, v) * kq_scale Wo * attn_output.scale + attn_output.bias
//     heads(l) > 0, kv_heads(l) = 0 ("linear attention", no KV cache):
//       x += (rms_norm(x) * attn_norm) Wo           no scale, no bias
//     heads(l) = 0: no token mixer
//     x += swiglu(rms_norm(x) * ffn_norm), each projection + bias, no scales
//   logits = (rms_norm(x) * output_norm) Woutput * output.scale   (token_embd when tied)
//
// kq_scale = 1/sqrt(head_dim) (the reference reads no attention.scale for
// deci). A layer with feed_forward_length 0 is refused: the reference's
// graph skips the rest of such a layer without keeping its attention output
// (the layer is a no-op there), which vtc does not reproduce. The
// generator's file has uniform scalar heads and FFN sizes, so only the
// attention kind is exercised by the tests.
#include <fmt/format.h>

#include <cmath>

#include "frontends/gguf/arch/step_graph.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Value;

class Deci final : public Transformer {
 public:
  Deci(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o) {
    for (int64_t l = 0; l < h.n_layer; ++l)
      if (h.ff(l) == 0)
        throw Error(fmt::format("{}: layer {} has feed_forward_length 0 (an FFN-free deci layer), which is not "
                                "supported",
                                f.path(), l));
  }

  void declare_states(ir::Module& m) const override {
    for (int64_t l = 0; l < h.n_layer; ++l)
      if (h.heads(l) > 0 && h.kv_heads(l) > 0) declare_kv_state(m, o_, h, l);
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    ir::RopeOptions rope = rope_options(h);
    rope.mode = ir::RopeMode::Normal;
    Value x = ir::Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      if (h.heads(l) > 0 && h.kv_heads(l) == 0) {
        x = b.add(x, g.linear_plain(g.norm(x, blk(l, "attn_norm")), blk(l, "attn_output")));
      } else if (h.heads(l) > 0) {
        auto [q, k, v] = g.qkv(g.norm(x, blk(l, "attn_norm")), l);
        Value freqs = g.optional("rope_freqs");
        Value a = g.attention(b.rope(q, g.pos, rope, freqs), b.rope(k, g.pos, rope, freqs), v, l);
        x = b.add(x, g.linear_bias(b.reshape(a, {g.n, h.heads(l) * h.head_dim}), blk(l, "attn_output")));
      }
      Value ffn = g.swiglu_ffn(g.norm(x, blk(l, "ffn_norm")), l, "", FfnTensors{.biases = true, .scales = false});
      x = ir::Builder::named(b.add(x, ffn), fmt::format("x{}", l));
    }
    return x;
  }
};

}  // namespace

ir::Module build_deci(const gguf::GgufFile& f, const BuildOptions& o) { return build<Deci>(f, o); }

}  // namespace vtc::arch
