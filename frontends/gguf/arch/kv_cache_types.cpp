// The KV cache's element types (--cache-type-k / --cache-type-v), applied
// to a built module: every builder declares its KV states f16 (llama.cpp's
// default), and this rewrite gives them the requested types afterwards, so
// no builder repeats it.
//
// Algorithm, for a module whose attention ops read [2, P, page, Hkv, D] KV
// states, when K or V is not f16:
//  1. Each KV state an attention op names takes the K type. When V's type
//     differs, the state keeps K alone ([1, P, ...]) and a new state
//     `<name>.v` of V's type holds V; the op's `v_state` names it.
//  2. The rotation llama.cpp applies since PR #21038 (support/kv_cache_type.h,
//     kv_rotation_block): when K's type is quantized and every attention
//     op's head size is the same multiple of 64, q and k are rotated
//     (`hadamard`) before the op; when V's is, v is rotated before it and
//     the op's result after it (the rotation is its own inverse). As there,
//     a module whose attention ops differ in head size is not rotated.
//     Nor is a hybrid with a sliding window (a plain state that an op reads
//     and writes, and a windowed attention op: lfm2): the reference keeps
//     it in its hybrid-iswa memory, whose graph input
//     (build_inp_mem_hybrid_iswa) builds no rotation matrices, so its q, k
//     and v reach a quantized cache unrotated.
//  3. MLA attention (k read as v, deepseek2) keeps f16 or f32 only: the
//     reference stores its latent cache its own way, which vtc does not
//     follow for a quantized type yet.
//  4. An indexer's side cache of raw keys (indexer_select, qwen4exp) takes
//     K's type, unrotated: llama.cpp builds that cache with type_k too and
//     stores the keys raw (llama-memory-hybrid-idx.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "frontends/gguf/arch/arch.h"
#include "ir/builder.h"
#include "ir/op_attrs.h"
#include "support/error.h"
#include "support/kv_cache_type.h"

namespace vtc::arch {

namespace {

// Appends `hadamard(x)` to f through the builder, then moves it to index
// `at` of f's ops. Returns its result.
ir::Value insert_hadamard(ir::Module& m, ir::Function& f, size_t at, ir::Value x, int64_t block) {
  ir::Builder b(m, f);
  const ir::Value y = b.hadamard(x, block);
  std::rotate(f.ops.begin() + std::ptrdiff_t(at), f.ops.end() - 1, f.ops.end());
  return y;
}

// The one head size all attention ops share for operand `which` (1: K, 2:
// V), or 0 when they differ (no rotation, as llama.cpp's n_embd_head_*_all).
int64_t uniform_head_size(const ir::Module& m, size_t which) {
  std::set<int64_t> sizes;
  for (const auto& f : m.functions)
    for (const auto& op : f->ops)
      if (op->kind == ir::OpKind::Attention) sizes.insert(op->operands[which].type().shape[2].constant().value_or(0));
  return sizes.size() == 1 ? *sizes.begin() : 0;
}

// A recurrent hybrid with a sliding window (step 2 above): some op reads and
// writes a plain state, and some attention op has a window.
bool hybrid_with_window(const ir::Module& m) {
  bool recurrent = false, windowed = false;
  for (const auto& f : m.functions)
    for (const auto& op : f->ops) {
      if (op->kind == ir::OpKind::Attention) windowed |= ir::AttentionAttrs::of(*op).window > 0;
      const std::string* state = ir::state_symbol(*op);
      const ir::StateDecl* decl = state ? m.find_state(*state) : nullptr;
      recurrent |= op->info().effect == ir::Effect::ReadsWritesState && decl && decl->kind == ir::StateKind::Plain;
    }
  return recurrent && windowed;
}

ir::StateDecl* find_state_decl(ir::Module& m, const std::string& name) {
  for (ir::StateDecl& d : m.states)
    if (d.name == name) return &d;
  return nullptr;
}

void retype_states(ir::Module& m, GgmlType k, GgmlType v, const std::set<std::string>& kv_states) {
  const ir::ElemType k_elem = elem_type_of(k), v_elem = elem_type_of(v);
  std::vector<ir::StateDecl> added;
  for (ir::StateDecl& d : m.states) {
    if (!kv_states.count(d.name)) continue;
    d.type.elem = k_elem;
    if (k == v) continue;
    d.type.shape[0] = ir::Dim(1);
    ir::StateDecl vd = d;
    vd.name += ".v";
    vd.type.elem = v_elem;
    added.push_back(vd);
  }
  for (ir::StateDecl& d : added) m.add_state(d.name, d.kind, d.type);
}

void rotate_around(ir::Module& m, ir::Function& f, size_t& i, int64_t k_rot, int64_t v_rot) {
  ir::Op* op = f.ops[i].get();
  if (k_rot > 0) {
    op->set_operand(0, insert_hadamard(m, f, i++, op->operands[0], k_rot));
    op->set_operand(1, insert_hadamard(m, f, i++, op->operands[1], k_rot));
  }
  if (v_rot > 0) {
    op->set_operand(2, insert_hadamard(m, f, i++, op->operands[2], v_rot));
    const ir::Value out = op->results[0];
    const ir::Value back = insert_hadamard(m, f, i + 1, out, v_rot);
    out.replace_all_uses_with(back);
    back->def->set_operand(0, out);  // the rotation's own operand was replaced too
    ++i;
  }
}

}  // namespace

void apply_kv_cache_types(ir::Module& m, const BuildOptions& o) {
  const GgmlType k = o.cache_type_k, v = o.cache_type_v;
  for (GgmlType t : {k, v})
    if (!is_kv_cache_type(t))
      throw Error(fmt::format("KV cache: {} is not a cache type (one of: {})", ggml_type_name(t), kv_cache_type_list()));
  if (k == GgmlType::F16 && v == GgmlType::F16) return;
  const bool rotate = !hybrid_with_window(m);
  const int64_t k_rot = rotate ? kv_rotation_block(k, uniform_head_size(m, 1), false) : 0;
  const int64_t v_rot = rotate ? kv_rotation_block(v, uniform_head_size(m, 2), true) : 0;
  std::set<std::string> kv_states;
  for (auto& f : m.functions)
    for (size_t i = 0; i < f->ops.size(); ++i) {
      ir::Op& op = *f->ops[i];
      if (op.kind == ir::OpKind::IndexerSelect)
        if (ir::StateDecl* d = find_state_decl(m, ir::IndexerSelectAttrs::of(op).state)) d->type.elem = elem_type_of(k);
      if (op.kind != ir::OpKind::Attention) continue;
      const std::string state = ir::AttentionAttrs::of(op).state;
      if (op.operands[1] == op.operands[2] && (ggml_traits(k).quantized || ggml_traits(v).quantized || k != v))
        throw Error(fmt::format("KV cache: MLA attention (@{}) keeps K and V in one latent cache; --cache-type-k and "
                                "--cache-type-v must be equal and f32, f16 or bf16 for it (got {} and {})",
                                state, ggml_type_name(k), ggml_type_name(v)));
      const int64_t head = op.operands[1].type().shape[2].constant().value_or(0);
      for (auto [t, flag] : {std::pair{k, "--cache-type-k"}, std::pair{v, "--cache-type-v"}})
        if (head % int64_t(ggml_traits(t).block_size) != 0)
          throw Error(fmt::format("KV cache: {} {} stores blocks of {} values along the head, and this model's heads "
                                  "hold {}; use f16, bf16 or f32", flag, ggml_type_name(t), ggml_traits(t).block_size,
                                  head));
      kv_states.insert(state);
      if (k != v) op.set_attr("v_state", ir::Attr::of_symbol(state + ".v"));
      rotate_around(m, *f, i, k_rot, v_rot);
    }
  retype_states(m, k, v, kv_states);
}

}  // namespace vtc::arch
