// Quantized matmul and embedding lookup, reading weight blocks directly.
//
// y[m, n] = sum_k x[m, k] * w[n, k], w in GGUF layout (rows of blocks).
// Two shapes of kernel, chosen from the row count M of x:
//  - GEMV (M without the prefill symbol T: decode's S rows, the head's R
//    rows): emit_gemv.cpp (coalesced window staging, q8 activation codes
//    and __dp4a for integer blocks).
//  - GEMM (prefill, M = T...): 64x64 output tiles, 256 threads, 4x4
//    outputs per thread; per 32-wide k step, 64 threads decode one chunk of
//    a weight row each into shared memory and all threads stage 64x32
//    activations, then multiply from shared memory.
// K not a multiple of 32 (float weights only) and embedding tables of such
// rows get plain one-thread-per-output kernels instead.
// Numerics (docs/cuda.md): weights decode to the CPU's floats; in the GEMM
// activations stay f32 for quantized weights (the CPU rounds them to q8
// blocks first; the GEMV rounds them as the CPU does), and are rounded to
// f16 / bf16 for f16 / bf16 weights as the CPU does; sums are f32.
#include <fmt/format.h>

#include <cstdlib>
#include <functional>
#include <map>

#include "codegen/cuda/emit.h"
#include "ir/fused_kinds.h"
#include "support/error.h"

namespace vtc::cuda {

GgmlType weight_type(const ir::ElemType& e) {
  if (e.layout() != WeightLayout::Rows)
    throw Error(fmt::format("cuda: weight type {} is a CPU weight layout; the CUDA kernels read the rows layout", e.name()));
  switch (e.kind()) {
    case ir::ElemType::F32: return GgmlType::F32;
    case ir::ElemType::F16: return GgmlType::F16;
    case ir::ElemType::BF16: return GgmlType::BF16;
    case ir::ElemType::Quant: return e.quant_type();
    default: return GgmlType::I32;
  }
}

std::string round_activation(GgmlType w, const std::string& v) {
  if (w == GgmlType::F16) return fmt::format("vtc_h2f(vtc_f2h({}))", v);
  if (w == GgmlType::BF16) return fmt::format("vtc_bf2f(vtc_f2bf({}))", v);
  return v;
}

bool has_symbol(const ir::Dim& d, const std::string& sym) {
  const std::string s = d.str();
  for (size_t i = s.find(sym); i != std::string::npos; i = s.find(sym, i + 1)) {
    const bool start = i == 0 || !std::isalnum(static_cast<unsigned char>(s[i - 1]));
    const bool end = i + sym.size() >= s.size() || !std::isalnum(static_cast<unsigned char>(s[i + sym.size()]));
    if (start && end) return true;
  }
  return false;
}

namespace {

// K not a multiple of 32 (float weights only: quantized rows are whole
// 32-value blocks), e.g. qwen4exp's hyper-connection projections (K = 8):
// one thread per output, k in order, the activation rounded as above.
Kernels emit_matmul_small_k(const ir::Op& op, const std::string& what, const ir::Dim& m, int64_t N, int64_t K,
                            const MatmulIo& io) {
  const ir::ElemType& we = op.operands[1].type().elem;
  KernelBuilder kb("matmul_small_k", what);
  const std::string x = kb.in(io.x, "x"), w = kb.in(io.w, "w");
  const StoreFn store = io.bind_out(kb);
  kb.body(fmt::format(R"(  constexpr long long N = {0}, K = {1};
  const long long M = {2};
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < M * N; i += (long long)gridDim.x * blockDim.x) {{
    const long long r = i / N, n = i % N;
    const float* xr = {3} + r * K;
    float s = 0.0f;
    for (long long k = 0; k < K; ++k) s += {4} * {5};
    {6}
  }}
)",
                      N, K, kb.expr(m), x, load_as_float(we, w, "n * K + k"), round_activation(weight_type(we), "xr[k]"),
                      store("s", "r", "n")));
  kb.launch(m * N, 128);
  return {kb.finish()};
}

// A float table whose rows are not a multiple of 32 wide (qwen4exp's tiny
// per-layer embeddings, 16 columns): one thread per output element.
Kernels emit_embed_narrow(const ir::Op& op, const std::string& what, int64_t rows, int64_t cols) {
  const ir::ElemType& te = op.operands[0].type().elem;
  KernelBuilder kb("embed_narrow", what);
  const std::string table = kb.in(op.operands[0], "table"), ids = kb.in(op.operands[1], "ids"),
                    y = kb.out(op.results[0], "y");
  const ir::Dim n = numel(op.operands[1].type());
  kb.body(fmt::format(R"(  constexpr long long V = {0}, C = {1};
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < {2} * C; e += (long long)gridDim.x * blockDim.x) {{
    const long long t = e / C, c = e % C;
    const long long id = (long long){3}[t];
    {4}[e] = id >= 0 && id < V ? {5} : 0.0f;
  }}
)",
                      rows, cols, kb.expr(n), ids, y, load_as_float(te, table, "id * C + c")));
  kb.launch(n * cols, 128);
  return {kb.finish()};
}


// The GEMV/GEMM (or small-K) kernel of `op`, reading io.x and io.w and
// storing each output value through io's store.
Kernels matmul_kernels(const ir::Op& op, const std::string& what, const MatmulIo& io) {
  const ir::TensorType& xt = op.operands[0].type();
  const ir::TensorType& wt = op.operands[1].type();
  if (xt.elem.kind() != ir::ElemType::F32) unsupported(op, "the input must be f32, got " + xt.str());
  const GgmlType wtype = weight_type(wt.elem);
  if (!quant_supported(wtype)) unsupported(op, "weight type " + wt.elem.name() + " has no CUDA kernel");
  auto n_rows = wt.shape[0].constant(), k_cols = wt.shape[1].constant();
  if (!n_rows || !k_cols) unsupported(op, "the weight shape must be constant");
  const ir::Dim m = dims_product(xt.shape, 0, xt.shape.size() - 1);
  if (*k_cols % 32 != 0) {
    if (wt.elem.kind() == ir::ElemType::Quant)
      unsupported(op, fmt::format("K = {} is not a multiple of 32", *k_cols));
    return emit_matmul_small_k(op, what, m, *n_rows, *k_cols, io);
  }
  const int64_t N = *n_rows, K = *k_cols, chunks = K / 32;
  if (!tiled_rows(m)) return emit_gemv(op, what, m, N, K, io);
  // VTC_CUDA_GEMM=fma keeps the FP32 tiles below (before/after figures,
  // or to rule the tensor-core path out on a GPU): docs/cuda.md.
  static const bool fma_forced = [] {
    const char* v = std::getenv("VTC_CUDA_GEMM");
    return v && std::string(v) == "fma";
  }();
  if (gemm_mma_supported(wtype, K) && !fma_forced) return emit_gemm_mma(op, what, m, N, K, io);
  KernelBuilder kb("gemm", what);
  const std::string x = kb.in(io.x, "x"), w = kb.in(io.w, "w");
  const StoreFn store = io.bind_out(kb);
  const std::string deq = deq32_helper(wtype);
  kb.need(deq);
  const uint64_t row_bytes = *ggml_bytes_for(wtype, uint64_t(K));
  kb.body(fmt::format(R"(  constexpr long long N = {0}, K = {1}, CHUNKS = {2}, ROW_BYTES = {3};
  const long long M = {4};
  __shared__ float xs[64][33];
  __shared__ float ws[64][33];
  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
  const long long n0 = blockIdx.x * 64LL;
  for (long long m0 = blockIdx.y * 64LL; m0 < M; m0 += gridDim.y * 64LL) {{
    float acc[4][4] = {{}};
    for (long long c = 0; c < CHUNKS; ++c) {{
      __syncthreads();
      for (int e = tid; e < 64 * 32; e += 256) {{
        const int r = e >> 5, l = e & 31;
        const float v = m0 + r < M ? {5}[(m0 + r) * K + 32 * c + l] : 0.0f;
        xs[r][l] = {6};
      }}
      if (tid < 64) {{
        float wv[32];
        if (n0 + tid < N) {7}((const u8*){8} + (n0 + tid) * ROW_BYTES, c, wv);
        else for (int l = 0; l < 32; ++l) wv[l] = 0.0f;
        for (int l = 0; l < 32; ++l) ws[tid][l] = wv[l];
      }}
      __syncthreads();
      for (int l = 0; l < 32; ++l) {{
        float a[4], b[4];
        for (int i = 0; i < 4; ++i) {{ a[i] = xs[ty * 4 + i][l]; b[i] = ws[tx * 4 + i][l]; }}
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
      }}
    }}
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) {{
        const long long mm = m0 + ty * 4 + i, nn = n0 + tx * 4 + j;
        if (mm < M && nn < N) {{ {9} }}
      }}
  }}
)",
                      N, K, chunks, row_bytes, kb.expr(m), x, round_activation(wtype, "v"), deq, w,
                      store("acc[i][j]", "mm", "nn")));
  kb.launch(ir::Dim(((N + 63) / 64) * 256), 256, m, 64);
  return {kb.finish()};
}

// The chain of a matmul_epilogue region on one output value: each op
// updates one float local; add, mul and scale as __fadd_rn/__fmul_rn (one
// rounding each, never contracted into an FMA: their own kernels store
// each value, so it is rounded on its own), the others the elementwise
// kernels' formulas.
std::string epilogue_op_expr(const ir::Op& op, const std::vector<std::string>& a, bool& gelu) {
  switch (op.kind) {
    case ir::OpKind::Add: return fmt::format("__fadd_rn({}, {})", a[0], a[1]);
    case ir::OpKind::Mul: return fmt::format("__fmul_rn({}, {})", a[0], a[1]);
    case ir::OpKind::Scale: return fmt::format("__fmul_rn({}, {})", a[0], flit(ir::ScaleAttrs::of(op).factor));
    default: return elementwise_scalar_expr(op, a, gelu);
  }
}

}  // namespace

Kernels emit_matmul(const ir::Op& op, const std::string& what) {
  const MatmulIo io{op.operands[0], op.operands[1], [&op](KernelBuilder& kb) -> StoreFn {
                      const std::string y = kb.out(op.results[0], "y");
                      return [y](const std::string& v, const std::string& row, const std::string& col) {
                        return fmt::format("{}[{} * N + {}] = {};", y, row, col, v);
                      };
                    }};
  return matmul_kernels(op, what, io);
}

std::string matmul_epilogue_why_not(const ir::Op& fused) {
  const ir::EpilogueRegion r = ir::decode_epilogue_region(*fused.body);
  const ir::Op& mm = *r.matmul;
  const ir::TensorType& out = mm.results[0].type();
  const ir::TensorType& wt = mm.operands[1].type();
  if (mm.operands[0].type().elem.kind() != ir::ElemType::F32) return "the matmul's input is not f32";
  if (wt.elem.layout() != WeightLayout::Rows || !quant_supported(weight_type(wt.elem)))
    return fmt::format("weight type {} has no CUDA matmul kernel", wt.elem.name());
  if (wt.shape.size() != 2 || !wt.shape[0].constant() || !wt.shape[1].constant()) return "the weight shape is not constant";
  if (*wt.shape[1].constant() % 32 != 0 && wt.elem.kind() == ir::ElemType::Quant) return "K is not a multiple of 32";
  const ir::ValueData* prev = mm.results[0].data();
  for (const ir::Op* op : r.chain) {
    const std::vector<std::string> probe(op->operands.size(), "x");
    bool gelu = false;
    if (epilogue_op_expr(*op, probe, gelu).empty())
      return fmt::format("the epilogue op '{}' has no float formula", op->mnemonic());
    if (op->results[0].type().elem.kind() != ir::ElemType::F32)
      return fmt::format("the epilogue op '{}' makes a {} value, not f32", op->mnemonic(), op->results[0].type().elem.name());
    for (const auto& v : op->operands) {
      if (v.data() == prev) continue;
      const ir::TensorType& t = v.type();
      const bool row = t.shape.size() == 1 && !out.shape.empty() && t.shape[0] == out.shape.back();
      if (!t.elem.is_float() || !(t.shape == out.shape || row))
        return fmt::format("the epilogue {} reads {}, neither float of the matmul's shape {} nor a row of its last dim",
                           op->mnemonic(), t.str(), ir::shape_str(out.shape));
    }
    prev = op->results[0].data();
  }
  return "";
}

// One GEMV/GEMM kernel: the matmul's value runs through the chain in
// registers and only the region's result is stored. An operand of the
// output's shape is read at the output's index, an [N] row at its column.
Kernels emit_matmul_epilogue(const ir::Op& fused, const std::string& what) {
  if (std::string why = matmul_epilogue_why_not(fused); !why.empty())
    throw Error(fmt::format("cuda: {}: the matmul_epilogue region has no one-kernel form: {}", what, why));
  const ir::EpilogueRegion r = ir::decode_epilogue_region(*fused.body);
  const ir::Op& mm = *r.matmul;
  // A body argument stands for the fused op's operand of its index.
  auto outer = [&fused](const ir::Value& v) { return fused.operands[v->index]; };
  const MatmulIo io{outer(mm.operands[0]), outer(mm.operands[1]), [&](KernelBuilder& kb) -> StoreFn {
    // Per chain op, per operand: the chain value (-1) or a load's index.
    std::vector<std::vector<int>> reads;
    struct Load {
      std::string param;
      bool full;  // output-sized (else one [N] row)
      ir::ElemType elem;
    };
    std::vector<Load> loads;
    std::map<const ir::ValueData*, int> load_of;
    const ir::ValueData* prev = mm.results[0].data();
    for (const ir::Op* op : r.chain) {
      std::vector<int> per;
      for (const auto& v : op->operands) {
        if (v.data() == prev) {
          per.push_back(-1);
          continue;
        }
        auto [it, fresh] = load_of.try_emplace(v.data(), int(loads.size()));
        if (fresh)
          loads.push_back({kb.in(outer(v), fmt::format("e{}", loads.size())), v.type().shape == mm.results[0].type().shape,
                           v.type().elem});
        per.push_back(it->second);
      }
      reads.push_back(std::move(per));
      prev = op->results[0].data();
    }
    const std::string y = kb.out(fused.results[0], "y");
    return [y, reads, loads, chain = r.chain, &kb](const std::string& v, const std::string& row, const std::string& col) {
      std::string code = fmt::format("const long long e_i = {} * N + {}; float e_v = {};", row, col, v);
      bool gelu = false;
      for (size_t k = 0; k < chain.size(); ++k) {
        std::vector<std::string> a;
        for (int l : reads[k])
          a.push_back(l < 0 ? "e_v" : load_as_float(loads[size_t(l)].elem, loads[size_t(l)].param, loads[size_t(l)].full ? "e_i" : col));
        code += fmt::format(" e_v = {};", epilogue_op_expr(*chain[k], a, gelu));
      }
      if (gelu) kb.need("gelu");
      return code + fmt::format(" {}[e_i] = e_v;", y);
    };
  }};
  return matmul_kernels(mm, what, io);
}


Kernels emit_embed(const ir::Op& op, const std::string& what) {
  const ir::TensorType& tt = op.operands[0].type();
  const GgmlType type = weight_type(tt.elem);
  if (!quant_supported(type)) unsupported(op, "table type " + tt.elem.name() + " has no CUDA kernel");
  auto rows = tt.shape[0].constant(), cols = tt.shape[1].constant();
  if (!op.operands[1].type().elem.is_integer()) unsupported(op, "ids must be integers");
  if (rows && cols && *cols % 32 != 0 && tt.elem.kind() != ir::ElemType::Quant)
    return emit_embed_narrow(op, what, *rows, *cols);
  if (!rows || !cols || *cols % 32 != 0) unsupported(op, "the table must be constant with a multiple of 32 columns");
  KernelBuilder kb(op.mnemonic(), what);
  const std::string table = kb.in(op.operands[0], "table"), ids = kb.in(op.operands[1], "ids"),
                    y = kb.out(op.results[0], "y");
  const std::string deq = deq32_helper(type);
  kb.need(deq);
  const ir::Dim n = numel(op.operands[1].type());
  const int64_t chunks = *cols / 32;
  // An id outside the table yields a zero row (the executor validates
  // prompt ids on the host; sampled ids are in range by construction).
  kb.body(fmt::format(R"(  constexpr long long V = {0}, CHUNKS = {1}, ROW_BYTES = {2};
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < {3} * CHUNKS; e += (long long)gridDim.x * blockDim.x) {{
    const long long t = e / CHUNKS, c = e % CHUNKS;
    const long long id = (long long){4}[t];
    float v[32];
    if (id >= 0 && id < V) {5}((const u8*){6} + id * ROW_BYTES, c, v);
    else for (int l = 0; l < 32; ++l) v[l] = 0.0f;
    for (int l = 0; l < 32; ++l) {7}[t * (CHUNKS * 32) + 32 * c + l] = v[l];
  }}
)",
                      *rows, chunks, *ggml_bytes_for(type, uint64_t(*cols)), kb.expr(n), ids, deq, table, y));
  kb.launch(n * chunks, 128);
  return {kb.finish()};
}

}  // namespace vtc::cuda
