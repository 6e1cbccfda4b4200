// The plain mixture-of-experts decoders: one attention block and one FFN
// block per layer, where the FFN is dense, routed experts, or routed experts
// beside a shared or dense FFN. Each architecture is a set of options
// (Variant below) read from its reference graph:
//
//   deepseek      src/models/deepseek.cpp (DeepSeek-MoE 16B, V1)
//   dots1         src/models/dots1.cpp
//   ernie4_5-moe  src/models/ernie4-5-moe.cpp
//   hunyuan-moe   src/models/hunyuan-moe.cpp
//   arctic        src/models/arctic.cpp
//   dbrx          src/models/dbrx.cpp
//   bailingmoe    src/models/bailingmoe.cpp (Ling)
//   bailingmoe2   src/models/bailingmoe2.cpp (Ling 2.0)
//   minimax-m2    src/models/minimax-m2.cpp
//   hy_v3         src/models/hy-v3.cpp
//   qwen3vlmoe    src/models/qwen3vlmoe.cpp (the text model of Qwen3-VL MoE)
//
//   x = token_embd[ids]
//   per layer:
//     h = norm(x) * attn_norm                 rms_norm; dbrx: layer_norm without bias
//     q, k, v = build_qkv(h)                  each * scale + bias; dbrx: the fused
//                                             attn_qkv clamped to +-attention.clamp_kqv;
//                                             minimax-m2: h Wq, h Wk, h Wv (no scale, no bias)
//     q, k = rms_norm over head_dim * attn_{q,k}_norm   before rope (dots1, bailingmoe2,
//                                             hy_v3, qwen3vlmoe), after it (hunyuan-moe);
//                                             minimax-m2: over the whole projection width,
//                                             before the head split
//     q, k = rope(q), rope(k)                 normal (deepseek, ernie4_5-moe, arctic, bailingmoe),
//                                             imrope with rope.dimension_sections (qwen3vlmoe:
//                                             a text token has its position in all four
//                                             components), neox (the others)
//     a = attention(q, k, v) / sqrt(head_dim) Wo * scale   (several graphs pass an
//                                             output bias, but no loader here creates one
//                                             that its graph applies)
//     x += a
//     ffn:
//       dense layer (layer < leading_dense_block_count; ernie4_5-moe also every
//       layer with (layer + 1) % interleave_moe_layer_step != 0; hy_v3: a layer
//       without ffn_gate_inp):
//         x += swiglu(rms_norm(x) * ffn_norm)  no scales (hy_v3: biases and scales)
//       expert layer:
//         h = rms_norm(x) * ffn_norm          dbrx: layer_norm(x) * attn_output_norm
//         x += build_moe_ffn(h)               router ffn_gate_inp, split experts, no
//                                             per-expert scales; routing below (hy_v3:
//                                             merged gate_up allowed, per-expert scales)
//              + swiglu_shexp(h)              deepseek, dots1, hunyuan-moe, bailingmoe,
//                                             bailingmoe2, hy_v3 (with scales); ernie4_5-moe
//                                             when expert_shared_feed_forward_length > 0
//       arctic (every layer): the dense FFN and the experts side by side,
//         the experts reading the layer's INPUT (before attention):
//         x' = x + swiglu(rms_norm(x) * ffn_norm)
//         x  = x' + build_moe_ffn(rms_norm(x_in) * ffn_norm_exps)
//   logits = (norm(x) * output_norm) Woutput * output.scale    (token_embd when tied)
//
// Routing (build_moe_ffn's arguments in each graph):
//   deepseek      softmax, not renormalized, expert_weights_scale
//   dots1         expert_gating_func, expert_weights_norm, expert_weights_scale,
//                 selection bias exp_probs_b (optional)
//   ernie4_5-moe  softmax, renormalized, selection bias exp_probs_b (optional)
//   bailingmoe    softmax, expert_weights_norm, expert_weights_scale
//   bailingmoe2   as dots1 (expert_gating_func required)
//   hy_v3         as dots1, gating sigmoid when expert_gating_func is absent
//   minimax-m2    expert_gating_func, renormalized, selection bias exp_probs_b
//   qwen3vlmoe    softmax, renormalized
//   hunyuan-moe, arctic, dbrx   softmax, renormalized
// (the architectures that read no expert_weights_scale get none).
// bailingmoe reads leading_dense_block_count but its loader and graph make
// every layer an expert layer, so vtc does too; its attention scale is
// 1/sqrt(n_rot), and its loader sizes the heads by n_rot, so a file whose
// rope.dimension_count is not the head size is refused.
// Multi-token prediction layers (nextn_predict_layers > 0: bailingmoe2,
// hy_v3) are refused for now; qwen3vlmoe's deepstack layers add the image
// embeddings' extra slices, which are zero for text, so they change
// nothing here.
#include <fmt/format.h>

#include <optional>

#include "frontends/gguf/arch/hybrid.h"
#include "frontends/gguf/arch/step_graph.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Value;

enum class QkNorm { None, BeforeRope, AfterRope, Projection };
enum class Shared { None, Always, WhenSized };
enum class Dense { None, Leading, LeadingAndStep, NoRouter };

// What an architecture of this family does differently.
struct Variant {
  ir::RopeMode rope = ir::RopeMode::Normal;  // IMulti: with rope.dimension_sections
  QkNorm qk_norm = QkNorm::None;
  bool layer_norm = false;         // LLM_NORM (dbrx) instead of LLM_NORM_RMS
  bool clamp_kqv = false;          // build_qkv clamps to attention.clamp_kqv (dbrx)
  bool dense_beside_experts = false;  // arctic
  Dense dense = Dense::None;
  FfnTensors dense_tensors{.biases = false, .scales = false};
  Shared shared = Shared::None;
  FfnTensors shared_tensors{.biases = false, .scales = false};
  bool expert_scales = false, merged_allowed = false;
  bool read_scale = false;         // the loader reads expert_weights_scale
  bool read_gating = false;        // expert_gating_func
  std::optional<ir::MoeGating> gating_none = std::nullopt;  // an absent gating func (else refused)
  bool read_norm = false;          // expert_weights_norm
  bool norm_w = true;              // build_moe_ffn's norm_w when not read
  bool selection_bias = false;     // the graph passes exp_probs_b
  std::string_view probs_bias = "exp_probs_b.bias";
  std::string_view moe_norm = "ffn_norm";
  bool nextn = false;              // the loader reads nextn_predict_layers (refused when > 0)
};

Variant variant_of(const std::string& arch) {
  using ir::RopeMode;
  const FfnTensors scales{.biases = false, .scales = true};
  if (arch == "deepseek")
    return {.dense = Dense::Leading, .shared = Shared::Always, .read_scale = true, .norm_w = false};
  if (arch == "dots1" || arch == "bailingmoe2")
    return {.rope = RopeMode::Neox, .qk_norm = QkNorm::BeforeRope, .dense = Dense::Leading,
            .shared = Shared::Always, .read_scale = true, .read_gating = true, .read_norm = true,
            .selection_bias = true, .nextn = arch == "bailingmoe2"};
  if (arch == "ernie4_5-moe")
    return {.dense = Dense::LeadingAndStep, .shared = Shared::WhenSized, .selection_bias = true};
  if (arch == "hunyuan-moe")
    return {.rope = RopeMode::Neox, .qk_norm = QkNorm::AfterRope, .shared = Shared::Always};
  if (arch == "arctic") return {.dense_beside_experts = true, .moe_norm = "ffn_norm_exps"};
  if (arch == "dbrx")
    return {.rope = RopeMode::Neox, .layer_norm = true, .clamp_kqv = true, .moe_norm = "attn_output_norm"};
  if (arch == "bailingmoe")
    return {.shared = Shared::Always, .read_scale = true, .read_norm = true};
  if (arch == "minimax-m2")
    return {.rope = RopeMode::Neox, .qk_norm = QkNorm::Projection, .read_gating = true, .selection_bias = true};
  if (arch == "hy_v3")
    return {.rope = RopeMode::Neox, .qk_norm = QkNorm::BeforeRope, .dense = Dense::NoRouter,
            .dense_tensors = {.biases = true, .scales = true}, .shared = Shared::Always, .shared_tensors = scales,
            .expert_scales = true, .merged_allowed = true, .read_scale = true, .read_gating = true,
            .gating_none = ir::MoeGating::Sigmoid, .read_norm = true, .selection_bias = true,
            .probs_bias = "exp_probs_b", .nextn = true};
  if (arch == "qwen3vlmoe")
    return {.rope = RopeMode::IMulti, .qk_norm = QkNorm::BeforeRope};
  throw Error(fmt::format("moe_decoder: no variant for architecture '{}'", arch));
}

class MoeDecoder final : public Transformer {
 public:
  MoeDecoder(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o), v_(variant_of(h.arch)) {
    const std::string& a = h.arch;
    n_used_ = read_expert_hparams(f, a);
    if (v_.dense == Dense::Leading || v_.dense == Dense::LeadingAndStep)
      n_dense_ = f.get_int(a + ".leading_dense_block_count").value_or(0);
    if (v_.dense == Dense::LeadingAndStep) moe_step_ = require_int(f, a + ".interleave_moe_layer_step");
    shared_ = v_.shared == Shared::Always ||
              (v_.shared == Shared::WhenSized && f.get_int(a + ".expert_shared_feed_forward_length").value_or(0) > 0);
    if (v_.read_scale) scale_ = f.get_float(a + ".expert_weights_scale").value_or(0.0);
    norm_w_ = v_.norm_w;
    if (v_.read_gating) {
      const int64_t func = f.get_int(a + ".expert_gating_func").value_or(0);
      // build_moe_ffn aborts on gating "none" where the loader leaves it so.
      if (func == 0 && !v_.gating_none)
        throw Error(fmt::format("{}: {} needs expert_gating_func (softmax or sigmoid)", f.path(), a));
      gating_ = expert_gating(f, func, v_.gating_none.value_or(ir::MoeGating::Softmax));
    }
    if (v_.read_norm) norm_w_ = f.get_int(a + ".expert_weights_norm").value_or(0) != 0;
    if (v_.clamp_kqv) clamp_kqv_ = f.get_float(a + ".attention.clamp_kqv").value_or(0.0);
    if (v_.layer_norm) {
      const auto eps = f.get_float(a + ".attention.layer_norm_epsilon");
      if (!eps) throw Error(fmt::format("{}: missing hparam '{}.attention.layer_norm_epsilon'", f.path(), a));
      ln_eps_ = *eps;
    }
    if (v_.rope == ir::RopeMode::IMulti) {
      sections_ = int_array(f, a + ".rope.dimension_sections");
      if (sections_.size() > 4) throw Error(fmt::format("{}: rope.dimension_sections has more than 4 entries", f.path()));
      sections_.resize(4, 0);
    }
    if (v_.nextn && f.get_int(a + ".nextn_predict_layers").value_or(0) > 0)
      throw Error(fmt::format("{}: {} with nextn_predict_layers > 0 (multi-token prediction layers) is not supported",
                              f.path(), a));
    if (a == "bailingmoe" && h.n_rot != h.head_dim)
      throw Error(fmt::format("{}: bailingmoe with rope.dimension_count {} != head size {} is not supported", f.path(),
                              h.n_rot, h.head_dim));
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    Value x = ir::Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      Value in = x;
      x = b.add(x, attention(g, norm(g, x, blk(l, "attn_norm")), l));
      if (v_.dense_beside_experts) {
        x = b.add(x, dense_ffn(g, g.norm(x, blk(l, "ffn_norm")), l));
        x = b.add(x, experts(g, g.norm(in, blk(l, v_.moe_norm)), l));
      } else if (dense_layer(g, l)) {
        x = b.add(x, dense_ffn(g, g.norm(x, blk(l, "ffn_norm")), l));
      } else {
        x = b.add(x, experts(g, norm(g, x, blk(l, v_.moe_norm)), l));
      }
      x = ir::Builder::named(x, fmt::format("x{}", l));
    }
    return x;
  }

  Value head(StepGraph& g, Value rows) const override { return g.output(embedding(g, rows)); }
  Value embedding(StepGraph& g, Value x) const override { return norm(g, x, "output_norm"); }

 private:
  // build_norm: LLM_NORM_RMS, or dbrx's LLM_NORM with a gain and no bias.
  Value norm(StepGraph& g, Value x, const std::string& gain) const {
    return v_.layer_norm ? g.layer_norm(x, gain, ln_eps_, Need::kNever) : g.norm(x, gain);
  }

  bool dense_layer(const StepGraph& g, int64_t l) const {
    switch (v_.dense) {
      case Dense::None: return false;
      case Dense::Leading: return l < n_dense_;
      case Dense::LeadingAndStep: return l < n_dense_ || (l + 1) % moe_step_ != 0;
      case Dense::NoRouter: return !g.has(blk(l, "ffn_gate_inp"));
    }
    return false;
  }

  // Q, K, V [n, heads, head_dim]: build_qkv; dbrx clamps the fused
  // projection (its loader takes attn_qkv only); minimax-m2 projects with
  // neither scale nor bias and norms the whole projection.
  StepGraph::Qkv qkv(StepGraph& g, Value x, int64_t l) const {
    ir::Builder& b = g.b;
    const int64_t hd = h.head_dim;
    auto heads = [&](Value y, int64_t count) { return b.reshape(y, {g.n, count, hd}); };
    if (v_.qk_norm == QkNorm::Projection)
      return {heads(g.norm(g.linear_plain(x, blk(l, "attn_q")), blk(l, "attn_q_norm")), h.n_head),
              heads(g.norm(g.linear_plain(x, blk(l, "attn_k")), blk(l, "attn_k_norm")), h.n_head_kv),
              heads(g.linear_plain(x, blk(l, "attn_v")), h.n_head_kv)};
    if (clamp_kqv_ <= 0.0) return g.qkv(x, l);
    const int64_t q_width = h.n_head * hd, kv_width = h.n_head_kv * hd;
    Value qkv = b.clamp(g.linear_bias(x, blk(l, "attn_qkv")), -clamp_kqv_, clamp_kqv_);
    return {heads(b.slice(qkv, 1, 0, q_width), h.n_head), heads(b.slice(qkv, 1, q_width, kv_width), h.n_head_kv),
            heads(b.slice(qkv, 1, q_width + kv_width, kv_width), h.n_head_kv)};
  }

  Value attention(StepGraph& g, Value x, int64_t l) const {
    ir::Builder& b = g.b;
    ir::RopeOptions rope = rope_options(h);
    rope.mode = v_.rope;
    Value pos = g.pos;
    if (v_.rope == ir::RopeMode::IMulti) {
      rope.sections = sections_;
      Value column = b.reshape(g.pos, {g.n, 1});
      pos = b.concat({column, column, column, column}, 1);
    }
    auto [q, k, v] = qkv(g, x, l);
    auto qk_norm = [&] {
      q = g.norm(q, blk(l, "attn_q_norm"));
      k = g.norm(k, blk(l, "attn_k_norm"));
    };
    if (v_.qk_norm == QkNorm::BeforeRope) qk_norm();
    q = b.rope(q, pos, rope);
    k = b.rope(k, pos, rope);
    if (v_.qk_norm == QkNorm::AfterRope) qk_norm();
    Value a = b.reshape(g.attention(q, k, v, l), {g.n, h.n_head * h.head_dim});
    return g.linear(a, blk(l, "attn_output"));
  }

  Value dense_ffn(StepGraph& g, Value x, int64_t l) const { return g.swiglu_ffn(x, l, "", v_.dense_tensors); }

  Value experts(StepGraph& g, Value x, int64_t l) const {
    ir::MoeRouteOptions route{.k = n_used_, .gating = gating_, .norm = norm_w_, .scale = scale_};
    if (v_.selection_bias) route.selection_bias = g.optional(blk(l, v_.probs_bias));
    Value moe = g.moe_ffn(x, l, {.route = route, .merged_allowed = v_.merged_allowed, .expert_scales = v_.expert_scales});
    if (!shared_) return moe;
    return g.b.add(moe, g.swiglu_ffn(x, l, "_shexp", v_.shared_tensors));
  }

  Variant v_;
  int64_t n_used_ = 0, n_dense_ = 0, moe_step_ = 1;
  bool shared_ = false, norm_w_ = true;
  ir::MoeGating gating_ = ir::MoeGating::Softmax;
  double scale_ = 0.0, clamp_kqv_ = 0.0, ln_eps_ = 1e-5;
  std::vector<int64_t> sections_;
};

}  // namespace

ir::Module build_moe_decoder(const gguf::GgufFile& f, const BuildOptions& o) { return build<MoeDecoder>(f, o); }

}  // namespace vtc::arch
