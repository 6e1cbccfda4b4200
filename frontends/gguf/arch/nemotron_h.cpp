// nemotron_h (Nemotron-H, NVIDIA-Nemotron-Nano-9B-v2), as the reference's
// src/models/nemotron-h.cpp: every layer is one of three blocks, chosen by
// the per-layer hparam arrays, each pre-normed with attn_norm and added to
// the residual stream:
//
//   head_count_kv[l] == 0 and feed_forward_length[l] == 0: Mamba-2
//     x += mamba2_layer(rms_norm(x) * attn_norm)    (arch/ssm.h; the conv
//                                                    bias is optional here)
//   feed_forward_length[l] == 0: attention without rope
//     q, k, v = build_qkv(h)                        each * scale + bias
//     x += attention(q, k, v; attention.scale, else 1/sqrt(head_dim))
//          Wo * attn_output.scale + attn_output.bias
//   otherwise: a non-gated relu^2 FFN
//     x += ((relu((h Wup + up.bias) * up.scale))^2 Wdown + down.bias) * down.scale
//   logits = (rms_norm(x) * output_norm) Woutput * output.scale
//
// relu(v) is computed as (v + |v|) * 0.5, which is exact. nemotron_h_moe
// is the same loader and graph (the reference's llama_model_nemotron_h_moe
// derives from nemotron_h and adds only an MTP graph vtc does not run).
// Only the dense FFN is built: a file with experts (Nemotron-H MoE's
// sigmoid-routed relu^2 experts, optionally latent, plus shared experts) is
// refused.
#include <fmt/format.h>

#include <cmath>

#include "frontends/gguf/arch/hybrid.h"
#include "frontends/gguf/arch/ssm.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Builder;
using ir::Value;

class NemotronH final : public Architecture {
 public:
  enum class Block { Mamba, Attention, Ffn };

  NemotronH(const gguf::GgufFile& f, const BuildOptions& o) : Architecture(f), o_(o) {
    const std::string& a = h.arch;
    ssm_ = read_ssm_hparams(f, a, /*mamba2=*/true);
    ssm_.conv_bias_optional = true;
    if (f.get_int(a + ".expert_count").value_or(0) > 0)
      throw Error(fmt::format("{}: {} with experts (the MoE FFN layers of Nemotron-H MoE) is not supported", f.path(), a));
    const std::vector<int64_t> kv = int_array(f, a + ".attention.head_count_kv"), ff = int_array(f, a + ".feed_forward_length");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      auto at = [&](const std::vector<int64_t>& v) { return v.size() == 1 ? v[0] : size_t(l) < v.size() ? v[size_t(l)] : -1; };
      if (at(kv) < 0 || at(ff) < 0)
        throw Error(fmt::format("{}: attention.head_count_kv and feed_forward_length must give every layer's value",
                                f.path()));
      blocks_.push_back(at(ff) != 0 ? Block::Ffn : at(kv) == 0 ? Block::Mamba : Block::Attention);
    }
    const double attention_scale = f.get_float(a + ".attention.scale").value_or(0.0);
    kq_scale_ = attention_scale != 0.0 ? attention_scale : double(1.0f / std::sqrt(float(h.head_dim)));
  }

  void declare_states(ir::Module& m) const override {
    for (int64_t l = 0; l < h.n_layer; ++l) {
      if (blocks_[size_t(l)] == Block::Mamba) declare_ssm_states(m, ssm_, l);
      if (blocks_[size_t(l)] == Block::Attention) declare_kv_state(m, o_, h, l);
    }
  }

  Value forward(StepGraph& g) const override {
    Builder& b = g.b;
    Value x = Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      Value normed = g.norm(x, blk(l, "attn_norm"));
      Value out;
      switch (blocks_[size_t(l)]) {
        case Block::Mamba: out = mamba_layer(g, ssm_, normed, l); break;
        case Block::Attention: out = attention(g, normed, l); break;
        case Block::Ffn: out = relu_sqr_ffn(g, normed, l); break;
      }
      x = Builder::named(b.add(x, out), fmt::format("x{}", l));
    }
    return x;
  }

  Value head(StepGraph& g, Value rows) const override { return g.output(embedding(g, rows)); }
  Value embedding(StepGraph& g, Value x) const override { return g.norm(x, "output_norm"); }

 private:
  Value attention(StepGraph& g, Value normed, int64_t l) const {
    Builder& b = g.b;
    auto [q, k, v] = g.qkv(normed, l);
    ir::AttentionOptions attn{.state = fmt::format("kv.{}", l), .scale = kq_scale_};
    Value a = b.reshape(b.attention(q, k, v, g.pos, g.seq, attn), {g.n, h.n_head * h.head_dim});
    return g.linear_bias(a, blk(l, "attn_output"));
  }

  Value relu_sqr_ffn(StepGraph& g, Value normed, int64_t l) const {
    Builder& b = g.b;
    Value up = g.ffn_linear(normed, blk(l, "ffn_up"));
    Value relu = b.scale(b.add(up, b.abs(up)), 0.5);
    return g.ffn_linear(b.mul(relu, relu), blk(l, "ffn_down"));
  }

  const BuildOptions& o_;
  SsmHparams ssm_;
  std::vector<Block> blocks_;
  double kq_scale_ = 1.0;
};

}  // namespace

ir::Module build_nemotron_h(const gguf::GgufFile& f, const BuildOptions& o) { return build<NemotronH>(f, o); }

}  // namespace vtc::arch
