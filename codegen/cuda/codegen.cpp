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
// operands and the region's results to the body's returned values. Last,
// share_activation_codes drops the decode GEMVs' repeated quantizations of
// one x (emit_gemv.cpp).
#include <fmt/format.h>

#include <llvm/ADT/DenseMap.h>

#include "codegen/cuda/emit.h"
#include "ir/fused_kinds.h"
#include "ir/op_attrs.h"
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
Kernels emit_CausalConv1d(const Ctx& c, const ir::Op& op) { return emit_causal_conv1d(c.module, op, c.what); }
Kernels emit_DeltaRule(const Ctx& c, const ir::Op& op) { return emit_delta_rule(c.module, op, c.what); }
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

void walk(const ir::Module& m, const ir::Function& fn, StepKernels& out);

// Non-elementwise regions: the body's ops in order, wired by aliases.
void lower_region_as_sequence(const ir::Module& m, const ir::Op& op, StepKernels& out) {
  const ir::Function& body = *op.body;
  for (size_t i = 0; i < body.args.size() && i < op.operands.size(); ++i)
    out.aliases.push_back({body.args[i].data(), op.operands[i].data(), 0});
  StepKernels inner;
  inner.function = out.function;
  walk(m, body, inner);
  for (auto& k : inner.kernels) out.kernels.push_back(std::move(k));
  for (auto& a : inner.aliases) out.aliases.push_back(a);
  for (auto& w : inner.weights) out.weights.push_back(w);
  for (size_t i = 0; i < op.results.size() && i < inner.returns.size(); ++i)
    out.aliases.push_back({op.results[i].data(), inner.returns[i], 0});
}

void walk(const ir::Module& m, const ir::Function& fn, StepKernels& out) {
  for (size_t i = 0; i < fn.ops.size(); ++i) {
    const ir::Op& op = *fn.ops[i];
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
      lower_region_as_sequence(m, op, out);
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
    return fmt::format("CUDA has no one-kernel form of a {} region: it runs its ops' kernels", ir::enum_name(kind));
  if (!fused_elementwise_composable(fused)) return "a value is not float, or an operand broadcasts where the body reshapes";
  return "";
}

StepKernels generate_step(const ir::Module& module, const ir::Function& fn) {
  // The kernels read ggml's rows layout; a weight repacked for the CPU's
  // kernels (weight-layout{target=cpu}) would be misread.
  for (const auto& w : module.weights)
    if (w.type.elem.layout() != WeightLayout::Rows)
      throw Error(fmt::format("cuda: weight @{} is {}, a CPU weight layout; the CUDA kernels read the rows layout ({}): "
                              "lower the module for target cuda (no weight-layout{{target=cpu}} pass)",
                              w.name, w.type.elem.name(), ir::ElemType::quant(w.type.elem.quant_type()).name()));
  StepKernels out;
  out.function = fn.name;
  walk(module, fn, out);
  share_activation_codes(out);
  return out;
}

}  // namespace vtc::cuda
