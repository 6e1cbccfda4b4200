// bert, the encoder of BERT-family embedding models (bge, MiniLM, e5), as
// the reference's src/models/bert.cpp for LLM_ARCH_BERT: no text head, only
// @embed, and attention without the causal mask (the file's
// bert.attention.causal, false in every converted model; the reference
// defaults it to true when absent, and so does this builder):
//
//   x = token_embd[ids] + token_types[0] + position_embd[pos]
//                                         token types are all "sentence A"
//   x = layer_norm(x) * token_embd_norm + bias      eps attention.layer_norm_epsilon
//   per layer:
//     q, k, v = build_qkv(x)                 each * scale + bias
//     a = attention(q, k, v) Wo * scale + bias      scale 1/sqrt(head_dim), no rope
//     x = layer_norm(a + x) * attn_output_norm + bias
//     f = gelu(x Wup + bias) Wdown + bias     no FFN scales (the graph passes none)
//     x = layer_norm(f + x) * layer_output_norm + bias
//   embd = x                                  (the reference's t_embd; no final norm)
//
// Every sequence must come whole in one step: without the mask a token
// reads the keys of later tokens (the reference asks n_ubatch >= n_tokens;
// runtime/session.h checks it). The classifier tensors cls and cls.output
// (rank pooling, a reranker) are loaded and not applied, as the reference
// applies them only with pooling rank, which vtc refuses
// (tensor_accounting.cpp lists them).
#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "frontends/gguf/arch/step_graph.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Value;

// A Transformer for its KV states (one @kv.l per layer); head and
// embedding are its own.
class Bert final : public Transformer {
 public:
  Bert(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o) {
    norm_eps_ = f.get_float(h.arch + ".attention.layer_norm_epsilon").value_or(1e-12);
    if (const gguf::Value* v = f.find(h.arch + ".attention.causal")) {
      const std::optional<bool> b = v->as_bool();
      if (!b) throw Error(fmt::format("{}: {}.attention.causal must be a bool", f.path(), h.arch));
      causal_ = *b;
    }
  }

  bool generates_text() const override { return false; }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    Value x = b.embed(g.weight("token_embd"), g.ids);
    if (g.has("token_types")) {
      // Row 0 of token_types, broadcast over the tokens.
      Value types = g.weight("token_types");
      x = b.add(x, b.reshape(b.slice(types, 0, 0, 1), {h.n_embd}));
    }
    x = b.add(b.embed(g.weight("position_embd"), g.pos), x);
    x = ir::Builder::named(norm(g, x, "token_embd_norm"), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      auto [q, k, v] = g.qkv(x, l);
      ir::AttentionOptions attn{.state = fmt::format("kv.{}", l), .scale = 1.0 / std::sqrt(double(h.head_dim)),
                                .causal = causal_};
      Value a = b.reshape(b.attention(q, k, v, g.pos, g.seq, attn), {g.n, h.n_head * h.head_dim});
      x = norm(g, b.add(g.linear_bias(a, blk(l, "attn_output")), x), blk(l, "attn_output_norm"));
      Value ffn = g.gelu_ffn(x, l, FfnTensors{.biases = true, .scales = false});
      x = norm(g, b.add(ffn, x), blk(l, "layer_output_norm"));
      x = ir::Builder::named(x, fmt::format("x{}", l));
    }
    return x;
  }

  Value head(StepGraph&, Value) const override {
    throw Error(fmt::format("{} is an encoder: it has no text head", h.arch));
  }
  Value embedding(StepGraph&, Value x) const override { return x; }

 private:
  // build_norm with LLM_NORM: layer_norm(x) * gain + bias.
  Value norm(StepGraph& g, Value x, const std::string& name) const {
    return g.layer_norm(x, name, norm_eps_);
  }

  double norm_eps_ = 1e-12;
  bool causal_ = true;
};

}  // namespace

ir::Module build_bert(const gguf::GgufFile& f, const BuildOptions& o) { return build<Bert>(f, o); }

}  // namespace vtc::arch
