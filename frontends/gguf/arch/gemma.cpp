// gemma (Gemma 1), gemma2 and gemma3, as the reference's src/models/gemma.cpp,
// gemma2.cpp and gemma3.cpp (the iswa graph; gemma3 without a sliding
// window is the plain one). gemma2 and gemma3 are the same sandwich-norm
// decoder with a GELU FFN; gemma3 adds QK-norm and per-layer rope, drops the
// attention soft cap and makes the final one optional. Gemma 1 is the
// plain pre-norm layer of the same decoder: no post-norms, no soft caps, no
// sliding window, q scaled by 1/sqrt(head_dim) at every size, and the output
// always token_embd:
//
//   x = token_embd[ids] * sqrt(n_embd)
//   per layer l (local = sliding window, else global):
//     h = rms_norm(x) * attn_norm
//     q, k, v = build_qkv(h)                       each * scale + bias
//     gemma3: q, k = rms_norm over head_dim * attn_q_norm, attn_k_norm
//     q, k = rope(q), rope(k)                      neox; local layers: base
//            rope.freq_base_swa (gemma2: default rope.freq_base; gemma3:
//            default 10000) and, on gemma3, no rope scaling
//     q *= attention_scale                         1/sqrt(head_dim); 27B:
//                                                  1/sqrt(n_embd / n_head)
//     a = attention(q, k, v), scale 1; local layers mask keys at or before
//         pos - sliding_window (LLAMA_SWA_TYPE_STANDARD); gemma2 soft-caps
//         each score: c tanh(s / c), c = attn_logit_softcapping (50)
//     x += rms_norm(a Wo * scale) * post_attention_norm
//                                                  (gemma 1: x += a Wo * scale)
//     h = rms_norm(x) * ffn_norm
//     x += rms_norm(gelu(h Wgate) * (h Wup) Wdown) * post_ffw_norm
//                                                  (FFN scales loaded, not applied;
//                                                  gemma 1: no post_ffw_norm)
//   logits = (rms_norm(x) * output_norm) Woutput   gemma, gemma2: always token_embd;
//                                                  gemma3: output, or token_embd
//   logits = c tanh(logits / c), c = final_logit_softcapping (gemma2: 30 by
//            default; gemma3: only when the key is present)
//
// Local layers: sliding_window_pattern p (gemma2: 2, gemma3: 6 when the key
// is absent or an array, which the reference's scalar read ignores) makes
// layer l local iff l % p < p - 1, so the last layer of each group of p is
// global. The converter stores every norm gain as 1 + w, so rms_norm * gain
// is the model's norm; the reference adds nothing at run time.
#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "frontends/gguf/arch/step_graph.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Value;

class Gemma final : public Transformer {
 public:
  Gemma(const gguf::GgufFile& f, const BuildOptions& o)
      : Transformer(f, o), gemma1_(h.arch == "gemma"), gemma3_(h.arch == "gemma3") {
    const std::string& a = h.arch;
    attn_scale_ = 1.0f / std::sqrt(float(h.head_dim));
    // Gemma 1's loader reads no window, soft cap or final-cap key.
    if (gemma1_) return;
    read_window(f);
    const float base = float(h.rope_base);
    rope_base_local_ = float(f.get_float(a + ".rope.freq_base_swa").value_or(gemma3_ ? 10000.0 : base));
    if (!gemma3_) attn_softcap_ = float(f.get_float(a + ".attn_logit_softcapping").value_or(50.0));
    if (auto c = f.get_float(a + ".final_logit_softcapping"); c && *c != 0.0) final_softcap_ = float(*c);
    else if (!gemma3_) final_softcap_ = 30.0f;
    // The reference's 27B (n_layer 46 for gemma2, 62 for gemma3) scales by
    // the model width per head instead of the head dim.
    if (h.n_layer == (gemma3_ ? 62 : 46)) attn_scale_ = 1.0f / std::sqrt(float(h.n_embd / h.n_head));
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    Value x = b.scale(b.embed(g.weight("token_embd"), g.ids), double(std::sqrt(float(h.n_embd))));
    x = ir::Builder::named(x, "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      Value a = attention_block(g, g.norm(x, blk(l, "attn_norm")), l);
      x = b.add(x, gemma1_ ? a : g.norm(a, blk(l, "post_attention_norm")));
      Value ffn = gelu_ffn(g, g.norm(x, blk(l, "ffn_norm")), l);
      if (!gemma1_) ffn = g.norm(ffn, blk(l, "post_ffw_norm"));
      x = ir::Builder::named(b.add(x, ffn), fmt::format("x{}", l));
    }
    return x;
  }

  Value head(StepGraph& g, Value rows) const override {
    ir::Builder& b = g.b;
    Value x = g.norm(rows, "output_norm");
    // gemma's and gemma2's loaders take token_embd as the output (an
    // output.weight is a tensor they do not load); gemma3's takes output
    // when present.
    Value logits = gemma3_ ? g.output(x) : b.matmul(x, g.weight("token_embd"));
    if (!final_softcap_) return logits;
    const float c = *final_softcap_;
    return b.scale(b.tanh(b.scale(logits, double(1.0f / c))), double(c));
  }

 private:
  // sliding_window and the pattern of local layers (see the header).
  void read_window(const gguf::GgufFile& f) {
    const std::string& a = h.arch;
    const auto window = f.get_int(a + ".attention.sliding_window");
    if (gemma3_ && (!window || *window <= 0)) return;  // gemma3 without SWA: every layer global
    window_ = window && *window > 0 ? *window : 4096;    // gemma2's default
    pattern_ = gemma3_ ? 6 : 2;
    if (const gguf::Value* p = f.find(a + ".attention.sliding_window_pattern"); p && !p->as_array()) {
      const auto n = f.get_int(a + ".attention.sliding_window_pattern");
      if (!n || *n < 0) throw Error(fmt::format("{}: invalid {}.attention.sliding_window_pattern", f.path(), a));
      pattern_ = *n;
    }
  }

  bool is_local(int64_t l) const { return window_ > 0 && (pattern_ == 0 || l % pattern_ < pattern_ - 1); }

  ir::RopeOptions rope_for(int64_t l) const {
    ir::RopeOptions rope = rope_options(h);
    if (!is_local(l)) return rope;
    rope.base = rope_base_local_;
    // gemma3's local layers rope at rope_freq_scale_train_swa, 1; gemma2's
    // at the trained scale, as its global ones.
    if (gemma3_) rope.freq_scale = ir::RopeAttrs{}.freq_scale;
    return rope;
  }

  Value attention_block(StepGraph& g, Value x, int64_t l) const {
    ir::Builder& b = g.b;
    const ir::RopeOptions rope = rope_for(l);
    auto [q, k, v] = g.qkv(x, l);
    if (gemma3_) {
      q = g.norm(q, blk(l, "attn_q_norm"));
      k = g.norm(k, blk(l, "attn_k_norm"));
    }
    q = b.scale(b.rope(q, g.pos, rope), double(attn_scale_));
    k = b.rope(k, g.pos, rope);
    ir::AttentionOptions attn{.state = fmt::format("kv.{}", l), .scale = 1.0};
    if (is_local(l)) attn.window = window_;
    if (attn_softcap_) attn.softcap = double(*attn_softcap_);
    Value a = b.attention(q, k, v, g.pos, g.seq, attn);
    return g.linear(b.reshape(a, {g.n, h.n_head * h.head_dim}), blk(l, "attn_output"));
  }

  // build_ffn with LLM_FFN_GELU and LLM_FFN_PAR: geglu(x Wgate, x Wup) Wdown,
  // no biases or scales (the graph passes none).
  Value gelu_ffn(StepGraph& g, Value x, int64_t l) const {
    ir::Builder& b = g.b;
    Value gate = b.gelu(g.linear_plain(x, blk(l, "ffn_gate")));
    Value up = g.linear_plain(x, blk(l, "ffn_up"));
    return g.linear_plain(b.mul(gate, up), blk(l, "ffn_down"));
  }

  const bool gemma1_, gemma3_;
  int64_t window_ = 0, pattern_ = 0;  // window 0: no local layers
  float rope_base_local_ = 10000.0f, attn_scale_ = 1.0f;
  std::optional<float> attn_softcap_, final_softcap_;
};

}  // namespace

ir::Module build_gemma(const gguf::GgufFile& f, const BuildOptions& o) { return build<Gemma>(f, o); }

}  // namespace vtc::arch
