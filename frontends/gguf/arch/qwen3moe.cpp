// qwen3moe: qwen3 (QK-norm, neox rope) with every FFN replaced by a
// mixture of experts, as the reference's src/models/qwen3moe.cpp:
//
//   h = rms_norm(x, ffn_norm)
//   weights, ids = moe_route(h Wgate_inp) {softmax over all experts, top
//                  expert_used_count, renormalized (norm_w = true), no scale}
//   x += moe_ffn(h, weights, ids, ffn_gate_exps, ffn_up_exps, ffn_down_exps)
//
// The attention half and the head are the dense builder's (arch/dense.h).
// qwen3moe has no shared expert; the shared expert with its sigmoid gate of
// later MoE architectures is plain matmul / sigmoid / mul ops.
#include <fmt/format.h>

#include "frontends/gguf/arch/dense.h"
#include "support/error.h"

namespace vtc::arch {

int64_t read_expert_hparams(const gguf::GgufFile& f, const std::string& a) {
  const int64_t n_expert = require_int(f, a + ".expert_count");
  const int64_t n_used = require_int(f, a + ".expert_used_count");
  if (n_used > n_expert)
    throw Error(fmt::format("{}: expert_used_count {} exceeds expert_count {}", f.path(), n_used, n_expert));
  for (const char* t : {"ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) {
    const auto* info = f.find_tensor(fmt::format("blk.0.{}.weight", t));
    if (!info) throw Error(fmt::format("{}: missing tensor 'blk.0.{}.weight'", f.path(), t));
    const size_t rank = std::string_view(t) == "ffn_gate_inp" ? 2 : 3;
    if (info->dims.size() != rank || int64_t(info->dims.back()) != n_expert)
      throw Error(fmt::format("{}: tensor 'blk.0.{}.weight' must have {} dims, the last being expert_count {}",
                              f.path(), t, rank, n_expert));
  }
  return n_used;
}

ir::Value routed_experts(ir::Builder& b, ir::Value x, int64_t l, int64_t n_used, double scale) {
  auto w = [&](const char* name) { return b.weight(fmt::format("blk.{}.{}", l, name)); };
  ir::Value logits = b.matmul(x, w("ffn_gate_inp"));
  std::vector<ir::NamedAttr> attrs = {{"k", ir::Attr::of_int(n_used)},
                                      {"gating", ir::Attr::of_enum("softmax")},
                                      {"norm", ir::Attr::of_bool(true)}};
  if (scale != 0.0 && scale != 1.0) attrs.push_back({"scale", ir::Attr::of_float(scale)});
  ir::Op& route = b.create(ir::OpKind::MoeRoute, {logits}, std::move(attrs));
  ir::Value weights = route.results[0], ids = route.results[1];
  return b.create(ir::OpKind::MoeFfn, {x, weights, ids, w("ffn_gate_exps"), w("ffn_up_exps"), w("ffn_down_exps")})
      .results[0];
}

ir::Module build_qwen3moe(const gguf::GgufFile& f, const BuildOptions& o) {
  const DenseHparams h = read_dense_hparams(f);
  const int64_t n_used = read_expert_hparams(f, h.arch);
  if (!h.qk_norm) throw Error(fmt::format("{}: qwen3moe needs blk.N.attn_q_norm / attn_k_norm tensors", f.path()));
  DecoderHooks hooks;
  hooks.ffn = [n_used](ir::Builder& b, ir::Value x, int64_t l) { return routed_experts(b, x, l, n_used); };
  return build_decoder(f, o, h, hooks);
}

}  // namespace vtc::arch
