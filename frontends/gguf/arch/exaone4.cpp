// exaone4 (EXAONE 4.0), as the reference's src/models/exaone4.cpp: no
// pre-norms; the attention and FFN outputs are normed before the residual
// add, and q, k get QK-norm:
//
//   per layer:
//     q, k, v = build_qkv(x)                  each * scale + bias
//     q, k = rms_norm over head_dim * attn_q_norm, attn_k_norm
//     q, k = rope(q, k, pos, rope_freqs)      neox; sliding-window layers only
//                                             when the model has them
//     x += rms_norm(attention(q, k, v) Wo * attn_output.scale) * post_attention_norm
//     x += rms_norm(swiglu(x)) * post_ffw_norm      (no biases, no scales)
//   logits = (rms_norm(x) * output_norm) Woutput * output.scale
//
// Sliding window: the reference enables it only for the 64-layer model
// (EXAONE 4.0 32B): layers with l % p < p - 1 (p = sliding_window_pattern,
// default 4) attend to the last sliding_window tokens (default 4096) and are
// roped; the others attend to everything and take no rope. Every other
// model is global attention with rope on every layer, whatever its
// sliding_window key says (the generator's 2-layer file sets 32: the window
// case checks it is not applied). The rope base is freq_base on every
// layer (the graph never reads freq_base_swa). NextN/MTP layers are refused.
#include <fmt/format.h>

#include <cmath>

#include "frontends/gguf/arch/step_graph.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Value;

class Exaone4 final : public Transformer {
 public:
  Exaone4(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o) {
    const std::string& a = h.arch;
    if (f.get_int(a + ".nextn_predict_layers").value_or(0) > 0)
      throw Error(fmt::format("{}: {}.nextn_predict_layers > 0 (NextN/MTP layers) is not supported", f.path(), a));
    if (h.n_layer != 64) return;
    window_ = f.get_int(a + ".attention.sliding_window").value_or(4096);
    if (const gguf::Value* p = f.find(a + ".attention.sliding_window_pattern")) {
      const auto n = p->as_int();
      if (!n || *n < 0)
        throw Error(fmt::format("{}: {}.attention.sliding_window_pattern must be one non-negative integer (a "
                                "per-layer array is not supported)",
                                f.path(), a));
      pattern_ = *n;
    }
    if (window_ <= 0) throw Error(fmt::format("{}: invalid {}.attention.sliding_window", f.path(), a));
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    const ir::RopeOptions rope = rope_options(h);  // neox
    Value x = ir::Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      auto [q, k, v] = g.qkv(x, l);
      q = g.norm(q, blk(l, "attn_q_norm"));
      k = g.norm(k, blk(l, "attn_k_norm"));
      if (window_ == 0 || is_local(l)) {
        Value freqs = g.optional("rope_freqs");
        q = b.rope(q, g.pos, rope, freqs);
        k = b.rope(k, g.pos, rope, freqs);
      }
      ir::AttentionOptions attn{.state = fmt::format("kv.{}", l), .scale = 1.0 / std::sqrt(double(h.head_dim))};
      if (window_ > 0 && is_local(l)) attn.window = window_;
      Value a = b.reshape(b.attention(q, k, v, g.pos, g.seq, attn), {g.n, h.n_head * h.head_dim});
      x = b.add(x, g.norm(g.linear(a, blk(l, "attn_output")), blk(l, "post_attention_norm")));
      Value ffn = g.swiglu_ffn(x, l, "", FfnTensors{.scales = false});
      x = ir::Builder::named(b.add(x, g.norm(ffn, blk(l, "post_ffw_norm"))), fmt::format("x{}", l));
    }
    return x;
  }

 private:
  bool is_local(int64_t l) const { return pattern_ == 0 || l % pattern_ < pattern_ - 1; }

  int64_t window_ = 0;  // 0: no sliding window (every model but the 64-layer one)
  int64_t pattern_ = 4;
};

}  // namespace

ir::Module build_exaone4(const gguf::GgufFile& f, const BuildOptions& o) { return build<Exaone4>(f, o); }

}  // namespace vtc::arch
