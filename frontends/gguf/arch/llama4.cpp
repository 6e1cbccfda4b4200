// llama4 (Llama 4 Scout / Maverick text decoder), as the reference's
// src/models/llama4.cpp with its chunked-attention hparams (the file has a
// nonzero attention.sliding_window or none):
//
//   x = token_embd[ids]
//   per layer l:
//     rope_l  = (l + 1) % 4 != 0               n_no_rope_layer_step = 4
//     chunk_l = l % P < P - 1                  P = attention.sliding_window_pattern (default 4; 0: all)
//     h = rms_norm(x) * attn_norm
//     q, k, v = build_qkv(h)                   each * scale + bias
//     rope_l:  q, k = rope(q, k, pos, rope_freqs)       normal rope; freq_base_swa on chunked layers
//              q, k = rms_norm(q), rms_norm(k) over head_dim, no gain (use_kq_norm: expert_count != 128)
//     else:    q *= log(floor((pos + 1) / 8192) + 1) * 0.1 + 1   temperature tuning (attn_temp)
//     x += attention(q, k, v) Wo * scale       scale 1/sqrt(head_dim); chunk_l: keys of the
//                                              query's 8192-position chunk only
//     h = rms_norm(x) * ffn_norm
//     x += (l + 1) % interleave_moe_layer_step == 0
//            ? moe(h) + swiglu_shexp(h)        router ffn_gate_inp; top expert_used_count on the raw
//                                              logits, weights sigmoid(logit), no renormalization;
//                                              each weight scales its expert's INPUT (weight_before_ffn)
//            : swiglu(h)                       no biases, no scales (build_ffn gets none)
//   logits = (rms_norm(x) * output_norm) Woutput * output.scale   (token_embd when tied)
//
// The reference fixes the chunk size (8192), the temperature floor scale
// (8192), scale (0.1) and offset (1) in code whatever the file says; it
// loads the .scale tensors of the FFNs and experts but its graph applies
// none (tensor_accounting.cpp). A file with attention.sliding_window = 0
// is refused: the reference then turns chunking off but still scales q on
// the last layer by an attention temperature it never set, and aborts.
#include <fmt/format.h>

#include "frontends/gguf/arch/step_graph.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Value;

constexpr int64_t kChunk = 8192;           // hparams.n_swa, fixed by the reference
constexpr int64_t kNoRopeStep = 4;         // hparams.n_no_rope_layer_step (its default)
constexpr int64_t kTempFloorScale = 8192;  // n_attn_temp_floor_scale
constexpr float kTempScale = 0.1f, kTempOffset = 1.0f;

class Llama4 final : public Transformer {
 public:
  Llama4(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o) {
    const std::string a = h.arch;
    if (f.get_int(a + ".attention.sliding_window").value_or(1) == 0)
      throw Error(fmt::format("{}: llama4 with attention.sliding_window = 0 is not supported (the reference "
                              "scales the last layer's q by an unset attention temperature)",
                              f.path()));
    if (f.get_int(a + ".expert_count").value_or(0) <= 0)
      throw Error(fmt::format("{}: llama4 model cannot have zero experts", f.path()));
    n_expert_used_ = read_expert_hparams(f, a);
    kq_norm_ = require_int(f, a + ".expert_count") != 128;  // type != LLM_TYPE_17B_128E
    moe_step_ = require_int(f, a + ".interleave_moe_layer_step");
    const std::string pattern = a + ".attention.sliding_window_pattern";
    if (f.find(pattern)) {
      const auto p = f.get_int(pattern);
      if (!p || *p < 0) throw Error(fmt::format("{}: {} must be one non-negative integer", f.path(), pattern));
      swa_period_ = *p;
    }
    rope_base_swa_ = f.get_float(a + ".rope.freq_base_swa").value_or(h.rope_base);
    if (h.n_rot != h.head_dim)
      throw Error(fmt::format("{}: llama4 needs rope.dimension_count ({}) == head_dim ({})", f.path(), h.n_rot,
                              h.head_dim));
  }

  Value forward(StepGraph& g) const override {
    ir::Builder& b = g.b;
    Value x = ir::Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    // The temperature of the no-rope layers' queries, [n, 1, 1] against [n, H, D].
    const Value temp = b.reshape(b.attn_temp(g.pos, kTempFloorScale, kTempScale, kTempOffset), {g.n, 1, 1});
    for (int64_t l = 0; l < h.n_layer; ++l) {
      auto [q, k, v] = g.qkv(g.norm(x, blk(l, "attn_norm")), l);
      const bool rope = (l + 1) % kNoRopeStep != 0;
      const bool chunked = swa_period_ == 0 || l % swa_period_ < swa_period_ - 1;
      if (rope) {
        ir::RopeOptions ro = rope_options(h);
        ro.mode = ir::RopeMode::Normal;
        if (chunked) ro.base = rope_base_swa_;
        Value freqs = g.optional("rope_freqs");
        q = b.rope(q, g.pos, ro, freqs);
        k = b.rope(k, g.pos, ro, freqs);
        if (kq_norm_) {
          q = g.unit_norm(q);  // Llama4TextL2Norm: no gain
          k = g.unit_norm(k);
        }
      } else {
        q = b.mul(q, temp);
      }
      ir::AttentionOptions attn{.state = fmt::format("kv.{}", l), .scale = 1.0 / std::sqrt(double(h.head_dim))};
      if (chunked) attn.chunk = kChunk;
      Value a = b.reshape(b.attention(q, k, v, g.pos, g.seq, attn), {g.n, h.n_head * h.head_dim});
      x = b.add(x, g.linear(a, blk(l, "attn_output")));
      Value cur = g.norm(x, blk(l, "ffn_norm"));
      const bool moe = moe_step_ > 0 && (l + 1) % moe_step_ == 0;
      Value ffn = moe ? b.add(routed(g, cur, l), g.swiglu_ffn(cur, l, "_shexp", FfnTensors{.scales = false}))
                      : g.swiglu_ffn(cur, l, "", FfnTensors{.scales = false});
      x = ir::Builder::named(b.add(x, ffn), fmt::format("x{}", l));
    }
    return x;
  }

 private:
  // build_moe_ffn for LLM_ARCH_LLAMA4: selection on the raw router logits,
  // weights sigmoid(logits[ids]) (sigmoid of the picked values, as the
  // reference gathers the sigmoid of every logit), applied to the input.
  Value routed(StepGraph& g, Value x, int64_t l) const {
    ir::Builder& b = g.b;
    auto [top, ids] = b.top_k(g.linear_plain(x, blk(l, "ffn_gate_inp")), n_expert_used_);
    ir::MoeExperts e;
    e.gate = g.weight(blk(l, "ffn_gate_exps"));
    e.up = g.weight(blk(l, "ffn_up_exps"));
    e.down = g.weight(blk(l, "ffn_down_exps"));
    return b.moe_ffn(x, b.sigmoid(top), ids, e, ir::MoeActivation{.weight_input = true});
  }

  int64_t n_expert_used_ = 0, moe_step_ = 0, swa_period_ = 4;
  bool kq_norm_ = true;
  double rope_base_swa_ = 10000.0;
};

}  // namespace

ir::Module build_llama4(const gguf::GgufFile& f, const BuildOptions& o) { return build<Llama4>(f, o); }

}  // namespace vtc::arch
