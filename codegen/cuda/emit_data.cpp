// Data movement (transpose, concat, slice, gather, scatter), state rows
// (state_read, state_write of plain and ring states) and the n-gram ops.
//
// All are index arithmetic over a flat output index with a grid-stride
// loop; symbolic dims (T, S, ...) are kernel parameters. Semantics are the
// CPU's (runtime/cpu/op_exec.cpp):
//  - scatter: a copy of x, then each update slice; when an index repeats,
//    the later one wins (a thread skips its slice if a later index equals
//    its own), so the result does not depend on thread order;
//  - state_read / state_write: row s of the step is the state's row
//    slots[s] (the executor uploads the step's slot list once per shape);
//  - ngram_hash: one thread per token walks back through the step (same
//    sequence) then the history row, and hashes in 64-bit unsigned
//    arithmetic (wrapping multiply, xor, modulo) on the device, so decode
//    never drains token ids to the host (DESIGN.md);
//  - ngram_roll: one thread per sequence copies its history row and
//    appends its tokens of the step in order.
#include <fmt/format.h>

#include "codegen/cuda/emit.h"

namespace vtc::cuda {
namespace {

const char* kLoop = "  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < {}; e += (long long)gridDim.x * blockDim.x) {{\n";

std::string loop(KernelBuilder& kb, const ir::Dim& n) { return fmt::format(fmt::runtime(kLoop), kb.expr(n)); }

void no_quant(const ir::Op& op) {
  for (const auto& v : op.operands)
    if (v.type().elem.is_quant()) unsupported(op, "quantized operands are not supported (use embed for quantized rows)");
}

Kernels transpose(const ir::Op& op, const std::string& what) {
  KernelBuilder kb(op.mnemonic(), what);
  const ir::TensorType& xt = op.operands[0].type();
  const ir::TensorType& yt = op.results[0].type();
  const std::vector<int64_t> perm = ir::TransposeAttrs::of(op).perm;
  const std::string x = kb.in(op.operands[0], "x"), y = kb.out(op.results[0], "y");
  const size_t rank = xt.rank();
  // Input strides, then the output index decomposed dim by dim (last first).
  std::string code;
  for (size_t i = 0; i < rank; ++i)
    code += fmt::format("    const long long in_stride{} = {};\n", i, kb.expr(dims_product(xt.shape, i + 1, rank)));
  code += "    long long rest = e, src = 0;\n";
  for (size_t d = rank; d-- > 0;)
    code += fmt::format("    {{ const long long n = {}; src += (rest % n) * in_stride{}; rest /= n; }}\n", kb.expr(yt.shape[d]),
                        perm[d]);
  kb.body(loop(kb, numel(yt)) + code + fmt::format("    {}[e] = {}[src];\n  }}\n", y, x));
  kb.launch(numel(yt), 256);
  return {kb.finish()};
}

Kernels concat(const ir::Op& op, const std::string& what) {
  const ir::TensorType& yt = op.results[0].type();
  const size_t axis = size_t(ir::ConcatAttrs::of(op).axis);
  Kernels out;
  ir::Dim offset = 0;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    KernelBuilder kb(op.mnemonic(), fmt::format("{} [operand {}]", what, i));
    const ir::TensorType& xt = op.operands[i].type();
    const std::string x = kb.in(op.operands[i], "x"), y = kb.out(op.results[0], "y");
    const ir::Dim chunk = dims_product(xt.shape, axis, xt.rank()), out_chunk = dims_product(yt.shape, axis, yt.rank());
    kb.body(loop(kb, numel(xt)) + fmt::format("    const long long o = e / {0}, r = e % {0};\n    {1}[o * {2} + {3} + r] = {4}[e];\n  }}\n",
                                              kb.expr(chunk), y, kb.expr(out_chunk), kb.expr(offset), x));
    kb.launch(numel(xt), 256);
    out.push_back(kb.finish());
    offset = offset + chunk;
  }
  return out;
}

Kernels slice(const ir::Op& op, const std::string& what) {
  KernelBuilder kb(op.mnemonic(), what);
  const ir::TensorType& xt = op.operands[0].type();
  const ir::TensorType& yt = op.results[0].type();
  const size_t axis = size_t(ir::SliceAttrs::of(op).axis);
  const std::string x = kb.in(op.operands[0], "x"), y = kb.out(op.results[0], "y");
  const ir::Dim inner = dims_product(xt.shape, axis + 1, xt.rank());
  const ir::Dim in_chunk = xt.shape[axis] * inner, out_chunk = yt.shape[axis] * inner;
  kb.body(loop(kb, numel(yt)) +
          fmt::format("    const long long o = e / {0}, r = e % {0};\n    {1}[e] = {2}[o * {3} + {4} * {5} + r];\n  }}\n",
                      kb.expr(out_chunk), y, x, kb.expr(in_chunk), kb.expr(ir::SliceAttrs::of(op).start), kb.expr(inner)));
  kb.launch(numel(yt), 256);
  return {kb.finish()};
}

// gather and scatter: x split at `axis` into outer x axis_len x inner.
struct Split {
  ir::Dim outer, axis_len, inner;
};
Split split_at(const ir::TensorType& t, size_t axis) {
  return {dims_product(t.shape, 0, axis), t.shape[axis], dims_product(t.shape, axis + 1, t.rank())};
}

Kernels gather(const ir::Op& op, const std::string& what) {
  KernelBuilder kb(op.mnemonic(), what);
  const Split s = split_at(op.operands[0].type(), size_t(ir::GatherAttrs::of(op).axis));
  const std::string x = kb.in(op.operands[0], "x"), idx = kb.in(op.operands[1], "idx"), y = kb.out(op.results[0], "y");
  const ir::Dim n_idx = numel(op.operands[1].type());
  // An out-of-range index yields zeros (the CPU throws; a kernel cannot).
  kb.body(loop(kb, numel(op.results[0].type())) +
          fmt::format(R"(    const long long inner = {0}, n_idx = {1}, len = {2};
    const long long o = e / (n_idx * inner), i = (e / inner) % n_idx, r = e % inner;
    const long long j = (long long){3}[i];
    {4}[e] = (j >= 0 && j < len) ? {5}[(o * len + j) * inner + r] : 0;
  }}
)",
                      kb.expr(s.inner), kb.expr(n_idx), kb.expr(s.axis_len), idx, y, x));
  kb.launch(numel(op.results[0].type()), 256);
  return {kb.finish()};
}

Kernels scatter(const ir::Op& op, const std::string& what) {
  Kernels out;
  {
    KernelBuilder kb("copy", what + " [copy]");
    const std::string x = kb.in(op.operands[0], "x"), y = kb.out(op.results[0], "y");
    const ir::Dim n = numel(op.operands[0].type());
    kb.body(loop(kb, n) + fmt::format("    {}[e] = {}[e];\n  }}\n", y, x));
    kb.launch(n, 256);
    out.push_back(kb.finish());
  }
  KernelBuilder kb(op.mnemonic(), what);
  const Split s = split_at(op.operands[0].type(), size_t(ir::ScatterAttrs::of(op).axis));
  const std::string idx = kb.in(op.operands[1], "idx"), upd = kb.in(op.operands[2], "upd"), y = kb.out(op.results[0], "y");
  const ir::Dim n_idx = numel(op.operands[1].type());
  kb.body(loop(kb, numel(op.operands[2].type())) +
          fmt::format(R"(    const long long inner = {0}, n_idx = {1}, len = {2};
    const long long o = e / (n_idx * inner), i = (e / inner) % n_idx, r = e % inner;
    const long long j = (long long){3}[i];
    if (j < 0 || j >= len) continue;
    bool later = false;
    for (long long k = i + 1; k < n_idx && !later; ++k) later = (long long){3}[k] == j;
    if (!later) {4}[(o * len + j) * inner + r] = {5}[e];
  }}
)",
                      kb.expr(s.inner), kb.expr(n_idx), kb.expr(s.axis_len), idx, y, upd));
  kb.launch(numel(op.operands[2].type()), 256);
  out.push_back(kb.finish());
  return out;
}

}  // namespace

Kernels emit_data_movement(const ir::Op& op, const std::string& what) {
  no_quant(op);
  switch (op.kind) {
    case ir::OpKind::Transpose: return transpose(op, what);
    case ir::OpKind::Concat: return concat(op, what);
    case ir::OpKind::Slice: return slice(op, what);
    case ir::OpKind::Gather: return gather(op, what);
    case ir::OpKind::Scatter: return scatter(op, what);
    default: unsupported(op, "not a data-movement op");
  }
}

Kernels emit_state(const ir::Module& m, const ir::Op& op, const std::string& what) {
  const std::string name = *ir::state_symbol(op);
  const ir::StateDecl* decl = m.find_state(name);
  if (!decl) unsupported(op, "unknown state @" + name);
  if (decl->kind == ir::StateKind::Paged) unsupported(op, "paged states are read by attention, not state_read/state_write");
  const bool write = op.kind == ir::OpKind::StateWrite;
  const ir::Value& v = write ? op.operands[0] : op.results[0];
  KernelBuilder kb(op.mnemonic(), what);
  const ir::Dim row = dims_product(decl->type.shape, 1, decl->type.rank());
  const std::string ct = c_type(decl->type.elem);
  const std::string st = kb.state_rows(name, "state", write ? ct + "*" : "const " + ct + "*");
  const std::string slots = kb.slots();
  const std::string buf = write ? kb.in(v, "x") : kb.out(v, "y");
  const ir::Dim n = numel(v.type());
  const std::string srow = fmt::format("(long long){}[e / ROW] * ROW + e % ROW", slots);
  kb.body(fmt::format("  const long long ROW = {};\n", kb.expr(row)) + loop(kb, n) +
          (write ? fmt::format("    {}[{}] = {}[e];\n  }}\n", st, srow, buf) : fmt::format("    {}[e] = {}[{}];\n  }}\n", buf, st, srow)));
  kb.launch(n, 256);
  return {kb.finish()};
}

Kernels emit_ngram(const ir::Op& op, const std::string& what) {
  KernelBuilder kb(op.mnemonic(), what);
  if (op.kind == ir::OpKind::NgramRoll) {
    const ir::TensorType& ht = op.operands[0].type();
    const std::string hist = kb.in(op.operands[0], "history"), ids = kb.in(op.operands[1], "ids"),
                      seq = kb.in(op.operands[2], "seq"), y = kb.out(op.results[0], "y");
    kb.body(fmt::format(R"(  const long long W = {0}, ROWS = {1}, T = {2};
  for (long long s = blockIdx.x * (long long)blockDim.x + threadIdx.x; s < ROWS; s += (long long)gridDim.x * blockDim.x) {{
    long long* row = {3} + s * W;
    for (long long i = 0; i < W; ++i) row[i] = {4}[s * W + i];
    for (long long t = 0; t < T; ++t) {{
      if ({5}[t] != s) continue;
      for (long long i = 0; i + 1 < W; ++i) row[i] = row[i + 1];
      row[W - 1] = (long long){6}[t];
    }}
  }}
)",
                        kb.expr(ht.shape.back()), kb.expr(dims_product(ht.shape, 0, ht.rank() - 1)),
                        kb.expr(numel(op.operands[1].type())), y, hist, seq, ids));
    kb.launch(dims_product(ht.shape, 0, ht.rank() - 1), 64);
    return {kb.finish()};
  }
  const ir::NgramHashAttrs attrs = ir::NgramHashAttrs::of(op);
  const int64_t n = attrs.n, hpg = attrs.heads_per_gram, eos = attrs.eos;
  const auto &mult = attrs.mult, &vocab = attrs.vocab, &offset = attrs.offset;
  const int64_t heads = (n - 1) * hpg;
  if (n < 2 || n > 16 || int64_t(mult.size()) < n || int64_t(vocab.size()) < heads || int64_t(offset.size()) < heads)
    unsupported(op, "n must be in [2, 16] with n multipliers and (n-1)*heads_per_gram vocab sizes and offsets");
  auto list = [](const std::vector<int64_t>& v, size_t count) {
    std::string s;
    for (size_t i = 0; i < count; ++i) s += fmt::format("{}{}ULL", i ? ", " : "", uint64_t(v[i]));
    return s;
  };
  const std::string ids = kb.in(op.operands[0], "ids"), seq = kb.in(op.operands[1], "seq"),
                    hist = kb.in(op.operands[2], "history"), y = kb.out(op.results[0], "y");
  const ir::TensorType& ht = op.operands[2].type();
  kb.body(fmt::format(R"(  constexpr int NG = {0}, HPG = {1}, HEADS = {2};
  constexpr long long EOS = {3}LL;
  const unsigned long long mult[NG] = {{{4}}};
  const unsigned long long vocab[HEADS] = {{{5}}};
  const unsigned long long offset[HEADS] = {{{6}}};
  const long long T = {7}, W = {8};
  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < T; t += (long long)gridDim.x * blockDim.x) {{
    long long ctx[NG];
    for (int k = 0; k < NG; ++k) ctx[k] = EOS;
    ctx[0] = (long long){9}[t];
    const int s = {10}[t];
    long long step_back = t - 1, hist_back = W - 1;
    for (int k = 1; k < NG; ++k) {{
      long long prev = EOS;
      while (step_back >= 0 && {10}[step_back] != s) --step_back;
      if (step_back >= 0) prev = (long long){9}[step_back--];
      else if (hist_back >= 0) prev = {11}[s * W + hist_back--];
      if (prev < 0 || prev == EOS) break;
      ctx[k] = prev;
    }}
    unsigned long long mixed = (unsigned long long)ctx[0] * mult[0];
    for (int g = 2; g <= NG; ++g) {{
      mixed ^= (unsigned long long)ctx[g - 1] * mult[g - 1];
      for (int j = 0; j < HPG; ++j) {{
        const int h = (g - 2) * HPG + j;
        {12}[t * HEADS + h] = (int)(mixed % vocab[h] + offset[h]);
      }}
    }}
  }}
)",
                      n, hpg, heads, eos, list(mult, size_t(n)), list(vocab, size_t(heads)), list(offset, size_t(heads)),
                      kb.expr(numel(op.operands[0].type())), kb.expr(ht.shape.back()), ids, seq, hist, y));
  kb.launch(numel(op.operands[0].type()), 64);
  return {kb.finish()};
}

}  // namespace vtc::cuda
