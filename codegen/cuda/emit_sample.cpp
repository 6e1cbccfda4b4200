// Device-side sampling.
//
// emit_sample: the IR's `sample` op (docs/ir.md "### sample") in two
// kernels, the row length and max_k constants of both:
//  1. sample_partial: the row in chunks of kChunk logits, one block of 256
//     threads per (chunk, row), 8 logits a thread; each
//     block writes its chunk's candidates: greedy rows their first maximum,
//     the others the chunk's best k in the order below (indices -1 past
//     them). The vocabulary is read once, by many blocks at a time (a
//     128k vocabulary is 63 blocks a row), where one block per row made
//     k passes over it on one SM.
//  2. sample: one block per row picks from the chunks' candidates with the
//     same rules (the global best k are among the chunks' best k, and the
//     order is by value and index, so the picks are those of one pass over
//     the row), then draws.
// Each pass of a selection takes the best element after the previous pick
// among those the threads hold in registers (vtc_block_best_regs): a warp
// reduction by shuffles, then one across the block's 8 warps.
// Per row, params = (temperature, top_k, top_p, min_p):
//   - temperature <= 0 (or NaN): greedy, argmax's reduction and rule
//     (emit_reduce.cpp: first maximum, NaN never wins, a row with nothing
//     above -inf gives 0);
//   - else k = max_k, or trunc(top_k) when 1 <= top_k < max_k, and k <= V.
//     The k candidates come from top_k's scan, "the best element strictly
//     after the previous pick" in its total order (value descending, NaN
//     last, lower index first), into shared memory; thread 0 finishes:
//     p[j] = expf((v[j] - v[0]) / temperature), total = sum p, keep = the
//     smallest prefix whose running sum of p[j] / total reaches top_p, cut
//     before the first j with p[j] < min_p * p[0], at least 1; kept = sum
//     of the kept p; z = splitmix64(seed + 0x9E3779B97F4A7C15 * (pos + 1)),
//     u = float(z >> 40) * 2^-24 * kept, pick the first j with u < the
//     running sum of p (else keep - 1).
// A draw depends only on (seed, pos, logits): no global counter, so rows
// need no single block and a replayed CUDA graph redraws only if pos moves.
// The float operations are the CPU kernel's (runtime/cpu/kernels/sample.cpp)
// in the same order (no products that fmad could contract), so the arms
// pick the same token up to 1-ulp differences of expf.
#include <fmt/format.h>

#include <algorithm>

#include "codegen/cuda/device_drafts.h"
#include "codegen/cuda/emit.h"

namespace vtc::cuda {

namespace {

constexpr long long kChunk = 2048;  // logits per partial block (8 KiB of shared memory)

// The row's k (top_k when 1 <= top_k < max_k, at most K) and the NPT
// elements each thread holds for the selection: v[e] of index g[e], -1
// past `count` (kernel text, inside the row's scope).
std::string row_k_and_registers(const std::string& count, const std::string& value, const std::string& index) {
  return fmt::format(R"(    int k = MAX_K;
    if (top_k >= 1.0f && top_k < (float)MAX_K) k = (int)top_k;
    if (k > K) k = K;
    float v[NPT];
    int g[NPT];
    for (int e = 0; e < NPT; ++e) {{
      const long long c = threadIdx.x + 256 * e;
      v[e] = c < {0} ? {1} : 0.0f;
      g[e] = c < {0} ? {2} : -1;
    }}
)",
                     count, value, index);
}

// Where a sample kernel finds its operands: parameter names, the rows as a
// C expression, and how far apart consecutive rows' settings are (4 and 2
// for the op's [S, 4] and [S, 2]; 0 where one setting serves every row).
struct SampleIo {
  std::string logits, params, seed, pos, tokens, rows;
  int params_stride = 4, seed_stride = 2;
};

// Kernel 1's body: each (chunk, row) block's candidates into scratch:
// values [rows][NB][K] floats, then indices [rows][NB][K] ints.
std::string partial_body(const SampleIo& io, int64_t vocab, int64_t max_k, int64_t k_cap, int64_t nb) {
  return fmt::format(R"(  constexpr long long N = {0}, CH = {1}, NB = {2};
  constexpr int MAX_K = {3}, K = {4}, NPT = CH / 256;
  __shared__ float sv[256];
  __shared__ long long si[256];
  const long long r = blockIdx.y, c0 = blockIdx.x * CH, n = min(CH, N - c0);
  const float* xr = {6} + r * N + c0;
  float* ov = scratch + (r * NB + blockIdx.x) * K;
  int* oi = (int*)(scratch + {5} * NB * K) + (r * NB + blockIdx.x) * K;
  const float temp = {7}[r * {9}], top_k = {7}[r * {9} + 1];
  int filled = 0;
  if (!(temp > 0.0f)) {{
    const long long best = vtc_block_argmax(xr, n, sv, si);
    if (threadIdx.x == 0) {{ ov[0] = sv[0]; oi[0] = best == 0x7fffffffffffffffLL ? -1 : (int)(c0 + best); }}
    filled = 1;
  }} else {{
{8}    float pv = 0.0f; int pi = -1;
    for (; filled < k; ++filled) {{
      pi = vtc_block_best_regs<NPT>(v, g, pv, pi, sv, (int*)si, &pv);
      if (pi < 0) break;
      if (threadIdx.x == 0) {{ ov[filled] = pv; oi[filled] = pi; }}
    }}
  }}
  for (int j = filled + threadIdx.x; j < K; j += blockDim.x) oi[j] = -1;
)",
                     vocab, kChunk, nb, max_k, k_cap, io.rows, io.logits, io.params,
                     row_k_and_registers("n", "xr[c]", "(int)(c0 + c)"), io.params_stride);
}

// Kernel 2's body: one block per row picks from the chunks' candidates
// and draws.
std::string pick_body(const SampleIo& io, int64_t max_k, int64_t k_cap, int64_t nb) {
  return fmt::format(R"(  constexpr long long NC = {0};
  constexpr int MAX_K = {2}, NPT = (int)((NC + 255) / 256);
  constexpr int K = {3};
  __shared__ float sv[256];
  __shared__ long long si[256];
  __shared__ float cand_v[K];
  __shared__ int cand_i[K];
  __shared__ float sp[K];
  for (long long r = blockIdx.x; r < {1}; r += gridDim.x) {{
    const float* xr = scratch + r * NC;
    const int* xi = (const int*)(scratch + {1} * NC) + r * NC;
    const float temp = {4}[r * {9}], top_k = {4}[r * {9} + 1];
    if (!(temp > 0.0f)) {{
      const long long best = vtc_block_argmax(xr, NC, sv, si, xi);
      if (threadIdx.x == 0) {7}[r] = best == 0x7fffffffffffffffLL ? 0 : (int)best;
      __syncthreads();
      continue;
    }}
{8}    float pv = 0.0f; int pi = -1;
    for (int j = 0; j < k; ++j) {{
      pi = vtc_block_best_regs<NPT>(v, g, pv, pi, sv, (int*)si, &pv);
      if (threadIdx.x == 0) {{ cand_v[j] = pv; cand_i[j] = (int)pi; }}
    }}
    if (threadIdx.x == 0) {{
      const float top_p = {4}[r * {9} + 2], min_p = {4}[r * {9} + 3];
      float total = 0.0f;
      for (int j = 0; j < k; ++j) {{ sp[j] = expf((cand_v[j] - cand_v[0]) / temp); total += sp[j]; }}
      int keep = k;
      float mass = 0.0f;
      for (int j = 0; j < k; ++j) {{
        if (sp[j] < min_p * sp[0]) {{ keep = j; break; }}
        mass += sp[j] / total;
        if (mass >= top_p) {{ keep = j + 1; break; }}
      }}
      if (keep < 1) keep = 1;
      float kept = 0.0f;
      for (int j = 0; j < keep; ++j) kept += sp[j];
      const unsigned long long key = (unsigned long long)(unsigned int){5}[r * {10}] | ((unsigned long long)(unsigned int){5}[r * {10} + 1] << 32);
      unsigned long long z = key + 0x9E3779B97F4A7C15ULL * ((unsigned long long)(long long){6}[r] + 1ULL);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
      z ^= z >> 31;
      const float u = (float)(z >> 40) * (1.0f / 16777216.0f) * kept;
      int pick = keep - 1;
      float acc = 0.0f;
      for (int j = 0; j < keep; ++j) {{ acc += sp[j]; if (u < acc) {{ pick = j; break; }} }}
      {7}[r] = cand_i[pick];
    }}
    __syncthreads();
  }}
)",
                     nb * k_cap, io.rows, max_k, k_cap, io.params, io.seed, io.pos, io.tokens,
                     row_k_and_registers("NC", "xr[c]", "xi[c]"), io.params_stride, io.seed_stride);
}

}  // namespace

Kernels emit_sample(const ir::Op& op, const std::string& what) {
  const ir::TensorType& lt = op.operands[0].type();
  if (lt.rank() != 2 || lt.elem.kind() != ir::ElemType::F32)
    unsupported(op, "logits must be [S, V] f32, got " + lt.str());
  const auto vocab = lt.shape[1].constant();
  if (!vocab || *vocab <= 0) unsupported(op, "the vocabulary must be a positive constant, got " + lt.str());
  const int64_t max_k = ir::SampleAttrs::of(op).max_k;
  if (max_k < 1 || max_k > 256) unsupported(op, fmt::format("max_k = {} must be in [1, 256]", max_k));
  const int64_t k_cap = std::min(max_k, *vocab), nb = (*vocab + kChunk - 1) / kChunk;
  const ir::Dim rows = lt.shape[0];
  const auto build = [&](bool pick) {
    KernelBuilder kb(pick ? op.mnemonic() : "sample_partial", pick ? what : what + " [per-chunk candidates]");
    SampleIo io;
    if (!pick) io.logits = kb.in(op.operands[0], "logits");
    io.params = kb.in(op.operands[1], "params");
    if (pick) {
      io.seed = kb.in(op.operands[2], "seed");
      io.pos = kb.in(op.operands[3], "pos");
      io.tokens = kb.out(op.results[0], "tokens");
    }
    kb.scratch(rows * (nb * k_cap * 8));
    io.rows = kb.expr(rows);
    kb.need("block_argmax");
    kb.need("block_best_regs");
    kb.body(pick ? pick_body(io, max_k, k_cap, nb) : partial_body(io, *vocab, max_k, k_cap, nb));
    if (pick) kb.launch(rows * 256, 256);
    else kb.launch(ir::Dim(nb * 256), 256, rows, 1);
    return kb.finish();
  };
  return {build(false), build(true)};
}

SampleRowsKernels sample_rows_kernels(int64_t vocab, int64_t max_k) {
  const int64_t k_cap = std::min(max_k, vocab), nb = (vocab + kChunk - 1) / kChunk;
  SampleRowsKernels out;
  out.scratch_bytes = kDecodeFormRows * nb * k_cap * 8;
  const auto build = [&](const char* mnemonic, const char* what, bool pick) {
    KernelBuilder kb(mnemonic, what);
    SampleIo io;
    io.params_stride = io.seed_stride = 0;
    if (!pick) io.logits = kb.extra("logits", "const float*");
    io.params = kb.extra("params", "const float*");
    if (pick) {
      io.seed = kb.extra("seed", "const int*");
      io.pos = kb.extra("pos", "const int*");
      io.tokens = kb.extra("tokens", "int*");
    }
    kb.extra("scratch", "float*");
    io.rows = kb.extra("rows", "long long");
    kb.need("block_argmax");
    kb.need("block_best_regs");
    kb.body(pick ? pick_body(io, max_k, k_cap, nb) : partial_body(io, vocab, max_k, k_cap, nb));
    kb.launch(ir::Dim(256), 256);  // the executor launches (chunks, rows), then rows blocks
    return kb.finish();
  };
  out.partial = build("spec_sample_partial", "device drafting: a verify step's draws [per-chunk candidates]", false);
  out.pick = build("spec_sample", "device drafting: a verify step's draws", true);
  out.chunks = nb;
  return out;
}

}  // namespace vtc::cuda
