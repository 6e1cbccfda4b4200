// plamo2 (PLaMo 2, Preferred Networks), as the reference's
// src/models/plamo2.cpp: Mamba layers where head_count_kv[l] is 0 and
// attention elsewhere, each mixer and the FFN wrapped in a pre-norm and a
// post-norm:
//
//   x += rms_norm(mixer(rms_norm(x) * attn_norm)) * post_attention_norm
//   x += rms_norm(ffn(rms_norm(x) * ffn_norm)) * post_ffw_norm
//   logits = (rms_norm(x) * output_norm) Woutput * output.scale
//
// The Mamba mixer is PLaMo's own (build_plamo2_mamba_layer), a Mamba-2 scan
// with H = time_step_rank heads of P = inner/H, one group, fed like Mamba-1:
//   zx = h Wssm_in, per head [z (P) | x (P)]
//   x = silu(causal_conv1d(x, ssm_conv1d))           no conv bias
//   [B (N) | C (N) | dt (max(64, D/16))] = x Wssm_x
//   B, C, dt = rms_norm(.) * ssm_b_norm, ssm_c_norm, ssm_dt_norm
//   dt = dt Wssm_dt + ssm_dt.bias                    [n, H]
//   y = ssm_scan(x, dt, ssm_a [H], B, C)             one decay per head
//   out = ((y + x * ssm_d) * silu(z)) Wssm_out
// Attention: fused attn_qkv, per-head q/k rms norms with a gain per head
// ([H, head_dim]), neox rope, 1/sqrt(value head dim), Wo * attn_output.scale.
// FFN: ffn_up holds the gate rows then the up rows: silu(gate) * up, then
// ffn_down. The graph passes no scale to attn_qkv, ssm_in, ssm_x, ssm_dt,
// ssm_out or the FFN (tensor_accounting.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "frontends/gguf/arch/ssm.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Builder;
using ir::Value;

class Plamo2 final : public Transformer {
 public:
  Plamo2(const gguf::GgufFile& f, const BuildOptions& o) : Transformer(f, o) {
    // PLaMo's Mamba reads the Mamba-1 keys (no groups: ssm.group_count is 0)
    // and runs heads of the Mamba-2 layout.
    ssm_ = read_ssm_hparams(f, h.arch, /*mamba2=*/false);
    ssm_.mamba2 = true;
    ssm_.n_group = 0;
    if (ssm_.d_inner % ssm_.dt_rank != 0)
      throw Error(fmt::format("{}: ssm.inner_size {} must be a multiple of ssm.time_step_rank {}", f.path(),
                              ssm_.d_inner, ssm_.dt_rank));
    recurrent_ = layers_without_kv_heads(f, h.arch, h.n_layer);
    dt_dim_ = std::max<int64_t>(64, h.n_embd / 16);
  }

  void declare_states(ir::Module& m) const override { declare_hybrid_states(m, o_, h, ssm_, recurrent_); }

  Value forward(StepGraph& g) const override {
    Builder& b = g.b;
    Value x = Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      Value normed = g.norm(x, blk(l, "attn_norm"));
      Value mixed = recurrent_[size_t(l)] ? mamba(g, normed, l) : attention(g, normed, l);
      x = b.add(x, g.norm(mixed, blk(l, "post_attention_norm")));
      Value ffn = fused_swiglu(g, g.norm(x, blk(l, "ffn_norm")), l);
      x = Builder::named(b.add(x, g.norm(ffn, blk(l, "post_ffw_norm"))), fmt::format("x{}", l));
    }
    return x;
  }

 private:
  Value mamba(StepGraph& g, Value normed, int64_t l) const {
    Builder& b = g.b;
    const ir::Dim& n = g.n;
    const int64_t H = ssm_.heads(), P = ssm_.head_dim(), N = ssm_.d_state, inner = ssm_.d_inner;
    Value zx = b.reshape(g.linear_plain(normed, blk(l, "ssm_in")), {n, H, 2 * P});
    Value z = b.slice(zx, 2, 0, P);
    Value xin = b.reshape(b.slice(zx, 2, P, P), {n, inner});
    Value xc = b.silu(b.causal_conv1d(xin, g.weight(blk(l, "ssm_conv1d")), g.seq, fmt::format("ssm_conv.{}", l)));
    Value bcdt = g.linear_plain(xc, blk(l, "ssm_x"));
    Value bm = g.norm(b.slice(bcdt, 1, 0, N), blk(l, "ssm_b_norm"));
    Value cm = g.norm(b.slice(bcdt, 1, N, N), blk(l, "ssm_c_norm"));
    Value dt = g.norm(b.slice(bcdt, 1, 2 * N, dt_dim_), blk(l, "ssm_dt_norm"));
    dt = b.add(g.linear_plain(dt, blk(l, "ssm_dt")), g.weight(blk(l, "ssm_dt.bias")));
    Value x = b.reshape(xc, {n, H, P});
    Value a = b.reshape(g.weight(blk(l, "ssm_a")), {H, 1});
    Value y = b.ssm_scan(x, dt, a, b.reshape(bm, {n, 1, N}), b.reshape(cm, {n, 1, N}), g.seq,
                         fmt::format("ssm_state.{}", l));
    y = b.add(y, b.mul(x, b.reshape(g.weight(blk(l, "ssm_d")), {H, 1})));
    y = b.mul(b.silu(z), y);
    return g.linear_plain(b.reshape(y, {n, inner}), blk(l, "ssm_out"));
  }

  Value attention(StepGraph& g, Value normed, int64_t l) const {
    Builder& b = g.b;
    const ir::Dim& n = g.n;
    const int64_t hd = h.head_dim, nh = h.n_head, nkv = h.n_head_kv;
    Value qkv = g.linear_plain(normed, blk(l, "attn_qkv"));
    Value q = g.norm(b.reshape(b.slice(qkv, 1, 0, nh * hd), {n, nh, hd}), blk(l, "attn_q_norm"));
    Value k = g.norm(b.reshape(b.slice(qkv, 1, nh * hd, nkv * hd), {n, nkv, hd}), blk(l, "attn_k_norm"));
    Value v = b.reshape(b.slice(qkv, 1, (nh + nkv) * hd, nkv * hd), {n, nkv, hd});
    const ir::RopeOptions rope = rope_options(h);
    q = b.rope(q, g.pos, rope);
    k = b.rope(k, g.pos, rope);
    ir::AttentionOptions attn{.state = fmt::format("kv.{}", l), .scale = double(1.0f / std::sqrt(float(hd)))};
    Value a = b.reshape(b.attention(q, k, v, g.pos, g.seq, attn), {n, nh * hd});
    return g.linear(a, blk(l, "attn_output"));
  }

  // ffn_up [2F, D]: silu of the first F outputs times the last F, then ffn_down.
  Value fused_swiglu(StepGraph& g, Value x, int64_t l) const {
    Value up = g.linear_plain(x, blk(l, "ffn_up"));
    const int64_t f = h.n_ff;
    Value act = g.b.mul(g.b.silu(g.b.slice(up, 1, 0, f)), g.b.slice(up, 1, f, f));
    return g.linear_plain(act, blk(l, "ffn_down"));
  }

  SsmHparams ssm_;
  std::vector<bool> recurrent_;
  int64_t dt_dim_ = 64;
};

}  // namespace

ir::Module build_plamo2(const gguf::GgufFile& f, const BuildOptions& o) { return build<Plamo2>(f, o); }

}  // namespace vtc::arch
