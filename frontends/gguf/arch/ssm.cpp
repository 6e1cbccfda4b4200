// State-space models: mamba (Mamba-1) and mamba2, as the reference's
// src/models/mamba.cpp, mamba2.cpp and mamba-base.cpp. Each layer is
//   x += mamba_layer(rms_norm(x) * attn_norm)
// and the head is rms_norm(x) * output_norm then the output matrix
// (token_embd when tied) with its scale. No attention, no FFN: the only
// states are recurrent, two per layer (ssm.h).
//
// Mamba-2 layer (build_mamba2_layer), H = time_step_rank heads of
// P = inner_size / H, G = group_count groups of N = state_size:
//   [z | xBC | dt] = h Wssm_in (* ssm_in.scale)      z [n, H, P], dt [n, H]
//   xBC = silu(causal_conv1d(xBC, ssm_conv1d) + ssm_conv1d.bias)
//                                  conv state @ssm_conv.l, as ggml_ssm_conv
//   [x | B | C] = xBC              x [n, H, P], B, C [n, G, N]
//   y = ssm_scan(x, dt + ssm_dt.bias, ssm_a, B, C)    state @ssm_state.l
//   y = (y + x * ssm_d) * silu(z)
//   y = rms_norm(y per group of P*H/G) * ssm_norm     (the grouped gain [G, D/G])
//   out = y Wssm_out (* ssm_out.scale)
// Mamba-1 layer (build_mamba_layer), H = inner_size channels of one row:
//   [x | z] = h Wssm_in (* scale); x = silu(causal_conv1d(x, conv1d) + bias)
//   [dt | B | C] = x Wssm_x        (dt_rank, N, N)
//   (jamba: dt, B, C each rms_norm'ed with ssm_dt_norm / ssm_b_norm / ssm_c_norm
//    when the layer has all three, as the reference tests them)
//   dt = dt Wssm_dt + ssm_dt.bias  [n, inner]
//   y = ssm_scan(x, dt, ssm_a [inner, N], B, C)       per-element decay
//   out = ((y + x * ssm_d) * silu(z)) Wssm_out (* scale)
// ssm_x and ssm_dt take no scale (the reference passes none).
// causal_conv1d matches ggml_ssm_conv over concat(conv_state, x): taps
// oldest first, summed in tap order from 0, the state the last d_conv-1
// inputs, zero for a new sequence (docs/ir.md), so it is reused as is.
#include "frontends/gguf/arch/ssm.h"

#include <fmt/format.h>

#include "frontends/gguf/arch/hybrid.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Builder;
using ir::Dim;
using ir::Value;

// ssm.conv_kernel and friends: positive, or an error naming the key.
int64_t ssm_key(const gguf::GgufFile& f, const std::string& arch, const char* key) {
  return require_int(f, arch + ".ssm." + key);
}

// silu(causal_conv1d(x) + bias) over layer l's conv state.
Value conv(StepGraph& g, const SsmHparams& s, Value x, int64_t l) {
  Builder& b = g.b;
  Value y = b.causal_conv1d(x, g.weight(blk(l, "ssm_conv1d")), g.seq, fmt::format("ssm_conv.{}", l));
  Value bias = s.conv_bias_optional ? g.optional(blk(l, "ssm_conv1d.bias")) : g.weight(blk(l, "ssm_conv1d.bias"));
  return b.silu(bias ? b.add(y, bias) : y);
}

Value mamba2_layer(StepGraph& g, const SsmHparams& s, Value h, int64_t l) {
  Builder& b = g.b;
  const Dim& n = g.n;
  const int64_t H = s.heads(), P = s.head_dim(), G = s.groups(), N = s.d_state, inner = s.d_inner;
  Value zxbcdt = g.linear(h, blk(l, "ssm_in"));
  Value z = b.reshape(b.slice(zxbcdt, 1, 0, inner), {n, H, P});
  Value xbc = conv(g, s, b.slice(zxbcdt, 1, inner, s.conv_channels()), l);
  Value dt = b.add(b.slice(zxbcdt, 1, inner + s.conv_channels(), H), g.weight(blk(l, "ssm_dt.bias")));
  Value x = b.reshape(b.slice(xbc, 1, 0, inner), {n, H, P});
  Value bm = b.reshape(b.slice(xbc, 1, inner, G * N), {n, G, N});
  Value cm = b.reshape(b.slice(xbc, 1, inner + G * N, G * N), {n, G, N});
  Value y = b.ssm_scan(x, dt, g.weight(blk(l, "ssm_a")), bm, cm, g.seq, fmt::format("ssm_state.{}", l));
  y = b.add(y, b.mul(x, g.weight(blk(l, "ssm_d"))));
  y = b.mul(b.silu(z), y);
  if (g.has(blk(l, "ssm_norm"))) y = g.norm(b.reshape(y, {n, G, inner / G}), blk(l, "ssm_norm"));
  return g.linear(b.reshape(y, {n, inner}), blk(l, "ssm_out"));
}

Value mamba1_layer(StepGraph& g, const SsmHparams& s, Value h, int64_t l) {
  Builder& b = g.b;
  const Dim& n = g.n;
  const int64_t inner = s.d_inner, N = s.d_state, R = s.dt_rank;
  Value xz = g.linear(h, blk(l, "ssm_in"));
  Value z = b.slice(xz, 1, inner, inner);
  Value x = conv(g, s, b.slice(xz, 1, 0, inner), l);
  Value xdb = g.linear_plain(x, blk(l, "ssm_x"));
  Value dt = b.slice(xdb, 1, 0, R);
  Value bm = b.slice(xdb, 1, R, N);
  Value cm = b.slice(xdb, 1, R + N, N);
  if (s.bc_norms && g.has(blk(l, "ssm_dt_norm")) && g.has(blk(l, "ssm_b_norm")) && g.has(blk(l, "ssm_c_norm"))) {
    dt = g.norm(dt, blk(l, "ssm_dt_norm"));
    bm = g.norm(bm, blk(l, "ssm_b_norm"));
    cm = g.norm(cm, blk(l, "ssm_c_norm"));
  }
  dt = b.add(g.linear_plain(dt, blk(l, "ssm_dt")), g.weight(blk(l, "ssm_dt.bias")));
  Value y = b.ssm_scan(b.reshape(x, {n, inner, 1}), dt, g.weight(blk(l, "ssm_a")), b.reshape(bm, {n, 1, N}),
                       b.reshape(cm, {n, 1, N}), g.seq, fmt::format("ssm_state.{}", l));
  y = b.add(b.reshape(y, {n, inner}), b.mul(x, g.weight(blk(l, "ssm_d"))));
  return g.linear(b.mul(b.silu(z), y), blk(l, "ssm_out"));
}

}  // namespace

SsmHparams read_ssm_hparams(const gguf::GgufFile& f, const std::string& arch, bool mamba2) {
  SsmHparams s;
  s.mamba2 = mamba2;
  s.d_conv = ssm_key(f, arch, "conv_kernel");
  s.d_inner = ssm_key(f, arch, "inner_size");
  s.d_state = ssm_key(f, arch, "state_size");
  s.dt_rank = ssm_key(f, arch, "time_step_rank");
  if (mamba2) {
    s.n_group = ssm_key(f, arch, "group_count");
    if (s.d_inner % s.dt_rank != 0 || s.d_inner % s.n_group != 0 || s.dt_rank % s.n_group != 0)
      throw Error(fmt::format("{}: ssm.inner_size {} must be a multiple of ssm.time_step_rank {} (the head count) and "
                              "of ssm.group_count {}, which must divide the head count",
                              f.path(), s.d_inner, s.dt_rank, s.n_group));
  }
  const auto* rms = f.find(arch + ".ssm.dt_b_c_rms");
  if (rms && rms->as_bool().value_or(false))
    throw Error(fmt::format("{}: ssm.dt_b_c_rms (falcon-mamba's weightless dt/B/C norms) is not supported", f.path()));
  return s;
}

Hparams read_recurrent_hparams(const gguf::GgufFile& f) {
  Hparams h;
  h.arch = f.architecture();
  h.n_embd = require_int(f, h.arch + ".embedding_length");
  h.n_layer = require_int(f, h.arch + ".block_count");
  h.n_ctx = require_int(f, h.arch + ".context_length");
  h.eps = f.get_float(h.arch + ".attention.layer_norm_rms_epsilon").value_or(1e-5);
  auto* embd = f.find_tensor("token_embd.weight");
  if (!embd || embd->dims.size() != 2)
    throw Error(fmt::format("{}: missing or malformed tensor 'token_embd.weight'", f.path()));
  h.n_vocab = int64_t(embd->dims[1]);
  return h;
}

std::vector<bool> layers_without_kv_heads(const gguf::GgufFile& f, const std::string& arch, int64_t n_layer) {
  const std::vector<int64_t> kv_heads = int_array(f, arch + ".attention.head_count_kv");
  std::vector<bool> recurrent(size_t(n_layer), false);
  if (kv_heads.size() <= 1) return recurrent;
  if (int64_t(kv_heads.size()) != n_layer)
    throw Error(fmt::format("{}: attention.head_count_kv has {} entries for {} layers", f.path(), kv_heads.size(), n_layer));
  for (int64_t l = 0; l < n_layer; ++l) recurrent[size_t(l)] = kv_heads[size_t(l)] == 0;
  return recurrent;
}

void declare_ssm_states(ir::Module& m, const SsmHparams& s, int64_t l) {
  const Dim S = Dim::symbol("S");
  m.add_state(fmt::format("ssm_conv.{}", l), ir::StateKind::Plain,
              {ir::ElemType::F32, {S, s.d_conv - 1, s.conv_channels()}, ir::Placement::Device});
  m.add_state(fmt::format("ssm_state.{}", l), ir::StateKind::Plain,
              {ir::ElemType::F32, {S, s.heads(), s.head_dim(), s.d_state}, ir::Placement::Device});
}

void declare_hybrid_states(ir::Module& m, const BuildOptions& o, const Hparams& h, const SsmHparams& s,
                           const std::vector<bool>& recurrent) {
  for (int64_t l = 0; l < h.n_layer; ++l) {
    if (recurrent[size_t(l)])
      declare_ssm_states(m, s, l);
    else
      declare_kv_state(m, o, h, l);
  }
}

Value mamba_layer(StepGraph& g, const SsmHparams& s, Value h, int64_t l) {
  return s.mamba2 ? mamba2_layer(g, s, h, l) : mamba1_layer(g, s, h, l);
}

namespace {

// mamba and mamba2: x += mamba_layer(rms_norm(x) * attn_norm); no FFN.
class Mamba final : public Architecture {
 public:
  Mamba(const gguf::GgufFile& f, const BuildOptions&)
      : Architecture(read_recurrent_hparams(f)), s_(read_ssm_hparams(f, h.arch, h.arch == "mamba2")) {
    // The reference's loader: "only an expansion factor of 2 is supported for now".
    if (!s_.mamba2 && s_.d_inner != 2 * h.n_embd)
      throw Error(fmt::format("{}: ssm.inner_size {} must be 2 x embedding_length {} (the reference supports no other)",
                              f.path(), s_.d_inner, h.n_embd));
  }

  void declare_states(ir::Module& m) const override {
    for (int64_t l = 0; l < h.n_layer; ++l) declare_ssm_states(m, s_, l);
  }

  Value forward(StepGraph& g) const override {
    Builder& b = g.b;
    Value x = Builder::named(b.embed(g.weight("token_embd"), g.ids), "x");
    for (int64_t l = 0; l < h.n_layer; ++l)
      x = Builder::named(b.add(x, mamba_layer(g, s_, g.norm(x, blk(l, "attn_norm")), l)), fmt::format("x{}", l));
    return x;
  }

  Value head(StepGraph& g, Value rows) const override { return g.output(embedding(g, rows)); }
  Value embedding(StepGraph& g, Value x) const override { return g.norm(x, "output_norm"); }

 private:
  SsmHparams s_;
};

}  // namespace

ir::Module build_mamba(const gguf::GgufFile& f, const BuildOptions& o) { return build<Mamba>(f, o); }

}  // namespace vtc::arch
