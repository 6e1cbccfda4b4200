// The llama family: dense decoders whose reference graph is llama's layer
// with one or two variations, each a row of one table (kVariants below)
// rather than a file of its own. Rows, after the reference's
// src/models/<arch>.cpp (the loader in the same file says which tensors
// exist; llama_model_rope_type in src/llama-model.cpp gives the rope):
//
//   xverse, internlm2       llama's layer, normal rope, output.weight required
//                           (internlm2's converter already splits the fused wqkv
//                           into plain q | k | v rows: create_tensor_qkv/build_qkv)
//   baichuan                as xverse; rope only for the 7B (32 layers); the 13B
//                           (40 layers) uses ALiBi, refused here; any other
//                           layer count is LLM_TYPE_UNKNOWN, where the reference
//                           applies neither rope nor ALiBi (no position encoding)
//   orion                   neox rope; layer norms with gain and bias (attn, ffn,
//                           output), eps attention.layer_norm_epsilon; output required
//   exaone                  neox rope with llama3's rope_freqs when present
//   arcee                   normal rope with rope_freqs; FFN relu(x Wup)^2 Wdown, no gate
//   ernie4_5                normal rope; attn_output.bias is loaded, never applied
//   hunyuan-dense           neox rope (base * alpha^(d/(d-2)) with rope.scaling.alpha);
//                           q, k = rms_norm over head_dim * attn_q_norm / attn_k_norm
//                           after rope. With rope.dimension_sections the reference
//                           calls ggml_rope_multi, but with hunyuan-dense's rope type
//                           (NEOX, no M-RoPE bit) ggml zeroes the sections: plain neox
//   maincoder               as hunyuan-dense with normal rope and no alpha
//   nanbeige                normal rope with rope_freqs; the FFN applies its
//                           projections' scales
//   pangu-embedded          neox rope; attn_output.bias required and applied;
//                           rope_freqs loaded, never applied
//   seed_oss                neox rope; the FFN's norm is post_attention_norm
//                           (the reference's attn_post_norm, before the FFN)
//
// Every row computes:
//
//   x = token_embd[ids]
//   per layer l:
//     h = norm(x) * attn_norm (+ attn_norm.bias)
//     q, k, v = build_qkv(h)                   merged attn_qkv or split, each * scale + bias
//     q, k = rope(q), rope(k)                  (the row's mode; rope_freqs when it applies them)
//     [qk-norm rows] q, k = rms_norm(q) * attn_q_norm, rms_norm(k) * attn_k_norm
//     x += attention(q, k, v) Wo * scale (+ attn_output.bias)   scale 1/sqrt(head_dim)
//     h = norm(x) * ffn_norm (+ ffn_norm.bias)    (seed_oss: post_attention_norm)
//     x += swiglu(h) (no biases; scales only where applied)  |  arcee: relu(h Wup)^2 Wdown
//   logits = (norm(x) * output_norm (+ bias)) Woutput * output.scale   (token_embd when
//            the row allows a tied output and the file has no output.weight)
//
// No row reads attention.scale (the reference's loaders for these read none,
// so f_attention_scale stays 0 and the scale is 1/sqrt(head_dim)).
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <string_view>

#include "frontends/gguf/arch/step_graph.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Value;

enum class NormKind { Rms, Layer };      // rms_norm * gain | layer_norm * gain + bias
enum class FfnKind { Swiglu, ReluSqr };  // build_ffn SILU/PAR | RELU_SQR/SEQ without gate
enum class QkNorm { None, AfterRope };   // rms_norm of q and k over head_dim, after rope

struct Variant {
  std::string_view arch;
  ir::RopeMode rope;
  NormKind norm = NormKind::Rms;
  FfnKind ffn = FfnKind::Swiglu;
  QkNorm qk_norm = QkNorm::None;
  bool output_required = false;  // the loader takes output.weight without a tied fallback
  bool rope_freqs = false;       // rope_freqs applied to q and k (llama3 factors)
  bool ffn_scales = false;       // build_ffn passes ffn_{gate,up,down}.scale
  bool wo_bias = false;          // attn_output.bias required and applied
  bool rope_alpha = false;       // rope.scaling.alpha raises the base (hunyuan's NTK-aware scaling)
  std::string_view ffn_norm = "ffn_norm";  // the FFN's norm gain (seed_oss: post_attention_norm)
};

constexpr ir::RopeMode kNorm = ir::RopeMode::Normal, kNeox = ir::RopeMode::Neox;

constexpr Variant kVariants[] = {
    {.arch = "xverse", .rope = kNorm, .output_required = true},
    {.arch = "internlm2", .rope = kNorm, .output_required = true},
    {.arch = "baichuan", .rope = kNorm, .output_required = true},
    {.arch = "orion", .rope = kNeox, .norm = NormKind::Layer, .output_required = true},
    {.arch = "exaone", .rope = kNeox, .rope_freqs = true},
    {.arch = "arcee", .rope = kNorm, .ffn = FfnKind::ReluSqr, .rope_freqs = true},
    {.arch = "ernie4_5", .rope = kNorm},
    {.arch = "hunyuan-dense", .rope = kNeox, .qk_norm = QkNorm::AfterRope, .rope_alpha = true},
    {.arch = "maincoder", .rope = kNorm, .qk_norm = QkNorm::AfterRope},
    {.arch = "nanbeige", .rope = kNorm, .rope_freqs = true, .ffn_scales = true},
    {.arch = "pangu-embedded", .rope = kNeox, .wo_bias = true},
    {.arch = "seed_oss", .rope = kNeox, .ffn_norm = "post_attention_norm"},
};

const Variant& variant_of(const gguf::GgufFile& f) {
  const std::string arch = f.architecture();
  for (const Variant& v : kVariants)
    if (v.arch == arch) return v;
  throw Error(fmt::format("{}: architecture '{}' is not a llama-family row", f.path(), arch));
}

// baichuan's positions by model size (the reference's load_arch_hparams and
// graph): the 7B (32 layers) ropes, the 13B (40 layers) uses ALiBi with
// max bias 8, any other size neither.
constexpr int64_t kBaichuan7bLayers = 32, kBaichuan13bLayers = 40;

class LlamaFamily final : public Transformer {
 public:
  LlamaFamily(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o), v_(variant_of(f)) {
    const std::string& a = h.arch;
    if (v_.norm == NormKind::Layer) {
      const auto eps = f.get_float(a + ".attention.layer_norm_epsilon");
      if (!eps) throw Error(fmt::format("{}: missing hparam '{}.attention.layer_norm_epsilon'", f.path(), a));
      norm_eps_ = *eps;
    }
    if (a == "baichuan") {
      if (h.n_layer == kBaichuan13bLayers)
        throw Error(fmt::format("{}: baichuan with {} layers (the 13B) uses ALiBi attention, which vtc does not "
                                "support yet (the 7B's rope and other sizes are)",
                                f.path(), h.n_layer));
      has_rope_ = h.n_layer == kBaichuan7bLayers;
    }
    if (a == "nanbeige" && f.get_int(a + ".num_loops").value_or(1) != 1)
      throw Error(fmt::format("{}: nanbeige with {}.num_loops != 1 (layers run in loops) is not supported", f.path(), a));
    rope_ = rope_options(h);
    rope_.mode = v_.rope;
    if (v_.rope_alpha) {
      // hunyuan's NTK-aware scaling: base = base * alpha^(d / (d - 2)),
      // computed in float as the reference does.
      if (const float alpha = float(f.get_float(a + ".rope.scaling.alpha").value_or(0.0)); alpha > 0.0f) {
        const float d = float(h.head_dim);
        rope_.base = float(h.rope_base) * std::pow(alpha, d / (d - 2.0f));
      }
    }
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    Value x = ir::Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      Value a = attention_block(g, norm(g, x, blk(l, "attn_norm")), l);
      x = b.add(x, a);
      Value ffn = ffn_block(g, norm(g, x, blk(l, v_.ffn_norm)), l);
      x = ir::Builder::named(b.add(x, ffn), fmt::format("x{}", l));
    }
    return x;
  }

  Value head(StepGraph& g, Value rows) const override {
    Value x = embedding(g, rows);
    return v_.output_required ? g.linear(x, "output") : g.output(x);
  }
  Value embedding(StepGraph& g, Value x) const override { return norm(g, x, "output_norm"); }

 private:
  // The row's norm of x with gain `gain` (and, for layer norms, gain.bias).
  Value norm(StepGraph& g, Value x, std::string_view gain) const {
    if (v_.norm == NormKind::Rms) return g.norm(x, gain);
    return g.layer_norm(x, gain, norm_eps_);
  }

  Value attention_block(StepGraph& g, Value x, int64_t l) const {
    ir::Builder& b = g.b;
    auto [q, k, v] = g.qkv(x, l);
    if (has_rope_) {
      Value freqs = v_.rope_freqs ? g.optional("rope_freqs") : Value();
      q = b.rope(q, g.pos, rope_, freqs);
      k = b.rope(k, g.pos, rope_, freqs);
    }
    if (v_.qk_norm == QkNorm::AfterRope) {
      q = g.norm(q, blk(l, "attn_q_norm"));
      k = g.norm(k, blk(l, "attn_k_norm"));
    }
    Value a = b.reshape(g.attention(q, k, v, l), {g.n, h.n_head * h.head_dim});
    Value out = g.linear(a, blk(l, "attn_output"));
    return v_.wo_bias ? b.add(out, g.weight(blk(l, "attn_output.bias"))) : out;
  }

  Value ffn_block(StepGraph& g, Value x, int64_t l) const {
    if (v_.ffn == FfnKind::Swiglu) return g.swiglu_ffn(x, l, "", FfnTensors{.scales = v_.ffn_scales});
    // build_ffn(LLM_FFN_RELU_SQR, LLM_FFN_SEQ) without gate: relu as a clamp at 0.
    ir::Builder& b = g.b;
    Value up = g.linear_plain(x, blk(l, "ffn_up"));
    Value relu = b.clamp(up, 0.0, std::numeric_limits<double>::infinity());
    return g.linear_plain(b.mul(relu, relu), blk(l, "ffn_down"));
  }

  const Variant& v_;
  ir::RopeOptions rope_;
  double norm_eps_ = 1e-5;
  bool has_rope_ = true;
};

}  // namespace

ir::Module build_llama_family(const gguf::GgufFile& f, const BuildOptions& o) { return build<LlamaFamily>(f, o); }

}  // namespace vtc::arch
