// Absorbed multi-head latent attention (arch/mla.h; the algorithm is in
// arch/deepseek2.cpp's header).
#include "frontends/gguf/arch/mla.h"

#include <fmt/format.h>

#include "support/error.h"

namespace vtc::arch {

using ir::Value;

void MlaAttention::declare_state(ir::Module& m, const BuildOptions& o, int64_t l) const {
  m.add_state(fmt::format("kv.{}", l), ir::StateKind::Paged,
              {ir::ElemType::F16, {2, ir::Dim::symbol("P"), o.kv_page_tokens, 1, s_.kv_lora + s_.rot},
               ir::Placement::Device});
}

// y[t, h] = x[t, h] W[h]^T for per-head matrices W[h] [n_out, n_in] of a
// [H, n_out, n_in] tensor (the reference's ggml_mul_mat over the head
// dim); a 2-D tensor is the one head of a single-head file.
Value MlaAttention::per_head(StepGraph& g, Value x, std::string_view name, int64_t n_out, int64_t n_in) const {
  ir::Builder& b = g.b;
  Value w = g.weight(name);
  const ir::Shape& s = w.type().shape;
  const bool one = s_.n_head == 1 && s.size() == 2;
  if (!one && !(s.size() == 3 && s[0] == ir::Dim(s_.n_head)))
    throw Error(fmt::format("{}: tensor has shape {} dims, expected [{}, {}, {}]", name, s.size(), s_.n_head, n_out, n_in));
  if (one) return b.reshape(b.matmul(b.reshape(x, {g.n, n_in}), w), {g.n, 1, n_out});
  std::vector<Value> heads;
  for (int64_t hd = 0; hd < s_.n_head; ++hd) {
    Value xh = b.reshape(b.slice(x, 1, hd, 1), {g.n, n_in});
    Value wh = b.reshape(b.slice(w, 0, hd, 1), {n_out, n_in});
    heads.push_back(b.reshape(b.matmul(xh, wh), {g.n, 1, n_out}));
  }
  return b.concat(heads, 1);
}

Value MlaAttention::operator()(StepGraph& g, Value x, int64_t l) const {
  ir::Builder& b = g.b;
  const ir::Dim n = g.n;
  const int64_t nope = s_.nope(), rot = s_.rot, kv_lora = s_.kv_lora;
  auto rope = [&](Value v) { return s_.rope ? b.rope(v, g.pos, s_.rope_options) : v; };
  Value q = s_.q_lora ? g.linear_plain(g.norm(g.linear_plain(x, blk(l, "attn_q_a")), blk(l, "attn_q_a_norm")),
                                       blk(l, "attn_q_b"))
                      : g.linear_plain(x, blk(l, "attn_q"));
  q = b.reshape(q, {n, s_.n_head, s_.dk});
  Value kv = g.linear_plain(x, blk(l, "attn_kv_a_mqa"));
  Value k_pe = rope(b.reshape(b.slice(kv, 1, kv_lora, rot), {n, 1, rot}));
  Value c = g.norm(b.slice(kv, 1, 0, kv_lora), blk(l, "attn_kv_a_norm"));
  Value q_pe = rope(b.slice(q, 2, nope, rot));
  Value q_abs = per_head(g, b.slice(q, 2, 0, nope), blk(l, "attn_k_b"), kv_lora, nope);
  Value qk = b.concat({q_abs, q_pe}, 2);
  Value k = b.concat({b.reshape(c, {n, 1, kv_lora}), k_pe}, 2);
  ir::AttentionOptions attn{.state = fmt::format("kv.{}", l), .scale = s_.kq_scale};
  Value o = b.attention(qk, k, k, g.pos, g.seq, attn);
  Value v = per_head(g, b.slice(o, 2, 0, kv_lora), blk(l, "attn_v_b"), s_.dv, kv_lora);
  return g.linear(b.reshape(v, {n, s_.n_head * s_.dv}), blk(l, "attn_output"));
}

}  // namespace vtc::arch
