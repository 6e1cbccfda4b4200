// The ALiBi decoders: bloom, mpt, jais and refact, one builder with the
// reference's variations as options (src/models/bloom.cpp, mpt.cpp,
// jais.cpp, refact.cpp). No rope: position enters only through ALiBi, the
// attention's alibi_max_bias (docs/ir.md "### attention"), which adds
// slope(h) * -|pos_q - pos_k| to every score.
//
//   x = token_embd[ids]
//   mpt: x = x + position_embd[pos]              (when the file has it)
//   bloom: x = norm(x) * token_embd_norm + bias
//   per layer:
//     h = norm(x) * attn_norm (+ bias)
//     q, k, v = build_qkv(h)                     fused attn_qkv or split q/k/v, each * scale + bias
//     mpt: q, k, v = clamp(., -clamp_kqv, clamp_kqv)   (when attention.clamp_kqv > 0)
//     a = attention(q, k, v) Wo * scale (+ bias) scale 1/sqrt(head_dim) (jais: 1/head_dim)
//     x = x + a
//     h = norm(x) * ffn_norm (+ bias)
//     bloom, mpt: f = gelu(h Wup + bias) [mpt: / ffn.act.scales] Wdown + bias
//     jais:       f = (silu(h Wgate + bias) * (h Wup + bias)) Wdown + bias
//     refact:     f = (silu(h Wgate) * (h Wup)) Wdown     (no biases, no scales)
//     x = x + f
//   logits = (norm(x) * output_norm (+ bias)) output * scale   (token_embd when tied)
//
// norm is the layer norm (eps attention.layer_norm_epsilon) with a bias
// for bloom, mpt (optional biases) and jais, and rms_norm (eps
// attention.layer_norm_rms_epsilon) for refact. The FFNs take no
// projection scales (the graphs pass none to build_ffn). ALiBi's max bias
// is 8 for bloom and refact (the reference fixes it), the file's
// attention.max_alibi_bias for mpt and jais (0 when absent: no ALiBi, as
// in the reference). refact's attn_output.bias and FFN biases are loaded
// and never applied by the reference (tensor_accounting.cpp), as is mpt's
// attn_k_norm without attn_q_norm.
//
// Refused, with the reason: mpt's QK layer norm (attn_q_norm; the
// reference's own generator cannot write it, so nothing here could be
// checked against the reference), and a refact file with experts (the
// reference loads ffn_*_exps but its graph applies none of them).
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "frontends/gguf/arch/step_graph.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Value;

enum class FfnKind { Gelu, SwigluBiased, Swiglu };

struct AlibiVariant {
  bool rms_norm = false;         // refact: rms_norm; else layer_norm with bias
  bool norm_bias_required = true;  // bloom, jais: every norm bias is required
  bool embd_norm = false;        // bloom: token_embd_norm
  bool pos_embd = false;         // mpt: optional position_embd
  bool clamp_kqv = false;        // mpt: attention.clamp_kqv
  bool wo_bias = true;           // refact: attn_output.bias is not applied
  bool tied_output = true;       // jais: output.weight is required
  bool inv_dim_scale = false;    // jais: scale 1/head_dim
  bool act_scales = false;       // mpt: ffn.act.scales divides the GELU
  FfnKind ffn = FfnKind::Gelu;
  float fixed_max_bias = 0.0f;   // bloom, refact: 8 (the file's key is not read)
};

AlibiVariant variant_of(const std::string& arch) {
  AlibiVariant v;
  if (arch == "bloom") {
    v.embd_norm = true;
    v.fixed_max_bias = 8.0f;
  } else if (arch == "mpt") {
    v.norm_bias_required = false;
    v.pos_embd = v.clamp_kqv = v.act_scales = true;
  } else if (arch == "jais") {
    v.tied_output = false;
    v.inv_dim_scale = true;
    v.ffn = FfnKind::SwigluBiased;
  } else if (arch == "refact") {
    v.rms_norm = true;
    v.wo_bias = false;
    v.ffn = FfnKind::Swiglu;
    v.fixed_max_bias = 8.0f;
  } else {
    throw Error(fmt::format("no ALiBi builder variant for architecture '{}'", arch));
  }
  return v;
}

class AlibiDecoder final : public Transformer {
 public:
  AlibiDecoder(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o), v_(variant_of(h.arch)) {
    const std::string& a = h.arch;
    if (!v_.rms_norm) {
      const auto eps = f.get_float(a + ".attention.layer_norm_epsilon");
      if (!eps) throw Error(fmt::format("{}: missing key '{}.attention.layer_norm_epsilon'", f.path(), a));
      layer_norm_eps_ = *eps;
    } else if (!f.get_float(a + ".attention.layer_norm_rms_epsilon")) {
      throw Error(fmt::format("{}: missing key '{}.attention.layer_norm_rms_epsilon'", f.path(), a));
    }
    max_bias_ = v_.fixed_max_bias > 0.0f ? v_.fixed_max_bias
                                         : float(f.get_float(a + ".attention.max_alibi_bias").value_or(0.0));
    if (max_bias_ < 0.0f) throw Error(fmt::format("{}: {}.attention.max_alibi_bias {} is negative", f.path(), a, max_bias_));
    if (v_.clamp_kqv) clamp_kqv_ = f.get_float(a + ".attention.clamp_kqv").value_or(0.0);
    if (h.arch == "refact" && f.get_int(a + ".expert_count").value_or(0) > 0)
      throw Error(fmt::format("{}: refact with {} experts: the reference loads ffn_*_exps but its graph applies none of "
                              "them (its FFN degenerates to silu(x)); vtc refuses such a file",
                              f.path(), *f.get_int(a + ".expert_count")));
    const float hd = float(h.head_dim);
    scale_ = v_.inv_dim_scale ? 1.0f / hd : 1.0f / std::sqrt(hd);
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    if (h.arch == "mpt" && g.has(blk(0, "attn_q_norm")))
      throw Error("mpt: the QK layer norm (attn_q_norm, attn_k_norm) is not supported: the reference's generator "
                  "cannot write it, so it could not be checked");
    Value x = b.embed(g.weight("token_embd"), g.ids);
    if (v_.pos_embd && g.has("position_embd")) x = b.add(x, b.embed(g.weight("position_embd"), g.pos));
    if (v_.embd_norm) x = norm(g, x, "token_embd_norm");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      Value cur = norm(g, x, blk(l, "attn_norm"));
      auto [q, k, v] = g.qkv(cur, l);
      if (clamp_kqv_ > 0.0) {
        q = b.clamp(q, -clamp_kqv_, clamp_kqv_);
        k = b.clamp(k, -clamp_kqv_, clamp_kqv_);
        v = b.clamp(v, -clamp_kqv_, clamp_kqv_);
      }
      ir::AttentionOptions attn{.state = fmt::format("kv.{}", l), .scale = double(scale_)};
      if (max_bias_ > 0.0f) attn.alibi_max_bias = double(max_bias_);
      Value a = b.reshape(b.attention(q, k, v, g.pos, g.seq, attn), {g.n, h.n_head * h.head_dim});
      a = v_.wo_bias ? g.linear_bias(a, blk(l, "attn_output")) : g.linear(a, blk(l, "attn_output"));
      x = ir::Builder::named(b.add(a, x), fmt::format("ffn_inp{}", l));
      Value f = ffn(g, norm(g, x, blk(l, "ffn_norm")), l);
      x = ir::Builder::named(b.add(f, x), fmt::format("x{}", l));
    }
    return x;
  }

  Value head(StepGraph& g, Value rows) const override {
    Value y = norm(g, rows, "output_norm");
    return v_.tied_output ? g.output(y) : g.linear(y, "output");
  }
  Value embedding(StepGraph& g, Value x) const override { return norm(g, x, "output_norm"); }

 private:
  // build_norm: layer_norm(x) * gain + bias, or rms_norm(x) * gain.
  Value norm(StepGraph& g, Value x, std::string_view gain) const {
    if (v_.rms_norm) return g.norm(x, gain);
    return g.layer_norm(x, gain, layer_norm_eps_, v_.norm_bias_required ? Need::kRequired : Need::kOptional);
  }

  Value ffn(StepGraph& g, Value x, int64_t l) const {
    ir::Builder& b = g.b;
    switch (v_.ffn) {
      case FfnKind::SwigluBiased: return g.swiglu_ffn(x, l, "", FfnTensors{.biases = true, .scales = false});
      case FfnKind::Swiglu: return g.swiglu_ffn(x, l, "", FfnTensors{.biases = false, .scales = false});
      case FfnKind::Gelu: break;
    }
    const FfnTensors biased{.biases = true, .scales = false};
    if (!v_.act_scales) return g.gelu_ffn(x, l, biased);
    // mpt: build_ffn divides the GELU by the AWQ activation scales when present.
    auto project = [&](Value in, const char* w) {
      Value y = g.linear_plain(in, blk(l, w));
      Value bias = v_.norm_bias_required ? g.weight(blk(l, std::string(w) + ".bias"))
                                         : g.optional(blk(l, std::string(w) + ".bias"));
      return bias ? b.add(y, bias) : y;
    };
    Value act = b.gelu(project(x, "ffn_up"));
    if (Value s = g.optional(blk(l, "ffn.act.scales"))) act = b.div(act, s);
    return project(act, "ffn_down");
  }

  AlibiVariant v_;
  double layer_norm_eps_ = 1e-5, clamp_kqv_ = 0.0;
  float max_bias_ = 0.0f, scale_ = 1.0f;
};

}  // namespace

ir::Module build_alibi(const gguf::GgufFile& f, const BuildOptions& o) { return build<AlibiDecoder>(f, o); }

}  // namespace vtc::arch
