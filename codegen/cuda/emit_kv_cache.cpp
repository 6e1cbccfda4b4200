// The KV cache's element types on the CUDA target (--cache-type-k/-v):
// how emit_attention.cpp's generic kernels store and read a cache half of
// any of llama.cpp's cache types, with the CPU's numerics
// (runtime/cpu/kernels/kv_cache.cpp, attention.cpp's one-row typed loop).
//
// Storing (kv_append): a unit is an element of an f32, f16 or bf16 half
// (f16 and bf16 round to nearest even) or a 32-value block of a block type,
// quantized by one thread with the CPU's algorithm and float operations
// written as explicit roundings (the "kv_quant" helpers): q8_0 as the
// CPU's activation quantizer (d = amax / 127, q = rn(x * 127 / amax)),
// q4_0/q5_0 from the value of largest magnitude, q4_1/q5_1 from the min and
// max, iq4_nl's nearest codebook entries and least-squares scale. The bytes
// equal the CPU's (the op cases compare one-half states byte for byte).
//
// Reading, per warp (one query row; lane l holds dims l, l + 32, ...):
//   the query: K f16 or f32: q rounded to f16; bf16: to bf16; a block type:
//     each 32-dim block (one register across the warp) quantized to q8_0
//     (q8_1 for q4_1 and q5_1: also s = f16(d * sum)) as the CPU's
//     quantizer does, codes in qc[], scales in qd[] (qs[] the q8_1 sums);
//   the score of a row: the lane's products, code by code and block by block
//     (d_k * d_q) * (code_k * code_q) (+ m_k * s_q on lane 0 for the types
//     with a min), then the warp sum: the CPU's integer block sums scaled
//     once per block, here reassociated (a few ulps);
//   a V element: its block's value as the CPU's dequantize_row computes it
//     ((code - offset) * d, or code * d + m with two roundings, d *
//     codebook[code]); f32 rounded to f16 (an f32 cache attends as f16, as
//     llama.cpp's flash attention casts it); bf16 widened.
#include <fmt/format.h>

#include <cctype>

#include "codegen/cuda/emit.h"
#include "support/error.h"
#include "support/kv_cache_type.h"

namespace vtc::cuda {

const std::map<std::string, HelperSource>& kv_cache_helpers() {
  static const std::map<std::string, HelperSource> table = {
      // One 32-value block of x quantized into y (the block's bytes), for
      // each block type of the KV cache; the CPU's operations in order.
      {"kv_quant", {{"iq4_values"}, R"(__device__ __forceinline__ float vtc_kv_absmax_signed(const float* x) {
  float amax = 0.0f, m = 0.0f;
  for (int j = 0; j < 32; ++j) if (amax < fabsf(x[j])) { amax = fabsf(x[j]); m = x[j]; }
  return m;
}
__device__ __forceinline__ void vtc_kv_minmax(const float* x, float& mn, float& mx) {
  mn = 3.402823466e38f; mx = -3.402823466e38f;
  for (int j = 0; j < 32; ++j) { mn = fminf(mn, x[j]); mx = fmaxf(mx, x[j]); }
}
__device__ __forceinline__ void vtc_kv_sth(u8* p, float f) { const unsigned short h = vtc_f2h(f); p[0] = (u8)h; p[1] = (u8)(h >> 8); }
__device__ __forceinline__ void vtc_kv_nibbles(const int* q, u8* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = (u8)((q[j] & 15) | ((q[j + 16] & 15) << 4));
}
__device__ __forceinline__ void vtc_kv_qh(const int* q, u8* qh) {
  u32 h = 0;
  for (int j = 0; j < 32; ++j) h |= (u32)((q[j] >> 4) & 1) << j;
  qh[0] = (u8)h; qh[1] = (u8)(h >> 8); qh[2] = (u8)(h >> 16); qh[3] = (u8)(h >> 24);
}
__device__ void vtc_kvq_q8_0(const float* x, u8* y) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = fmaxf(amax, fabsf(x[j]));
  const float d = __fdiv_rn(amax, 127.0f), id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
  vtc_kv_sth(y, d);
  for (int j = 0; j < 32; ++j) y[2 + j] = (u8)(signed char)__float2int_rn(__fmul_rn(x[j], id));
}
__device__ void vtc_kvq_q4_0(const float* x, u8* y) {
  const float d = __fdiv_rn(vtc_kv_absmax_signed(x), -8.0f), id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = min(15, (int)__fadd_rn(__fmul_rn(x[j], id), 8.5f));
  vtc_kv_sth(y, d); vtc_kv_nibbles(q, y + 2);
}
__device__ void vtc_kvq_q4_1(const float* x, u8* y) {
  float mn, mx; vtc_kv_minmax(x, mn, mx);
  const float d = __fdiv_rn(__fsub_rn(mx, mn), 15.0f), id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = min(15, (int)__fadd_rn(__fmul_rn(__fsub_rn(x[j], mn), id), 0.5f));
  vtc_kv_sth(y, d); vtc_kv_sth(y + 2, mn); vtc_kv_nibbles(q, y + 4);
}
__device__ void vtc_kvq_q5_0(const float* x, u8* y) {
  const float d = __fdiv_rn(vtc_kv_absmax_signed(x), -16.0f), id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = min(31, (int)__fadd_rn(__fmul_rn(x[j], id), 16.5f));
  vtc_kv_sth(y, d); vtc_kv_qh(q, y + 2); vtc_kv_nibbles(q, y + 6);
}
__device__ void vtc_kvq_q5_1(const float* x, u8* y) {
  float mn, mx; vtc_kv_minmax(x, mn, mx);
  const float d = __fdiv_rn(__fsub_rn(mx, mn), 31.0f), id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = (int)__fadd_rn(__fmul_rn(__fsub_rn(x[j], mn), id), 0.5f) & 255;
  vtc_kv_sth(y, d); vtc_kv_sth(y + 2, mn); vtc_kv_qh(q, y + 4); vtc_kv_nibbles(q, y + 8);
}
__device__ __forceinline__ int vtc_kv_nearest(float v) {
  if (v <= (float)vtc_iq4_values[0]) return 0;
  if (v >= (float)vtc_iq4_values[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) { const int mid = (lo + hi) / 2; if (v < (float)vtc_iq4_values[mid]) hi = mid; else lo = mid; }
  return __fsub_rn(v, (float)vtc_iq4_values[hi - 1]) < __fsub_rn((float)vtc_iq4_values[hi], v) ? hi - 1 : hi;
}
__device__ void vtc_kvq_iq4_nl(const float* x, u8* y) {
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = 0;
  const float m = vtc_kv_absmax_signed(x);
  float d = 0.0f;
  if (fabsf(m) >= 1e-15f) {
    const float id = __fdiv_rn(1.0f, __fdiv_rn(m, (float)vtc_iq4_values[0]));
    float sumqx = 0.0f, sumq2 = 0.0f;
    for (int j = 0; j < 32; ++j) {
      q[j] = vtc_kv_nearest(__fmul_rn(id, x[j]));
      const float v = (float)vtc_iq4_values[q[j]], w = __fmul_rn(x[j], x[j]);
      sumqx = __fadd_rn(sumqx, __fmul_rn(__fmul_rn(w, v), x[j]));
      sumq2 = __fadd_rn(sumq2, __fmul_rn(__fmul_rn(w, v), v));
    }
    d = sumq2 > 0.0f ? __fdiv_rn(sumqx, sumq2) : 0.0f;
  }
  vtc_kv_sth(y, d); vtc_kv_nibbles(q, y + 2);
}
)"}},
  };
  return table;
}

namespace {

bool is_block(GgmlType t) { return ggml_traits(t).quantized; }

// The C name of a block type in the helpers: q8_0, iq4_nl, ...
std::string type_tag(GgmlType t) {
  std::string s(ggml_type_name(t));
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Bytes of one 32-value block.
int64_t block_bytes(GgmlType t) { return int64_t(ggml_traits(t).block_bytes); }

// The signed code of value `j` of the block at `b` that the CPU's integer
// dot multiplies (offset taken off for q4_0 and q5_0; raw for the types with
// a min; the codebook entry for iq4_nl).
std::string code_expr(GgmlType t, const std::string& b, const std::string& j) {
  const std::string nib = [&](int qs) {
    return fmt::format("({1} < 16 ? ({0}[{2} + {1}] & 15) : ({0}[{2} + {1} - 16] >> 4))", b, j, qs);
  }(t == GgmlType::Q4_1 ? 4 : t == GgmlType::Q5_0 ? 6 : t == GgmlType::Q5_1 ? 8 : 2);
  const std::string hi = [&](int qh) { return fmt::format("((int)((vtc_ld32({0} + {2}) >> {1}) & 1u) << 4)", b, j, qh); }(
      t == GgmlType::Q5_0 ? 2 : 4);
  switch (t) {
    case GgmlType::Q8_0: return fmt::format("(int)(signed char){}[2 + {}]", b, j);
    case GgmlType::Q4_0: return "(" + nib + " - 8)";
    case GgmlType::Q4_1: return nib;
    case GgmlType::Q5_0: return "((" + nib + " | " + hi + ") - 16)";
    case GgmlType::Q5_1: return "(" + nib + " | " + hi + ")";
    case GgmlType::IQ4_NL: return "(int)vtc_iq4_values[" + nib + "]";
    default: break;
  }
  throw Error(fmt::format("cuda codegen: {} is not a KV cache block type", ggml_type_name(t)));
}

bool has_min(GgmlType t) { return t == GgmlType::Q4_1 || t == GgmlType::Q5_1; }

}  // namespace

KvHalf kv_half(GgmlType type, std::string state, int half, int64_t hkv, int64_t d) {
  KvHalf h;
  h.type = type, h.state = std::move(state), h.half = half;
  if (is_block(type)) {
    h.head = d / 32 * block_bytes(type);
    h.ctype = "u8";
  } else {
    h.head = d;
    h.ctype = type == GgmlType::F32 ? "float" : "unsigned short";
  }
  h.row = hkv * h.head;
  h.units = is_block(type) ? hkv * (d / 32) : hkv * d;
  return h;
}

bool KvHalf::block() const { return is_block(type); }

std::string kv_store_unit(const KvHalf& h, const std::string& pool, const std::string& src, int64_t d) {
  if (!h.block()) {
    const std::string v = "(" + src + ")[u]";
    const std::string stored = h.type == GgmlType::F32 ? v : h.type == GgmlType::F16 ? "vtc_f2h(" + v + ")" : "vtc_f2bf(" + v + ")";
    return fmt::format("{}[row * {} + u] = {};", pool, h.row, stored);
  }
  const int64_t nb = d / 32;
  return fmt::format("vtc_kvq_{}({} + (u / {}) * {} + (u % {}) * 32, {} + row * {} + (u / {}) * {} + (u % {}) * {});",
                     type_tag(h.type), src, nb, d, nb, pool, h.row, nb, h.head, nb, block_bytes(h.type));
}

std::string kv_query_prologue(const KvHalf& k) {
  if (!k.block()) {
    const std::string round = k.type == GgmlType::BF16 ? "vtc_bf2f(vtc_f2bf(qv[i]))" : "vtc_h2f(vtc_f2h(qv[i]))";
    return fmt::format("  for (int i = 0; i < DL; ++i) qv[i] = {};\n", round);
  }
  // D is a multiple of 32 here: block i is register i across the warp.
  return fmt::format(R"(  int qc[DL];
  float qd[DL], qsum[DL];
  for (int i = 0; i < DL; ++i) {{
    const float amax = vtc_warp_max(fabsf(qv[i]));
    const float d = __fdiv_rn(amax, 127.0f), id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
    qc[i] = __float2int_rn(__fmul_rn(qv[i], id));
    qd[i] = vtc_h2f(vtc_f2h(d));
    int sum = qc[i];
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    qsum[i] = {};
  }}
)",
                     has_min(k.type) ? "vtc_h2f(vtc_f2h(__fmul_rn(d, (float)sum)))" : "0.0f");
}

std::string kv_score(const KvHalf& k) {
  if (!k.block()) {
    const std::string load = k.type == GgmlType::F32   ? "vtc_h2f(vtc_f2h(kr[lane + 32 * i]))"
                             : k.type == GgmlType::F16 ? "vtc_h2f(kr[lane + 32 * i])"
                                                       : "vtc_bf2f(kr[lane + 32 * i])";
    return fmt::format("      for (int i = 0; i < DL; ++i) if (lane + 32 * i < D) s += qv[i] * {};\n", load);
  }
  const int64_t bb = block_bytes(k.type);
  std::string body = fmt::format(R"(      for (int i = 0; i < DL; ++i) {{
        const u8* kb = kr + i * {0};
        s += __fmul_rn(vtc_ldh(kb), qd[i]) * (float)({1} * qc[i]);
)",
                                 bb, code_expr(k.type, "kb", "lane"));
  if (has_min(k.type)) body += "        if (lane == 0) s += vtc_ldh(kb + 2) * qsum[i];\n";
  return body + "      }\n";
}

std::string kv_value(const KvHalf& v) {
  switch (v.type) {
    case GgmlType::F32: return "vtc_h2f(vtc_f2h(vr[lane + 32 * i]))";
    case GgmlType::F16: return "vtc_h2f(vr[lane + 32 * i])";
    case GgmlType::BF16: return "vtc_bf2f(vr[lane + 32 * i])";
    default: break;
  }
  const std::string b = fmt::format("(vr + i * {})", block_bytes(v.type));
  const std::string code = "(float)" + code_expr(v.type, b, "lane");
  if (v.type == GgmlType::IQ4_NL) return fmt::format("__fmul_rn(vtc_ldh({}), {})", b, code);
  if (has_min(v.type)) return fmt::format("__fadd_rn(__fmul_rn({}, vtc_ldh({})), vtc_ldh({} + 2))", code, b, b);
  return fmt::format("__fmul_rn({}, vtc_ldh({}))", code, b);
}

std::vector<std::string> kv_helpers(const KvHalf& k, const KvHalf& v) {
  std::vector<std::string> out;
  if (k.block() || v.block()) out.push_back("kv_quant");
  return out;
}

}  // namespace vtc::cuda
