// lfm2 and lfm2moe (Liquid's LFM2 and LFM2-MoE), as the reference's
// src/models/lfm2.cpp and lfm2moe.cpp (one graph; the MoE variant swaps the
// FFN of its layers past leading_dense_block_count for routed experts).
// A hybrid of gated short convolutions and attention layers; a layer is a
// convolution layer when its attention.head_count_kv entry is 0.
//
//   per layer l:
//     h = rms_norm(x) * attn_norm
//     x += shortconv(h) or attention(h)
//     x += ffn(rms_norm(x) * ffn_norm)
//   logits = (rms_norm(x) * token_embd_norm) Woutput * output.scale
//                                          (the final norm's GGUF name is
//                                           token_embd_norm; tied when no output)
//
// Short convolution (K = shortconv.l_cache taps, over the D = n_embd
// channels; no scales, the reference passes none):
//   b, c, x = split(h Win, 3)              shortconv.in_proj [D, 3D]
//   y = c * causal_conv1d(b * x, conv)     depthwise, no bias, no activation;
//                                          ring state @shortconv.L of the last
//                                          K-1 inputs b*x per sequence
//   out = y Wout                           shortconv.out_proj
// Attention: q, k, v = build_qkv(h) (each * scale + bias), q, k =
// rms_norm over head_dim * attn_q_norm, attn_k_norm, neox rope, causal
// attention / sqrt(head_dim) (lfm2 with attention.sliding_window > 0: every
// attention layer keeps the last sliding_window positions; lfm2moe's loader
// reads no window), out = a Wo * attn_output.scale.
// FFN: swiglu(h) with no scales (build_ffn passes none), or, on lfm2moe's
// layers l >= leading_dense_block_count, build_moe_ffn: router
// ffn_gate_inp, gating expert_gating_func (softmax, sigmoid or
// softmax_weight), selection bias exp_probs_b (picks only), the picked
// weights always renormalized (the graph passes norm_w = true), no weight
// scale (the loader does not read expert_weights_scale), no per-expert
// scales.
// Refused: attention.causal = false (the reference's bidirectional
// convolution of the embedding variants), attention layers of unequal head
// counts, shortconv.l_cache < 2.
#include <fmt/format.h>

#include <cmath>

#include "frontends/gguf/arch/hybrid.h"
#include "frontends/gguf/arch/step_graph.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Builder;
using ir::Value;

class Lfm2 final : public Architecture {
 public:
  Lfm2(const gguf::GgufFile& f, const BuildOptions& o) : Architecture(f), o_(o) {
    const std::string& a = h.arch;
    read_layer_pattern(f);
    conv_kernel_ = f.get_int(a + ".shortconv.l_cache").value_or(0);
    if (conv_kernel_ < 2)
      throw Error(fmt::format("{}: missing or invalid hparam '{}.shortconv.l_cache' (need >= 2)", f.path(), a));
    if (const auto causal = f.get_int(a + ".attention.causal"); causal && *causal == 0)
      throw Error(fmt::format("{}: {}.attention.causal = false (the bidirectional embedding variant) is not supported",
                              f.path(), a));
    if (a == "lfm2") {
      n_dense_ = h.n_layer;
      window_ = f.get_int(a + ".attention.sliding_window").value_or(0);
      return;
    }
    n_dense_ = f.get_int(a + ".leading_dense_block_count").value_or(0);
    n_used_ = read_expert_hparams(f, a);
    const auto func = f.get_int(a + ".expert_gating_func");
    if (!func || *func < 1 || *func > 3)
      throw Error(fmt::format("{}: expert_gating_func {} is not supported (1 softmax, 2 sigmoid, 3 softmax_weight)",
                              f.path(), func ? fmt::format("{}", *func) : std::string("missing")));
    gating_ = *func == 1 ? ir::MoeGating::Softmax : *func == 2 ? ir::MoeGating::Sigmoid : ir::MoeGating::SoftmaxWeight;
  }

  void declare_states(ir::Module& m) const override {
    const ir::Dim S = ir::Dim::symbol("S");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      if (!recurrent_[size_t(l)]) {
        declare_kv_state(m, o_, h, l);
        continue;
      }
      m.add_state(conv_state(l), ir::StateKind::Plain,
                  {ir::ElemType::F32, {S, conv_kernel_ - 1, h.n_embd}, ir::Placement::Device});
    }
  }

  Value forward(StepGraph& g) const override {
    Builder& b = g.b;
    Value x = Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      Value cur = g.norm(x, blk(l, "attn_norm"));
      x = b.add(x, recurrent_[size_t(l)] ? short_conv(g, cur, l) : attention(g, cur, l));
      Value ffn_out = ffn(g, g.norm(x, blk(l, "ffn_norm")), l);
      x = Builder::named(b.add(x, ffn_out), fmt::format("x{}", l));
    }
    return x;
  }

  Value head(StepGraph& g, Value rows) const override { return g.output(embedding(g, rows)); }
  Value embedding(StepGraph& g, Value x) const override { return g.norm(x, "token_embd_norm"); }

 private:
  static std::string conv_state(int64_t l) { return fmt::format("shortconv.{}", l); }

  // Convolution layers: head_count_kv 0 (the reference's is_recr); the
  // attention layers must share the counts read_hparams took.
  void read_layer_pattern(const gguf::GgufFile& f) {
    const std::string& a = h.arch;
    std::vector<int64_t> kv = int_array(f, a + ".attention.head_count_kv");
    std::vector<int64_t> heads = int_array(f, a + ".attention.head_count");
    auto per_layer = [&](const std::vector<int64_t>& v, int64_t l) { return v.size() == 1 ? v[0] : v[size_t(l)]; };
    if ((kv.size() != 1 && int64_t(kv.size()) != h.n_layer) || (heads.size() != 1 && int64_t(heads.size()) != h.n_layer))
      throw Error(fmt::format("{}: attention.head_count and head_count_kv must have one entry or one per layer ({})",
                              f.path(), h.n_layer));
    for (int64_t l = 0; l < h.n_layer; ++l) {
      const bool conv = per_layer(kv, l) == 0;
      if (!conv && (per_layer(kv, l) != h.n_head_kv || per_layer(heads, l) != h.n_head))
        throw Error(fmt::format("{}: attention layer {} has {} heads / {} KV heads; attention layers of different "
                                "head counts are not supported ({} / {} elsewhere)",
                                f.path(), l, per_layer(heads, l), per_layer(kv, l), h.n_head, h.n_head_kv));
      recurrent_.push_back(conv);
    }
  }

  Value short_conv(StepGraph& g, Value h_in, int64_t l) const {
    Builder& b = g.b;
    const int64_t d = h.n_embd;
    Value bcx = g.linear_plain(h_in, blk(l, "shortconv.in_proj"));
    Value gate_in = b.slice(bcx, 1, 0, d), gate_out = b.slice(bcx, 1, d, d), input = b.slice(bcx, 1, 2 * d, d);
    Value conv = b.causal_conv1d(b.mul(gate_in, input), g.weight(blk(l, "shortconv.conv")), g.seq, conv_state(l));
    return g.linear_plain(b.mul(gate_out, conv), blk(l, "shortconv.out_proj"));
  }

  Value attention(StepGraph& g, Value h_in, int64_t l) const {
    Builder& b = g.b;
    auto [q, k, v] = g.qkv(h_in, l);
    q = g.norm(q, blk(l, "attn_q_norm"));
    k = g.norm(k, blk(l, "attn_k_norm"));
    const ir::RopeOptions rope = rope_options(h);
    ir::AttentionOptions attn{.state = fmt::format("kv.{}", l), .scale = double(1.0f / std::sqrt(float(h.head_dim)))};
    if (window_ > 0) attn.window = window_;
    Value a = b.attention(b.rope(q, g.pos, rope), b.rope(k, g.pos, rope), v, g.pos, g.seq, attn);
    return g.linear(b.reshape(a, {g.n, h.n_head * h.head_dim}), blk(l, "attn_output"));
  }

  Value ffn(StepGraph& g, Value x, int64_t l) const {
    if (l < n_dense_) return g.swiglu_ffn(x, l, "", {.biases = false, .scales = false});
    const ir::MoeRouteOptions route{.k = n_used_, .gating = gating_, .norm = true,
                                    .selection_bias = g.weight(blk(l, "exp_probs_b.bias"))};
    return g.moe_ffn(x, l, {.route = route, .expert_scales = false});
  }

  const BuildOptions& o_;
  std::vector<bool> recurrent_;
  int64_t conv_kernel_ = 0, window_ = 0, n_dense_ = 0, n_used_ = 0;
  ir::MoeGating gating_ = ir::MoeGating::Softmax;
};

}  // namespace

ir::Module build_lfm2(const gguf::GgufFile& f, const BuildOptions& o) { return build<Lfm2>(f, o); }

}  // namespace vtc::arch
