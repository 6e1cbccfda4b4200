// mistral3 (Ministral 3, Mistral Small 3.x text decoder), as the
// reference's src/models/mistral3.cpp: llama's layer, dense or with
// Mixtral-style experts:
//
//   x = token_embd[ids]
//   per layer:
//     h = rms_norm(x) * attn_norm
//     q, k, v = build_qkv(h)                   each * scale + bias
//     q, k = rope(q, k, pos, rope_freqs)       normal rope; llama3's rope_freqs when present
//     x += attention(q, k, v) Wo * scale + attn_output.bias      scale 1/sqrt(head_dim)
//     h = rms_norm(x) * ffn_norm
//     x += expert_count == 0 ? swiglu(h), each projection + bias, * scale
//                            : build_moe_ffn(h) (softmax, top expert_used_count,
//                              renormalized, per-expert scales, no weight scale:
//                              mistral3 reads no expert_weights_scale)
//   logits = (rms_norm(x) * output_norm) Woutput * output.scale   (token_embd when tied)
//
// What the reference adds over llama: Llama-4-style attention temperature
// tuning (attention.temperature_scale: q scaled per position by
// log(floor((pos + 1) / n_ctx_orig) + 1) * temperature_scale + 1). vtc does
// not implement it yet and refuses a file that turns it on; the generator's
// files leave it at 0 (off). The YaRN beta and log-multiplier keys it reads
// only matter for YaRN scaling (rope_options).
#include <fmt/format.h>

#include "frontends/gguf/arch/step_graph.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Value;

class Mistral3 final : public Transformer {
 public:
  Mistral3(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o) {
    if (f.get_float(h.arch + ".attention.temperature_scale").value_or(0.0) != 0.0)
      throw Error(fmt::format("{}: mistral3 attention temperature tuning (attention.temperature_scale) is not "
                              "supported yet",
                              f.path()));
    if (f.get_int(h.arch + ".expert_count").value_or(0) > 0) n_expert_used_ = read_expert_hparams(f, h.arch);
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    ir::RopeOptions rope = rope_options(h);
    rope.mode = ir::RopeMode::Normal;
    Value x = ir::Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      auto [q, k, v] = g.qkv(g.norm(x, blk(l, "attn_norm")), l);
      Value freqs = g.optional("rope_freqs");
      q = b.rope(q, g.pos, rope, freqs);
      k = b.rope(k, g.pos, rope, freqs);
      Value a = b.reshape(g.attention(q, k, v, l), {g.n, h.n_head * h.head_dim});
      x = b.add(x, g.linear_bias(a, blk(l, "attn_output")));
      Value cur = g.norm(x, blk(l, "ffn_norm"));
      Value ffn = n_expert_used_ > 0 ? g.moe_ffn(cur, l, MoeFfnOptions{.route = {.k = n_expert_used_}})
                                     : g.swiglu_ffn(cur, l, "", FfnTensors{.biases = true});
      x = ir::Builder::named(b.add(x, ffn), fmt::format("x{}", l));
    }
    return x;
  }

 private:
  int64_t n_expert_used_ = 0;
};

}  // namespace

ir::Module build_mistral3(const gguf::GgufFile& f, const BuildOptions& o) { return build<Mistral3>(f, o); }

}  // namespace vtc::arch
