// The device-side helper library shared by generated kernels: the prelude
// every kernel gets (scalar conversions, warp and block reductions) and
// named helpers an emitter pulls in on demand (quant block decoders).
//
// Conversions are written without cuda_fp16.h so NVRTC compiles each kernel
// without any include path (faster compiles, no toolkit headers needed at
// run time): f16 <-> f32 through the PTX cvt instructions (round to nearest
// even, like the CPU's fp32_to_fp16), bf16 by bit manipulation with the same
// rounding as the CPU's fp32_to_bf16. The simulated device compiles kernels
// without __CUDA_ARCH__ and gets the same conversions from its host header
// (runtime/cuda/sim/kernel_host.h).
//
// Quantized weights are decoded 32 values at a time: deq32_<type>(row, c, y)
// writes values 32c .. 32c+31 of a weight row into y. Every block size (32
// or 256) is a multiple of 32, so GEMV and GEMM kernels walk any type in the
// same 32-value chunks. The block layouts are those of
// frontends/gguf/dequant.cpp (see its header); each formula keeps the CPU's
// evaluation order (e.g. (d * sc) * q - (dmin * m)) so weights decode to
// the same floats as on the CPU.
#include <fmt/format.h>

#include <map>

#include "codegen/cuda/emit.h"
#include "support/error.h"

namespace vtc::cuda {

std::string prelude_source() {
  return R"(typedef unsigned char u8;
typedef unsigned int u32;
#ifdef __CUDA_ARCH__
__device__ __forceinline__ float vtc_h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ unsigned short vtc_f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
#else
__device__ __forceinline__ float vtc_h2f(unsigned short h) { return vtc_sim_h2f(h); }
__device__ __forceinline__ unsigned short vtc_f2h(float f) { return vtc_sim_f2h(f); }
#endif
__device__ __forceinline__ float vtc_bf2f(unsigned short h) { return __uint_as_float(((u32)h) << 16); }
__device__ __forceinline__ unsigned short vtc_f2bf(float f) {
  const u32 x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
  return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ u32 vtc_ld16(const u8* p) { return (u32)p[0] | ((u32)p[1] << 8); }
__device__ __forceinline__ u32 vtc_ld32(const u8* p) { return vtc_ld16(p) | (vtc_ld16(p + 2) << 16); }
__device__ __forceinline__ float vtc_ldh(const u8* p) { return vtc_h2f((unsigned short)vtc_ld16(p)); }
__device__ __forceinline__ float vtc_warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double vtc_warp_sum_d(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float vtc_warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Block-wide reductions (blockDim.x a multiple of 32); every thread gets the
// result. The leading barrier makes back-to-back calls safe.
__device__ double vtc_block_sum_d(double v) {
  __shared__ double part[32];
  v = vtc_warp_sum_d(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? part[lane] : 0.0;
  return vtc_warp_sum_d(v);
}
__device__ float vtc_block_max(float v) {
  __shared__ float part[32];
  v = vtc_warp_max(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? part[lane] : -__int_as_float(0x7f800000);
  return vtc_warp_max(v);
}
)";
}

namespace {

// Quant decoders and the other shared helpers: name -> (deps, source).
const std::map<std::string, HelperSource>& helpers() {
  static const std::map<std::string, HelperSource> table = {
      {"gelu", {{}, R"(__device__ __forceinline__ float vtc_gelu(float v) {
  if (v <= -10.0f) return 0.0f;
  if (v >= 10.0f) return v;
  const float f = vtc_h2f(vtc_f2h(v));
  const float g = 0.5f * f * (1.0f + tanhf(0.79788456080286535587989211986876f * f * (1.0f + 0.044715f * f * f)));
  return vtc_h2f(vtc_f2h(g));
}
)"}},
      // The top_k order: value descending, NaN last, ties to the lower index.
      {"order_before", {{}, R"(__device__ __forceinline__ bool vtc_before(float va, long long ia, float vb, long long ib) {
  const bool na = isnan(va), nb = isnan(vb);
  if (na != nb) return nb;
  if (!na && va != vb) return va > vb;
  return ia < ib;
}
)"}},
      // A row's first maximum over the block (NaN never wins), as argmax
      // and greedy sampling choose it; 0x7fffffffffffffff when nothing is
      // above -inf. sv/si: blockDim.x shared slots; every thread gets it.
      // With `idx`, element c stands for index idx[c] (< 0: no element), in
      // increasing c order: a list of candidates (sampling's second pass).
      {"block_argmax", {{}, R"(__device__ long long vtc_block_argmax(const float* xr, long long N, float* sv, long long* si, const int* idx = 0) {
  float bv = -__int_as_float(0x7f800000);
  long long bi = 0x7fffffffffffffffLL;
  for (long long c = threadIdx.x; c < N; c += blockDim.x)
    if ((!idx || idx[c] >= 0) && xr[c] > bv) { bv = xr[c]; bi = idx ? (long long)idx[c] : c; }
  __syncthreads();
  sv[threadIdx.x] = bv; si[threadIdx.x] = bi;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const float ov = sv[threadIdx.x + s]; const long long oi = si[threadIdx.x + s];
      if (ov > sv[threadIdx.x] || (ov == sv[threadIdx.x] && oi < si[threadIdx.x])) { sv[threadIdx.x] = ov; si[threadIdx.x] = oi; }
    }
    __syncthreads();
  }
  return si[0];
}
)"}},
      // The best element of a row in the top_k order strictly after the
      // previous pick (pi < 0: the best of all), over the block: top_k and
      // sampling's candidates. Returns its index (-1: none left) and its
      // value in *v, for every thread. `idx` as for vtc_block_argmax.
      {"block_best_after", {{"order_before"}, R"(__device__ long long vtc_block_best_after(const float* xr, long long N, float pv, long long pi, float* sv, long long* si, float* v, const int* idx = 0) {
  float bv = 0.0f; long long bi = -1;
  for (long long c = threadIdx.x; c < N; c += blockDim.x) {
    const float x = xr[c];
    const long long g = idx ? (long long)idx[c] : c;
    if (g < 0 || (pi >= 0 && !vtc_before(pv, pi, x, g))) continue;
    if (bi < 0 || vtc_before(x, g, bv, bi)) { bv = x; bi = g; }
  }
  __syncthreads();
  sv[threadIdx.x] = bv; si[threadIdx.x] = bi;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const float ov = sv[threadIdx.x + s]; const long long oi = si[threadIdx.x + s];
      if (oi >= 0 && (si[threadIdx.x] < 0 || vtc_before(ov, oi, sv[threadIdx.x], si[threadIdx.x]))) { sv[threadIdx.x] = ov; si[threadIdx.x] = oi; }
    }
    __syncthreads();
  }
  *v = sv[0];
  return si[0];
}
)"}},
      // vtc_block_best_after over NPT elements each thread holds in
      // registers (v[e] of index g[e], g < 0: none): a warp reduction by
      // shuffles, then warp 0 reduces the warps' bests (sv/si: 33 slots).
      // Sampling's passes: no shared or global reads per pass.
      {"block_best_regs", {{"order_before"}, R"(template <int NPT>
__device__ int vtc_block_best_regs(const float* v, const int* g, float pv, int pi, float* sv, int* si, float* out) {
  float bv = 0.0f; int bi = -1;
  for (int e = 0; e < NPT; ++e) {
    if (g[e] < 0 || (pi >= 0 && !vtc_before(pv, pi, v[e], g[e]))) continue;
    if (bi < 0 || vtc_before(v[e], g[e], bv, bi)) { bv = v[e]; bi = g[e]; }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (oi >= 0 && (bi < 0 || vtc_before(ov, oi, bv, bi))) { bv = ov; bi = oi; }
  }
  __syncthreads();
  const int lane = threadIdx.x & 31;
  if (lane == 0) { sv[threadIdx.x >> 5] = bv; si[threadIdx.x >> 5] = bi; }
  __syncthreads();
  if (threadIdx.x < 32) {
    const bool has = lane < (int)(blockDim.x >> 5);
    bv = has ? sv[lane] : 0.0f;
    bi = has ? si[lane] : -1;
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (oi >= 0 && (bi < 0 || vtc_before(ov, oi, bv, bi))) { bv = ov; bi = oi; }
    }
    if (lane == 0) { sv[32] = bv; si[32] = bi; }
  }
  __syncthreads();
  *out = sv[32];
  return si[32];
}
)"}},
      {"iq4_values", {{}, R"(__device__ __constant__ signed char vtc_iq4_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
)"}},
      {"scale_min_k4", {{}, R"(__device__ __forceinline__ void vtc_scale_min_k4(int j, const u8* q, int& sc, int& mn) {
  if (j < 4) { sc = q[j] & 63; mn = q[j + 4] & 63; }
  else { sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4); mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4); }
}
)"}},
      {"deq32_f32", {{}, R"(__device__ __forceinline__ void deq32_f32(const u8* row, long long c, float* y) {
  const float* p = (const float*)row + 32 * c;
  for (int l = 0; l < 32; ++l) y[l] = p[l];
}
)"}},
      {"deq32_f16", {{}, R"(__device__ __forceinline__ void deq32_f16(const u8* row, long long c, float* y) {
  const unsigned short* p = (const unsigned short*)row + 32 * c;
  for (int l = 0; l < 32; ++l) y[l] = vtc_h2f(p[l]);
}
)"}},
      {"deq32_bf16", {{}, R"(__device__ __forceinline__ void deq32_bf16(const u8* row, long long c, float* y) {
  const unsigned short* p = (const unsigned short*)row + 32 * c;
  for (int l = 0; l < 32; ++l) y[l] = vtc_bf2f(p[l]);
}
)"}},
      {"deq32_q4_0", {{}, R"(__device__ __forceinline__ void deq32_q4_0(const u8* row, long long c, float* y) {
  const u8* b = row + 18 * c; const float d = vtc_ldh(b); const u8* qs = b + 2;
  for (int j = 0; j < 16; ++j) { y[j] = (float)((qs[j] & 0xf) - 8) * d; y[j + 16] = (float)((qs[j] >> 4) - 8) * d; }
}
)"}},
      {"deq32_q4_1", {{}, R"(__device__ __forceinline__ void deq32_q4_1(const u8* row, long long c, float* y) {
  const u8* b = row + 20 * c; const float d = vtc_ldh(b), m = vtc_ldh(b + 2); const u8* qs = b + 4;
  for (int j = 0; j < 16; ++j) { y[j] = (float)(qs[j] & 0xf) * d + m; y[j + 16] = (float)(qs[j] >> 4) * d + m; }
}
)"}},
      {"deq32_q5_0", {{}, R"(__device__ __forceinline__ void deq32_q5_0(const u8* row, long long c, float* y) {
  const u8* b = row + 22 * c; const float d = vtc_ldh(b); const u32 qh = vtc_ld32(b + 2); const u8* qs = b + 6;
  for (int i = 0; i < 32; ++i) {
    const int lo = i < 16 ? (qs[i] & 0xf) : (qs[i - 16] >> 4);
    y[i] = (float)((lo | (int)(((qh >> i) & 1u) << 4)) - 16) * d;
  }
}
)"}},
      {"deq32_q5_1", {{}, R"(__device__ __forceinline__ void deq32_q5_1(const u8* row, long long c, float* y) {
  const u8* b = row + 24 * c; const float d = vtc_ldh(b), m = vtc_ldh(b + 2); const u32 qh = vtc_ld32(b + 4); const u8* qs = b + 8;
  for (int i = 0; i < 32; ++i) {
    const int lo = i < 16 ? (qs[i] & 0xf) : (qs[i - 16] >> 4);
    y[i] = (float)(lo | (int)(((qh >> i) & 1u) << 4)) * d + m;
  }
}
)"}},
      {"deq32_q8_0", {{}, R"(__device__ __forceinline__ void deq32_q8_0(const u8* row, long long c, float* y) {
  const u8* b = row + 34 * c; const float d = vtc_ldh(b);
  for (int i = 0; i < 32; ++i) y[i] = (float)(signed char)b[2 + i] * d;
}
)"}},
      {"deq32_iq4_nl", {{"iq4_values"}, R"(__device__ __forceinline__ void deq32_iq4_nl(const u8* row, long long c, float* y) {
  const u8* b = row + 18 * c; const float d = vtc_ldh(b); const u8* qs = b + 2;
  for (int j = 0; j < 16; ++j) { y[j] = d * (float)vtc_iq4_values[qs[j] & 0xf]; y[j + 16] = d * (float)vtc_iq4_values[qs[j] >> 4]; }
}
)"}},
      // MXFP4: E2M1 codes (doubled, as kvalues_fp4) times 2^(e-128), the
      // bits of ggml_e8m0_to_fp32_half (subnormal for e < 2).
      {"fp4_values", {{}, R"(__device__ __constant__ signed char vtc_fp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
)"}},
      {"deq32_mxfp4", {{"fp4_values"}, R"(__device__ __forceinline__ void deq32_mxfp4(const u8* row, long long c, float* y) {
  const u8* b = row + 17 * c; const u32 e = b[0]; const u8* qs = b + 1;
  const float d = __uint_as_float(e < 2 ? (0x00200000u << e) : ((e - 1) << 23));
  for (int j = 0; j < 16; ++j) { y[j] = (float)vtc_fp4_values[qs[j] & 0xf] * d; y[j + 16] = (float)vtc_fp4_values[qs[j] >> 4] * d; }
}
)"}},
      // K-quants: chunk j = c % 8 of super-block c / 8. In the CPU loops a
      // chunk is half h = j / 4 at bit shift 2 * (j % 4) (Q2_K/Q3_K), or
      // byte group j / 2 at nibble j % 2 (Q4_K/Q5_K).
      {"deq32_q2_k", {{}, R"(__device__ __forceinline__ void deq32_q2_k(const u8* row, long long c, float* y) {
  const u8* b = row + 84 * (c >> 3); const int j = (int)(c & 7), half = j >> 2, shift = 2 * (j & 3);
  const u8* scales = b; const u8* q = b + 16 + 32 * half;
  const float d = vtc_ldh(b + 80), dmin = vtc_ldh(b + 82);
  for (int l = 0; l < 32; ++l) {
    const int s = 8 * half + 2 * (j & 3) + (l >> 4);
    const float dl = d * (float)(scales[s] & 0xf), ml = dmin * (float)(scales[s] >> 4);
    y[l] = dl * (float)((q[l] >> shift) & 3) - ml;
  }
}
)"}},
      {"deq32_q3_k", {{}, R"(__device__ __forceinline__ void deq32_q3_k(const u8* row, long long c, float* y) {
  const u8* b = row + 110 * (c >> 3); const int j = (int)(c & 7), half = j >> 2, shift = 2 * (j & 3), bit = j;
  const u8* hmask = b; const u8* q = b + 32 + 32 * half; const u8* sc = b + 96;
  const float d = vtc_ldh(b + 108);
  for (int l = 0; l < 32; ++l) {
    const int s = 8 * half + 2 * (j & 3) + (l >> 4);
    const int lo = s < 8 ? (sc[s] & 0xf) : (sc[s - 8] >> 4);
    const int hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
    const float dl = d * (float)((lo | (hi << 4)) - 32);
    const int v = ((q[l] >> shift) & 3) - (((hmask[l] >> bit) & 1) ? 0 : 4);
    y[l] = dl * (float)v;
  }
}
)"}},
      {"deq32_q4_k", {{"scale_min_k4"}, R"(__device__ __forceinline__ void deq32_q4_k(const u8* row, long long c, float* y) {
  const u8* b = row + 144 * (c >> 3); const int j = (int)(c & 7), nib = j & 1;
  const float d = vtc_ldh(b), dmin = vtc_ldh(b + 2); const u8* q = b + 16 + 32 * (j >> 1);
  int sc, mn; vtc_scale_min_k4(j, b + 4, sc, mn);
  const float dl = d * (float)sc, ml = dmin * (float)mn;
  for (int l = 0; l < 32; ++l) y[l] = dl * (float)((q[l] >> (4 * nib)) & 0xf) - ml;
}
)"}},
      {"deq32_q5_k", {{"scale_min_k4"}, R"(__device__ __forceinline__ void deq32_q5_k(const u8* row, long long c, float* y) {
  const u8* b = row + 176 * (c >> 3); const int j = (int)(c & 7), nib = j & 1;
  const float d = vtc_ldh(b), dmin = vtc_ldh(b + 2); const u8* qh = b + 16; const u8* q = b + 48 + 32 * (j >> 1);
  int sc, mn; vtc_scale_min_k4(j, b + 4, sc, mn);
  const float dl = d * (float)sc, ml = dmin * (float)mn;
  for (int l = 0; l < 32; ++l) y[l] = dl * (float)(((q[l] >> (4 * nib)) & 0xf) + (((qh[l] >> j) & 1) ? 16 : 0)) - ml;
}
)"}},
      // Q6_K: chunk j is quarter k = j % 4 of 128-value half j / 4.
      {"deq32_q6_k", {{}, R"(__device__ __forceinline__ void deq32_q6_k(const u8* row, long long c, float* y) {
  const u8* b = row + 210 * (c >> 3); const int j = (int)(c & 7), half = j >> 2, k = j & 3;
  const u8* ql = b + 64 * half + 32 * (k & 1); const u8* qh = b + 128 + 32 * half;
  const signed char* sc = (const signed char*)(b + 192 + 8 * half);
  const float d = vtc_ldh(b + 208);
  for (int l = 0; l < 32; ++l) {
    const int lo = k < 2 ? (ql[l] & 0xf) : (ql[l] >> 4);
    const int q = (lo | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
    y[l] = d * (float)sc[(l >> 4) + 2 * k] * (float)q;
  }
}
)"}},
      {"deq32_iq4_xs", {{"iq4_values"}, R"(__device__ __forceinline__ void deq32_iq4_xs(const u8* row, long long c, float* y) {
  const u8* b = row + 136 * (c >> 3); const int ib = (int)(c & 7);
  const float d = vtc_ldh(b); const u32 scales_h = vtc_ld16(b + 2); const u8* qs = b + 8 + 16 * ib;
  const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xf) | (((scales_h >> (2 * ib)) & 3) << 4);
  const float dl = d * (float)(ls - 32);
  for (int l = 0; l < 16; ++l) { y[l] = dl * (float)vtc_iq4_values[qs[l] & 0xf]; y[l + 16] = dl * (float)vtc_iq4_values[qs[l] >> 4]; }
}
)"}},
  };
  return table;
}

// A helper of any table: this file's, the decode GEMV's (helpers_dot.cpp)
// or the tensor cores' (helpers_mma.cpp).
const HelperSource* find_helper(const std::string& name) {
  for (const auto* table : {&helpers(), &dot_helpers(), &mma_helpers(), &kv_cache_helpers()})
    if (auto it = table->find(name); it != table->end()) return &it->second;
  return nullptr;
}

}  // namespace

std::string helper_source(const std::string& name) {
  const HelperSource* h = find_helper(name);
  if (!h) throw Error("cuda codegen: unknown device helper " + name);
  return h->source;
}

std::vector<std::string> helper_deps(const std::string& name) {
  const HelperSource* h = find_helper(name);
  return h ? h->deps : std::vector<std::string>{};
}

bool quant_supported(GgmlType t) {
  switch (t) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16:
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::Q8_0:
    case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
    case GgmlType::IQ4_NL: case GgmlType::IQ4_XS: case GgmlType::MXFP4:
      return true;
    default:
      return false;
  }
}

std::string deq32_helper(GgmlType t) {
  std::string name(ggml_type_name(t));
  for (auto& ch : name) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return "deq32_" + name;
}

}  // namespace vtc::cuda
