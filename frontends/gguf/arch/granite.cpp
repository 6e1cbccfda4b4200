// granite (Granite 3.x dense and, with experts, Granite MoE under the same
// architecture name) and granitemoe (Granite MoE's own name, dense or with
// experts), as the reference's src/models/granite.cpp (granite-moe.cpp
// loads the same tensors and builds granite's graph): llama's layer with
// Granite's four scalars:
//
//   x = token_embd[ids] * embedding_scale          (when the key is non-zero)
//   per layer:
//     h = rms_norm(x) * attn_norm
//     q, k, v = build_qkv(h)                       each * scale + bias
//     q, k = rope(q, k, pos, rope_freqs)           normal rope, when rope.scaling.finetuned
//                                                  (default true: Granite's rope switch;
//                                                  granitemoe reads no switch and always ropes)
//     x += residual_scale * (attention(q, k, v; scale attention.scale, else
//          1/sqrt(head_dim)) Wo * scale + attn_output.bias)
//     h = rms_norm(x) * ffn_norm
//     x += residual_scale * (expert_count == 0
//            ? swiglu(h), each projection + bias, no scales
//            : build_moe_ffn(h) (softmax, top expert_used_count, renormalized,
//              no weight scale, no per-expert scales)
//              + swiglu_shexp(h) when expert_shared_feed_forward_length > 0)
//   logits = ((rms_norm(x) * output_norm) Woutput * output.scale) / logit_scale
//
// residual_scale 0 (absent) means none, as the reference tests it.
#include <fmt/format.h>

#include <cmath>

#include "frontends/gguf/arch/step_graph.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Value;

class Granite final : public Transformer {
 public:
  Granite(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o) {
    const std::string& a = h.arch;
    const auto logit_scale = f.get_float(a + ".logit_scale");
    if (!logit_scale || *logit_scale == 0.0)
      throw Error(fmt::format("{}: missing or zero hparam '{}.logit_scale'", f.path(), a));
    logit_scale_ = *logit_scale;
    residual_scale_ = f.get_float(a + ".residual_scale").value_or(0.0);
    embedding_scale_ = f.get_float(a + ".embedding_scale").value_or(0.0);
    const double attention_scale = f.get_float(a + ".attention.scale").value_or(0.0);
    kq_scale_ = attention_scale != 0.0 ? attention_scale : 1.0 / std::sqrt(double(h.head_dim));
    // granitemoe's loader never reads the key: its layers always rope.
    if (const gguf::Value* finetuned = f.find(a + ".rope.scaling.finetuned"); finetuned && a == "granite")
      has_rope_ = finetuned->as_bool().value_or(true);
    if (f.get_int(a + ".expert_count").value_or(0) > 0) {
      n_expert_used_ = read_expert_hparams(f, a);
      shared_expert_ = f.get_int(a + ".expert_shared_feed_forward_length").value_or(0) > 0;
    }
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    ir::RopeOptions rope = rope_options(h);
    rope.mode = ir::RopeMode::Normal;
    Value x = b.embed(g.weight("token_embd"), g.ids);
    if (embedding_scale_ != 0.0) x = b.scale(x, embedding_scale_);
    x = ir::Builder::named(x, "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      auto [q, k, v] = g.qkv(g.norm(x, blk(l, "attn_norm")), l);
      if (has_rope_) {
        Value freqs = g.optional("rope_freqs");
        q = b.rope(q, g.pos, rope, freqs);
        k = b.rope(k, g.pos, rope, freqs);
      }
      ir::AttentionOptions attn{.state = fmt::format("kv.{}", l), .scale = kq_scale_};
      Value a = b.reshape(b.attention(q, k, v, g.pos, g.seq, attn), {g.n, h.n_head * h.head_dim});
      x = b.add(x, residual(b, g.linear_bias(a, blk(l, "attn_output"))));
      x = ir::Builder::named(b.add(x, residual(b, ffn(g, g.norm(x, blk(l, "ffn_norm")), l))), fmt::format("x{}", l));
    }
    return x;
  }

  Value head(StepGraph& g, Value rows) const override {
    return g.b.scale(g.output(g.norm(rows, "output_norm")), 1.0 / logit_scale_);
  }

 private:
  Value residual(ir::Builder& b, Value y) const { return residual_scale_ != 0.0 ? b.scale(y, residual_scale_) : y; }

  Value ffn(StepGraph& g, Value cur, int64_t l) const {
    if (n_expert_used_ == 0) return g.swiglu_ffn(cur, l, "", FfnTensors{.biases = true, .scales = false});
    Value moe = g.moe_ffn(cur, l, MoeFfnOptions{.route = {.k = n_expert_used_}, .expert_scales = false});
    if (!shared_expert_) return moe;
    return g.b.add(moe, g.swiglu_ffn(cur, l, "_shexp", FfnTensors{.scales = false}));
  }

  double logit_scale_ = 1.0, residual_scale_ = 0.0, embedding_scale_ = 0.0, kq_scale_ = 1.0;
  bool has_rope_ = true, shared_expert_ = false;
  int64_t n_expert_used_ = 0;
};

}  // namespace

ir::Module build_granite(const gguf::GgufFile& f, const BuildOptions& o) { return build<Granite>(f, o); }

}  // namespace vtc::arch
