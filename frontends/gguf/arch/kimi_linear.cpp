// kimi-linear (Kimi Linear, Moonshot), as the reference's
// src/models/kimi-linear.cpp: Kimi Delta Attention (KDA) layers where
// head_count_kv[l] is 0, multi-head latent attention without rope on the
// others, and a dense or MoE FFN after every mixer:
//
//   h = rms_norm(x) * attn_norm
//   x += head_count_kv[l] == 0 ? kda(h) : mla(h)
//   h = rms_norm(x) * ffn_norm
//   x += layer < leading_dense_block_count ? swiglu(h)            (no scales)
//        : build_moe_ffn(h) + swiglu_shexp(h)                      (no scales)
//          router ffn_gate_inp, gating expert_gating_func, selection bias
//          exp_probs_b (picks only), always renormalized, times
//          expert_weights_scale
//   logits = (rms_norm(x) * output_norm) Woutput                 (no scale)
//
// KDA, H = head_count[0] heads of d = kda.head_dim, no projection scales
// or biases (the graph multiplies by the bare matrices):
//   q, k, v = silu(causal_conv1d(h W{q,k,v}, ssm_conv1d_{q,k,v}))  [n, H, d]
//       three depthwise convolutions, each with its own ring state
//       @kda_conv_{q,k,v}.L (the reference's one r_l row holds the three)
//   q, k = l2_norm(q), l2_norm(k)   eps = the rms norm's eps
//   g = softplus((h Wf_a) Wf_b + ssm_dt.bias) * ssm_a              [n, H, d]
//       one log decay per key channel (ssm_a: one -exp(A_log) per head)
//   beta = sigmoid(h Wbeta)                                         [n, H]
//   o = delta_rule(q, k, v, g, beta) scale 1/sqrt(d)   state @kda_state.L
//   out = (rms_norm(o) * ssm_norm * sigmoid((h Wg_a) Wg_b)) Wo      per head
// MLA: the absorbed block of deepseek2 (arch/mla.h) with q = h Wq (or the
// q_lora path when the layer has attn_q_a_norm), no rope on q_pe or k_pe,
// kq_scale = 1/sqrt(key_length_mla), and attn_output's scale.
//
// Not supported (a clear error): files without the MLA keys, for which
// the reference falls back to an MHA cache over attn_kv_b.
#include <fmt/format.h>

#include <cmath>

#include "frontends/gguf/arch/mla.h"
#include "frontends/gguf/arch/ssm.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Builder;
using ir::Dim;
using ir::Value;

class KimiLinear final : public Architecture {
 public:
  KimiLinear(const gguf::GgufFile& f, const BuildOptions& o) : Architecture(f), o_(o) {
    const std::string& a = h.arch;
    recurrent_ = layers_without_kv_heads(f, a, h.n_layer);
    head_dim_ = require_int(f, a + ".kda.head_dim");
    conv_kernel_ = require_int(f, a + ".ssm.conv_kernel");
    const int64_t dk = f.get_int(a + ".attention.key_length_mla").value_or(0);
    const int64_t dv = f.get_int(a + ".attention.value_length_mla").value_or(0);
    if (dk <= 0 || dv <= 0)
      throw Error(fmt::format("{}: kimi-linear without attention.key_length_mla/value_length_mla (the MHA fallback "
                              "over attn_kv_b) is not supported",
                              f.path()));
    const int64_t kv_lora = require_int(f, a + ".attention.kv_lora_rank");
    if (dk - h.n_rot < 1) throw Error(fmt::format("{}: key_length_mla {} leaves no non-rotary part", f.path(), dk));
    mla_shape_ = {.n_head = h.n_head, .dk = dk, .dv = dv, .kv_lora = kv_lora, .rot = h.n_rot, .q_lora = false,
                  .rope = false, .rope_options = {}, .kq_scale = double(1.0f / std::sqrt(float(dk)))};
    n_dense_ = f.get_int(a + ".leading_dense_block_count").value_or(0);
    if (n_dense_ < h.n_layer) {
      n_used_ = read_expert_hparams(f, a);
      gating_ = expert_gating(f, require_int(f, a + ".expert_gating_func"), ir::MoeGating::Softmax);
      scale_ = f.get_float(a + ".expert_weights_scale").value_or(0.0);
    }
  }

  void declare_states(ir::Module& m) const override {
    const Dim S = Dim::symbol("S");
    const int64_t inner = h.n_head * head_dim_;
    for (int64_t l = 0; l < h.n_layer; ++l) {
      if (!recurrent_[size_t(l)]) {
        MlaAttention(mla_shape_).declare_state(m, o_, l);
        continue;
      }
      for (const char* part : {"q", "k", "v"})
        m.add_state(fmt::format("kda_conv_{}.{}", part, l), ir::StateKind::Plain,
                    {ir::ElemType::F32, {S, conv_kernel_ - 1, inner}, ir::Placement::Device});
      m.add_state(fmt::format("kda_state.{}", l), ir::StateKind::Plain,
                  {ir::ElemType::F32, {S, h.n_head, head_dim_, head_dim_}, ir::Placement::Device});
    }
  }

  Value forward(StepGraph& g) const override {
    Builder& b = g.b;
    Value x = Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      Value normed = g.norm(x, blk(l, "attn_norm"));
      x = b.add(x, recurrent_[size_t(l)] ? kda(g, normed, l) : mla(g, normed, l));
      x = Builder::named(b.add(x, ffn(g, g.norm(x, blk(l, "ffn_norm")), l)), fmt::format("x{}", l));
    }
    return x;
  }

  Value head(StepGraph& g, Value rows) const override { return g.linear_plain(g.norm(rows, "output_norm"), "output"); }

 private:
  Value mla(StepGraph& g, Value x, int64_t l) const {
    MlaShape s = mla_shape_;
    s.q_lora = g.has(blk(l, "attn_q_a_norm"));
    return MlaAttention(s)(g, x, l);
  }

  // silu(causal_conv1d(x W)) of one of q, k, v: [n, H, d].
  Value short_conv(StepGraph& g, Value x, int64_t l, const char* part) const {
    Builder& b = g.b;
    const int64_t inner = h.n_head * head_dim_;
    Value y = g.linear_plain(x, blk(l, fmt::format("attn_{}", part)));
    // [d_conv, 1, inner] in the file: one row of taps per channel.
    Value taps = b.reshape(g.weight(blk(l, fmt::format("ssm_conv1d_{}", part))), {inner, conv_kernel_});
    Value c = b.silu(b.causal_conv1d(y, taps, g.seq, fmt::format("kda_conv_{}.{}", part, l)));
    return b.reshape(c, {g.n, h.n_head, head_dim_});
  }

  Value kda(StepGraph& g, Value x, int64_t l) const {
    Builder& b = g.b;
    const Dim& n = g.n;
    const int64_t nh = h.n_head, d = head_dim_;
    Value q = b.l2_norm(short_conv(g, x, l, "q"), h.eps);
    Value k = b.l2_norm(short_conv(g, x, l, "k"), h.eps);
    Value v = short_conv(g, x, l, "v");
    Value f = g.linear_plain(g.linear_plain(x, blk(l, "ssm_f_a")), blk(l, "ssm_f_b"));
    Value decay = b.reshape(b.softplus(b.add(f, g.weight(blk(l, "ssm_dt.bias")))), {n, nh, d});
    Value gate = b.mul(decay, b.reshape(g.weight(blk(l, "ssm_a")), {nh, 1}));
    Value beta_w = b.reshape(g.weight(blk(l, "ssm_beta")), {nh, h.n_embd});
    Value beta = b.sigmoid(b.matmul(x, beta_w));
    // The reference scales by 1.0f / sqrtf(float(d)).
    const double scale = double(1.0f / std::sqrt(float(d)));
    Value o = b.delta_rule(q, k, v, gate, beta, g.seq, fmt::format("kda_state.{}", l), scale);
    Value out_gate = g.linear_plain(g.linear_plain(x, blk(l, "ssm_g_a")), blk(l, "ssm_g_b"));
    Value gated = b.mul(g.norm(o, blk(l, "ssm_norm")), b.sigmoid(b.reshape(out_gate, {n, nh, d})));
    return g.linear_plain(b.reshape(gated, {n, nh * d}), blk(l, "attn_output"));
  }

  Value ffn(StepGraph& g, Value x, int64_t l) const {
    const FfnTensors plain{.biases = false, .scales = false};
    if (l < n_dense_) return g.swiglu_ffn(x, l, "", plain);
    const ir::MoeRouteOptions route{.k = n_used_, .gating = gating_, .norm = true, .scale = scale_,
                                    .selection_bias = g.weight(blk(l, "exp_probs_b.bias"))};
    Value routed = g.moe_ffn(x, l, {.route = route, .merged_allowed = false, .expert_scales = false});
    return g.b.add(routed, g.swiglu_ffn(x, l, "_shexp", plain));
  }

  const BuildOptions& o_;
  std::vector<bool> recurrent_;
  int64_t head_dim_ = 0, conv_kernel_ = 0, n_dense_ = 0, n_used_ = 0;
  MlaShape mla_shape_;
  ir::MoeGating gating_ = ir::MoeGating::Softmax;
  double scale_ = 0.0;
};

}  // namespace

ir::Module build_kimi_linear(const gguf::GgufFile& f, const BuildOptions& o) { return build<KimiLinear>(f, o); }

}  // namespace vtc::arch
