// Device helpers of the decode GEMV (emit_gemv.cpp): the integer dot of one
// 32-value chunk of a quantized weight row with the same chunk of up to 8
// activation rows quantized as the CPU quantizes them (its "vec_dot type").
// A chunk's weights are decoded once into registers and dotted with every
// activation row, so a weight byte is read from shared memory once:
//
//   void vload32_<type>(const u8* w, int c, vtc_wq& q)   chunk c of the window w
//   float vtc_wdot<O, KIND>(const vtc_wq& q, const vtc_xq& x)
//
// vtc_wq: 32 weight codes as 8 ints (code 4i+b in byte b of q[i]; values
// 0..15 of the chunk in q[0..3], 16..31 in q[4..7]), the multipliers a0, a1
// of the two 16-value halves' integer sums, the mins m0, m1 and the float
// scales d (codes), dm (K-quant mins) and mw (q4_1/q5_1 mins).
// vtc_xq: the chunk's 32 activation codes, the activation scale d, s = the
// q8_1 block's f16(d * sum) (KIND 1), and the halves' code sums b0, b1
// (q8_K: its bsums; q8_1: summed here when the weight codes carry an
// offset O: q4_0's 8, q5_0's 16; q3_K's 4 and q6_K's 32 use the bsums).
// KIND: 0 q8_1, 1 q8_1 with a min, 2 q8_K, 3 q8_K with mins.
//
//   isum = a0 * (sub0 - O * b0) + a1 * (sub1 - O * b1)     exact integers
//   r    = (x.d * q.d) * isum [+ q.mw * x.s] [- (x.d * q.dm) * (m0 * b0 + m1 * b1)]
//
// The integer sums are the CPU's exact isums (runtime/cpu/kernels/
// quant_scalar.cpp) and the float products the same, per block for the
// 32-value types, per chunk for the K-quants (a reassociation of the CPU's
// per-super-block sum). Unsigned codes are dotted as they are and the
// offset is taken off with the activation code sums, as the CPU's isum is.
//
// Loads from the window are 16-byte shared loads of the aligned 16-byte
// words covering a chunk's bytes, realigned in registers (vtc_loadw): a
// chunk's bytes at any alignment cost one more load than its 16-byte words.
#include "codegen/cuda/emit.h"

namespace vtc::cuda {

const std::map<std::string, HelperSource>& dot_helpers() {
  static const std::map<std::string, HelperSource> table = {
      // 16 bytes through one vector load and store (16-byte aligned); 8
      // through one (8-byte aligned). The simulated device's forms keep
      // each one access (kernel_host.h).
      {"copy16", {{}, R"(#ifdef __CUDA_ARCH__
__device__ __forceinline__ void vtc_copy16(void* d, const void* s) { *(uint4*)d = *(const uint4*)s; }
__device__ __forceinline__ uint4 vtc_load16(const void* s) { return *(const uint4*)s; }
__device__ __forceinline__ uint2 vtc_load8(const void* s) { return *(const uint2*)s; }
#else
__device__ __forceinline__ void vtc_copy16(void* d, const void* s) { vtc_sim_copy16(d, s); }
__device__ __forceinline__ uint4 vtc_load16(const void* s) { return vtc_sim_load16(s); }
__device__ __forceinline__ uint2 vtc_load8(const void* s) { return vtc_sim_load8(s); }
#endif
)"}},
      {"dot_common", {{"copy16"}, R"(struct vtc_wq { int q[8]; int a0, a1, m0, m1; float d, dm, mw; };
struct vtc_xq { int q[8]; float d, s; int b0, b1; };
__device__ __forceinline__ u32 vtc_w32a4(const u8* p) { return *(const u32*)p; }
__device__ __forceinline__ u32 vtc_w32a2(const u8* p) {
  const unsigned short* h = (const unsigned short*)p;
  return (u32)h[0] | ((u32)h[1] << 16);
}
__device__ __forceinline__ float vtc_wh(const u8* p) { return vtc_h2f(*(const unsigned short*)p); }
// NW (4 or 8) words from p: the 16-byte words that cover them, shifted
// into place (selects on the offset, no indexed registers). A16: p is
// 16-byte aligned (NW / 4 loads); else one more load, whatever p's offset,
// so every lane issues the same loads.
template <int NW, bool A16>
__device__ __forceinline__ void vtc_loadw(const u8* p, u32* o) {
  const unsigned r = A16 ? 0u : (unsigned)((unsigned long long)p & 15);
  u32 w[NW + 4];
  const u8* a = p - r;
  for (int v = 0; v < (A16 ? NW / 4 : NW / 4 + 1); ++v) {
    const uint4 t = vtc_load16(a + 16 * v);
    w[4 * v] = t.x, w[4 * v + 1] = t.y, w[4 * v + 2] = t.z, w[4 * v + 3] = t.w;
  }
  const int s = (int)(r >> 2), sh = 8 * (int)(r & 3);
  for (int i = 0; i < NW; ++i) {
    if (A16) {
      o[i] = w[i];
      continue;
    }
    const u32 lo = s == 0 ? w[i] : s == 1 ? w[i + 1] : s == 2 ? w[i + 2] : w[i + 3];
    const u32 hi = s == 0 ? w[i + 1] : s == 1 ? w[i + 2] : s == 2 ? w[i + 3] : w[i + 4];
    o[i] = sh ? (lo >> sh) | (hi << (32 - sh)) : lo;
  }
}
// The sum of codes 4i..4i+3 for i in [i0, i1).
__device__ __forceinline__ int vtc_code_sum(const int* xq, int i0, int i1) {
  int s = 0;
  for (int i = i0; i < i1; ++i) s = __dp4a(0x01010101, xq[i], s);
  return s;
}
// Bytes 0..3 of a word, each looked up in a 16-entry signed table by its
// low nibble (after the shift): four codes of iq4_nl / mxfp4.
__device__ __forceinline__ int vtc_table4(const signed char* t, u32 v) {
  return (int)((u32)(u8)t[v & 15] | ((u32)(u8)t[(v >> 8) & 15] << 8) | ((u32)(u8)t[(v >> 16) & 15] << 16) |
               ((u32)(u8)t[(v >> 24) & 15] << 24));
}
// Four bits of qh from bit `b` on, each moved to bit 4 of its byte.
__device__ __forceinline__ u32 vtc_qh4(u32 qh, int b) {
  return (((qh >> b) & 1u) << 4) | (((qh >> (b + 1)) & 1u) << 12) | (((qh >> (b + 2)) & 1u) << 20) |
         (((qh >> (b + 3)) & 1u) << 28);
}
__device__ __forceinline__ int vtc_bsum(u32 packed, int half) { return (int)(short)(half ? packed >> 16 : packed & 0xffffu); }
// A 32-value block's unsigned codes: low nibbles of the 16 bytes at qs
// (values 0..15), high nibbles (16..31), with the fifth bits of qh.
__device__ __forceinline__ void vtc_nibbles(const u8* qs, u32 qh, vtc_wq& q) {
  u32 v[4];
  vtc_loadw<4, false>(qs, v);
  for (int i = 0; i < 4; ++i) {
    q.q[i] = (int)((v[i] & 0x0f0f0f0fu) | vtc_qh4(qh, 4 * i));
    q.q[i + 4] = (int)(((v[i] >> 4) & 0x0f0f0f0fu) | vtc_qh4(qh, 16 + 4 * i));
  }
}
// The same nibbles looked up in a 16-entry signed table (iq4, fp4).
__device__ __forceinline__ void vtc_table_nibbles(const signed char* table, const u8* qs, vtc_wq& q) {
  u32 v[4];
  vtc_loadw<4, false>(qs, v);
  for (int i = 0; i < 4; ++i) {
    q.q[i] = vtc_table4(table, v[i]);
    q.q[i + 4] = vtc_table4(table, v[i] >> 4);
  }
}
__device__ __forceinline__ void vtc_wq_plain(vtc_wq& q, float d) {
  q.a0 = q.a1 = 1;
  q.m0 = q.m1 = 0;
  q.d = d, q.dm = 0.0f, q.mw = 0.0f;
}
// Chunk j's scale and min (ggml's get_scale_min_k4 on the 12 scale bytes
// at b + 4, read as three words so every lane issues the same loads) and
// the super-block's d and dmin (b, b + 2): q4_K, q5_K.
__device__ __forceinline__ void vtc_k4_scales(int j, const u8* b, vtc_wq& q) {
  const u32 w0 = vtc_w32a4(b + 4), w1 = vtc_w32a4(b + 8), w2 = vtc_w32a4(b + 12);
  auto byte = [&](int i) { return (int)(((i < 4 ? w0 : i < 8 ? w1 : w2) >> (8 * (i & 3))) & 255u); };
  int sc, mn;
  if (j < 4) {
    sc = byte(j) & 63, mn = byte(j + 4) & 63;
  } else {
    sc = (byte(j + 4) & 0xf) | ((byte(j - 4) >> 6) << 4);
    mn = (byte(j + 4) >> 4) | ((byte(j) >> 6) << 4);
  }
  q.a0 = q.a1 = sc, q.m0 = q.m1 = mn;
  const u32 dd = vtc_w32a4(b);
  q.d = vtc_h2f((unsigned short)(dd & 0xffffu)), q.dm = vtc_h2f((unsigned short)(dd >> 16)), q.mw = 0.0f;
}
template <int O, int KIND>
__device__ __forceinline__ float vtc_wdot(const vtc_wq& q, const vtc_xq& x) {
  int sub0 = 0, sub1 = 0;
  for (int i = 0; i < 4; ++i) {
    sub0 = __dp4a(q.q[i], x.q[i], sub0);
    sub1 = __dp4a(q.q[i + 4], x.q[i + 4], sub1);
  }
  const int isum = q.a0 * (sub0 - O * x.b0) + q.a1 * (sub1 - O * x.b1);
  float r = (x.d * q.d) * (float)isum;
  if (KIND == 1) r += q.mw * x.s;
  if (KIND == 3) r -= (x.d * q.dm) * (float)(q.m0 * x.b0 + q.m1 * x.b1);
  return r;
}
)"}},
      // The tensor-core GEMM's form of vtc_wdot (emit_gemm.cpp) for one
      // (weight row, activation row): the mma's integer sums s0, s1 of a
      // chunk's halves (or the whole chunk's in s0 when HALVES is false:
      // the halves share their multiplier), the weight chunk's d, its dm
      // (KIND 3) or mw (KIND 1), its packed multipliers p = a0 a1 m0 m1 a
      // byte each, and the activation's d and xs (its halves' code sums,
      // or s for KIND 1).
      {"mma_scale", {{}, R"(template <int O, int KIND, bool HALVES>
__device__ __forceinline__ float vtc_mma_scale(int s0, int s1, float wd, float wm, u32 p, float xd, u32 xs) {
  const int a0 = (int)(signed char)(p & 255), a1 = (int)(signed char)((p >> 8) & 255);
  const int m0 = (int)(signed char)((p >> 16) & 255), m1 = (int)(signed char)(p >> 24);
  const int b0 = (int)(short)(xs & 0xffffu), b1 = (int)(short)(xs >> 16);
  const int isum = HALVES ? a0 * (s0 - O * b0) + a1 * (s1 - O * b1) : a0 * (s0 - O * (b0 + b1));
  float r = (xd * wd) * (float)isum;
  if (KIND == 1) r += wm * __uint_as_float(xs);
  if (KIND == 3) r -= (xd * wm) * (float)(m0 * b0 + m1 * b1);
  return r;
}
)"}},
      // The GEMV's activation code layout (emit_gemv.cpp): windows of 1024
      // values; in each, the first 16 bytes of every 32-value chunk, then
      // the second 16, so lane c's two 16-byte loads of chunk c are
      // consecutive across the warp's lanes (16 sectors a request).
      {"code_layout", {{}, R"(__device__ __forceinline__ long long vtc_code_at(long long v, long long K) {
  const long long w0 = v & ~1023ll;
  const long long nc = min(1024ll, K - w0) >> 5;
  const int e = (int)(v & 1023);
  return w0 + ((e >> 4) & 1) * nc * 16 + (e >> 5) * 16 + (e & 15);
}
)"}},
      {"vload32_q4_0", {{"dot_common"}, R"(template <bool A16>
__device__ __forceinline__ void vload32_q4_0(const u8* w, int c, vtc_wq& q) {
  const u8* b = w + 18 * c;
  vtc_nibbles(b + 2, 0u, q);
  vtc_wq_plain(q, vtc_wh(b));
}
)"}},
      {"vload32_q4_1", {{"dot_common"}, R"(template <bool A16>
__device__ __forceinline__ void vload32_q4_1(const u8* w, int c, vtc_wq& q) {
  const u8* b = w + 20 * c;
  vtc_nibbles(b + 4, 0u, q);
  vtc_wq_plain(q, vtc_wh(b));
  q.mw = vtc_wh(b + 2);
}
)"}},
      {"vload32_q5_0", {{"dot_common"}, R"(template <bool A16>
__device__ __forceinline__ void vload32_q5_0(const u8* w, int c, vtc_wq& q) {
  const u8* b = w + 22 * c;
  vtc_nibbles(b + 6, vtc_w32a2(b + 2), q);
  vtc_wq_plain(q, vtc_wh(b));
}
)"}},
      {"vload32_q5_1", {{"dot_common"}, R"(template <bool A16>
__device__ __forceinline__ void vload32_q5_1(const u8* w, int c, vtc_wq& q) {
  const u8* b = w + 24 * c;
  vtc_nibbles(b + 8, vtc_w32a4(b + 4), q);
  vtc_wq_plain(q, vtc_wh(b));
  q.mw = vtc_wh(b + 2);
}
)"}},
      {"vload32_q8_0", {{"dot_common"}, R"(template <bool A16>
__device__ __forceinline__ void vload32_q8_0(const u8* w, int c, vtc_wq& q) {
  const u8* b = w + 34 * c;
  vtc_loadw<8, false>(b + 2, (u32*)q.q);
  vtc_wq_plain(q, vtc_wh(b));
}
)"}},
      {"vload32_iq4_nl", {{"dot_common", "iq4_values"}, R"(template <bool A16>
__device__ __forceinline__ void vload32_iq4_nl(const u8* w, int c, vtc_wq& q) {
  const u8* b = w + 18 * c;
  vtc_table_nibbles(vtc_iq4_values, b + 2, q);
  vtc_wq_plain(q, vtc_wh(b));
}
)"}},
      // d = f16(x.d) * 2^(e-128) as the CPU's dot_mxfp4 scales a block.
      {"vload32_mxfp4", {{"dot_common", "fp4_values"}, R"(template <bool A16>
__device__ __forceinline__ void vload32_mxfp4(const u8* w, int c, vtc_wq& q) {
  const u8* b = w + 17 * c;
  const u32 e = b[0];
  vtc_table_nibbles(vtc_fp4_values, b + 1, q);
  vtc_wq_plain(q, __uint_as_float(e < 2 ? (0x00200000u << e) : ((e - 1) << 23)));
}
)"}},
      // K-quants: chunk j = c % 8 of super-block c / 8 (helpers.cpp's deq32
      // comments give each layout).
      {"vload32_q2_k", {{"dot_common"}, R"(template <bool A16>
__device__ __forceinline__ void vload32_q2_k(const u8* w, int c, vtc_wq& q) {
  const u8* b = w + 84 * (c >> 3);
  const int j = c & 7, half = j >> 2, shift = 2 * (j & 3), s0 = 8 * half + 2 * (j & 3);
  u32 v[8];
  vtc_loadw<8, false>(b + 16 + 32 * half, v);
  for (int i = 0; i < 8; ++i) q.q[i] = (int)((v[i] >> shift) & 0x03030303u);
  const u32 sc = vtc_w32a4(b + (s0 & ~3));  // scales s0, s0 + 1 (s0 is even)
  const u32 s2 = sc >> (8 * (s0 & 3));
  q.a0 = (int)(s2 & 15), q.m0 = (int)((s2 >> 4) & 15), q.a1 = (int)((s2 >> 8) & 15), q.m1 = (int)((s2 >> 12) & 15);
  const u32 dd = vtc_w32a4(b + 80);  // d, dmin
  q.d = vtc_h2f((unsigned short)(dd & 0xffffu)), q.dm = vtc_h2f((unsigned short)(dd >> 16)), q.mw = 0.0f;
}
)"}},
      // q3_K: chunk j of the super-block at b (110 bytes: hmask 32, qs 64,
      // scales 12, d). The scales and d arrive as one 16-byte word (the
      // last 2 bytes are the next block's or the row's readable tail):
      // scale s = 8 * half + 2k + p has its low nibble in byte s & 7
      // (shifted by 4 * half) and its high 2 bits in byte 8 + (s & 3)
      // (shifted by 2 * (s >> 2)); bytes 2k, 2k + 1 and 8 + 2(k & 1), + 1
      // are halfwords of the words, picked without indexed registers.
      // vload32_q3_k reads blocks in place (the GEMM, from global memory);
      // vload32s_q3_k reads the GEMV's window restaged at 112 bytes a
      // block, every load 16-byte aligned.
      {"vload32_q3_k", {{"dot_common"}, R"(template <bool A16>
__device__ __forceinline__ void vtc_q3k_chunk(const u8* b, int j, vtc_wq& q) {
  const int half = j >> 2, k = j & 3, shift = 2 * k;
  u32 v[8], h[8];
  vtc_loadw<8, A16>(b + 32 + 32 * half, v);
  vtc_loadw<8, A16>(b, h);
  for (int i = 0; i < 8; ++i) q.q[i] = (int)(((v[i] >> shift) & 0x03030303u) | (((h[i] >> j) & 0x01010101u) << 2));
  const u32 lo2 = (A16 ? vtc_w32a4(b + 96 + 4 * (k >> 1)) : vtc_w32a2(b + 96 + 4 * (k >> 1))) >> (16 * (k & 1));
  const u32 hi2 = (A16 ? vtc_w32a4(b + 104) : vtc_w32a2(b + 104)) >> (16 * (k & 1));
  const int lsh = 4 * half, hsh = 2 * (2 * half + (k >> 1));
  q.a0 = (int)(((lo2 >> lsh) & 15u) | (((hi2 >> hsh) & 3u) << 4)) - 32;
  q.a1 = (int)((((lo2 >> 8) >> lsh) & 15u) | ((((hi2 >> 8) >> hsh) & 3u) << 4)) - 32;
  q.m0 = q.m1 = 0;
  q.d = vtc_wh(b + 108), q.dm = 0.0f, q.mw = 0.0f;
}
template <bool A16>
__device__ __forceinline__ void vload32_q3_k(const u8* w, int c, vtc_wq& q) {
  vtc_q3k_chunk<false>(w + 110 * (c >> 3), c & 7, q);
}
__device__ __forceinline__ void vload32s_q3_k(const u8* w, int c, vtc_wq& q) {
  vtc_q3k_chunk<true>(w + 112 * (c >> 3), c & 7, q);
}
)"}},
      {"vload32_q4_k", {{"dot_common"}, R"(template <bool A16>
__device__ __forceinline__ void vload32_q4_k(const u8* w, int c, vtc_wq& q) {
  const u8* b = w + 144 * (c >> 3);
  const int j = c & 7, shift = 4 * (j & 1);
  u32 v[8];
  vtc_loadw<8, A16>(b + 16 + 32 * (j >> 1), v);
  for (int i = 0; i < 8; ++i) q.q[i] = (int)((v[i] >> shift) & 0x0f0f0f0fu);
  vtc_k4_scales(j, b, q);
}
)"}},
      {"vload32_q5_k", {{"dot_common"}, R"(template <bool A16>
__device__ __forceinline__ void vload32_q5_k(const u8* w, int c, vtc_wq& q) {
  const u8* b = w + 176 * (c >> 3);
  const int j = c & 7, shift = 4 * (j & 1);
  u32 v[8], h[8];
  vtc_loadw<8, A16>(b + 48 + 32 * (j >> 1), v);
  vtc_loadw<8, A16>(b + 16, h);
  for (int i = 0; i < 8; ++i) q.q[i] = (int)(((v[i] >> shift) & 0x0f0f0f0fu) | (((h[i] >> j) & 0x01010101u) << 4));
  vtc_k4_scales(j, b, q);
}
)"}},
      {"vload32_q6_k", {{"dot_common"}, R"(template <bool A16>
__device__ __forceinline__ void vload32_q6_k(const u8* w, int c, vtc_wq& q) {
  const u8* b = w + 210 * (c >> 3);
  const int j = c & 7, half = j >> 2, k = j & 3, lshift = k < 2 ? 0 : 4;
  u32 lo[8], hi[8];
  vtc_loadw<8, false>(b + 64 * half + 32 * (k & 1), lo);
  vtc_loadw<8, false>(b + 128 + 32 * half, hi);
  for (int i = 0; i < 8; ++i) q.q[i] = (int)(((lo[i] >> lshift) & 0x0f0f0f0fu) | (((hi[i] >> (2 * k)) & 0x03030303u) << 4));
  const u32 sc = *(const unsigned short*)(b + 192 + 8 * half + 2 * k);  // scales 2k, 2k + 1 (int8)
  q.a0 = (int)(signed char)(sc & 255u), q.a1 = (int)(signed char)(sc >> 8), q.m0 = q.m1 = 0;
  q.d = vtc_wh(b + 208), q.dm = 0.0f, q.mw = 0.0f;
}
)"}},
      {"vload32_iq4_xs", {{"dot_common", "iq4_values"}, R"(template <bool A16>
__device__ __forceinline__ void vload32_iq4_xs(const u8* w, int c, vtc_wq& q) {
  const u8* b = w + 136 * (c >> 3);
  const int ib = c & 7;
  vtc_table_nibbles(vtc_iq4_values, b + 8 + 16 * ib, q);
  const u32 scales_h = *(const unsigned short*)(b + 2);
  const int ls = (((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xf) | (((scales_h >> (2 * ib)) & 3) << 4)) - 32;
  vtc_wq_plain(q, vtc_wh(b));
  q.a0 = q.a1 = ls;
}
)"}},
  };
  return table;
}

}  // namespace vtc::cuda
