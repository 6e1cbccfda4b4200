// Gated DeltaNet hybrids: qwen35, qwen35moe and qwen3next, as the
// reference's src/models/{qwen35,qwen35moe,qwen3next}.cpp and
// delta-net-base.cpp. The decoder skeleton is the dense one (arch/dense.h)
// with the FFN pre-norm named post_attention_norm; what differs is the
// token mixer, which alternates per layer:
//
// Linear attention (layers with (l + 1) % full_attention_interval != 0,
// or those `attention.recurrent_layers` marks), with Hk key heads and
// Hv = ssm.time_step_rank value heads of size d = ssm.state_size:
//   qkv = h Wqkv [n, 2 Hk d + Hv d]         z = h Wgate [n, Hv d]
//   beta = sigmoid(h Wbeta) [n, Hv]         g = softplus(h Walpha + dt) * A
//   (qwen3next: ssm_ba, and in older files ssm_in, interleave the parts
//    per key head; they are sliced apart into qwen35's order)
//   c = silu(causal_conv1d(qkv, conv1d))    conv ring state @gdn_conv.L
//   q, k, v = split(c); q, k = l2_norm(q), l2_norm(k)
//   q, k repeated to Hv heads: tiled (qwen35*, head h reads key head
//     h mod Hk, as the reference's fused kernel) or interleaved (qwen3next,
//     head h reads h / (Hv/Hk), as its explicit repeat)
//   o = delta_rule(q, k, v, g, beta)        recurrent state @gdn_state.L
//   out = (rms_norm(o, ssm_norm) * silu(z)) Wout
// Full attention (the other layers): the Q projection yields a query and
// a gate per head; q, k get QK-norm and rope (qwen35*: interleaved
// multi-section rope over [n, 4] positions, all four the token's position
// for text; qwen3next: neox); out = (attention * sigmoid(gate)) Wo.
// FFN: SwiGLU (qwen35), or routed experts plus a shared expert gated by
// sigmoid(h w_shexp_gate) (qwen35moe, qwen3next).
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

Value w(Builder& b, int64_t l, const char* name) { return b.weight(fmt::format("blk.{}.{}", l, name)); }

}  // namespace

std::vector<int64_t> int_array(const gguf::GgufFile& f, const std::string& key) {
  std::vector<int64_t> out;
  const auto* kv = f.find(key);
  if (!kv) return out;
  if (const auto* arr = kv->as_array()) {
    for (const auto& item : arr->items) out.push_back(item.as_int().value_or(0));
  } else if (auto v = kv->as_int()) {
    out.push_back(*v);
  }
  return out;
}

DeltaNetHparams read_deltanet_hparams(const gguf::GgufFile& f, const DenseHparams& h) {
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
  const int64_t first = int64_t(std::find(d.recurrent.begin(), d.recurrent.end(), true) - d.recurrent.begin());
  d.fused_qkvz = f.find_tensor(fmt::format("blk.{}.ssm_in.weight", first)) != nullptr;
  d.fused_ba = f.find_tensor(fmt::format("blk.{}.ssm_ba.weight", first)) != nullptr;
  if (!d.interleaved) {
    d.rope_sections = int_array(f, a + ".rope.dimension_sections");
    d.rope_sections.resize(4, 0);
  }
  d.sigmoid_output_gate = a == "qwen4exp";
  d.moe = a != "qwen35";
  if (d.moe) {
    d.n_used = read_expert_hparams(f, a);
    d.expert_scale = f.get_float(a + ".expert_weights_scale").value_or(0.0);
  }
  return d;
}

void HybridLayers::declare_states(ir::Module& m, const BuildOptions& o) const {
  const Dim P = Dim::symbol("P"), S = Dim::symbol("S");
  const int64_t conv_channels = 2 * d_.k_heads * d_.head_dim + d_.v_heads * d_.head_dim;
  for (int64_t l = 0; l < h_.n_layer; ++l) {
    if (!d_.recurrent[size_t(l)]) {
      m.add_state(fmt::format("kv.{}", l), ir::StateKind::Paged,
                  {o.kv_type, {2, P, o.kv_page_tokens, h_.n_head_kv, h_.head_dim}, ir::Placement::Device});
      continue;
    }
    m.add_state(fmt::format("gdn_conv.{}", l), ir::StateKind::Plain,
                {ir::ElemType::F32, {S, d_.conv_kernel - 1, conv_channels}, ir::Placement::Device});
    m.add_state(fmt::format("gdn_state.{}", l), ir::StateKind::Plain,
                {ir::ElemType::F32, {S, d_.v_heads, d_.head_dim, d_.head_dim}, ir::Placement::Device});
  }
}

Value HybridLayers::mixer(Builder& b, Value h, Value pos, Value seq, const Dim& n, int64_t l) const {
  return d_.recurrent[size_t(l)] ? delta_net(b, h, seq, n, l) : gated_attention(b, h, pos, seq, n, l);
}

Value HybridLayers::ffn(Builder& b, Value h, int64_t l) const {
  if (!d_.moe) return swiglu_ffn(b, h, l);
  Value routed = routed_experts(b, h, l, d_.n_used, d_.expert_scale);
  Value gate_w = b.reshape(w(b, l, "ffn_gate_inp_shexp"), {1, h_.n_embd});
  Value shared = b.mul(swiglu_ffn(b, h, l, "_shexp"), b.sigmoid(b.matmul(h, gate_w)));
  return b.add(routed, shared);
}

HybridLayers::Projections HybridLayers::project(Builder& b, Value h, const Dim& n, int64_t l) const {
  // Fused layouts interleave the parts per key head: ssm_in holds
  // [q d | k d | v r*d | z r*d] and ssm_ba [beta r | alpha r], r = Hv / Hk.
  const int64_t d = d_.head_dim, r = d_.v_heads / d_.k_heads, hk = d_.k_heads;
  auto part = [&](Value x, int64_t start, int64_t size) { return b.reshape(b.slice(x, 2, start, size), {n, hk * size}); };
  Projections p;
  if (d_.fused_qkvz) {
    Value qkvz = b.reshape(b.matmul(h, w(b, l, "ssm_in")), {n, hk, 2 * d + 2 * r * d});
    p.qkv = b.concat({part(qkvz, 0, d), part(qkvz, d, d), part(qkvz, 2 * d, r * d)}, 1);
    p.z = part(qkvz, 2 * d + r * d, r * d);
  } else {
    p.qkv = b.matmul(h, w(b, l, "attn_qkv"));
    p.z = b.matmul(h, w(b, l, "attn_gate"));
  }
  if (d_.fused_ba) {
    Value ba = b.reshape(b.matmul(h, w(b, l, "ssm_ba")), {n, hk, 2 * r});
    p.beta = part(ba, 0, r);
    p.alpha = part(ba, r, r);
  } else {
    p.beta = b.matmul(h, w(b, l, "ssm_beta"));
    p.alpha = b.matmul(h, w(b, l, "ssm_alpha"));
  }
  return p;
}

// [n, Hk, d] -> [n, Hv, d]: tiled (head h = key head h mod Hk) or
// interleaved (head h = key head h / r).
Value HybridLayers::repeat_heads(Builder& b, Value x, const Dim& n) const {
  const int64_t r = d_.v_heads / d_.k_heads;
  if (r == 1) return x;
  if (!d_.interleaved) return b.concat(std::vector<Value>(size_t(r), x), 1);
  Value one = b.reshape(x, {n, d_.k_heads, 1, d_.head_dim});
  return b.reshape(b.concat(std::vector<Value>(size_t(r), one), 2), {n, d_.v_heads, d_.head_dim});
}

Value HybridLayers::delta_net(Builder& b, Value h, Value seq, const Dim& n, int64_t l) const {
  const int64_t d = d_.head_dim, hk = d_.k_heads, hv = d_.v_heads;
  Projections p = project(b, h, n, l);
  Value beta = b.sigmoid(p.beta);
  Value g = b.mul(b.softplus(b.add(p.alpha, w(b, l, "ssm_dt.bias"))), w(b, l, "ssm_a"));
  Value conv = b.silu(b.causal_conv1d(p.qkv, w(b, l, "ssm_conv1d"), seq, fmt::format("gdn_conv.{}", l)));
  auto heads = [&](int64_t start, int64_t count) {
    return b.reshape(b.slice(conv, 1, start * d, count * d), {n, count, d});
  };
  auto l2 = [&](Value x) { return b.l2_norm(x, h_.eps); };
  Value q = repeat_heads(b, l2(heads(0, hk)), n);
  Value k = repeat_heads(b, l2(heads(hk, hk)), n);
  Value v = heads(2 * hk, hv);
  // The reference scales by 1.0f / sqrtf(float(d)), which differs from the
  // double quotient for some sizes (96).
  const double scale = double(1.0f / std::sqrt(float(d)));
  Value o = b.delta_rule(q, k, v, g, beta, seq, fmt::format("gdn_state.{}", l), scale);
  Value normed = b.rms_norm(o, w(b, l, "ssm_norm"), h_.eps);
  Value z = b.reshape(p.z, {n, hv, d});
  Value gated = b.mul(normed, d_.sigmoid_output_gate ? b.sigmoid(z) : b.silu(z));
  return b.matmul(b.reshape(gated, {n, hv * d}), w(b, l, "ssm_out"));
}

Value HybridLayers::gated_attention(Builder& b, Value h, Value pos, Value seq, const Dim& n, int64_t l,
                                    Value selected) const {
  const int64_t hd = h_.head_dim, nh = h_.n_head, nkv = h_.n_head_kv;
  Value qg = b.reshape(b.matmul(h, w(b, l, "attn_q")), {n, nh, 2 * hd});
  Value q = b.rms_norm(b.slice(qg, 2, 0, hd), w(b, l, "attn_q_norm"), h_.eps);
  Value gate = b.reshape(b.slice(qg, 2, hd, hd), {n, nh * hd});
  Value k = b.rms_norm(b.reshape(b.matmul(h, w(b, l, "attn_k")), {n, nkv, hd}), w(b, l, "attn_k_norm"), h_.eps);
  Value v = b.reshape(b.matmul(h, w(b, l, "attn_v")), {n, nkv, hd});
  const Rope rope = attention_rope(b, pos, n);
  q = b.rope(q, rope.pos, rope.options);
  k = b.rope(k, rope.pos, rope.options);
  ir::AttentionOptions attn{.state = fmt::format("kv.{}", l), .scale = 1.0 / std::sqrt(double(hd))};
  Value a = b.reshape(b.attention(q, k, v, pos, seq, attn, selected), {n, nh * hd});
  return b.matmul(b.mul(a, b.sigmoid(gate)), w(b, l, "attn_output"));
}

HybridLayers::Rope HybridLayers::attention_rope(Builder& b, Value pos, const Dim& n) const {
  Rope rope{rope_options(h_), pos};
  if (!d_.interleaved) {
    // Text: the token's position in all four components.
    rope.options.mode = "imulti";
    rope.options.sections = d_.rope_sections;
    Value column = b.reshape(pos, {n, 1});
    rope.pos = b.concat({column, column, column, column}, 1);
  }
  return rope;
}

ir::Module build_qwen35(const gguf::GgufFile& f, const BuildOptions& o) {
  const DenseHparams h = read_dense_hparams(f);
  const DeltaNetHparams d = read_deltanet_hparams(f, h);
  const HybridLayers layers(h, d);
  DecoderHooks hooks;
  hooks.ffn_norm = "post_attention_norm";
  hooks.declare_states = [&](ir::Module& m) { layers.declare_states(m, o); };
  hooks.mixer = [&](Builder& b, Value x, Value pos, Value seq, const Dim& n, int64_t l) {
    return layers.mixer(b, x, pos, seq, n, l);
  };
  hooks.ffn = [&](Builder& b, Value x, int64_t l) { return layers.ffn(b, x, l); };
  return build_decoder(f, o, h, hooks);
}

}  // namespace vtc::arch
