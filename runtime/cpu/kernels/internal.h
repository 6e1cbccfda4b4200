// Internal interface between the dispatching code and the per-ISA kernel
// files. Only plain declarations and POD structs live here: the AVX2
// translation units are compiled with -mavx2 -mfma -mf16c, and an inline
// function defined here and compiled there could be merged by the linker
// into code that runs on machines without AVX2.
#pragma once

#include <cstdint>
#include <vector>

namespace vtc::cpu {
enum class Isa : uint8_t;  // kernels.h
}

namespace vtc::cpu::detail {

// Activation blocks (ggml's block_q8_0, block_q8_1, block_q8_K).
struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[32];
};
struct BlockQ8_1 {
  uint16_t d;  // f16 scale
  uint16_t s;  // f16 of d * sum(qs)
  int8_t qs[32];
};
struct BlockQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];  // sums of qs in groups of 16
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36 && sizeof(BlockQ8_K) == 292);

// Weight blocks, field for field as in ggml-common.h (see
// frontends/gguf/dequant.cpp for what each field means).
struct BlockQ4_0 { uint16_t d; uint8_t qs[16]; };
struct BlockQ4_1 { uint16_t d, m; uint8_t qs[16]; };
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ8_0W { uint16_t d; int8_t qs[32]; };
struct BlockIQ4_NL { uint16_t d; uint8_t qs[16]; };
struct BlockQ2_K { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; };
struct BlockQ3_K { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; };
struct BlockQ4_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; };
struct BlockQ5_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
struct BlockQ6_K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };
struct BlockIQ4_XS { uint16_t d; uint16_t scales_h; uint8_t scales_l[4]; uint8_t qs[128]; };
struct BlockMXFP4 { uint8_t e; uint8_t qs[16]; };  // e: E8M0 exponent; qs as IQ4_NL
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0W) == 34 && sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockIQ4_XS) == 136 &&
              sizeof(BlockMXFP4) == 17);

// The IQ4_NL / IQ4_XS codebook.
extern const int8_t kIq4nlValues[16];
// The MXFP4 (E2M1) values, doubled: ggml's kvalues_fp4. The block scale is
// then half the E8M0 power of two, 2^(e-128) (see frontends/gguf/dequant.cpp).
extern const int8_t kMxfp4Values[16];

// Q4_K / Q5_K: the 12 packed scale bytes -> sc[0..7] (bytes 0..7 of out)
// and mins m[0..7] (bytes 8..15).
void unpack_k4_scales(const uint8_t* packed, uint8_t out[16]);
// Q3_K: the 12 packed scale bytes -> 16 signed scales.
void unpack_q3k_scales(const uint8_t* packed, int8_t out[16]);

// Scalar activation quantizers shared by both ISAs (ggml has no SIMD q8_K
// quantizer on x86 either).
void quantize_q8_K_scalar(const float* x, void* y, int64_t n);
void quantize_bf16_scalar(const float* x, void* y, int64_t n);

// Activation (vec_dot) types, indexing QuantKernels::quantize.
enum class ActType : uint8_t { F32 = 0, F16, BF16, Q8_0, Q8_1, Q8_K, Count };

// Converts n f32 values (a whole number of blocks) to the activation type.
using QuantizeFn = void (*)(const float* x, void* y, int64_t n);
// Dot product of one weight row with one converted activation row, n values.
using DotFn = float (*)(int64_t n, const void* w, const void* x);

constexpr int kTypeSlots = 48;  // > every GgmlType value

// GgmlType values of the natively supported weight types (checked against
// support/ggml_type.h in matmul.cpp; that header is not included here).
enum TypeSlot : int {
  kSlotF32 = 0, kSlotF16 = 1, kSlotQ4_0 = 2, kSlotQ4_1 = 3, kSlotQ5_0 = 6, kSlotQ5_1 = 7, kSlotQ8_0 = 8,
  kSlotQ2_K = 10, kSlotQ3_K = 11, kSlotQ4_K = 12, kSlotQ5_K = 13, kSlotQ6_K = 14, kSlotIQ4_NL = 20,
  kSlotIQ4_XS = 23, kSlotBF16 = 30, kSlotMXFP4 = 39,
};

// A register-blocked tile of dot products (gemm_avx2.cpp): for r < rows
// and t < the tile's token count,
//   y[t * y_stride + r] = dot(n, w + r * w_stride, x + t * x_stride)
// (strides in bytes for w and x, in floats for y), bit-identical to the
// table's dot for the same type.
using GemmFn = void (*)(int64_t n, const void* w, int64_t w_stride, const void* x, int64_t x_stride, float* y,
                        int64_t y_stride);
constexpr int kMaxGemmToks = 4;
struct GemmKernels {  // POD (see the top of this file); value-initialize it
  int rows;                     // rows per tile; 0 = no tiles for this type
  int toks;                     // the most tokens per tile
  // The tiles read the activations converted to the activation type and
  // widened back to f32 (exact for f16 and bf16), not the converted rows.
  bool widened_x;
  GemmFn fn[kMaxGemmToks + 1];  // fn[k]: `rows` rows x k tokens, 1 <= k <= toks
  // A single token (decode) also goes through fn[1], `rows` rows at a time,
  // instead of the dot kernel one row at a time (same bits): the tile's
  // independent accumulators then hide the dot's one float dependency chain.
  bool one_token;
};

// Interleaved-8 weights (support/weight_layout.h; packed_x8.cpp). One x8
// block holds block k of 8 consecutive rows:
//   Q4_0: d[r] the rows' scales; qs[32c + 4r + i] = row r's qs[4c + i]
//         (c < 4, i < 4): low nibble value 4c+i, high nibble 16+4c+i.
//   Q4_K: d[r], dmin[r]; scales[8k + r] = row r's scales[k] (k < 12);
//         qs[256p + 32c + 4r + i] = row r's qs[32p + 4c + i] (p < 4, c < 8):
//         low nibble value 64p+4c+i (sub-block 2p), high 64p+32+4c+i.
//   Q8_0: d[r]; qs[32c + 4r + i] = row r's qs[4c + i] (c < 8).
//   Q6_K: ql[512h + 32c + 4r + i] = row r's ql[64h + 4c + i] (h < 2,
//         c < 16); qh[256h + 32c + 4r + i] = row r's qh[32h + 4c + i]
//         (c < 8); scales[8s + r] = row r's scales[s] (s < 16); d[r].
// So one 32-byte load holds 4 consecutive quants of all 8 rows, and one
// broadcast 4-byte group of activations multiplies all of them.
struct BlockQ4_0x8 { uint16_t d[8]; uint8_t qs[128]; };
struct BlockQ4_Kx8 { uint16_t d[8]; uint16_t dmin[8]; uint8_t scales[96]; uint8_t qs[1024]; };
struct BlockQ6_Kx8 { uint8_t ql[1024]; uint8_t qh[512]; int8_t scales[128]; uint16_t d[8]; };
struct BlockQ8_0x8 { uint16_t d[8]; int8_t qs[256]; };
static_assert(sizeof(BlockQ4_0x8) == 8 * sizeof(BlockQ4_0) && sizeof(BlockQ4_Kx8) == 8 * sizeof(BlockQ4_K) &&
              sizeof(BlockQ6_Kx8) == 8 * sizeof(BlockQ6_K) && sizeof(BlockQ8_0x8) == 8 * sizeof(BlockQ8_0W));

// One group of 8 interleaved rows against k tokens (1 <= k <= the table's
// toks): for r < 8 and t < k,
//   y[t * y_stride + r] = dot(row r, token t)
// with `n_blocks` x8 blocks at w, token t's converted activations at
// x + t * x_stride (bytes), and for Q4_0 the per-block sums of token t's
// q8_0 quants at block_sums + t * sums_stride (unused for Q4_K).
//
// Every ISA computes the same bits: per row, the integer dot of each block
// (Q4_K: of each superblock, scales and mins applied in integers) is exact,
// and the float accumulation is, per block in order,
//   Q4_0: acc = fma(f16(d_r) * f16(x.d), float(isum - 8 * block_sum), acc)
//   Q8_0: acc = fma(f16(d_r) * f16(x.d), float(isum), acc)
//   Q4_K: acc = fma(f16(d_r) * x.d, float(isum), acc);
//         acc_min = fma(f16(dmin_r) * x.d, float(sum_j min_j * bsum_j), acc_min);
//         result acc - acc_min; in a call for 4 tokens those two steps are
//         taken per pair of sub-blocks (isum and the mins sum over j = 2p,
//         2p+1), as in llama.cpp's gemm, which gets a matmul's tokens 4 at a
//         time and its last n % 4 through the gemv; matmul groups tokens the
//         same way (4-aligned, only the last group short), or with
//         TokenOrder::EachAsOne takes every group through fn4_each_token
//         (the gemv's per-superblock steps), so that each row of a
//         speculative verify chunk has the bits of its one-token step
//   Q6_K: acc = fma(f16(d_r) * x.d, float(isum - 32 * sum_s sc_s * bsum_s), acc)
//         (isum over the unsigned 6-bit codes)
// For Q4_0 and Q4_K that is the float order of llama.cpp's own repacked
// kernels on x86 (ggml_gemv/gemm_q4_0_8x8_q8_0, ..._q4_K_8x8_q8_K), which
// its CPU backend uses by default there; so those results equal the
// reference's bit for bit. Q8_0 and Q6_K have no such kernels in the
// reference on x86: their x8 results differ from its row kernels (and vtc's)
// by float reassociation, which the weight-layout pass therefore only
// chooses on request.
using PackedFn = void (*)(int64_t n_blocks, const void* w, const void* x, int64_t x_stride, const int32_t* block_sums,
                          int64_t sums_stride, float* y, int64_t y_stride);
struct PackedKernels {  // POD; value-initialize it
  int toks;                        // 0 = no kernel for this type
  PackedFn fn[kMaxGemmToks + 1];   // fn[k]: 8 rows x k tokens
  // Optional: two consecutive x8 groups (16 rows: the group at w, then the
  // one n_blocks x8 blocks further) against k tokens, y[t * y_stride + r]
  // for r < 16; the same bits as two fn[k] calls. Null where a level has
  // none for k tokens; matmul pairs groups only where fn16[toks] is set
  // (then fn stands in for a null fn16[k]).
  PackedFn fn16[kMaxGemmToks + 1];
  // Where fn[kMaxGemmToks] sums in another order than fn[1] (Q4_K): 4
  // tokens, each in fn[1]'s order. Null for the other types.
  PackedFn fn4_each_token;
};

struct QuantKernels {
  QuantizeFn quantize[static_cast<int>(ActType::Count)];
  DotFn dot[kTypeSlots];    // indexed by GgmlType value; null = no native path
  GemmKernels gemm[kTypeSlots];  // optional tiles for several tokens
  PackedKernels x8[kTypeSlots];  // interleaved-8 weights (Q4_0, Q8_0, Q4_K, Q6_K)
};

// Fills the x8 kernels of `t`: the scalar ones (packed_x8.cpp) and the AVX2
// ones (packed_x8_avx2.cpp).
void add_scalar_x8_kernels(QuantKernels& t);
void add_avx2_x8_kernels(QuantKernels& t);

// Fills the AVX2 tiles of `t` (gemm_avx2.cpp).
void add_avx2_gemm_kernels(QuantKernels& t);

const QuantKernels& scalar_quant_kernels();
// Null when the AVX2 translation unit is not part of this build: the AVX2
// level's table (plain AVX2, no AVX-VNNI kernel).
const QuantKernels* avx2_quant_kernels_novnni();
// Each level's kernels, put in place in a copy of the table below it
// (isa.cpp): AVX-VNNI's Q8_0 tiles (quant_avxvnni.cpp), the AVX-512 VNNI
// kernels (*_avx512.cpp), the AVX512-BF16 ones (*_avx512bf16.cpp). Each is
// a no-op when its translation units are not part of this build.
void add_avxvnni_kernels(QuantKernels& t);
void add_avx512_kernels(QuantKernels& t);
// add_avx512_kernels' parts, one per file: Rows-layout dots and tiles
// (quant_avx512.cpp), F16/F32 tiles (gemm_float_avx512.cpp), x8 kernels
// (packed_x8_avx512.cpp).
void add_avx512_row_kernels(QuantKernels& t);
void add_avx512_float_tiles(QuantKernels& t);
void add_avx512_x8_kernels(QuantKernels& t);
void add_avx512bf16_kernels(QuantKernels& t);
// The table of `isa` (call only for a level isa_supported() accepts).
const QuantKernels& quant_kernels(Isa isa);
bool cpu_has_avxvnni();

// Float helpers with per-ISA versions.
struct FloatKernels {
  double (*sum_squares)(const float* x, int64_t n);  // sum of (double)(x*x)
  void (*add)(const float* a, const float* b, float* y, int64_t n);
  void (*mul)(const float* a, const float* b, float* y, int64_t n);
  void (*scale)(const float* x, float s, float* y, int64_t n);
  float (*dot_f32)(const float* a, const float* b, int64_t n);
  float (*dot_f16)(const uint16_t* a, const uint16_t* b, int64_t n);
  void (*mad_f32)(float* y, const float* x, float v, int64_t n);         // y += x*v
  void (*mad_f16)(uint16_t* y, const uint16_t* x, float v, int64_t n);   // y = f16(y + x*v)
  void (*mad_f32_f16)(float* y, const uint16_t* x, float v, int64_t n);  // y += f32(x)*v
  void (*scale_f16)(uint16_t* y, float v, int64_t n);                    // y = f16(y*v)
  void (*f32_to_f16)(const float* x, uint16_t* y, int64_t n);
  void (*silu)(const float* x, float* y, int64_t n);                     // x/(1+exp(-x))
  // ggml_vec_dot_f32's vector part: 4 FMA chains of L lanes over n values
  // (a multiple of 4L), reduced in ggml's order (L as dot_f16's). Null in
  // the scalar table: the reference's builds without FMA sum in order.
  float (*dot_f32_blocks)(const float* a, const float* b, int64_t n);
};

const FloatKernels& scalar_float_kernels();
// AVX2 tables; they differ only in dot_f16's summation order, which follows
// ggml's AVX2 build (8 lanes) or its AVX-512 builds (16 lanes), whichever
// the reference would load on this machine (see reference_lanes()).
const FloatKernels* avx2_float_kernels();
const FloatKernels* avx2_float_kernels_l16();

// The SIMD width (8 or 16 floats) of the llama.cpp CPU backend variant that
// this machine would load: 16 with AVX-512F, else 8. VTC_CPU_REF_LANES=8|16
// overrides it.
int reference_lanes();
// The reference's vector width for the active ISA: reference_lanes() where
// the active level has FMA, 0 on the scalar level (standing for the
// reference's builds without FMA, whose sums run in plain order).
int reference_vector_width();

// The tables for the active ISA.
const QuantKernels& active_quant_kernels();
const FloatKernels& active_float_kernels();

// Exact f16 -> f32 through a 65536-entry table (scalar code paths).
const float* fp16_table();

// The reference's iq4_nl x q8_0 vec_dot in its float order (two
// accumulators; kv_cache.cpp), for the KV cache's K dot.
float kv_dot_iq4_nl(int64_t n, const void* k, const void* q);

// ggml_vec_dot_f32 in the reference's summation order for the active ISA
// (linear_attention.cpp, which documents that order).
float vec_dot_f32_ref(const float* a, const float* b, int64_t n);

// Token indices of each sequence, in batch order. Throws vtc::Error naming
// `op` for a sequence index outside [0, n_seqs).
std::vector<std::vector<int64_t>> tokens_by_sequence(const int32_t* seq, int64_t n_tokens, int64_t n_seqs,
                                                     const char* op);

}  // namespace vtc::cpu::detail
