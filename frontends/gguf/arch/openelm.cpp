// openelm (Apple OpenELM), as the reference's src/models/openelm.cpp:
// llama's layer with per-layer head counts and FFN sizes (attention.head_count,
// head_count_kv and feed_forward_length arrays: Hparams::heads, kv_heads),
// a merged qkv projection and QK-norm, and the head tied to token_embd:
//
//   per layer l (H = heads(l), Hkv = kv_heads(l)):
//     h = rms_norm(x) * attn_norm
//     qkv = h Wqkv  [n, H + 2 Hkv, head_dim]   no scale, no bias (the graph passes none)
//     q, k, v = its first H heads, the next Hkv, the last Hkv
//     q, k = rms_norm over head_dim * attn_q_norm, attn_k_norm
//     x += attention(rope(q), rope(k), v) Wo * attn_output.scale     neox rope
//     x += swiglu(rms_norm(x) * ffn_norm)      no biases or scales
//   logits = (rms_norm(x) * output_norm) token_embd        (always tied)
#include <fmt/format.h>

#include "frontends/gguf/arch/step_graph.h"

namespace vtc::arch {
namespace {

using ir::Value;

class OpenElm final : public Transformer {
 public:
  using Transformer::Transformer;

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    const ir::RopeOptions rope = rope_options(h);  // neox
    Value x = ir::Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      const int64_t nh = h.heads(l), nkv = h.kv_heads(l);
      Value qkv = b.reshape(g.linear_plain(g.norm(x, blk(l, "attn_norm")), blk(l, "attn_qkv")),
                            {g.n, nh + 2 * nkv, h.head_dim});
      Value q = g.norm(b.slice(qkv, 1, 0, nh), blk(l, "attn_q_norm"));
      Value k = g.norm(b.slice(qkv, 1, nh, nkv), blk(l, "attn_k_norm"));
      Value v = b.slice(qkv, 1, nh + nkv, nkv);
      Value a = g.attention(b.rope(q, g.pos, rope), b.rope(k, g.pos, rope), v, l);
      x = b.add(x, g.linear(b.reshape(a, {g.n, nh * h.head_dim}), blk(l, "attn_output")));
      Value ffn = g.swiglu_ffn(g.norm(x, blk(l, "ffn_norm")), l, "", FfnTensors{.scales = false});
      x = ir::Builder::named(b.add(x, ffn), fmt::format("x{}", l));
    }
    return x;
  }

  // The reference's loader takes token_embd as the output matrix and no
  // output.weight (a file with one is refused).
  Value head(StepGraph& g, Value rows) const override {
    return g.b.matmul(g.norm(rows, "output_norm"), g.weight("token_embd"));
  }
};

}  // namespace

ir::Module build_openelm(const gguf::GgufFile& f, const BuildOptions& o) { return build<OpenElm>(f, o); }

}  // namespace vtc::arch
