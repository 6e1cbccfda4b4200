// CPU kernels for the interpreter: quantized matmul, embedding lookup, and
// the float ops of a llama / qwen2 / qwen3 forward pass.
//
// Numerics follow ggml's CPU backend (see docs/cpu-kernels.md): matmul
// quantizes the activations to the weight type's "vec_dot type" (q8_0, q8_1,
// q8_K, f16, bf16 or f32) and does integer dot products on the quantized
// blocks; attention follows ggml's flash-attention kernel, including its f16
// accumulator when V is f16. Every kernel has a scalar version and, where it
// pays, an AVX2 (+FMA, F16C) version chosen at run time; both compute the same
// values up to float reassociation.
//
// Layouts are row-major and dense. Unless stated otherwise, input and output
// buffers of the float ops may alias exactly (in place) but not partially.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/attr_enums.h"
#include "runtime/cpu/thread_pool.h"
#include "support/rope_yarn.h"
#include "support/ggml_type.h"
#include "support/weight_layout.h"

namespace vtc::cpu {

// ---------------------------------------------------------------------------
// Instruction-set dispatch.

// Instruction-set levels, each a superset of the one before on the machines
// that have it (AVX-VNNI, the 256-bit VEX form, is the exception: AVX-512
// machines without it run the AVX-512 levels over the plain AVX2 tiles).
//   scalar      portable C++
//   avx2        AVX2 + FMA + F16C (Haswell, Zen 1-3)
//   avxvnni     + AVX-VNNI (vpdpbusd on ymm: Alder Lake, Zen 4+)
//   avx512vnni  AVX-512 F/BW/VL + VNNI (Ice Lake, Sapphire Rapids, Zen 4+)
//   avx512bf16  + AVX512-BF16 (vdpbf16ps: Cooper/Sapphire Rapids, Zen 4+)
// A level's kernel table is the one below it with that level's kernels in
// their place, so forcing a lower level (VTC_CPU_ISA) runs exactly what a
// machine of that kind runs.
enum class Isa : uint8_t { Scalar = 0, Avx2 = 1, AvxVnni = 2, Avx512Vnni = 3, Avx512Bf16 = 4 };
inline constexpr Isa kLastIsa = Isa::Avx512Bf16;

// "scalar", "avx2", "avxvnni", "avx512vnni", "avx512bf16".
const char* isa_name(Isa isa);
// The level named `name` (isa_name's spelling); false if there is none.
bool isa_from_name(const char* name, Isa& out);
// True if this machine and build can run `isa`.
bool isa_supported(Isa isa);
// Every level this machine and build can run, lowest first.
std::vector<Isa> supported_isas();
// The best ISA this machine and build support, or the level named by the
// environment variable VTC_CPU_ISA (which must be supported: an unknown or
// unsupported name throws vtc::Error naming what the machine has).
Isa best_isa();
// True when VTC_CPU_ISA chose best_isa().
bool isa_forced();
// The ISA the kernels use now; initially best_isa().
Isa active_isa();
// Selects the ISA for all later calls (tests, benchmarks). Throws vtc::Error
// if this machine or build does not support it.
void set_active_isa(Isa isa);

// ---------------------------------------------------------------------------
// Matmul on quantized weights.

// True if matmul has a native quantized-dot path for `wtype` (F32, F16, BF16,
// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, IQ4_NL, IQ4_XS, MXFP4).
bool matmul_native(GgmlType wtype);
// True if matmul accepts `wtype` at all (native, or dequantizing one weight
// row at a time for the other dequantizable types).
bool matmul_supported(GgmlType wtype);
// The type the activations are converted to for `wtype` (ggml's
// vec_dot_type); F32 for the row-dequantizing fallback.
GgmlType matmul_activation_type(GgmlType wtype);

// How a matmul of several tokens orders each token's float sums. Batched:
// as the reference's batched kernels do (Q4_K in the x8 layout: full groups
// of 4 tokens in its gemm's order, internal.h, PackedFn); EachAsOne: every
// token as a one-token call sums it, so that no token's bits depend on the
// batch (the rows of a speculative verify chunk then have decode's bits).
// The other types and layouts sum every token alike either way.
enum class TokenOrder : uint8_t { Batched, EachAsOne };

// y[t][r] = dot(W[r], x[t]) for r < rows, t < n_tokens.
// W: `rows` rows of `cols` values in ggml layout (each row a whole number of
// wtype blocks, rows contiguous). x: [n_tokens][cols] f32. y: [n_tokens][rows].
// Throws vtc::Error for an unsupported type or cols not a multiple of the
// block size.
// `layout` says how W's bytes are arranged (support/weight_layout.h); a
// layout other than Rows needs matmul_layout_supported().
void matmul(GgmlType wtype, const void* w, int64_t rows, int64_t cols, const float* x, int64_t n_tokens,
            float* y, ThreadPool& pool, WeightLayout layout = WeightLayout::Rows,
            TokenOrder order = TokenOrder::Batched);

// True if matmul reads `wtype` weights stored in `layout` with `rows` rows
// (Rows: matmul_supported; Interleaved8: Q4_0 or Q4_K, rows % 8 == 0).
bool matmul_layout_supported(GgmlType wtype, WeightLayout layout, int64_t rows);

// Rearranges a [rows][cols] `wtype` weight from the Rows layout into
// `layout` (dst has the same size as src and must not overlap it). Throws
// vtc::Error unless matmul_layout_supported(wtype, layout, rows) and cols is
// a whole number of blocks.
void repack_weight(GgmlType wtype, WeightLayout layout, const void* src, int64_t rows, int64_t cols, void* dst);

// Several matmuls of the same activations: outputs[i].y = x W_i^T, each as
// matmul(outputs[i].wtype, outputs[i].w, outputs[i].rows, cols, x, n_tokens,
// outputs[i].y). When every weight has a native path with the same
// activation type, x is converted once and all the row tiles run in one
// parallel_for (one synchronisation, one load balance); otherwise the
// matmuls run one after the other. Bit-identical to separate calls.
struct MatmulOutput {
  GgmlType wtype;
  const void* w;
  int64_t rows;
  float* y;
  WeightLayout layout = WeightLayout::Rows;
};
void matmul_shared_input(const MatmulOutput* outputs, size_t n_outputs, int64_t cols, const float* x,
                         int64_t n_tokens, ThreadPool& pool, TokenOrder order = TokenOrder::Batched);

// A fused region as one kernel (runtime/cpu/fused_kernels.h builds them):
// the matmuls of one input in groups, an optional prologue that produces
// the input rows just before they are converted, and per group an
// epilogue over each box of output as soon as it is computed, by the
// worker that computed it, while it is in cache.
//   - A group's outputs have the same rows; one work item computes rows
//     [r0, r1) x tokens [t0, t1) of every output of the group, then calls
//     the epilogue on that box. item_rows (a multiple of 16; 0: 16) sets
//     the box height, e.g. a whole number of heads for a rope.
//   - in_scratch: the outputs' y are not written (may be null); each box
//     goes to the worker's scratch, which only the epilogue reads (gate
//     and up never leave the cache). Otherwise the box is y's.
//   - The prologue runs on token ranges [t0, t1) that cover every token
//     once, before those rows of x are read (x is where it writes them).
// Every output value is the same as matmul's, so an epilogue that applies
// an elementwise op row by row gives that op's bits. Without one shared
// activation type (see matmul_shared_input) the prologue runs on all
// tokens, the matmuls one after the other, then each epilogue on one box
// of the whole output.
constexpr size_t kMaxGroupOutputs = 4;
struct TileBox {
  int64_t r0, r1, t0, t1;
  const float* out[kMaxGroupOutputs];  // output i's value at (t0, r0)
  int64_t ld;                          // floats from one token's row of a box to the next
};
struct TileFn {
  void (*fn)(const void* context, const TileBox& box) = nullptr;
  const void* context = nullptr;
};
struct MatmulGroup {
  const MatmulOutput* outputs = nullptr;
  size_t n_outputs = 0;  // at most kMaxGroupOutputs
  int64_t item_rows = 0;
  TileFn epilogue;  // fn null: none
  bool in_scratch = false;
};
struct RowFn {
  void (*fn)(const void* context, int64_t t0, int64_t t1) = nullptr;
  const void* context = nullptr;
};
void matmul_groups(const MatmulGroup* groups, size_t n_groups, int64_t cols, const float* x, int64_t n_tokens,
                   ThreadPool& pool, RowFn prologue = {}, TokenOrder order = TokenOrder::Batched);

// out[i][:] = dequantized row ids[i] of `table` ([n_rows][cols] of `type`).
// Throws vtc::Error for an id outside [0, n_rows) or an unsupported type.
void embed_rows(GgmlType type, const void* table, int64_t n_rows, int64_t cols, const int32_t* ids, int64_t n,
                float* out);

// ---------------------------------------------------------------------------
// Float ops.

// y[r] = x[r] * (1/sqrt(mean(x[r]^2) + eps)) * weight, per row of n_cols; the
// sum of squares accumulates in double as in ggml. weight may be null (no
// gain); x and y may alias.
void rms_norm(const float* x, const float* weight, float eps, int64_t n_rows, int64_t n_cols, float* y);

// ggml_norm, then the optional gain and bias: per row, mean and variance
// accumulate in double (ggml_float) over x - mean; y = (x - mean) / sqrt(var
// + eps) * gain + bias. gain and bias may be null; x and y may alias.
void layer_norm(const float* x, const float* gain, const float* bias, float eps, int64_t n_rows, int64_t n_cols,
                float* y);

// Elementwise, n values; y may alias an input.
void add(const float* a, const float* b, float* y, int64_t n);
void mul(const float* a, const float* b, float* y, int64_t n);
void scale(const float* x, float s, float* y, int64_t n);
void neg(const float* x, float* y, int64_t n);
void exp(const float* x, float* y, int64_t n);
void silu(const float* x, float* y, int64_t n);
void sigmoid(const float* x, float* y, int64_t n);
void softplus(const float* x, float* y, int64_t n);  // x > 20 ? x : log(1 + e^x)
void tanh_values(const float* x, float* y, int64_t n);  // tanhf, as ggml_vec_tanh_f32
// GELU (tanh approximation), evaluated like ggml: through an f16 table, with
// x <= -10 -> 0 and x >= 10 -> x.
void gelu(const float* x, float* y, int64_t n);
// ggml's abs, sgn and sqrt (fabsf; x > 0 ? 1 : x < 0 ? -1 : 0; sqrtf). Named
// so they do not hide <cmath>'s abs and sqrt inside this namespace.
void absolute(const float* x, float* y, int64_t n);
void sgn(const float* x, float* y, int64_t n);
void square_root(const float* x, float* y, int64_t n);
// ggml's clamp: y = MAX(MIN(x, hi), lo) with its ternary macros, so NaN -> hi.
void clamp_values(const float* x, float lo, float hi, float* y, int64_t n);
// y = silu(gate) * up (the SwiGLU of llama FFNs), n values.
void swiglu(const float* gate, const float* up, float* y, int64_t n);

// Row softmax of x * scale (scale 1 for plain softmax); the sum accumulates
// in double as in ggml.
void softmax(const float* x, int64_t n_rows, int64_t n_cols, float scale, float* y);

// y[r] = sum of x[r][0..n_cols), accumulated in double in index order and
// rounded once, as ggml_vec_sum_f32 (ggml_sum_rows); y has n_rows values.
void sum_rows(const float* x, int64_t n_rows, int64_t n_cols, float* y);

// The IR's rope modes (ir/attr_enums.def): Normal rotates pairs (x[2i],
// x[2i+1]) (llama), Neox (x[i], x[i + n_dims/2]) (qwen2, qwen3); Multi
// (ggml's MROPE) and IMulti (IMROPE) rotate like Neox, each pair taking its
// angle from one of four position components, chosen by `sections`.
using RopeMode = ir::RopeMode;

struct RopeParams {
  int64_t n_dims = 0;     // rotated dims, even, <= head_dim; the rest are copied
  RopeMode mode = RopeMode::Normal;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  float attn_factor = 1.0f;            // multiplies cos and sin (ggml's mscale)
  const float* freq_factors = nullptr;  // n_dims/2 divisors of theta, optional (llama3 rope_freqs)
  // YaRN: with ext_factor != 0, pair i's angle mixes the interpolated and
  // extrapolated angles by ramp(corr_dims, i) * ext_factor, and cos/sin
  // get an extra 1 + 0.1 ln(1/freq_scale) (ggml's rope_yarn).
  float ext_factor = 0.0f;
  float corr_dims[2] = {0.0f, 0.0f};
  // Multi / IMulti: pair i has sector s = i mod (sum of sections) and uses
  // component 0 for s < sections[0], 1 below sections[0..1], 2 below
  // sections[0..2], else 3; IMulti instead uses 1 when s%3 == 1 and
  // s < 3*sections[1], 2 when s%3 == 2 and s < 3*sections[2], 0 when
  // s%3 == 0 and s < 3*sections[0], else 3 (docs/ir.md, rope).
  int32_t sections[4] = {0, 0, 0, 0};
};

// YaRN's correction dims: rope_yarn_corr_dims in support/rope_yarn.h.

// RoPE on x [n_tokens][n_heads][head_dim] at per-token positions pos[t],
// as ggml: theta_i = pos * freq_scale * base^(-2i/n_dims) / freq_factors[i],
// with base^(-2/n_dims) applied by repeated float multiplication. In the
// Multi and IMulti modes pos is [n_tokens][4] (component j of token t at
// pos[4t + j]). x and y may alias.
void rope(const float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, const int32_t* pos,
          const RopeParams& params, float* y);
// rope in two steps, for a kernel that rotates in a matmul's epilogue
// (fused qk_rope): rope_table fills rows t0..t1 of table [n_tokens][n_dims]
// with each token's cos/sin pairs, once for every head and every rope of
// the same positions; rope_rotate rotates n_heads heads of n_tokens rows
// (x_stride and y_stride floats apart) by the table's rows for those
// tokens. Together bit-identical to rope().
void rope_table(const RopeParams& params, int64_t head_dim, const int32_t* pos, int64_t t0, int64_t t1,
                float* table);
void rope_rotate(const float* x, int64_t x_stride, int64_t n_tokens, int64_t n_heads, int64_t head_dim,
                 const float* table, const RopeParams& params, float* y, int64_t y_stride);

// KV cache rows (kv_cache.cpp). quantize_kv_row stores n values (a whole
// number of blocks) as the reference's KV store does for `type` (one of
// kv_cache_types(), support/kv_cache_type.h); throws vtc::Error otherwise.
void quantize_kv_row(GgmlType type, const float* x, void* y, int64_t n);
// The reference's rotation for a quantized cache: y = H x for each block of
// `block` values (a power of two; n_values a multiple of it), H the
// orthonormal Walsh-Hadamard matrix, computed as ggml's fast transform.
// x and y may be the same.
void hadamard_rows(const float* x, float* y, int64_t n_values, int64_t block);

struct AttentionParams {
  int64_t n_tokens = 0;   // query rows
  int64_t n_head = 0;     // query heads, a multiple of n_head_kv (GQA)
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;   // K and Q head size
  int64_t head_dim_v = 0;  // V head size; 0 means head_dim
  int64_t n_kv = 0;       // cache rows
  // The cache halves' element types: f16 is llama.cpp's default; any of
  // kv_cache_types(). Two caches of f16, or of f32, take the reference's
  // fast paths; any other pair its generic one-row loop (below).
  GgmlType k_type = GgmlType::F16, v_type = GgmlType::F16;
  float scale = 1.0f;     // usually 1/sqrt(head_dim)
  float softcap = 0.0f;   // 0: none; else s = softcap * tanh(s / softcap)
  // false (an encoder's bidirectional attention): every key the query's
  // sequence holds is visible, not only those at or before its position.
  bool causal = true;
  int32_t n_swa = 0;      // 0: none; else key visible iff q_pos - k_pos < n_swa
  // 0: none; else key visible iff k_pos / n_chunk == q_pos / n_chunk
  // (llama4's chunked attention, the reference's LLAMA_SWA_TYPE_CHUNKED).
  int32_t n_chunk = 0;
  // ALiBi: 0 none; else every visible score gains slope(h) * f16(-|q_pos -
  // k_pos|) after the scale and softcap, with ggml's per-head slopes for
  // this max bias (support/alibi.h).
  float alibi_max_bias = 0.0f;
  // Accumulate V in f16 when v_type is F16, as ggml's CPU flash attention
  // does (default; matches the reference). false: accumulate in f32.
  bool f16_accumulator = true;
  // Paged cache: cache row j lives at physical row
  // page_table[j / page_size] * page_size + j % page_size of k and v.
  // null: row j is physical row j (a dense cache).
  const int32_t* page_table = nullptr;
  int64_t page_size = 0;
  // Sparse attention (indexer_select): query i also masks every key whose
  // position is not among selected[i * selected_width, (i + 1) *
  // selected_width) (-1 entries select nothing). null: no such mask.
  const int32_t* selected = nullptr;
  int64_t selected_width = 0;
  // Decode at depth (one query row, 1024+ cache rows, f16/q8_0 halves) may
  // take the f32 tile kernel instead of the reference's one-row order
  // (attention.cpp); false keeps the reference's order (tests pinning it).
  bool depth_kernel = true;
  // Attention sinks (gpt-oss): one logit per query head [n_head] that joins
  // every softmax's denominator with no value (ggml's flash-attention
  // sinks). null: none.
  const float* sinks = nullptr;
};

// Attention for one sequence (causal unless params.causal is false).
// q: [n_tokens][n_head][head_dim] f32. k: [n_kv][n_head_kv][head_dim],
// v: [n_kv][n_head_kv][head_dim_v], of k_type and v_type (rows through the page
// table when params.page_table is set). q_pos: position of each
// query token; kv_pos: position of each cache row (null: row index). Key j
// is visible to query i iff kv_pos[j] <= q_pos[i] or !params.causal (and the
// window and params.selected allow it).
// out: [n_tokens][n_head][head_dim_v]; a query that sees no key gets zeros.
void attention(const float* q, const void* k, const void* v, const int32_t* q_pos, const int32_t* kv_pos,
               const AttentionParams& params, float* out, ThreadPool& pool);

// Index of the first maximum of x[0..n) (NaNs never win); -1 if n == 0.
int64_t argmax(const float* x, int64_t n);
// The indices of the k largest values, largest first; ties go to the lower
// index. k is clamped to n. Returns the number written.
int64_t top_k(const float* x, int64_t n, int64_t k, int32_t* indices);

// The `sample` op for one row of logits x[0..n) (sample.cpp; docs/ir.md
// "### sample"): params = {temperature, top_k, top_p, min_p}; temperature
// <= 0 is argmax, else a draw among at most max_k (clamped to [1,
// kSampleMaxK]) top_k-ordered candidates, keyed by (seed, pos) only.
// Returns the token; 0 for an empty row.
inline constexpr int64_t kSampleMaxK = 256;
int32_t sample_row(const float* x, int64_t n, const float params[4], uint64_t seed, int32_t pos, int64_t max_k);

}  // namespace vtc::cpu
