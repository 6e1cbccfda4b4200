// qwen, qwen2 and qwen2vl, as the reference's src/models/qwen.cpp,
// qwen2.cpp and qwen2vl.cpp: llama's layer with neox rope, q/k/v from
// build_qkv (qwen: the merged attn_qkv with its bias; qwen2, qwen2vl:
// split, optional biases), no output-projection or FFN biases (the
// reference loads none), FFN scales loaded but not applied (their build_ffn
// passes none):
//
//   per layer:
//     h = rms_norm(x) * attn_norm
//     q, k, v = build_qkv(h)              each * scale + bias
//     x += attention(rope(q), rope(k), v) Wo * scale
//     x += swiglu(rms_norm(x) * ffn_norm)
//   logits = (rms_norm(x) * output_norm) Woutput * output.scale
//            (+ output.bias: qwen2 only; qwen2vl loads it and never adds it)
//
// qwen2vl ropes with M-RoPE (rope mode multi, rope.dimension_sections) over
// the text positions [pos, pos, pos, 0] (StepGraph::text_mrope_positions);
// the vision tower is not part of the text model. qwen2vl's loader reads no
// layer_norm_rms_epsilon: the reference normalizes with eps 0 whatever the
// file says. vtc's rms_norm wants eps > 0, so qwen2vl takes FLT_MIN, which
// leaves mean(x^2) + eps equal to mean(x^2) in f32 for every row with
// mean(x^2) above ~2e-31 (any row that is not all but zero).
// qwen's output matrix is required (not tied).
#include <fmt/format.h>

#include <limits>

#include "frontends/gguf/arch/step_graph.h"

namespace vtc::arch {
namespace {

using ir::Value;

class Qwen2 final : public Transformer {
 public:
  Qwen2(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o) {
    output_bias_ = h.arch == "qwen2";
    if (h.arch == "qwen2vl") {
      sections_ = rope_sections(f, h);
      eps_ = double(std::numeric_limits<float>::min());
    }
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    ir::RopeOptions rope = rope_options(h);
    Value pos = g.pos;
    if (!sections_.empty()) {
      rope.mode = ir::RopeMode::Multi;
      rope.sections = sections_;
      pos = g.text_mrope_positions();
    }
    Value x = ir::Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      Value cur = norm(g, x, blk(l, "attn_norm"));
      auto [q, k, v] = g.qkv(cur, l);
      Value a = g.attention(b.rope(q, pos, rope), b.rope(k, pos, rope), v, l);
      x = b.add(x, g.linear(b.reshape(a, {g.n, h.n_head * h.head_dim}), blk(l, "attn_output")));
      Value ffn = g.swiglu_ffn(norm(g, x, blk(l, "ffn_norm")), l, "", FfnTensors{.scales = false});
      x = ir::Builder::named(b.add(x, ffn), fmt::format("x{}", l));
    }
    return x;
  }

  Value head(StepGraph& g, Value rows) const override {
    Value x = norm(g, rows, "output_norm");
    return h.arch == "qwen" ? g.linear(x, "output") : g.output(x, output_bias_);
  }

  Value embedding(StepGraph& g, Value x) const override { return norm(g, x, "output_norm"); }

 private:
  Value norm(StepGraph& g, Value x, std::string_view gain) const { return g.b.rms_norm(x, g.weight(gain), eps_); }

  double eps_ = h.eps;
  bool output_bias_ = false;
  std::vector<int64_t> sections_;  // qwen2vl's M-RoPE sections
};

}  // namespace

ir::Module build_qwen2(const gguf::GgufFile& f, const BuildOptions& o) { return build<Qwen2>(f, o); }

}  // namespace vtc::arch
