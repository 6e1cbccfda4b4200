// phi3 (Phi-3, Phi-3.5, Phi-4-mini), as the reference's src/models/phi3.cpp:
//
//   x = token_embd[ids]
//   per layer:
//     h = rms_norm(x) * attn_norm
//     q, k, v = build_qkv(h)                  merged attn_qkv or split, each * scale + bias
//     q, k = rope(q, k, pos, freq factors)    neox rope; LongRoPE factors (below)
//     x += attention(q / sqrt(d), k, v) Wo * scale       (the reference scales q, then kq_scale 1)
//     h = rms_norm(x) * ffn_norm
//     g, u = halves of h Wup                  ffn_up holds the gate rows, then the up rows
//     x += (silu(g) * u) Wdown                build_ffn(LLM_FFN_SWIGLU) with no gate tensor and no scales
//   logits = (rms_norm(x) * output_norm) Woutput * output.scale   (token_embd when tied)
//
// LongRoPE: the reference picks rope_factors_long when the context's
// per-sequence length exceeds rope.scaling.original_context_length, else
// rope_factors_short (llama_model::get_rope_factors). A vtc module has no
// context length of its own, so it takes the file's: long when
// context_length > original_context_length (a 128k Phi-3 run at its full
// context, as the reference does by default), short otherwise (the test
// files: 256 and 256). A reference context shorter than the original one on
// a 128k file would pick the short factors instead. The attention factor
// comes from rope.scaling.attn_factor (rope_options).
//
// Sliding window: the reference disables Phi-3's SWA (load_arch_hparams sets
// swa_type NONE whatever sliding_window says), so every layer is full
// attention here too. The MoE branch of the graph is phimoe's (an
// ffn_gate_inp that phi3's loader never creates), so phi3 is dense.
//
// phimoe (Phi-3.5-MoE) is the same graph (the reference's phimoe reuses
// llama_model_phi3::graph) over what its loader creates instead:
//
//   every norm is rms_norm(x) * gain + bias   (attn_norm, ffn_norm, output_norm .bias)
//   x += attention(...) Wo * scale + attn_output.bias
//   x += build_moe_ffn(h)                     softmax router ffn_gate_inp, top
//                                             expert_used_count, renormalized; no
//                                             weight scale (phimoe reads none) and
//                                             no per-expert scales (the call passes none)
//   logits = (...) Woutput * output.scale + output.bias
//
// phimoe declares no sliding window, so it is full attention as well.
#include <fmt/format.h>

#include <cmath>

#include "frontends/gguf/arch/step_graph.h"

namespace vtc::arch {
namespace {

using ir::Value;

class Phi3 final : public Transformer {
 public:
  Phi3(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o) {
    factors_ = longrope_factors(f, h);
    if (h.arch == "phimoe") n_expert_used_ = read_expert_hparams(f, h.arch);
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    const ir::RopeOptions rope = rope_options(h);  // neox
    Value x = ir::Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      Value cur = norm(g, x, blk(l, "attn_norm"));
      auto [q, k, v] = g.qkv(cur, l);
      Value freqs = g.optional(factors_);
      q = b.rope(q, g.pos, rope, freqs);
      k = b.rope(k, g.pos, rope, freqs);
      // Scaled before attention, as the reference does: the rounding is its.
      q = b.scale(q, 1.0 / std::sqrt(double(h.head_dim)));
      ir::AttentionOptions attn{.state = fmt::format("kv.{}", l), .scale = 1.0};
      Value a = b.reshape(b.attention(q, k, v, g.pos, g.seq, attn), {g.n, h.n_head * h.head_dim});
      x = b.add(x, moe() ? g.linear_bias(a, blk(l, "attn_output")) : g.linear(a, blk(l, "attn_output")));
      cur = norm(g, x, blk(l, "ffn_norm"));
      Value ffn = moe() ? g.moe_ffn(cur, l, {.route = {.k = n_expert_used_}, .expert_scales = false}) : g.fused_swiglu_ffn(cur, l);
      x = ir::Builder::named(b.add(x, ffn), fmt::format("x{}", l));
    }
    return x;
  }

  Value head(StepGraph& g, Value rows) const override { return g.output(embedding(g, rows), moe()); }
  Value embedding(StepGraph& g, Value x) const override { return norm(g, x, "output_norm"); }

 private:
  bool moe() const { return n_expert_used_ > 0; }

  // build_norm(LLM_NORM_RMS) with phimoe's bias.
  Value norm(StepGraph& g, Value x, const std::string& gain) const {
    Value y = g.norm(x, gain);
    return moe() ? g.b.add(y, g.weight(gain + ".bias")) : y;
  }

  std::string factors_;
  int64_t n_expert_used_ = 0;  // phimoe
};

}  // namespace

ir::Module build_phi3(const gguf::GgufFile& f, const BuildOptions& o) { return build<Phi3>(f, o); }

}  // namespace vtc::arch
