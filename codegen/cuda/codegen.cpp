// Op dispatch for the CUDA code generator and the step driver.
//
// The dispatch table is generated from ir/ops.def, one entry per op, so an
// op added to the table without a CUDA emitter fails to compile here.
// generate_step walks a function in order: weights and alias ops become
// bindings (no launch), every other op its emitter's kernels. A fused region
// of kind `elementwise` becomes one kernel (emit_fused) when it composes, one
// of kind `matmul_epilogue` one GEMV/GEMM with the chain before its store
// (emit_matmul_epilogue) when every chain op and operand has that form;
// other region kinds, and those that do not compose, run their
// body op by op, with the body's arguments aliased to the region's
// operands and the region's results to the body's returned values; a
// projection region's matmuls in a decode step as one multi-part GEMV
// (lower_projection_region), and in a prefill step its rms_norm with the
// GEMMs' quantize and its swiglu activations with their products
// (lower_prefill_region). Last,
// share_activation_codes drops the decode GEMVs' repeated quantizations of
// one x (emit_gemv.cpp).
// @prefill is walked twice: as above (launched when T > kDecodeFormRows),
// and in its decode form (tiled_rows false: T rows take the GEMVs, the
// merged projections and flash decoding of @decode), launched when T is at
// most kDecodeFormRows, so that a verify row has decode's bits (kernel.h).
#include <fmt/format.h>

#include <llvm/ADT/DenseMap.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <optional>
#include <set>

#include "codegen/cuda/emit.h"
#include "ir/fused_kinds.h"
#include "ir/op_attrs.h"
#include "ir/step_interface.h"
#include "support/error.h"

namespace vtc::cuda {
namespace {

using Ctx = EmitContext;
using EmitFn = Kernels (*)(const Ctx&, const ir::Op&);

Kernels none(const Ctx&, const ir::Op&) { return {}; }
Kernels elementwise(const Ctx& c, const ir::Op& op) { return emit_elementwise(c.fn, op, c.what); }
Kernels data(const Ctx& c, const ir::Op& op) { return emit_data_movement(op, c.what); }
Kernels state(const Ctx& c, const ir::Op& op) { return emit_state(c.module, op, c.what); }
Kernels ngram(const Ctx& c, const ir::Op& op) { return emit_ngram(op, c.what); }

}  // namespace

// The emitters of emit.h that only forward to an op family's emitter.
Kernels emit_Weight(const Ctx& c, const ir::Op& op) { return none(c, op); }
Kernels emit_StateRead(const Ctx& c, const ir::Op& op) { return state(c, op); }
Kernels emit_StateWrite(const Ctx& c, const ir::Op& op) { return state(c, op); }
Kernels emit_ToHost(const Ctx& c, const ir::Op& op) { return none(c, op); }
Kernels emit_ToDevice(const Ctx& c, const ir::Op& op) { return none(c, op); }
Kernels emit_Embed(const Ctx& c, const ir::Op& op) { return emit_embed(op, c.what); }
Kernels emit_Matmul(const Ctx& c, const ir::Op& op) { return emit_matmul(op, c.what); }
Kernels emit_Add(const Ctx& c, const ir::Op& op) { return elementwise(c, op); }
Kernels emit_Mul(const Ctx& c, const ir::Op& op) { return elementwise(c, op); }
Kernels emit_Div(const Ctx& c, const ir::Op& op) { return elementwise(c, op); }
Kernels emit_Silu(const Ctx& c, const ir::Op& op) { return elementwise(c, op); }
Kernels emit_Gelu(const Ctx& c, const ir::Op& op) { return elementwise(c, op); }
Kernels emit_Sigmoid(const Ctx& c, const ir::Op& op) { return elementwise(c, op); }
Kernels emit_Tanh(const Ctx& c, const ir::Op& op) { return elementwise(c, op); }
Kernels emit_Softplus(const Ctx& c, const ir::Op& op) { return elementwise(c, op); }
Kernels emit_Exp(const Ctx& c, const ir::Op& op) { return elementwise(c, op); }
Kernels emit_Neg(const Ctx& c, const ir::Op& op) { return elementwise(c, op); }
Kernels emit_Abs(const Ctx& c, const ir::Op& op) { return elementwise(c, op); }
Kernels emit_Sign(const Ctx& c, const ir::Op& op) { return elementwise(c, op); }
Kernels emit_Sqrt(const Ctx& c, const ir::Op& op) { return elementwise(c, op); }
Kernels emit_Scale(const Ctx& c, const ir::Op& op) { return elementwise(c, op); }
Kernels emit_Clamp(const Ctx& c, const ir::Op& op) { return elementwise(c, op); }
Kernels emit_Cast(const Ctx& c, const ir::Op& op) { return elementwise(c, op); }
Kernels emit_RmsNorm(const Ctx& c, const ir::Op& op) { return emit_rms_norm(op, c.what); }
Kernels emit_Rope(const Ctx& c, const ir::Op& op) { return emit_rope(op, c.what); }
Kernels emit_L2Norm(const Ctx& c, const ir::Op& op) { return emit_l2_norm(op, c.what); }
Kernels emit_LayerNorm(const Ctx& c, const ir::Op& op) { return emit_layer_norm(op, c.what); }
Kernels emit_Hadamard(const Ctx& c, const ir::Op& op) { return emit_hadamard(op, c.what); }
Kernels emit_CausalConv1d(const Ctx& c, const ir::Op& op) { return emit_causal_conv1d(c.module, op, c.what); }
Kernels emit_DeltaRule(const Ctx& c, const ir::Op& op) { return emit_delta_rule(c.module, op, c.what); }
Kernels emit_SsmScan(const Ctx& c, const ir::Op& op) { return emit_ssm_scan(c.module, op, c.what); }
Kernels emit_Attention(const Ctx& c, const ir::Op& op) { return emit_attention(c.module, op, c.what); }
Kernels emit_AttnTemp(const Ctx& c, const ir::Op& op) { return emit_attn_temp(op, c.what); }
Kernels emit_Softmax(const Ctx& c, const ir::Op& op) { return emit_softmax(op, c.what); }
Kernels emit_Sum(const Ctx& c, const ir::Op& op) { return emit_sum(op, c.what); }
Kernels emit_Argmax(const Ctx& c, const ir::Op& op) { return emit_argmax(op, c.what); }
Kernels emit_TopK(const Ctx& c, const ir::Op& op) { return emit_top_k(op, c.what); }
Kernels emit_Sample(const Ctx& c, const ir::Op& op) { return emit_sample(op, c.what); }
Kernels emit_MoeRoute(const Ctx& c, const ir::Op& op) { return emit_moe_route(op, c.what); }
Kernels emit_MoeFfn(const Ctx& c, const ir::Op& op) { return emit_moe_ffn(op, c.what); }
Kernels emit_IndexerSelect(const Ctx& c, const ir::Op& op) { return emit_indexer_select(c.module, op, c.what); }
Kernels emit_Reshape(const Ctx& c, const ir::Op& op) { return none(c, op); }
Kernels emit_View(const Ctx& c, const ir::Op& op) { return none(c, op); }
Kernels emit_Transpose(const Ctx& c, const ir::Op& op) { return data(c, op); }
Kernels emit_Concat(const Ctx& c, const ir::Op& op) { return data(c, op); }
Kernels emit_Slice(const Ctx& c, const ir::Op& op) { return data(c, op); }
Kernels emit_Gather(const Ctx& c, const ir::Op& op) { return data(c, op); }
Kernels emit_Scatter(const Ctx& c, const ir::Op& op) { return data(c, op); }
Kernels emit_NgramHash(const Ctx& c, const ir::Op& op) { return ngram(c, op); }
Kernels emit_NgramRoll(const Ctx& c, const ir::Op& op) { return ngram(c, op); }
// Only a region that runs as one kernel reaches its emitter: walk() wires
// the others (why_op_by_op) as sequences of their body ops' kernels, so no
// kernel ever reads a body value that nothing wired.
Kernels emit_Fused(const Ctx& c, const ir::Op& op) {
  if (std::string why = why_op_by_op(op); !why.empty())
    throw Error(fmt::format("cuda: {} runs op by op ({}); generate_step wires it as a sequence", c.what, why));
  if (ir::fused_kind(op) == ir::FusedKind::MatmulEpilogue) return emit_matmul_epilogue(op, c.what);
  return emit_fused(op, c.what);
}
Kernels emit_Return(const Ctx& c, const ir::Op& op) { return none(c, op); }

namespace {

constexpr EmitFn kEmit[] = {
#define VTC_OP(id, ...) &emit_##id,
#include "ir/ops.def"
#undef VTC_OP
};

// "%x = embed (op #1 in @decode) -> T x 64 x f32"; unnamed results show only
// their types.
std::string describe(const ir::Function& fn, const ir::Op& op, size_t index) {
  std::string names, types;
  for (const auto& r : op.results) {
    if (!r->name.empty()) names += (names.empty() ? "%" : ", %") + r->name;
    types += (types.empty() ? "" : ", ") + ir::shape_str(r.type().shape) + " x " + r.type().elem.name();
  }
  return fmt::format("{}{}{} (op #{} in @{}){}{}", names, names.empty() ? "" : " = ", op.mnemonic(), index, fn.name,
                     types.empty() ? "" : " -> ", types);
}

// Emits an op's kernels itself instead of walk (true: handled).
using OpHook = std::function<bool(const ir::Op& op, size_t index, StepKernels& out)>;

void walk(const ir::Module& m, const ir::Function& fn, StepKernels& out, const OpHook& hook = {});

// Non-elementwise regions: the body's ops in order, wired by aliases.
void lower_region_as_sequence(const ir::Module& m, const ir::Op& op, StepKernels& out, const OpHook& hook = {}) {
  const ir::Function& body = *op.body;
  for (size_t i = 0; i < body.args.size() && i < op.operands.size(); ++i)
    out.aliases.push_back({body.args[i].data(), op.operands[i].data(), 0});
  StepKernels inner;
  inner.function = out.function;
  walk(m, body, inner, hook);
  for (auto& k : inner.kernels) out.kernels.push_back(std::move(k));
  for (auto& a : inner.aliases) out.aliases.push_back(a);
  for (auto& w : inner.weights) out.weights.push_back(w);
  for (size_t i = 0; i < op.results.size() && i < inner.returns.size(); ++i)
    out.aliases.push_back({op.results[i].data(), inner.returns[i], 0});
}

// A matmul GEMV part storing its result plainly.
GemvPart plain_part(const ir::Op& mm, size_t i) {
  const std::string name = fmt::format("y{}", i);
  return {mm.operands[1], std::nullopt, *mm.operands[1].type().shape[0].constant(),
          [&mm, name](KernelBuilder& kb) -> StoreFn {
            const std::string y = kb.out(mm.results[0], name);
            return [y](const std::string& v, const std::string& row, const std::string& col) {
              return fmt::format("{}[{} * N + {}] = {};", y, row, col, v);
            };
          },
          nullptr};
}

// The GEMV parts of a projection region (norm_matmul, swiglu, qk_rope) in
// a decode step, and the body ops they take over; empty when its matmuls
// do not merge into one launch: prefill GEMMs, different K, weight types
// that take different activation codes, or an intermediate value the body
// returns (the merged kernel does not write a swiglu's gate and up).
std::vector<GemvPart> projection_parts(const ir::Op& op, const ir::ProjectionRegion& r, std::set<const ir::Op*>& taken) {
  if (r.matmuls.size() < 2) return {};
  // Every matmul value is stored (a rope chain's too), but a pair's gate,
  // up and silu values are not.
  std::set<const ir::ValueData*> unstored;
  for (const auto& sp : r.swiglu)
    for (const ir::Op* o : {sp.gate, sp.silu, sp.up}) unstored.insert(o->results[0].data());
  for (const auto& body_op : op.body->ops)
    if (body_op->kind == ir::OpKind::Return)
      for (const auto& v : body_op->operands)
        if (unstored.count(v.data())) return {};
  std::vector<GgmlType> types;
  std::optional<int64_t> k;
  for (const ir::Op* mm : r.matmuls) {
    const ir::TensorType& xt = mm->operands[0].type();
    const ir::TensorType& wt = mm->operands[1].type();
    if (xt.elem.kind() != ir::ElemType::F32 || wt.elem.layout() != WeightLayout::Rows || wt.shape.size() != 2) return {};
    const auto n = wt.shape[0].constant(), kk = wt.shape[1].constant();
    if (!n || !kk || *kk % 32 != 0 || (k && *k != *kk)) return {};
    k = *kk;
    if (tiled_rows(dims_product(xt.shape, 0, xt.shape.size() - 1))) return {};
    types.push_back(weight_type(wt.elem));
  }
  if (!gemv_parts_mergeable(types)) return {};
  std::vector<GemvPart> parts;
  for (const ir::Op* mm : r.plain) parts.push_back(plain_part(*mm, parts.size())), taken.insert(mm);
  for (const auto& rc : r.ropes) parts.push_back(plain_part(*rc.matmul, parts.size())), taken.insert(rc.matmul);
  for (const auto& sp : r.swiglu) {
    if (sp.gate->operands[1].type().elem != sp.up->operands[1].type().elem) {
      // Two weight types: two plain parts, the activation op by op.
      parts.push_back(plain_part(*sp.gate, parts.size())), taken.insert(sp.gate);
      parts.push_back(plain_part(*sp.up, parts.size())), taken.insert(sp.up);
      continue;
    }
    GemvPart pair = plain_part(*sp.mul, parts.size());
    pair.w = sp.gate->operands[1];
    pair.w_pair = sp.up->operands[1];
    pair.n = *sp.gate->operands[1].type().shape[0].constant();
    const bool silu_first = sp.mul->operands[0].data() == sp.silu->results[0].data();
    pair.combine = [silu = sp.silu, mul = sp.mul, silu_first](const std::string& g, const std::string& u, bool& gelu) {
      const std::string act = elementwise_scalar_expr(*silu, {g}, gelu);
      return elementwise_scalar_expr(*mul, silu_first ? std::vector<std::string>{act, u} : std::vector<std::string>{u, act},
                                     gelu);
    };
    parts.push_back(std::move(pair));
    for (const ir::Op* o : {sp.gate, sp.silu, sp.up, sp.mul}) taken.insert(o);
  }
  return parts;
}

// The region's rms_norm prologue, when one kernel can normalize and
// quantize its rows for the merged GEMV (integer weights; only the matmuls
// read the normalized rows; a [K] gain), else null.
const ir::Op* fusable_norm(const ir::Op& region, const ir::ProjectionRegion& r, const std::vector<GemvPart>& parts) {
  if (!r.norm || dot_form(weight_type(parts[0].w.type().elem)).codes == Codes::None) return nullptr;
  const ir::Value& y = r.norm->results[0];
  const auto k = y.type().shape.back().constant();
  if (!k || numel(r.norm->operands[1].type()) != ir::Dim(*k) || r.norm->operands[0].type().elem.kind() != ir::ElemType::F32)
    return nullptr;
  std::set<const ir::Op*> matmuls(r.matmuls.begin(), r.matmuls.end());
  for (const auto& op : region.body->ops)
    for (const auto& v : op->operands)
      if (v.data() == y.data() && !matmuls.count(op.get())) return nullptr;
  return r.norm;
}

// A projection region of a decode step as its body's kernels, but its
// matmuls (and a swiglu's activation) as one multi-part GEMV launch where
// the first matmul was, and its rms_norm fused with the activations'
// quantize where it can be; false when the matmuls do not merge
// (projection_parts).
bool lower_projection_region(const ir::Module& m, const ir::Op& op, StepKernels& out) {
  const ir::FusedKind kind = ir::fused_kind(op);
  if (kind != ir::FusedKind::NormMatmul && kind != ir::FusedKind::Swiglu && kind != ir::FusedKind::QkRope) return false;
  const ir::ProjectionRegion r = ir::decode_projection_region(kind, *op.body);  // decoded once, read below
  std::set<const ir::Op*> taken;
  std::vector<GemvPart> parts = projection_parts(op, r, taken);
  if (parts.empty()) return false;
  const ir::Op* norm = fusable_norm(op, r, parts);
  if (norm) taken.insert(norm);
  // The rope chains' ropes: one launch where the last one was (every chain's
  // QK-norm has run by then; only the return reads a rope's result).
  std::vector<const ir::Op*> ropes;
  for (const auto& rc : r.ropes) ropes.push_back(rc.rope);
  if (ropes.size() < 2) ropes.clear();
  for (const ir::Op* r : ropes) taken.insert(r);
  bool emitted = false;
  const OpHook hook = [&](const ir::Op& body_op, size_t index, StepKernels& inner) {
    if (!taken.count(&body_op)) return false;
    const std::string what = describe(*op.body, body_op, index);
    if (body_op.kind == ir::OpKind::Rope) {
      if (&body_op != ropes.back()) return true;
      for (auto& kern : emit_rope_ops(ropes, what + " [one launch for the region's ropes]")) {
        kern.op = &body_op;
        inner.kernels.push_back(std::move(kern));
      }
      return true;
    }
    if (&body_op == norm) {
      const ir::TensorType& t = body_op.results[0].type();
      const int64_t k = *t.shape.back().constant();
      Kernel kern = norm_quantize_kernel(body_op, dot_form(weight_type(parts[0].w.type().elem)).codes,
                                         dims_product(t.shape, 0, t.shape.size() - 1), k, what + " [with the quantize]");
      kern.op = &body_op;
      inner.kernels.push_back(std::move(kern));
      return true;
    }
    if (emitted) return true;
    emitted = true;
    const ir::Dim m_rows = dims_product(body_op.operands[0].type().shape, 0, body_op.operands[0].type().shape.size() - 1);
    const int64_t k = *body_op.operands[1].type().shape[1].constant();
    for (auto& kern : emit_gemv_parts(parts, body_op.operands[0], what + " [one launch for the region's matmuls]", m_rows, k)) {
      if (norm && kern.writes_codes_of) continue;  // the norm's kernel wrote the codes
      kern.op = &body_op;
      inner.kernels.push_back(std::move(kern));
    }
    return true;
  };
  lower_region_as_sequence(m, op, out, hook);
  return true;
}

// The rms_norm prologue of a prefill projection region when one kernel
// can normalize its rows into the activation codes of every GEMM that
// reads them (integer-block weights taking one code form, one K; only
// those matmuls read the normalized rows; a [K] gain), else null.
const ir::Op* prefill_fusable_norm(const ir::Op& region, const ir::ProjectionRegion& r) {
  if (!r.norm || r.norm->operands[0].type().elem.kind() != ir::ElemType::F32) return nullptr;
  const ir::Value& y = r.norm->results[0];
  const auto k = y.type().shape.back().constant();
  if (!k || numel(r.norm->operands[1].type()) != ir::Dim(*k)) return nullptr;
  std::optional<Codes> codes;
  for (const auto& op : region.body->ops)
    for (const auto& v : op->operands) {
      if (v.data() != y.data()) continue;
      if (op->kind != ir::OpKind::Matmul) return nullptr;
      const ir::TensorType& wt = op->operands[1].type();
      if (wt.elem.layout() != WeightLayout::Rows || wt.shape.size() != 2) return nullptr;
      const GgmlType t = weight_type(wt.elem);
      if (!gemm_mma_supported(t, *k) || dot_form(t).codes == Codes::None) return nullptr;
      if (codes && *codes != dot_form(t).codes) return nullptr;
      codes = dot_form(t).codes;
    }
  return codes ? r.norm : nullptr;
}

// Whether a swiglu pair's activation and product can run as one kernel:
// f32 values of one size, the activation read only by the product.
bool activation_fusable(const ir::Op& region, const ir::ProjectionRegion::SwigluPair& sp) {
  const ir::Value& a = sp.silu->results[0];
  for (const ir::Value& v : {sp.silu->operands[0], a, sp.mul->operands[0], sp.mul->operands[1], sp.mul->results[0]})
    if (v.type().elem.kind() != ir::ElemType::F32 || numel(v.type()) != numel(a.type())) return false;
  for (const auto& op : region.body->ops)
    if (op.get() != sp.mul)
      for (const auto& v : op->operands)
        if (v.data() == a.data()) return false;
  return true;
}

// A projection region of a prefill step as its body's kernels, except an
// rms_norm fused with the quantize of the GEMMs that read it
// (norm_quantize_kernel; their own quantize kernels dropped) and each
// swiglu pair's activation and product as one kernel
// (emit_swiglu_activation); false when neither applies.
bool lower_prefill_region(const ir::Module& m, const ir::Op& op, StepKernels& out) {
  const ir::FusedKind kind = ir::fused_kind(op);
  if (kind != ir::FusedKind::NormMatmul && kind != ir::FusedKind::Swiglu && kind != ir::FusedKind::QkRope) return false;
  const ir::ProjectionRegion r = ir::decode_projection_region(kind, *op.body);
  if (r.matmuls.empty()) return false;
  for (const ir::Op* mm : r.matmuls) {
    const ir::TensorType& xt = mm->operands[0].type();
    if (!tiled_rows(dims_product(xt.shape, 0, xt.shape.size() - 1))) return false;
  }
  const ir::Op* norm = prefill_fusable_norm(op, r);
  std::map<const ir::Op*, const ir::Op*> act_of_mul;  // a pair's product -> its activation
  for (const auto& sp : r.swiglu)
    if (activation_fusable(op, sp)) act_of_mul[sp.mul] = sp.silu;
  if (!norm && act_of_mul.empty()) return false;
  std::set<const ir::Op*> acts;
  for (const auto& [mul, act] : act_of_mul) acts.insert(act);
  const OpHook hook = [&](const ir::Op& body_op, size_t index, StepKernels& inner) {
    const std::string what = describe(*op.body, body_op, index);
    Kernels kernels;
    if (&body_op == norm) {
      const ir::TensorType& t = body_op.results[0].type();
      const int64_t k = *t.shape.back().constant();
      const ir::Op* reader = nullptr;
      for (const ir::Op* mm : r.matmuls)
        if (mm->operands[0].data() == norm->results[0].data()) reader = mm;
      kernels.push_back(norm_quantize_kernel(body_op, dot_form(weight_type(reader->operands[1].type().elem)).codes,
                                             dims_product(t.shape, 0, t.shape.size() - 1), k,
                                             what + " [with the GEMMs' quantize]"));
    } else if (acts.count(&body_op)) {
      return true;  // runs with its product
    } else if (auto it = act_of_mul.find(&body_op); it != act_of_mul.end()) {
      kernels = emit_swiglu_activation(*it->second, body_op, what + " [with its activation]");
    } else if (norm && body_op.kind == ir::OpKind::Matmul && body_op.operands[0].data() == norm->results[0].data()) {
      Ctx ctx{m, *op.body, what};
      for (auto& k : kEmit[static_cast<size_t>(body_op.kind)](ctx, body_op))
        if (!k.writes_codes_of) kernels.push_back(std::move(k));  // the norm's kernel wrote the codes
    } else {
      return false;
    }
    for (auto& k : kernels) {
      k.op = &body_op;
      inner.kernels.push_back(std::move(k));
    }
    return true;
  };
  lower_region_as_sequence(m, op, out, hook);
  return true;
}

void walk(const ir::Module& m, const ir::Function& fn, StepKernels& out, const OpHook& hook) {
  for (size_t i = 0; i < fn.ops.size(); ++i) {
    const ir::Op& op = *fn.ops[i];
    if (hook && hook(op, i, out)) continue;
    switch (op.kind) {
      case ir::OpKind::Weight:
        out.weights.push_back({op.results[0].data(), *ir::weight_symbol(op)});
        continue;
      case ir::OpKind::Reshape:
      case ir::OpKind::ToHost:
      case ir::OpKind::ToDevice:
        out.aliases.push_back({op.results[0].data(), op.operands[0].data(), 0});
        continue;
      case ir::OpKind::View:
        out.aliases.push_back({op.results[0].data(), op.operands[0].data(), ir::ViewAttrs::of(op).offset});
        continue;
      case ir::OpKind::Return:
        for (const auto& v : op.operands) out.returns.push_back(v.data());
        continue;
      default:
        break;
    }
    if (op.body && !why_op_by_op(op).empty()) {
      if (!lower_projection_region(m, op, out) && !lower_prefill_region(m, op, out)) lower_region_as_sequence(m, op, out);
      continue;
    }
    const std::string what = describe(fn, op, i);
    Ctx ctx{m, fn, what};
    for (auto& k : kEmit[static_cast<size_t>(op.kind)](ctx, op)) {
      k.op = &op;
      out.kernels.push_back(std::move(k));
    }
  }
}

// Drops each quantize kernel whose activation codes the scratch already
// holds: the same value (through offset-free aliases: a region's argument
// is its operand) rounded by the same kernel, with no kernel in between
// that uses the scratch for itself. q, k and v read one x, and the gate and
// up projections another: each is quantized once.
void share_activation_codes(StepKernels& step) {
  llvm::DenseMap<const ir::ValueData*, const ir::ValueData*> source_of;
  for (const ValueAlias& a : step.aliases)
    if (a.offset_elems.constant() == 0) source_of[a.value] = a.source;
  auto root = [&](const ir::ValueData* v) {
    for (size_t hops = 0; hops <= step.aliases.size(); ++hops) {
      auto it = source_of.find(v);
      if (it == source_of.end()) break;
      v = it->second;
    }
    return v;
  };
  const ir::ValueData* held = nullptr;
  std::string held_by;
  std::vector<Kernel> kept;
  for (Kernel& k : step.kernels) {
    if (k.writes_codes_of) {
      const ir::ValueData* v = root(k.writes_codes_of);
      if (v == held && k.entry == held_by) continue;
      held = v, held_by = k.entry;
    } else if (!k.reads_codes_of) {
      for (const KernelArg& a : k.args)
        if (a.kind == KernelArg::Kind::Scratch) held = nullptr;
    }
    kept.push_back(std::move(k));
  }
  step.kernels = std::move(kept);
}

}  // namespace

std::string why_op_by_op(const ir::Op& fused) {
  const ir::FusedKind kind = ir::fused_kind(fused);
  if (kind == ir::FusedKind::MatmulEpilogue) return matmul_epilogue_why_not(fused);
  if (kind != ir::FusedKind::Elementwise)
    return fmt::format("CUDA has no one-kernel form of a {} region: it runs its ops' kernels (a decode step's "
                       "matmuls as one GEMV launch; a prefill's rms_norm with its GEMMs' quantize and a swiglu's "
                       "activation with its product)",
                       ir::enum_name(kind));
  if (!fused_elementwise_composable(fused)) return "a value is not float, or an operand broadcasts where the body reshapes";
  return "";
}

// Set while generate_step lowers a prefill step's decode form (tiled_rows).
thread_local bool lowering_decode_form = false;

bool tiled_rows(const ir::Dim& m) { return !lowering_decode_form && has_symbol(m, "T"); }

namespace {

// The kernels of `fn` in launch order, its shared activation codes dropped;
// with `decode_form`, rows over T take decode's kernels.
StepKernels lower_step(const ir::Module& module, const ir::Function& fn, bool decode_form) {
  struct Scope {
    bool saved = lowering_decode_form;
    explicit Scope(bool on) { lowering_decode_form = on; }
    ~Scope() { lowering_decode_form = saved; }
  } scope(decode_form);
  StepKernels out;
  out.function = fn.name;
  walk(module, fn, out);
  share_activation_codes(out);
  return out;
}

bool same_entries(const StepKernels& a, const StepKernels& b) {
  return a.kernels.size() == b.kernels.size() &&
         std::equal(a.kernels.begin(), a.kernels.end(), b.kernels.begin(),
                    [](const Kernel& x, const Kernel& y) { return x.entry == y.entry; });
}

}  // namespace

StepKernels generate_step(const ir::Module& module, const ir::Function& fn) {
  // The kernels read ggml's rows layout; a weight repacked for the CPU's
  // kernels (weight-layout{target=cpu}) would be misread.
  for (const auto& w : module.weights)
    if (w.type.elem.layout() != WeightLayout::Rows)
      throw Error(fmt::format("cuda: weight @{} is {}, a CPU weight layout; the CUDA kernels read the rows layout ({}): "
                              "lower the module for target cuda (no weight-layout{{target=cpu}} pass)",
                              w.name, w.type.elem.name(), ir::ElemType::quant(w.type.elem.quant_type()).name()));
  StepKernels out = lower_step(module, fn, false);
  // VTC_CUDA_PREFILL_FORM=tiled leaves the decode form out (before/after
  // figures, or to rule it out on a GPU): docs/cuda.md.
  static const bool tiled_only = [] {
    const char* v = std::getenv("VTC_CUDA_PREFILL_FORM");
    return v && std::string(v) == "tiled";
  }();
  if (fn.name != ir::step_name(ir::StepKind::Prefill) || tiled_only) return out;
  // @prefill also carries its decode form, launched in buckets of at most
  // kDecodeFormRows rows (kernel.h): the two kernel sequences one after
  // the other, each guarded, and the aliases and weights of both.
  StepKernels few = lower_step(module, fn, true);
  if (same_entries(out, few)) return out;
  for (Kernel& k : out.kernels) k.guard = RowsGuard::ManyRows;
  for (Kernel& k : few.kernels) {
    k.guard = RowsGuard::FewRows;
    out.kernels.push_back(std::move(k));
  }
  for (const ValueAlias& a : few.aliases)
    if (std::none_of(out.aliases.begin(), out.aliases.end(), [&](const ValueAlias& b) {
          return b.value == a.value && b.source == a.source && b.offset_elems == a.offset_elems;
        }))
      out.aliases.push_back(a);
  for (const WeightBinding& w : few.weights)
    if (std::none_of(out.weights.begin(), out.weights.end(),
                     [&](const WeightBinding& b) { return b.value == w.value; }))
      out.weights.push_back(w);
  return out;
}

bool launches_in(const Kernel& k, std::optional<int64_t> t_rows, bool rows_as_decode) {
  const bool decode_form = t_rows && (*t_rows <= kDecodeFormRows || rows_as_decode);
  switch (k.guard) {
    case RowsGuard::Always: return true;
    case RowsGuard::FewRows: return decode_form;
    case RowsGuard::ManyRows: return !decode_form;
  }
  return true;
}

}  // namespace vtc::cuda
