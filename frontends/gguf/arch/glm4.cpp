// chatglm (ChatGLM3, GLM-4 9B chat in the older layout) and glm4 (GLM-4
// 0414, GLM-Z1), as the reference's src/models/chatglm.cpp and glm4.cpp: one
// layer, glm4 adding norms after attention and after the FFN:
//
//   per layer:
//     h = rms_norm(x) * attn_norm
//     q, k, v = build_qkv(h)                   each * scale + bias
//     q, k = rope(q), rope(k)                  normal rope on the first n_rot
//                                              dims (partial rotary)
//     a = attention(q, k, v) Wo * attn_output.scale
//     x += glm4 ? rms_norm(a) * post_attention_norm : a
//     h = rms_norm(x) * ffn_norm
//     u = h Wup                                ffn_up holds [2F]: gate rows, then up
//     f = (silu(u[:F]) * u[F:]) Wdown          (LLM_FFN_SWIGLU, no biases or scales)
//     x += glm4 ? rms_norm(f) * post_ffw_norm : f
//   logits = (rms_norm(x) * output_norm) Woutput * output.scale
//
// glm4 with rope.dimension_sections (sections 0 and 1 non-zero, the GLM-4V
// text tower) ropes with M-RoPE (mode multi: neox pairs) over the text
// positions [pos, pos, pos, 0]. NextN/MTP layers (nextn_predict_layers > 0)
// are refused.
#include <fmt/format.h>

#include "frontends/gguf/arch/step_graph.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Value;

class Glm4 final : public Transformer {
 public:
  Glm4(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o), post_norms_(h.arch == "glm4") {
    const std::string& a = h.arch;
    if (f.get_int(a + ".nextn_predict_layers").value_or(0) > 0)
      throw Error(fmt::format("{}: {}.nextn_predict_layers > 0 (NextN/MTP layers) is not supported", f.path(), a));
    if (post_norms_) {
      const std::vector<int64_t> sections = rope_sections(f, h);
      if (sections[0] > 0 && sections[1] > 0) sections_ = sections;  // the reference's use_mrope()
    }
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    ir::RopeOptions rope = rope_options(h);
    rope.mode = ir::RopeMode::Normal;
    Value pos = g.pos;
    if (!sections_.empty()) {
      rope.mode = ir::RopeMode::Multi;
      rope.sections = sections_;
      pos = g.text_mrope_positions();
    }
    Value x = ir::Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      auto [q, k, v] = g.qkv(g.norm(x, blk(l, "attn_norm")), l);
      Value a = g.attention(b.rope(q, pos, rope), b.rope(k, pos, rope), v, l);
      a = g.linear(b.reshape(a, {g.n, h.n_head * h.head_dim}), blk(l, "attn_output"));
      x = b.add(x, post_norms_ ? g.norm(a, blk(l, "post_attention_norm")) : a);
      Value ffn = g.fused_swiglu_ffn(g.norm(x, blk(l, "ffn_norm")), l);
      x = ir::Builder::named(b.add(x, post_norms_ ? g.norm(ffn, blk(l, "post_ffw_norm")) : ffn), fmt::format("x{}", l));
    }
    return x;
  }

 private:
  const bool post_norms_;
  std::vector<int64_t> sections_;  // glm4's M-RoPE sections, when it uses them
};

}  // namespace

ir::Module build_glm4(const gguf::GgufFile& f, const BuildOptions& o) { return build<Glm4>(f, o); }

}  // namespace vtc::arch
