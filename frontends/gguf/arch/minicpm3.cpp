// minicpm3 (MiniCPM3-4B), as the reference's src/models/minicpm3.cpp:
// MiniCPM's scalars (fixed in the graph, not read from the file) around an
// attention with q and kv LoRA projections in the non-absorbed MLA form
// (the kv_b layout; deepseek2.cpp is the absorbed one):
//
//   x = token_embd[ids] * 12
//   per layer (r = 1.4 / sqrt(n_layer), dk = key_length = nope + rot,
//              rot = rope.dimension_count, dv = value_length):
//     h = rms_norm(x) * attn_norm
//     q = (rms_norm(h Wq_a) * attn_q_a_norm) Wq_b        [n, H, dk]
//     kv = h Wkv_a_mqa                    [n, kv_lora + rot]: latent | k_pe
//     c = rms_norm(kv[:kv_lora]) * attn_kv_a_norm
//     k_nope, v = split per head of c Wkv_b              [n, H, nope], [n, H, dv]
//     q = q[:, :, :nope] | rope(q[:, :, nope:])          neox rope on the trailing
//     k = k_nope | rope(kv[kv_lora:]) on every head       rot dims (ggml_rope_set_offset)
//     x += r * (attention(q, k, v) / sqrt(dk) Wo * attn_output.scale)
//     x += r * swiglu(rms_norm(x) * ffn_norm)                  no biases or scales
//   logits = ((rms_norm(x) * output_norm) * (256 / n_embd)) Woutput * output.scale
//
// The rope takes the LongRoPE factors the reference picks for the file's
// context (longrope_factors, as phi3). The attention op wants k and v of one
// width: with dv < dk, v is padded with k's first dk - dv lanes, whose
// outputs are dropped (dv > dk is refused).
#include <fmt/format.h>

#include <cmath>

#include "frontends/gguf/arch/step_graph.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Value;

class MiniCpm3 final : public Transformer {
 public:
  MiniCpm3(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o) {
    const std::string& a = h.arch;
    require_int(f, a + ".attention.q_lora_rank");  // required by the reference; the shapes carry it
    kv_lora_ = require_int(f, a + ".attention.kv_lora_rank");
    dk_ = h.head_dim;
    dv_ = f.get_int(a + ".attention.value_length").value_or(dk_);
    rot_ = h.n_rot;
    nope_ = dk_ - rot_;
    if (nope_ < 0) throw Error(fmt::format("{}: rope.dimension_count {} exceeds key_length {}", f.path(), rot_, dk_));
    if (dv_ > dk_)
      throw Error(fmt::format("{}: value_length {} > key_length {} is not supported", f.path(), dv_, dk_));
    factors_ = longrope_factors(f, h);
  }

  // K and V of every head (the reference repeats k_pe to all heads).
  void declare_states(ir::Module& m) const override {
    for (int64_t l = 0; l < h.n_layer; ++l)
      m.add_state(fmt::format("kv.{}", l), ir::StateKind::Paged,
                  {ir::ElemType::F16, {2, ir::Dim::symbol("P"), o_.kv_page_tokens, h.n_head, dk_}, ir::Placement::Device});
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    const double residual = double(1.4f / std::sqrt(float(h.n_layer)));
    Value x = ir::Builder::named(b.scale(b.embed(g.weight("token_embd"), g.ids), 12.0), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      x = b.add(x, b.scale(attention(g, g.norm(x, blk(l, "attn_norm")), l), residual));
      Value ffn = g.swiglu_ffn(g.norm(x, blk(l, "ffn_norm")), l, "", FfnTensors{.scales = false});
      x = ir::Builder::named(b.add(x, b.scale(ffn, residual)), fmt::format("x{}", l));
    }
    return x;
  }

  Value head(StepGraph& g, Value rows) const override {
    return g.output(g.b.scale(g.norm(rows, "output_norm"), double(256.0f / float(h.n_embd))));
  }

 private:
  // The trailing rot dims of each head of x [n, heads, nope + rot] roped.
  Value rope_tail(StepGraph& g, Value x) const {
    ir::Builder& b = g.b;
    const ir::RopeOptions rope = rope_options(h);  // neox
    Value tail = b.rope(nope_ > 0 ? b.slice(x, 2, nope_, rot_) : x, g.pos, rope, g.optional(factors_));
    return nope_ > 0 ? b.concat({b.slice(x, 2, 0, nope_), tail}, 2) : tail;
  }

  Value attention(StepGraph& g, Value x, int64_t l) const {
    ir::Builder& b = g.b;
    const ir::Dim n = g.n;
    const int64_t nh = h.n_head;
    Value q = g.linear_plain(g.norm(g.linear_plain(x, blk(l, "attn_q_a")), blk(l, "attn_q_a_norm")), blk(l, "attn_q_b"));
    q = rope_tail(g, b.reshape(q, {n, nh, dk_}));
    Value kv_a = g.linear_plain(x, blk(l, "attn_kv_a_mqa"));
    Value c = g.norm(b.slice(kv_a, 1, 0, kv_lora_), blk(l, "attn_kv_a_norm"));
    Value kv = b.reshape(g.linear_plain(c, blk(l, "attn_kv_b")), {n, nh, nope_ + dv_});
    Value v = b.slice(kv, 2, nope_, dv_);
    Value k_pe = rope_tail(g, b.reshape(b.slice(kv_a, 1, kv_lora_, rot_), {n, 1, rot_}));
    Value k_pe_heads = b.concat(std::vector<Value>(size_t(nh), k_pe), 1);
    Value k = nope_ > 0 ? b.concat({b.slice(kv, 2, 0, nope_), k_pe_heads}, 2) : k_pe_heads;
    if (dv_ < dk_) v = b.concat({v, b.slice(k, 2, 0, dk_ - dv_)}, 2);
    ir::AttentionOptions attn{.state = fmt::format("kv.{}", l), .scale = double(1.0f / std::sqrt(float(dk_)))};
    Value o = b.attention(q, k, v, g.pos, g.seq, attn);
    if (dv_ < dk_) o = b.slice(o, 2, 0, dv_);
    return g.linear(b.reshape(o, {n, nh * dv_}), blk(l, "attn_output"));
  }

  int64_t kv_lora_ = 0, dk_ = 0, dv_ = 0, rot_ = 0, nope_ = 0;
  std::string factors_;
};

}  // namespace

ir::Module build_minicpm3(const gguf::GgufFile& f, const BuildOptions& o) { return build<MiniCpm3>(f, o); }

}  // namespace vtc::arch
