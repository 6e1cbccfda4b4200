// Row reductions: rms_norm, softmax, sum, argmax, top_k. One block of 256
// threads per row of the last dim (grid-stride over rows); the row length
// is a constant of the kernel.
//
// Numerics follow the CPU kernels: rms_norm, softmax and sum accumulate their
// sums in double (ggml does), rms_norm computes (x * s) * w with
// s = 1 / sqrt(mean + eps); softmax writes e = exp(x - max) then e * (1/sum).
// argmax returns the first maximum (NaN never wins, an all-NaN row gives 0);
// top_k orders by value descending, NaN last, ties to the lower index, and
// selects k times "the best element strictly after the previous pick" in that
// total order, so it needs no per-row scratch and handles any vocabulary.
#include <fmt/format.h>

#include "codegen/cuda/emit.h"

namespace vtc::cuda {
namespace {

struct RowShape {
  ir::Dim rows;
  int64_t cols;
};

RowShape row_shape(const ir::Op& op, const ir::TensorType& t) {
  if (t.shape.empty()) unsupported(op, "needs at least one dim");
  auto cols = t.shape.back().constant();
  if (!cols || *cols <= 0) unsupported(op, "the last dim must be a positive constant, got " + t.str());
  return {dims_product(t.shape, 0, t.shape.size() - 1), *cols};
}

void require_f32(const ir::Op& op, const ir::Value& v, const char* what) {
  if (v.type().elem.kind() != ir::ElemType::F32) unsupported(op, fmt::format("{} must be f32, got {}", what, v.type().str()));
}

constexpr int kBlock = 256;

}  // namespace

Kernels emit_rms_norm(const ir::Op& op, const std::string& what) {
  require_f32(op, op.operands[0], "input");
  require_f32(op, op.operands[1], "weight");
  KernelBuilder kb(op.mnemonic(), what);
  const RowShape rs = row_shape(op, op.operands[0].type());
  const std::string x = kb.in(op.operands[0], "x"), w = kb.in(op.operands[1], "w"), y = kb.out(op.results[0], "y");
  const ir::Dim wn = numel(op.operands[1].type());
  const std::string widx = wn == ir::Dim(rs.cols) ? "c" : fmt::format("(r * {} + c) % {}", rs.cols, kb.expr(wn));
  kb.body(fmt::format(R"(  constexpr long long N = {0};
  for (long long r = blockIdx.x; r < {1}; r += gridDim.x) {{
    const float* xr = {2} + r * N;
    double acc = 0.0;
    for (long long c = threadIdx.x; c < N; c += blockDim.x) acc += (double)xr[c] * (double)xr[c];
    acc = vtc_block_sum_d(acc);
    const float mean = (float)(acc / (double)N);
    const float s = 1.0f / sqrtf(mean + {3});
    for (long long c = threadIdx.x; c < N; c += blockDim.x) {4}[r * N + c] = (xr[c] * s) * {5}[{6}];
  }}
)",
                      rs.cols, kb.expr(rs.rows), x, flit(ir::RmsNormAttrs::of(op).eps), y, w, widx));
  kb.launch(rs.rows * kBlock, kBlock);
  return {kb.finish()};
}

// ggml_norm per row (mean, then the variance of x - mean, both in double),
// times the optional gain, plus the optional bias.
Kernels emit_layer_norm(const ir::Op& op, const std::string& what) {
  for (size_t i = 0; i < op.operands.size(); ++i) require_f32(op, op.operands[i], i == 0 ? "input" : i == 1 ? "gain" : "bias");
  KernelBuilder kb(op.mnemonic(), what);
  const RowShape rs = row_shape(op, op.operands[0].type());
  const std::string x = kb.in(op.operands[0], "x"), y = kb.out(op.results[0], "y");
  std::string affine;
  if (op.operands.size() > 1) affine += " * " + kb.in(op.operands[1], "g") + "[c]";
  if (op.operands.size() > 2) affine += " + " + kb.in(op.operands[2], "b") + "[c]";
  kb.body(fmt::format(R"(  constexpr long long N = {0};
  for (long long r = blockIdx.x; r < {1}; r += gridDim.x) {{
    const float* xr = {2} + r * N;
    double acc = 0.0;
    for (long long c = threadIdx.x; c < N; c += blockDim.x) acc += (double)xr[c];
    acc = vtc_block_sum_d(acc);
    const float mean = (float)(acc / (double)N);
    double acc2 = 0.0;
    for (long long c = threadIdx.x; c < N; c += blockDim.x) {{ const float v = xr[c] - mean; acc2 += (double)(v * v); }}
    acc2 = vtc_block_sum_d(acc2);
    const float s = 1.0f / sqrtf((float)(acc2 / (double)N) + {3});
    for (long long c = threadIdx.x; c < N; c += blockDim.x) {4}[r * N + c] = ((xr[c] - mean) * s){5};
  }}
)",
                      rs.cols, kb.expr(rs.rows), x, flit(ir::LayerNormAttrs::of(op).eps), y, affine));
  kb.launch(rs.rows * kBlock, kBlock);
  return {kb.finish()};
}

Kernels emit_softmax(const ir::Op& op, const std::string& what) {
  require_f32(op, op.operands[0], "input");
  KernelBuilder kb(op.mnemonic(), what);
  const RowShape rs = row_shape(op, op.operands[0].type());
  const std::string x = kb.in(op.operands[0], "x"), y = kb.out(op.results[0], "y");
  kb.body(fmt::format(R"(  constexpr long long N = {0};
  for (long long r = blockIdx.x; r < {1}; r += gridDim.x) {{
    const float* xr = {2} + r * N;
    float* yr = {3} + r * N;
    float m = -__int_as_float(0x7f800000);
    for (long long c = threadIdx.x; c < N; c += blockDim.x) m = fmaxf(m, xr[c]);
    m = vtc_block_max(m);
    double sum = 0.0;
    for (long long c = threadIdx.x; c < N; c += blockDim.x) {{ const float e = expf(xr[c] - m); yr[c] = e; sum += (double)e; }}
    sum = vtc_block_sum_d(sum);
    const float inv = (float)(1.0 / sum);
    for (long long c = threadIdx.x; c < N; c += blockDim.x) yr[c] *= inv;
  }}
)",
                      rs.cols, kb.expr(rs.rows), x, y));
  kb.launch(rs.rows * kBlock, kBlock);
  return {kb.finish()};
}

// sum_rows: each thread adds a strided part of the row in double, the block
// combines the parts in double, one rounding to f32. The CPU adds in index
// order; a double sum of floats of one row rounds to the same f32 unless
// the reassociation error (~1e-16 relative) straddles a rounding boundary.
Kernels emit_sum(const ir::Op& op, const std::string& what) {
  KernelBuilder kb(op.mnemonic(), what);
  const ir::ElemType xe = op.operands[0].type().elem;
  if (!xe.is_float()) unsupported(op, "input must be f32, f16 or bf16, got " + op.operands[0].type().str());
  const RowShape rs = row_shape(op, op.operands[0].type());
  const std::string x = kb.in(op.operands[0], "x"), y = kb.out(op.results[0], "y");
  kb.body(fmt::format(R"(  constexpr long long N = {0};
  for (long long r = blockIdx.x; r < {1}; r += gridDim.x) {{
    double acc = 0.0;
    for (long long c = threadIdx.x; c < N; c += blockDim.x) acc += (double){2};
    acc = vtc_block_sum_d(acc);
    if (threadIdx.x == 0) {3}[r] = (float)acc;
  }}
)",
                      rs.cols, kb.expr(rs.rows), load_as_float(xe, x, "r * N + c"), y));
  kb.launch(rs.rows * kBlock, kBlock);
  return {kb.finish()};
}

Kernels emit_argmax(const ir::Op& op, const std::string& what) {
  require_f32(op, op.operands[0], "input");
  KernelBuilder kb(op.mnemonic(), what);
  const RowShape rs = row_shape(op, op.operands[0].type());
  const std::string x = kb.in(op.operands[0], "x"), y = kb.out(op.results[0], "y");
  kb.need("block_argmax");
  kb.body(fmt::format(R"(  constexpr long long N = {0};
  __shared__ float sv[{4}];
  __shared__ long long si[{4}];
  for (long long r = blockIdx.x; r < {1}; r += gridDim.x) {{
    const long long best = vtc_block_argmax({2} + r * N, N, sv, si);
    if (threadIdx.x == 0) {3}[r] = best == 0x7fffffffffffffffLL ? 0 : (int)best;
  }}
)",
                      rs.cols, kb.expr(rs.rows), x, y, kBlock));
  kb.launch(rs.rows * kBlock, kBlock);
  return {kb.finish()};
}

Kernels emit_top_k(const ir::Op& op, const std::string& what) {
  require_f32(op, op.operands[0], "input");
  KernelBuilder kb(op.mnemonic(), what);
  const RowShape rs = row_shape(op, op.operands[0].type());
  const int64_t k = ir::TopKAttrs::of(op).k;
  if (k < 1 || k > rs.cols) unsupported(op, fmt::format("k = {} must be in [1, {}]", k, rs.cols));
  const std::string x = kb.in(op.operands[0], "x"), vals = kb.out(op.results[0], "values"),
                    idx = kb.out(op.results[1], "indices");
  kb.need("block_best_after");
  kb.body(fmt::format(R"(  constexpr long long N = {0};
  constexpr int K = {5};
  __shared__ float sv[{6}];
  __shared__ long long si[{6}];
  for (long long r = blockIdx.x; r < {1}; r += gridDim.x) {{
    const float* xr = {2} + r * N;
    float pv = 0.0f; long long pi = -1;
    for (int j = 0; j < K; ++j) {{
      pi = vtc_block_best_after(xr, N, pv, pi, sv, si, &pv);
      if (threadIdx.x == 0) {{ {3}[r * K + j] = pv; {4}[r * K + j] = (int)pi; }}
    }}
  }}
)",
                      rs.cols, kb.expr(rs.rows), x, vals, idx, k, kBlock));
  kb.launch(rs.rows * kBlock, kBlock);
  return {kb.finish()};
}

}  // namespace vtc::cuda
