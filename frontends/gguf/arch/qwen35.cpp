// Gated DeltaNet hybrids: qwen35, qwen35moe and qwen3next, as the
// reference's src/models/{qwen35,qwen35moe,qwen3next}.cpp and
// delta-net-base.cpp. The decoder skeleton is the Transformer one (arch/step_graph.h)
// with the FFN pre-norm named post_attention_norm; what differs is the
// token mixer, which alternates per layer:
//
// Linear attention (layers with (l + 1) % full_attention_interval != 0,
// or those `attention.recurrent_layers` marks), with Hk key heads and
// Hv = ssm.time_step_rank value heads of size d = ssm.state_size:
//   qkv = h Wqkv [n, 2 Hk d + Hv d]         z = h Wgate [n, Hv d]
//   beta = sigmoid(h Wbeta) [n, Hv]         g = softplus(h Walpha + dt) * A
//   (qwen3next: ssm_ba, and in older files ssm_in, interleave the parts
//    per key head; they are sliced apart into qwen35's order; the
//    reference prefers attn_qkv + attn_gate when a file has both)
//   c = silu(causal_conv1d(qkv, conv1d))    conv ring state @gdn_conv.L
//   q, k, v = split(c); q, k = l2_norm(q), l2_norm(k)
//   q, k repeated to Hv heads: tiled (qwen35*, head h reads key head
//     h mod Hk, as the reference's fused kernel) or interleaved (qwen3next,
//     head h reads h / (Hv/Hk), as its explicit repeat)
//   o = delta_rule(q, k, v, g, beta)        recurrent state @gdn_state.L
//   out = (rms_norm(o, ssm_norm) * silu(z)) Wout
// Full attention (the other layers): the Q projection yields a query and
// a gate per head; q, k get QK-norm and rope (qwen35*: interleaved
// multi-section rope over [n, 4] positions, for text the token's position
// in the first three and 0 in the fourth, StepGraph::text_mrope_positions;
// qwen3next: neox); out = (attention * sigmoid(gate)) Wo.
// FFN: SwiGLU (qwen35), or routed experts plus a shared expert gated by
// sigmoid(h w_shexp_gate) (qwen35moe, qwen3next), the experts split or
// merged (ffn_gate_up_exps).
// Scales: every projection takes its optional .scale, except qwen3next's
// DeltaNet projections (attn_qkv, attn_gate, ssm_in, ssm_ba, ssm_out), to
// which the reference passes none. The attention's q/k/v biases, which the
// reference loads, are never added (tensor_accounting.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "frontends/gguf/arch/hybrid.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Builder;
using ir::Dim;
using ir::Value;

}  // namespace

DeltaNetHparams read_deltanet_hparams(const gguf::GgufFile& f, const Hparams& h) {
  const std::string& a = h.arch;
  DeltaNetHparams d;
  d.conv_kernel = require_int(f, a + ".ssm.conv_kernel");
  d.head_dim = require_int(f, a + ".ssm.state_size");
  d.k_heads = require_int(f, a + ".ssm.group_count");
  d.v_heads = require_int(f, a + ".ssm.time_step_rank");
  const int64_t inner = require_int(f, a + ".ssm.inner_size");
  if (inner != d.head_dim * d.v_heads || d.v_heads % d.k_heads != 0)
    throw Error(fmt::format("{}: ssm.inner_size {} must be ssm.state_size {} x ssm.time_step_rank {}, and the "
                            "time_step_rank a multiple of ssm.group_count {}",
                            f.path(), inner, d.head_dim, d.v_heads, d.k_heads));
  std::vector<int64_t> marks = int_array(f, a + ".attention.recurrent_layers");
  const int64_t interval = f.get_int(a + ".full_attention_interval").value_or(4);
  if (interval <= 0) throw Error(fmt::format("{}: full_attention_interval must be positive", f.path()));
  for (int64_t l = 0; l < h.n_layer; ++l)
    d.recurrent.push_back(marks.empty() ? (l + 1) % interval != 0 : size_t(l) < marks.size() && marks[size_t(l)] != 0);
  d.interleaved = a == "qwen3next";
  if (!d.interleaved) {
    d.rope_sections = rope_sections(f, h);
  }
  d.sigmoid_output_gate = a == "qwen4exp";
  d.moe = a != "qwen35";
  if (d.moe) d.n_used = read_expert_hparams(f, a);
  return d;
}

void HybridLayers::declare_states(ir::Module& m, const BuildOptions& o) const {
  const Dim S = Dim::symbol("S");
  const int64_t conv_channels = 2 * d_.k_heads * d_.head_dim + d_.v_heads * d_.head_dim;
  for (int64_t l = 0; l < h_.n_layer; ++l) {
    if (!d_.recurrent[size_t(l)]) {
      declare_kv_state(m, o, h_, l);
      continue;
    }
    m.add_state(fmt::format("gdn_conv.{}", l), ir::StateKind::Plain,
                {ir::ElemType::F32, {S, d_.conv_kernel - 1, conv_channels}, ir::Placement::Device});
    m.add_state(fmt::format("gdn_state.{}", l), ir::StateKind::Plain,
                {ir::ElemType::F32, {S, d_.v_heads, d_.head_dim, d_.head_dim}, ir::Placement::Device});
  }
}

Value HybridLayers::mixer(StepGraph& g, Value h, int64_t l) const {
  return d_.recurrent[size_t(l)] ? delta_net(g, h, l) : gated_attention(g, h, l);
}

Value HybridLayers::ffn(StepGraph& g, Value h, int64_t l) const {
  if (!d_.moe) return g.swiglu_ffn(h, l);
  Value routed = g.moe_ffn(h, l, {.route = {.k = d_.n_used}, .merged_allowed = true});
  Value gate_w = g.b.reshape(g.weight(blk(l, "ffn_gate_inp_shexp")), {1, h_.n_embd});
  Value shared = g.b.mul(g.swiglu_ffn(h, l, "_shexp"), g.b.sigmoid(g.b.matmul(h, gate_w)));
  return g.b.add(routed, shared);
}

HybridLayers::Projections HybridLayers::project(StepGraph& g, Value h, int64_t l) const {
  Builder& b = g.b;
  const Dim& n = g.n;
  // qwen3next's graph passes no scale to these projections.
  auto linear = [&](const char* name) {
    return d_.interleaved ? g.linear_plain(h, blk(l, name)) : g.linear(h, blk(l, name));
  };
  // Fused layouts interleave the parts per key head: ssm_in holds
  // [q d | k d | v r*d | z r*d] and ssm_ba [beta r | alpha r], r = Hv / Hk.
  const int64_t d = d_.head_dim, r = d_.v_heads / d_.k_heads, hk = d_.k_heads;
  auto part = [&](Value x, int64_t start, int64_t size) { return b.reshape(b.slice(x, 2, start, size), {n, hk * size}); };
  Projections p;
  if (d_.interleaved && !g.has(blk(l, "attn_qkv"))) {
    Value qkvz = b.reshape(linear("ssm_in"), {n, hk, 2 * d + 2 * r * d});
    p.qkv = b.concat({part(qkvz, 0, d), part(qkvz, d, d), part(qkvz, 2 * d, r * d)}, 1);
    p.z = part(qkvz, 2 * d + r * d, r * d);
  } else {
    p.qkv = linear("attn_qkv");
    p.z = linear("attn_gate");
  }
  if (d_.interleaved) {
    Value ba = b.reshape(linear("ssm_ba"), {n, hk, 2 * r});
    p.beta = part(ba, 0, r);
    p.alpha = part(ba, r, r);
  } else {
    p.beta = linear("ssm_beta");
    p.alpha = linear("ssm_alpha");
  }
  return p;
}

// [n, Hk, d] -> [n, Hv, d]: tiled (head h = key head h mod Hk) or
// interleaved (head h = key head h / r).
Value HybridLayers::repeat_heads(StepGraph& g, Value x) const {
  const int64_t r = d_.v_heads / d_.k_heads;
  if (r == 1) return x;
  if (!d_.interleaved) return g.b.concat(std::vector<Value>(size_t(r), x), 1);
  Value one = g.b.reshape(x, {g.n, d_.k_heads, 1, d_.head_dim});
  return g.b.reshape(g.b.concat(std::vector<Value>(size_t(r), one), 2), {g.n, d_.v_heads, d_.head_dim});
}

Value HybridLayers::delta_net(StepGraph& g, Value h, int64_t l) const {
  Builder& b = g.b;
  const Dim& n = g.n;
  const int64_t d = d_.head_dim, hk = d_.k_heads, hv = d_.v_heads;
  Projections p = project(g, h, l);
  Value beta = b.sigmoid(p.beta);
  Value gate = b.mul(b.softplus(b.add(p.alpha, g.weight(blk(l, "ssm_dt.bias")))), g.weight(blk(l, "ssm_a")));
  Value conv = b.silu(b.causal_conv1d(p.qkv, g.weight(blk(l, "ssm_conv1d")), g.seq, fmt::format("gdn_conv.{}", l)));
  auto heads = [&](int64_t start, int64_t count) {
    return b.reshape(b.slice(conv, 1, start * d, count * d), {n, count, d});
  };
  auto l2 = [&](Value x) { return b.l2_norm(x, h_.eps); };
  Value q = repeat_heads(g, l2(heads(0, hk)));
  Value k = repeat_heads(g, l2(heads(hk, hk)));
  Value v = heads(2 * hk, hv);
  // The reference scales by 1.0f / sqrtf(float(d)), which differs from the
  // double quotient for some sizes (96).
  const double scale = double(1.0f / std::sqrt(float(d)));
  Value o = b.delta_rule(q, k, v, gate, beta, g.seq, fmt::format("gdn_state.{}", l), scale);
  Value normed = g.norm(o, blk(l, "ssm_norm"));
  Value z = b.reshape(p.z, {n, hv, d});
  Value gated = b.mul(normed, d_.sigmoid_output_gate ? b.sigmoid(z) : b.silu(z));
  Value flat = b.reshape(gated, {n, hv * d});
  return d_.interleaved ? g.linear_plain(flat, blk(l, "ssm_out")) : g.linear(flat, blk(l, "ssm_out"));
}

Value HybridLayers::gated_attention(StepGraph& g, Value h, int64_t l, Value selected) const {
  Builder& b = g.b;
  const Dim& n = g.n;
  const int64_t hd = h_.head_dim, nh = h_.n_head, nkv = h_.n_head_kv;
  Value qg = b.reshape(g.linear(h, blk(l, "attn_q")), {n, nh, 2 * hd});
  Value q = g.norm(b.slice(qg, 2, 0, hd), blk(l, "attn_q_norm"));
  Value gate = b.reshape(b.slice(qg, 2, hd, hd), {n, nh * hd});
  Value k = g.norm(b.reshape(g.linear(h, blk(l, "attn_k")), {n, nkv, hd}), blk(l, "attn_k_norm"));
  Value v = b.reshape(g.linear(h, blk(l, "attn_v")), {n, nkv, hd});
  const Rope rope = attention_rope(g);
  q = b.rope(q, rope.pos, rope.options);
  k = b.rope(k, rope.pos, rope.options);
  Value a = b.reshape(g.attention(q, k, v, l, selected), {n, nh * hd});
  return g.linear(b.mul(a, b.sigmoid(gate)), blk(l, "attn_output"));
}

HybridLayers::Rope HybridLayers::attention_rope(StepGraph& g) const {
  Rope rope{rope_options(h_), g.pos};
  if (!d_.interleaved) {
    rope.options.mode = ir::RopeMode::IMulti;
    rope.options.sections = d_.rope_sections;
    rope.pos = g.text_mrope_positions();
  }
  return rope;
}

namespace {

// qwen35, qwen35moe and qwen3next: pre-norm layers, x += mixer(rms_norm(x)),
// x += ffn(rms_norm(x) * post_attention_norm).
class Qwen35 final : public Architecture {
 public:
  Qwen35(const gguf::GgufFile& f, const BuildOptions& o)
      : Architecture(f), d_(read_deltanet_hparams(f, h)), o_(o), layers_(h, d_) {}

  void declare_states(ir::Module& m) const override { layers_.declare_states(m, o_); }

  Value forward(StepGraph& g) const override {
    Builder& b = g.b;
    Value x = Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l) {
      x = b.add(x, layers_.mixer(g, g.norm(x, blk(l, "attn_norm")), l));
      Value ffn = layers_.ffn(g, g.norm(x, blk(l, "post_attention_norm")), l);
      x = Builder::named(b.add(x, ffn), fmt::format("x{}", l));
    }
    return x;
  }

  Value head(StepGraph& g, Value rows) const override { return g.output(g.norm(rows, "output_norm")); }

 private:
  DeltaNetHparams d_;
  const BuildOptions& o_;
  HybridLayers layers_;
};

}  // namespace

ir::Module build_qwen35(const gguf::GgufFile& f, const BuildOptions& o) { return build<Qwen35>(f, o); }

}  // namespace vtc::arch
