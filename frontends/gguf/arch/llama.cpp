// llama (Llama 2/3, Mistral, TinyLlama, and Mixtral-style experts), as the
// reference's src/models/llama.cpp:
//
//   x = token_embd[ids]
//   per layer:
//     h = rms_norm(x) * attn_norm
//     q, k, v = build_qkv(h)              merged attn_qkv or split, each * scale + bias
//     q, k = rope(q, k, pos, rope_freqs)  normal rope; llama3's rope_freqs when present
//     x += attention(q, k, v) Wo * scale + attn_output.bias
//     h = rms_norm(x) * ffn_norm
//     x += expert_count == 0 ? swiglu(h) with per-projection bias and scale
//                            : build_moe_ffn(h) (softmax, top expert_used_count,
//                              renormalized, per-expert scales)
//   logits = (rms_norm(x) * output_norm) Woutput * output.scale   (token_embd when tied)
//
// The file decides nothing by probing: experts come from expert_count, and
// every optional tensor is one the reference loads as optional for llama.
#include <fmt/format.h>

#include "frontends/gguf/arch/step_graph.h"

namespace vtc::arch {
namespace {

using ir::Value;

class Llama final : public Transformer {
 public:
  Llama(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o) {
    if (f.get_int("llama.expert_count").value_or(0) > 0) n_expert_used_ = read_expert_hparams(f, "llama");
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    const ir::RopeOptions rope = rope_options(h);
    Value x = ir::Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      Value cur = g.norm(x, blk(l, "attn_norm"));
      auto [q, k, v] = g.qkv(cur, l);
      Value freqs = g.optional("rope_freqs");
      q = b.rope(q, g.pos, rope, freqs);
      k = b.rope(k, g.pos, rope, freqs);
      Value a = b.reshape(g.attention(q, k, v, l), {g.n, h.n_head * h.head_dim});
      x = b.add(x, g.linear_bias(a, blk(l, "attn_output")));
      cur = g.norm(x, blk(l, "ffn_norm"));
      Value ffn = n_expert_used_ > 0 ? g.moe_ffn(cur, l, {.route = {.k = n_expert_used_}}) : g.swiglu_ffn(cur, l, "", FfnTensors{.biases = true});
      x = ir::Builder::named(b.add(x, ffn), fmt::format("x{}", l));
    }
    return x;
  }

 private:
  int64_t n_expert_used_ = 0;
};

}  // namespace

ir::Module build_llama(const gguf::GgufFile& f, const BuildOptions& o) { return build<Llama>(f, o); }

}  // namespace vtc::arch
