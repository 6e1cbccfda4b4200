// Internal to codegen/cuda: the builder every op emitter uses, and the
// emitters themselves (one file per op family).
//
// An emitter declares its parameters through the builder (buffers, state
// bases, step symbols), writes the kernel body as text with fmt, and names
// the device helpers it calls; the builder assembles the translation unit
// (prelude, helpers, signature, body), hashes it into the entry name and
// records the launch. Dims are written as C expressions: a constant is a
// literal (the kernel is specialized on it), a symbol becomes the `long long`
// parameter s_<symbol>.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "codegen/cuda/kernel.h"
#include "ir/op_attrs.h"

namespace vtc::cuda {

class KernelBuilder {
 public:
  KernelBuilder(std::string_view mnemonic, std::string what);

  // A buffer parameter for an IR value; returns the parameter name.
  std::string in(const ir::Value& v, const std::string& name);
  std::string out(const ir::Value& v, const std::string& name);
  // State and bookkeeping parameters.
  std::string state_rows(const std::string& state, const std::string& name, const std::string& ctype);
  std::string state_pool(const std::string& state, int half, const std::string& name, const std::string& ctype);
  std::string slots();       // const int* slots
  std::string page_table();  // const int* page_table, stride PT_STRIDE
  std::string scratch(const ir::Dim& bytes);  // float* scratch
  std::string counters(const ir::Dim& ints);  // int* counters (Kind::Counters)
  std::string extra(const std::string& name, const std::string& ctype);

  // A dim as a C expression of type long long.
  std::string expr(const ir::Dim& d);
  // Requires a named helper from the helper library (helpers.cpp).
  void need(const std::string& helper);
  void body(std::string code) { body_ += code; }
  void launch(const ir::Dim& threads_x, int block, const ir::Dim& rows_y = 1, int rows_per_block_y = 1);

  Kernel finish();

 private:
  std::string add(KernelArg arg);
  std::string mnemonic_;
  Kernel kernel_;
  std::set<std::string> symbols_;
  std::vector<std::string> helpers_;
  std::string body_;
};

// The C type of an element: float, unsigned short (f16/bf16 bits), int,
// long long, unsigned char (u8 and quantized blocks).
std::string c_type(const ir::ElemType& e);
// A C expression converting element `i` of buffer `p` (of type e) to float.
std::string load_as_float(const ir::ElemType& e, const std::string& p, const std::string& i);
// A C statement storing float `v` into element `i` of `p`.
std::string store_from_float(const ir::ElemType& e, const std::string& p, const std::string& i, const std::string& v);
// Shape helpers (symbolic).
ir::Dim numel(const ir::TensorType& t);
ir::Dim dims_product(const ir::Shape& s, size_t from, size_t to);
// A float literal for CUDA source that round-trips exactly (hex float).
std::string flit(double v);
[[noreturn]] void unsupported(const ir::Op& op, const std::string& why);

// Helper library: source for a named device helper and its dependencies.
struct HelperSource {
  std::vector<std::string> deps;
  const char* source;
};
// The decode GEMV's chunk dot products and copies (helpers_dot.cpp); the
// rest of the library is in helpers.cpp.
const std::map<std::string, HelperSource>& dot_helpers();
// The tensor-core instructions (helpers_mma.cpp).
const std::map<std::string, HelperSource>& mma_helpers();
std::string helper_source(const std::string& name);
std::vector<std::string> helper_deps(const std::string& name);
std::string prelude_source();
// Quantized weights: supported on CUDA, block geometry and the name of the
// helper that dequantizes 32 consecutive values.
bool quant_supported(GgmlType t);
std::string deq32_helper(GgmlType t);
// The GGUF type of a matmul weight element (I32 for non-weight types), and
// the CPU's activation rounding for it as a C expression of `v`: f16 / bf16
// weights round activations to their type, other weights keep f32
// (docs/cuda.md "Numerics"). Shared by matmul and moe_ffn.
GgmlType weight_type(const ir::ElemType& e);
std::string round_activation(GgmlType w, const std::string& v);
// The rope rotation of one pair (x0, x1) by cos c and sin s into (y0, y1), as
// CUDA statements: neox (and multi) modes with separately rounded products,
// normal mode with the CPU's fma form (emit_rope.cpp). Shared with the QSA
// indexer's key rope.
std::string rope_rotation(bool neox);

// Emitters, one per op family. `fn` and `op` describe the op; they return
// the kernels in launch order.
using Kernels = std::vector<Kernel>;
// Several rope ops in one launch, one grid-stride loop each (emit_rope.cpp).
Kernels emit_rope_ops(const std::vector<const ir::Op*>& ops, const std::string& what);
Kernels emit_elementwise(const ir::Function& fn, const ir::Op& op, const std::string& what);
// True when a fused elementwise region compiles to one kernel: every operand
// and result is float and as large as the region (or broadcasts along
// trailing dims), and every body op is elementwise arithmetic.
bool fused_elementwise_composable(const ir::Op& op);
Kernels emit_fused(const ir::Op& op, const std::string& what);
Kernels emit_layer_norm(const ir::Op& op, const std::string& what);
Kernels emit_rms_norm(const ir::Op& op, const std::string& what);
Kernels emit_softmax(const ir::Op& op, const std::string& what);
Kernels emit_sum(const ir::Op& op, const std::string& what);
Kernels emit_argmax(const ir::Op& op, const std::string& what);
Kernels emit_top_k(const ir::Op& op, const std::string& what);
// The `sample` op (emit_sample.cpp).
Kernels emit_sample(const ir::Op& op, const std::string& what);
Kernels emit_matmul(const ir::Op& op, const std::string& what);
// Stores output value v (a float expression) at (row, col) of a matmul's
// [M, N] output: a C statement, in a kernel body where N is a constant.
using StoreFn = std::function<std::string(const std::string& v, const std::string& row, const std::string& col)>;
// What a matmul kernel reads (x, w: values the executor binds) and how it
// binds its output parameters and stores (called once, after x and w).
struct MatmulIo {
  ir::Value x, w;
  std::function<StoreFn(KernelBuilder&)> bind_out;
};
// Whether dim `d` names step symbol `sym` as a whole word (emit_matmul.cpp):
// a matmul's rows with the prefill symbol T run the GEMM, others the GEMV.
bool has_symbol(const ir::Dim& d, const std::string& sym);
// Whether rows over `m` run the prefill kernels (tiled GEMMs, prefill
// attention, the grouped MoE): `m` has the prefill symbol T and
// generate_step is not lowering the step's decode form (kernel.h,
// RowsGuard), in which T rows run decode's kernels.
bool tiled_rows(const ir::Dim& m);
// The decode GEMV of an [M, K] x [N, K] matmul, M without the prefill
// symbol (emit_gemv.cpp): a quantize kernel for integer-block weights,
// then the GEMV.
Kernels emit_gemv(const ir::Op& op, const std::string& what, const ir::Dim& m, int64_t N, int64_t K, const MatmulIo& io);
// One output of a multi-part GEMV (emit_gemv_parts): a weight of N rows,
// or a pair of them (a swiglu's gate and up) whose two sums per row
// `combine` makes one value of (C expressions of the two sums; sets its
// bool when the expression calls vtc_gelu), stored through bind_out.
struct GemvPart {
  ir::Value w;
  std::optional<ir::Value> w_pair;
  int64_t n = 0;
  std::function<StoreFn(KernelBuilder&)> bind_out;
  std::function<std::string(const std::string&, const std::string&, bool&)> combine;
};
// Several GEMVs of one x in one launch (a projection region's q, k, v, or
// its gate/up pair with the activation): each part's blocks after the
// previous part's, one quantize for all. The weight types must take the
// same activation codes (gemv_parts_mergeable).
bool gemv_parts_mergeable(const std::vector<GgmlType>& types);
Kernels emit_gemv_parts(const std::vector<GemvPart>& parts, const ir::Value& x, const std::string& what,
                        const ir::Dim& m, int64_t K);
// Integer-block weights' activation codes (emit_gemv.cpp), shared by the
// GEMV and the tensor-core GEMM: the CPU's vec_dot type of a weight type,
// the offset its codes carry and the vtc_wdot KIND (helpers_dot.cpp).
enum class Codes { None, Q8_1, Q8_K };
struct DotForm {
  Codes codes;
  int offset, kind;
};
DotForm dot_form(GgmlType t);
// Scratch of the codes of an [M, K] x: codes [M][K] int8 in the
// code_layout, then [M][K/32] 8-byte scale records.
ir::Dim codes_scratch_bytes(const ir::Dim& m, int64_t k);
Kernel quantize_kernel(Codes codes, const ir::Value& x, const ir::Dim& m, int64_t K, const std::string& what);
// Regions of a kernel's scratch (bytes): its whole size, and the offsets
// a kernel reads from and writes to.
struct ScratchRegions {
  ir::Dim total, from, to;
};
// The same rounding of f32 rows [M, K] that a kernel left in the scratch
// at regions.from, to codes at regions.to (the MoE's expert activations).
Kernel quantize_scratch_kernel(Codes codes, const ir::Dim& m, int64_t K, const ScratchRegions& regions,
                               const std::string& what);
// Statements loading lane `lane`'s 32-value chunk of a codes window into
// the vtc_xq `xq` (declared by the caller), each line after `indent`:
// they read the window's codes at `xr` (nc chunks: the code_layout's two
// 16-byte halves apart) and its scale records at `xmr`.
std::string activation_chunk(const DotForm& form, const std::string& indent);
// An rms_norm [M, K] (gain [K]) whose result only matmuls read, fused with
// the quantize of that result: the normalized rows never reach memory.
Kernel norm_quantize_kernel(const ir::Op& norm, Codes codes, const ir::Dim& m, int64_t K, const std::string& what);
// The chunk decoder of an integer-block type (helpers_dot.cpp): vload32_<type>.
std::string vload32_helper(GgmlType t);
// The prefill matmul on tensor cores (emit_gemm.cpp): integer-block and
// f16/bf16 weights with K a multiple of 256; gemm_mma_supported says which.
bool gemm_mma_supported(GgmlType w, int64_t K);
// The integer GEMM grouped by expert (emit_moe.cpp's prefill experts, as
// llama.cpp's mmid): grid rows walk a table of tiles in the scratch (a
// count, then (expert, first, end) per tile, into the rows sorted by
// expert), each tile up to 128 of one expert's rows r, and the results
// land at their rows of an [R][N] f32 scratch region. Offsets in bytes.
struct GemmGrouping {
  ir::Dim scratch_bytes, codes_at, perm_at, tiles_at, out_at;
  ir::Dim rows;                 // R = T * k
  int64_t experts = 0, slots = 0;
  bool codes_per_token = true;  // the codes' row of r: r / k (x's), or r
  int64_t rows_per_expert = 0, first_row = 0;  // expert e's weight row n: e * rows_per_expert + first_row + n
};
// The GEMM's kernel alone for weight type `wtype` (codes already in the
// scratch): the plain one when `grouped` is null.
Kernel integer_gemm_kernel(GgmlType wtype, const std::string& what, const ir::Dim& m, int64_t N, int64_t K,
                           const MatmulIo& io, const GemmGrouping* grouped);
Kernels emit_gemm_mma(const ir::Op& op, const std::string& what, const ir::Dim& m, int64_t N, int64_t K,
                      const MatmulIo& io);
// A matmul_epilogue region (ir/fused_kinds.h) as one GEMV/GEMM kernel: the
// chain applied to each output value before its one store (emit_matmul.cpp).
// matmul_epilogue_why_not says why a region has no such kernel (empty: it
// has); emit_matmul_epilogue requires that it has.
std::string matmul_epilogue_why_not(const ir::Op& fused);
Kernels emit_matmul_epilogue(const ir::Op& fused, const std::string& what);
// The float expression of one elementwise op over its operands' float
// expressions (emit_elementwise.cpp); empty for an op it has none for.
// Sets needs_gelu when it calls vtc_gelu.
std::string elementwise_scalar_expr(const ir::Op& op, const std::vector<std::string>& operands, bool& needs_gelu);
// A swiglu's activation and product, act(g) * u, as one kernel over f32
// values of one shape (a prefill's swiglu region: its GEMMs write g and u).
Kernels emit_swiglu_activation(const ir::Op& act, const ir::Op& mul, const std::string& what);
// Mixture of experts (emit_moe.cpp).
Kernels emit_moe_route(const ir::Op& op, const std::string& what);
Kernels emit_moe_ffn(const ir::Op& op, const std::string& what);
Kernels emit_embed(const ir::Op& op, const std::string& what);
Kernels emit_rope(const ir::Op& op, const std::string& what);
// Linear attention (emit_linear_attention.cpp).
Kernels emit_l2_norm(const ir::Op& op, const std::string& what);
Kernels emit_causal_conv1d(const ir::Module& m, const ir::Op& op, const std::string& what);
Kernels emit_delta_rule(const ir::Module& m, const ir::Op& op, const std::string& what);
Kernels emit_ssm_scan(const ir::Module& m, const ir::Op& op, const std::string& what);
Kernels emit_attention(const ir::Module& m, const ir::Op& op, const std::string& what);
Kernels emit_attn_temp(const ir::Op& op, const std::string& what);  // emit_attention.cpp
Kernels emit_hadamard(const ir::Op& op, const std::string& what);   // emit_attention.cpp

// KV cache halves of any cache type (emit_kv_cache.cpp): what the generic
// attention kernels need to store a unit of a half and read it back.
struct KvHalf {
  GgmlType type = GgmlType::F16;
  std::string state;  // the state holding this half
  int half = 0;       // its pool in that state: 0 (K, or a [1, ...] state) or 1 (V of a [2, ...] state)
  int64_t head = 0;   // pool units (elements, or bytes for a block type) of one kv head's row
  int64_t row = 0;    // pool units of one position: every kv head
  int64_t units = 0;  // stored units per position: elements, or 32-value blocks
  std::string ctype;  // the pool's C element type
  bool block() const;
};
KvHalf kv_half(GgmlType type, std::string state, int half, int64_t hkv, int64_t d);
// A statement storing unit `u` of the f32 row `src` (all kv heads of one
// token) at pool row `row` of `pool`.
std::string kv_store_unit(const KvHalf& h, const std::string& pool, const std::string& src, int64_t d);
// After the flash prologue: q converted to K's dot type (qv rounded, or
// block codes qc[], scales qd[] and q8_1 sums qsum[]).
std::string kv_query_prologue(const KvHalf& k);
// Loop code adding the lane's part of q.k of the row at `kr` to `s`.
std::string kv_score(const KvHalf& k);
// The float value of V element lane + 32 i of the row at `vr`.
std::string kv_value(const KvHalf& v);
// The device helpers those need.
std::vector<std::string> kv_helpers(const KvHalf& k, const KvHalf& v);
const std::map<std::string, HelperSource>& kv_cache_helpers();
// The QSA indexer (emit_indexer.cpp).
Kernels emit_indexer_select(const ir::Module& m, const ir::Op& op, const std::string& what);
Kernels emit_data_movement(const ir::Op& op, const std::string& what);
Kernels emit_state(const ir::Module& m, const ir::Op& op, const std::string& what);
Kernels emit_ngram(const ir::Op& op, const std::string& what);

// What an op's emitter sees besides the op: the module (its states), the
// function the op is in, and the op's description for kernel names.
struct EmitContext {
  const ir::Module& module;
  const ir::Function& fn;
  const std::string& what;
};

// One emitter per op of ops.def, emit_<Id>; codegen.cpp builds its dispatch
// table from the same rows, so a new op's emitter is defined in its
// emit_*.cpp file and declared nowhere else.
#define VTC_OP(id, ...) Kernels emit_##id(const EmitContext& c, const ir::Op& op);
#include "ir/ops.def"
#undef VTC_OP

}  // namespace vtc::cuda
