// Elementwise ops and fused elementwise regions: one thread per output
// element (grid-stride loop), each operand read at the element index or,
// when it is smaller (a trailing-shape broadcast, docs/ir.md `add`), at the
// index modulo its element count.
//
// A fused elementwise region composes its body: every body op becomes one
// `const float` local computed from earlier locals, so the region reads each
// operand once and writes each result once, with no intermediate buffers.
// Scalar formulas follow the CPU kernels (runtime/cpu/kernels): silu is
// x / (1 + e^-x), softplus switches to x above 20, sign and clamp use
// ggml's comparisons (sign(NaN) = 0, clamp(NaN) = max), gelu goes through f16
// like ggml's table (f16 in, tanh approximation, f16 out, identity beyond
// +-10), and a cast to f16/bf16 rounds as the CPU's conversion does.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "codegen/cuda/emit.h"

namespace vtc::cuda {
namespace {

// The float expression of one elementwise op over operand expressions.
std::string scalar_expr(const ir::Op& op, const std::vector<std::string>& a, bool& needs_gelu) {
  switch (op.kind) {
    case ir::OpKind::Add: return fmt::format("({} + {})", a[0], a[1]);
    case ir::OpKind::Mul: return fmt::format("({} * {})", a[0], a[1]);
    case ir::OpKind::Div: return fmt::format("__fdiv_rn({}, {})", a[0], a[1]);
    case ir::OpKind::Silu: return fmt::format("({0} / (1.0f + expf(-{0})))", a[0]);
    case ir::OpKind::Sigmoid: return fmt::format("(1.0f / (1.0f + expf(-{})))", a[0]);
    case ir::OpKind::Softplus: return fmt::format("({0} > 20.0f ? {0} : logf(1.0f + expf({0})))", a[0]);
    case ir::OpKind::Exp: return fmt::format("expf({})", a[0]);
    case ir::OpKind::Tanh: return fmt::format("tanhf({})", a[0]);
    case ir::OpKind::Neg: return fmt::format("(-{})", a[0]);
    case ir::OpKind::Scale: return fmt::format("({} * {})", a[0], flit(ir::ScaleAttrs::of(op).factor));
    case ir::OpKind::Abs: return fmt::format("fabsf({})", a[0]);
    case ir::OpKind::Sign: return fmt::format("({0} > 0.0f ? 1.0f : ({0} < 0.0f ? -1.0f : 0.0f))", a[0]);
    case ir::OpKind::Sqrt: return fmt::format("sqrtf({})", a[0]);  // IEEE-rounded: NVRTC's default -prec-sqrt
    case ir::OpKind::Clamp: {
      // ggml's MAX(MIN(x, max), min) ternaries, not fminf/fmaxf: NaN -> max,
      // and a signed-zero tie yields the bound, as on the CPU.
      const ir::ClampAttrs bounds = ir::ClampAttrs::of(op);
      const std::string hi = flit(bounds.max), lo = flit(bounds.min);
      const std::string m = fmt::format("({0} < {1} ? {0} : {1})", a[0], hi);
      return fmt::format("({0} > {1} ? {0} : {1})", m, lo);
    }
    case ir::OpKind::Gelu: needs_gelu = true; return fmt::format("vtc_gelu({})", a[0]);
    case ir::OpKind::Cast: {
      const ir::ElemType to = op.results[0].type().elem;
      if (to.kind() == ir::ElemType::F16) return fmt::format("vtc_h2f(vtc_f2h({}))", a[0]);
      if (to.kind() == ir::ElemType::BF16) return fmt::format("vtc_bf2f(vtc_f2bf({}))", a[0]);
      if (to.kind() == ir::ElemType::F32) return a[0];
      return "";
    }
    default: return "";
  }
}

bool float_elem(const ir::ElemType& e) { return e.is_float(); }

// Index expression for an operand of type `t` in a loop over the elements
// of `result`: the element index, the index modulo the operand's size (a
// trailing-shape broadcast), or, when the operand has size-1 dims, the sum
// over its other dims of the result coordinate times the operand's stride.
std::string index_for(KernelBuilder& kb, const ir::TensorType& t, const ir::TensorType& result) {
  const ir::Dim n = numel(t), total = numel(result);
  if (n == total) return "i";
  const ir::Shape &b = t.shape, &y = result.shape;
  const size_t lead = y.size() - b.size();
  if (std::equal(b.begin(), b.end(), y.begin() + long(lead))) return fmt::format("(i % {})", kb.expr(n));
  std::string sum;
  ir::Dim y_stride(1), b_stride(1);
  for (size_t d = y.size(); d-- > lead;) {
    if (!(b[d - lead] == ir::Dim(1)))
      sum += fmt::format("{}((i / {}) % {}) * {}", sum.empty() ? "" : " + ", kb.expr(y_stride), kb.expr(y[d]),
                         kb.expr(b_stride));
    y_stride = y_stride * y[d];
    b_stride = b_stride * b[d - lead];
  }
  return sum.empty() ? "0" : "(" + sum + ")";
}

Kernels emit_cast(const ir::Op& op, const std::string& what) {
  KernelBuilder kb(op.mnemonic(), what);
  const ir::TensorType& xt = op.operands[0].type();
  const ir::TensorType& yt = op.results[0].type();
  if (xt.elem.is_quant() || yt.elem.is_quant()) unsupported(op, "casts of quantized values are not supported");
  const std::string x = kb.in(op.operands[0], "x"), y = kb.out(op.results[0], "y");
  const ir::Dim n = numel(yt);
  const std::string ns = kb.expr(n);
  std::string stmt;
  if (xt.elem.is_integer() && yt.elem.is_integer()) stmt = fmt::format("{}[i] = ({}){}[i];", y, c_type(yt.elem), x);
  else if (yt.elem.is_integer()) stmt = fmt::format("{}[i] = ({})(long long){};", y, c_type(yt.elem), load_as_float(xt.elem, x, "i"));
  else stmt = store_from_float(yt.elem, y, "i", load_as_float(xt.elem, x, "i"));
  kb.body(fmt::format("  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < {}; i += (long long)gridDim.x * blockDim.x)\n    {}\n", ns, stmt));
  kb.launch(n, 256);
  return {kb.finish()};
}

}  // namespace

std::string elementwise_scalar_expr(const ir::Op& op, const std::vector<std::string>& operands, bool& needs_gelu) {
  return scalar_expr(op, operands, needs_gelu);
}

Kernels emit_elementwise(const ir::Function&, const ir::Op& op, const std::string& what) {
  if (op.kind == ir::OpKind::Cast) return emit_cast(op, what);
  KernelBuilder kb(op.mnemonic(), what);
  const ir::TensorType& yt = op.results[0].type();
  for (const auto& v : op.operands)
    if (!float_elem(v.type().elem)) unsupported(op, "elementwise arithmetic needs float operands, got " + v.type().str());
  const ir::Dim n = numel(yt);
  std::vector<std::string> args;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    const std::string p = kb.in(op.operands[i], fmt::format("a{}", i));
    args.push_back(load_as_float(op.operands[i].type().elem, p, index_for(kb, op.operands[i].type(), yt)));
  }
  const std::string y = kb.out(op.results[0], "y");
  bool gelu = false;
  const std::string e = scalar_expr(op, args, gelu);
  std::string body = fmt::format(
      "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < {}; i += (long long)gridDim.x * blockDim.x) {{\n"
      "    {}\n  }}\n",
      kb.expr(n), store_from_float(yt.elem, y, "i", e));
  kb.body(body);
  if (gelu) kb.need("gelu");
  kb.launch(n, 256);
  return {kb.finish()};
}

Kernels emit_swiglu_activation(const ir::Op& silu, const ir::Op& mul, const std::string& what) {
  KernelBuilder kb("swiglu_act", what);
  const ir::TensorType& yt = mul.results[0].type();
  const ir::Value& u = mul.operands[0].data() == silu.results[0].data() ? mul.operands[1] : mul.operands[0];
  const std::string g = kb.in(silu.operands[0], "g"), up = kb.in(u, "u");
  const std::string y = kb.out(mul.results[0], "y");
  bool gelu = false;
  const std::string act = scalar_expr(silu, {g + "[i]"}, gelu);
  const bool silu_first = mul.operands[0].data() == silu.results[0].data();
  const std::string e = scalar_expr(mul, silu_first ? std::vector<std::string>{act, up + "[i]"}
                                                    : std::vector<std::string>{up + "[i]", act},
                                    gelu);
  const ir::Dim n = numel(yt);
  kb.body(fmt::format(
      "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < {}; i += (long long)gridDim.x * blockDim.x) {{\n"
      "    {}[i] = {};\n  }}\n",
      kb.expr(n), y, e));
  if (gelu) kb.need("gelu");
  kb.launch(n, 256);
  return {kb.finish()};
}

bool fused_elementwise_composable(const ir::Op& op) {
  const ir::Function& body = *op.body;
  const ir::Dim n = numel(op.results[0].type());
  bool composable = true;
  for (const auto& r : op.results) composable = composable && numel(r.type()) == n && float_elem(r.type().elem);
  // An operand with size-1 dims broadcasts by coordinates, which a reshape
  // in the body would invalidate: such regions run op by op.
  const ir::Shape& y_shape = op.results[0].type().shape;
  for (const auto& a : op.operands) {
    const ir::Shape& s = a.type().shape;
    const bool trailing = s.size() <= y_shape.size() && std::equal(s.begin(), s.end(), y_shape.end() - long(s.size()));
    composable = composable && float_elem(a.type().elem) && (numel(a.type()) == n || trailing);
  }
  for (const auto& bop : body.ops) {
    if (bop->kind == ir::OpKind::Return || bop->kind == ir::OpKind::Reshape) continue;
    if (!bop->info().is_elementwise()) composable = false;
    for (const auto& r : bop->results) composable = composable && float_elem(r.type().elem);
  }
  return composable;
}

// One kernel for a fused elementwise region that composes (emit_Fused
// checks; generate_step wires every other region as a sequence of its body
// ops' kernels, codegen.cpp).
Kernels emit_fused(const ir::Op& op, const std::string& what) {
  const ir::Function& body = *op.body;
  const ir::Dim n = numel(op.results[0].type());
  KernelBuilder kb("fused", what);
  std::map<const ir::ValueData*, std::string> local;
  std::string code;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    const std::string p = kb.in(op.operands[i], fmt::format("a{}", i));
    local[body.args[i].data()] = fmt::format("v_a{}", i);
    code += fmt::format("    const float v_a{} = {};\n", i,
                        load_as_float(op.operands[i].type().elem, p, index_for(kb, op.operands[i].type(), op.results[0].type())));
  }
  std::vector<std::string> outs;
  for (size_t i = 0; i < op.results.size(); ++i) outs.push_back(kb.out(op.results[i], fmt::format("y{}", i)));
  bool gelu = false;
  int next = 0;
  for (const auto& bop : body.ops) {
    if (bop->kind == ir::OpKind::Reshape) {
      local[bop->results[0].data()] = local.at(bop->operands[0].data());
      continue;
    }
    if (bop->kind == ir::OpKind::Return) {
      for (size_t i = 0; i < bop->operands.size() && i < outs.size(); ++i)
        code += "    " + store_from_float(op.results[i].type().elem, outs[i], "i", local.at(bop->operands[i].data())) + "\n";
      continue;
    }
    std::vector<std::string> args;
    for (const auto& v : bop->operands) args.push_back(local.at(v.data()));
    const std::string name = fmt::format("v{}", next++);
    code += fmt::format("    const float {} = {};  // {}\n", name, scalar_expr(*bop, args, gelu), bop->mnemonic());
    local[bop->results[0].data()] = name;
  }
  if (gelu) kb.need("gelu");
  kb.body(fmt::format(
      "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < {}; i += (long long)gridDim.x * blockDim.x) {{\n{}  }}\n",
      kb.expr(n), code));
  kb.launch(n, 256);
  return {kb.finish()};
}

}  // namespace vtc::cuda
