// gpt-oss (llama.cpp's LLM_ARCH_OPENAI_MOE), as the reference's
// src/models/openai-moe.cpp:
//
//   x = token_embd[ids]
//   per layer l (SWA layers: l % pattern < pattern - 1, pattern =
//   attention.sliding_window_pattern, default 2, so even layers; pattern 0
//   makes every layer SWA, as llama_hparams::set_swa_pattern):
//     h = rms_norm(x) * attn_norm
//     q, k, v = build_qkv(h)              each x W * scale + bias, head_dim n_rot
//     q, k = rope(q, k, pos)              neox; rope.freq_base_swa on SWA layers
//     a = attention(q, k, v) with the sinks attn_sinks [n_head] joining each
//         softmax's denominator, scale 1/sqrt(n_rot), on SWA layers only
//         the last sliding_window positions visible
//     x += a Wo * scale + attn_output.bias
//     h = rms_norm(x) * post_attention_norm
//     x += build_moe_ffn(h):
//            logits = h Wgate_inp + ffn_gate_inp.bias
//            ids = top expert_used_count of the logits; weights = softmax
//                  over those logits (SOFTMAX_WEIGHT gating, no renorm, no
//                  scale: the reference reads no expert_weights_scale here)
//            per expert: g = h Wgate + gate bias, u = h Wup + up bias,
//                        y = swiglu_oai(g, u; alpha 1.702, limit 7) Wdown + down bias
//            sum over slots of weight * y
//   logits = (rms_norm(x) * output_norm) Woutput
//
// The reference passes no per-expert scales to build_moe_ffn and no output
// scale, so the expert .scale tensors the generic scale pass loads are in
// the accepted-unused table.
#include <fmt/format.h>

#include <cmath>

#include "frontends/gguf/arch/step_graph.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Value;

class GptOss final : public Transformer {
 public:
  GptOss(const gguf::GgufFile& f, const BuildOptions& o)
      : Transformer(f, o), n_expert_used_(read_expert_hparams(f, h.arch)) {
    const std::string& a = h.arch;
    require_int(f, a + ".expert_feed_forward_length");  // required by the reference's loader
    n_swa_ = require_int(f, a + ".attention.sliding_window");
    const std::string pattern_key = a + ".attention.sliding_window_pattern";
    if (const auto* kv = f.find(pattern_key); kv && kv->as_array())
      throw Error(fmt::format("{}: {} must be a scalar (the reference reads one period)", f.path(), pattern_key));
    const int64_t period = f.get_int(pattern_key).value_or(2);
    if (period < 0) throw Error(fmt::format("{}: {} must not be negative", f.path(), pattern_key));
    swa_.resize(size_t(h.n_layer));
    for (int64_t l = 0; l < h.n_layer; ++l) swa_[size_t(l)] = period == 0 || l % period < period - 1;
    rope_base_swa_ = f.get_float(a + ".rope.freq_base_swa").value_or(h.rope_base);
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    Value x = ir::Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      Value cur = g.norm(x, blk(l, "attn_norm"));
      x = b.add(x, attention(g, cur, l));
      cur = g.norm(x, blk(l, "post_attention_norm"));
      x = ir::Builder::named(b.add(x, experts(g, cur, l)), fmt::format("x{}", l));
    }
    return x;
  }

 private:
  Value attention(StepGraph& g, Value x, int64_t l) const {
    ir::Builder& b = g.b;
    const bool swa = swa_[size_t(l)];
    ir::RopeOptions rope = rope_options(h);
    if (swa) rope.base = rope_base_swa_;
    auto [q, k, v] = g.qkv(x, l);
    q = b.rope(q, g.pos, rope);
    k = b.rope(k, g.pos, rope);
    ir::AttentionOptions o{.state = fmt::format("kv.{}", l), .scale = 1.0 / std::sqrt(double(h.n_rot))};
    if (swa) o.window = n_swa_;
    o.sinks = g.weight(blk(l, "attn_sinks"));
    Value a = b.reshape(b.attention(q, k, v, g.pos, g.seq, o), {g.n, h.n_head * h.head_dim});
    return g.linear_bias(a, blk(l, "attn_output"));
  }

  Value experts(StepGraph& g, Value x, int64_t l) const {
    ir::Builder& b = g.b;
    // The router: a plain matmul, then its bias (build_moe_ffn's gate_inp_b).
    Value logits = b.add(g.linear_plain(x, blk(l, "ffn_gate_inp")), g.weight(blk(l, "ffn_gate_inp.bias")));
    auto [weights, ids] =
        b.moe_route(logits, ir::MoeRouteOptions{.k = n_expert_used_, .gating = ir::MoeGating::SoftmaxWeight, .norm = false});
    ir::MoeExperts e;
    e.gate = g.weight(blk(l, "ffn_gate_exps"));
    e.up = g.weight(blk(l, "ffn_up_exps"));
    e.down = g.weight(blk(l, "ffn_down_exps"));
    e.gate_bias = g.weight(blk(l, "ffn_gate_exps.bias"));
    e.up_bias = g.weight(blk(l, "ffn_up_exps.bias"));
    e.down_bias = g.weight(blk(l, "ffn_down_exps.bias"));
    return b.moe_ffn(x, weights, ids, e, ir::MoeActivation{.kind = ir::MoeActivationKind::SwigluOai});
  }

  int64_t n_expert_used_ = 0, n_swa_ = 0;
  std::vector<bool> swa_;
  double rope_base_swa_ = 10000.0;
};

}  // namespace

ir::Module build_gpt_oss(const gguf::GgufFile& f, const BuildOptions& o) { return build<GptOss>(f, o); }

}  // namespace vtc::arch
