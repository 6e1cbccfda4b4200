// AVX2 (+FMA, F16C) activation quantizers and quantized dot products.
//
// Compiled with -mavx2 -mfma -mf16c and called only after run-time
// detection. Everything here is in an anonymous namespace and only standard
// C headers are included, so no AVX2 code can leak into shared inline
// functions (see internal.h). Same integer arithmetic as quant_scalar.cpp.
// The K-quant and IQ4_XS kernels combine their integer lane sums in ggml's
// x86 float order (see "super-block float order" below), which
// quant_scalar.cpp does not.
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "runtime/cpu/kernels/avx2_common.h"
#include "runtime/cpu/kernels/internal.h"

namespace vtc::cpu::detail {
namespace {


// ----- activation quantizers ------------------------------------------------

void quantize_f32(const float* x, void* y, int64_t n) { std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float)); }

void quantize_f16(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<uint16_t*>(vy);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) y[i] = f2h(x[i]);
}

template <bool kWithSum>
void quantize_q8_32(const float* x, void* vy, int64_t n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    __m256 v[4];
    for (int k = 0; k < 4; ++k) v[k] = _mm256_loadu_ps(x + 8 * k);
    __m256 m = _mm256_andnot_ps(sign, v[0]);
    for (int k = 1; k < 4; ++k) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[k]));
    const float amax = hmax_ps(m);
    const float d = amax / 127.f;
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    const __m256 mul = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; ++k)
      q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    __m256i p01 = _mm256_packs_epi32(q[0], q[1]);
    __m256i p23 = _mm256_packs_epi32(q[2], q[3]);
    __m256i p = _mm256_packs_epi16(p01, p23);
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    if constexpr (kWithSum) {
      auto* blk = static_cast<BlockQ8_1*>(vy) + b;
      blk->d = f2h(d);
      const int sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
      blk->s = f2h(d * static_cast<float>(sum));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(blk->qs), p);
    } else {
      auto* blk = static_cast<BlockQ8_0*>(vy) + b;
      blk->d = f2h(d);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(blk->qs), p);
    }
  }
}

// ggml's quantize_row_q8_K_ref (scalar C in the reference too), vectorized
// with the same float operations, so bit-identical to quantize_q8_K_scalar:
//   max = the first value of largest |x| (its sign decides the codes' sign)
//   iscale = -127 / max;  q = min(nearest(iscale * x), 127)  (ties to even,
//   as ggml's nearest_int and cvtps do);  d = 1 / iscale;  bsums per 16.
// A block holding a NaN goes to the scalar code (whose comparisons skip
// NaNs in a way max_ps does not reproduce).
void quantize_q8_K(const float* x, void* vy, int64_t n) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t b = 0; b < n / 256; ++b, x += 256) {
    BlockQ8_K& blk = static_cast<BlockQ8_K*>(vy)[b];
    __m256 m = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
    for (int j = 0; j < 256; j += 8) {
      const __m256 v = _mm256_loadu_ps(x + j);
      m = _mm256_max_ps(m, _mm256_and_ps(v, abs_mask));
      nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    if (_mm256_movemask_ps(nan) != 0) {
      quantize_q8_K_scalar(x, &blk, 256);
      continue;
    }
    const float amax = hmax_ps(m);
    if (amax == 0.0f) {
      std::memset(&blk, 0, sizeof(blk));
      continue;
    }
    int first = 0;
    while (__builtin_fabsf(x[first]) != amax) ++first;
    const float iscale = -127.f / x[first];
    const __m256 vs = _mm256_set1_ps(iscale);
    const __m256i cap = _mm256_set1_epi32(127);
    for (int j = 0; j < 256; j += 32) {
      __m256i q[4];
      for (int k = 0; k < 4; ++k)
        q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(x + j + 8 * k))), cap);
      const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(blk.qs + j),
                          _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    }
    for (int g = 0; g < 16; g += 2) {  // two groups of 16 codes per 32 bytes
      const __m256i c16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs + 16 * g)));
      const __m256i c16b =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs + 16 * g + 16)));
      const __m256i s32 = _mm256_hadd_epi32(_mm256_madd_epi16(c16, _mm256_set1_epi16(1)),
                                            _mm256_madd_epi16(c16b, _mm256_set1_epi16(1)));
      // s32 lanes: [a0+a1, a2+a3, b0+b1, b2+b3 | a4+a5, a6+a7, b4+b5, b6+b7]
      const __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
      const __m128i sums = _mm_hadd_epi32(t, t);  // [a, b, a, b]
      blk.bsums[g] = static_cast<int16_t>(_mm_cvtsi128_si32(sums));
      blk.bsums[g + 1] = static_cast<int16_t>(_mm_extract_epi32(sums, 1));
    }
    blk.d = 1 / iscale;
  }
}

// ----- dot products: float types --------------------------------------------

float dot_f32(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const float*>(vw);
  const auto* x = static_cast<const float*>(vx);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k)
      acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8 * k), _mm256_loadu_ps(x + i + 8 * k), acc[k]);
  for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), acc[0]);
  float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum += w[i] * x[i];
  return sum;
}


template <bool kBf16>
float dot_16bit(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* x = static_cast<const uint16_t*>(vx);
  auto load = [](const uint16_t* p) { return kBf16 ? load_bf16(p) : load_f16(p); };
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) acc[k] = _mm256_fmadd_ps(load(w + i + 8 * k), load(x + i + 8 * k), acc[k]);
  for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(load(w + i), load(x + i), acc[0]);
  float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum += kBf16 ? bf2f(w[i]) * bf2f(x[i]) : h2f(w[i]) * h2f(x[i]);
  return sum;
}

// ----- dot products: 32-value blocks with q8_0 / q8_1 -----------------------

float dot_q4_0(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ4_0*>(vw);
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  __m256 acc = _mm256_setzero_ps();
  const __m256i off = _mm256_set1_epi8(8);
  for (int64_t b = 0; b < n / 32; ++b) {
    const __m256 d = _mm256_set1_ps(h2f(w[b].d) * h2f(x[b].d));
    const __m256i q = _mm256_sub_epi8(nibbles32(w[b].qs), off);
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8(q, loadu(x[b].qs))), acc);
  }
  return hsum_ps(acc);
}

float dot_q4_1(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ4_1*>(vw);
  const auto* x = static_cast<const BlockQ8_1*>(vx);
  __m256 acc = _mm256_setzero_ps();
  float summ = 0.0f;
  for (int64_t b = 0; b < n / 32; ++b) {
    const __m256 d = _mm256_set1_ps(h2f(w[b].d) * h2f(x[b].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_u8(nibbles32(w[b].qs), loadu(x[b].qs))), acc);
    summ += h2f(w[b].m) * h2f(x[b].s);
  }
  return hsum_ps(acc) + summ;
}

float dot_q5_0(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ5_0*>(vw);
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  __m256 acc = _mm256_setzero_ps();
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  for (int64_t b = 0; b < n / 32; ++b) {
    const __m256 d = _mm256_set1_ps(h2f(w[b].d) * h2f(x[b].d));
    __m256i q = _mm256_or_si256(nibbles32(w[b].qs), _mm256_and_si256(bits32(w[b].qh), bit4));
    q = _mm256_sub_epi8(q, bit4);
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8(q, loadu(x[b].qs))), acc);
  }
  return hsum_ps(acc);
}

float dot_q5_1(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ5_1*>(vw);
  const auto* x = static_cast<const BlockQ8_1*>(vx);
  __m256 acc = _mm256_setzero_ps();
  float summ = 0.0f;
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  for (int64_t b = 0; b < n / 32; ++b) {
    const __m256 d = _mm256_set1_ps(h2f(w[b].d) * h2f(x[b].d));
    const __m256i q = _mm256_or_si256(nibbles32(w[b].qs), _mm256_and_si256(bits32(w[b].qh), bit4));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_u8(q, loadu(x[b].qs))), acc);
    summ += h2f(w[b].m) * h2f(x[b].s);
  }
  return hsum_ps(acc) + summ;
}

float dot_q8_0(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ8_0W*>(vw);
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 32; ++b) {
    // About one prefetch per 64-byte line (2 blocks of 34 bytes): Zen 3,
    // 5120x1280 from DRAM, 1 thread, 5 rounds alternated, 20-25 -> 24-32
    // GFLOP/s; 2 threads, bound by DRAM, alike.
    if (b % 2 == 0) prefetch_dot_ahead(w + b);
    const __m256 d = _mm256_set1_ps(h2f(w[b].d) * h2f(x[b].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8(loadu(w[b].qs), loadu(x[b].qs))), acc);
  }
  return hsum_ps(acc);
}


float dot_iq4_nl(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockIQ4_NL*>(vw);
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  const __m256i table = iq4_table();
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 32; ++b) {
    const __m256 d = _mm256_set1_ps(h2f(w[b].d) * h2f(x[b].d));
    const __m256i q = _mm256_shuffle_epi8(table, nibbles32(w[b].qs));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8(q, loadu(x[b].qs))), acc);
  }
  return hsum_ps(acc);
}

// MXFP4 x q8_0: ggml's x86 AVX2 kernel's float order (quant_scalar.cpp's
// dot_mxfp4 describes it): blocks in pairs on two accumulators, an odd
// last block added in scalar with one fma.
inline float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline __m256i mxfp4_lanes(const BlockMXFP4& w, const BlockQ8_0& x, __m256i table) {
  return dot_i8(_mm256_shuffle_epi8(table, nibbles32(w.qs)), loadu(x.qs));
}

float dot_mxfp4(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockMXFP4*>(vw);
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Values)));
  const int64_t nb = n / 32;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    acc0 = fmadd_lanes(h2f(x[b].d) * e8m0_half(w[b].e), mxfp4_lanes(w[b], x[b], table), acc0);
    acc1 = fmadd_lanes(h2f(x[b + 1].d) * e8m0_half(w[b + 1].e), mxfp4_lanes(w[b + 1], x[b + 1], table), acc1);
  }
  float sum = hsum_ps(_mm256_add_ps(acc0, acc1));
  if (b < nb) {
    const float d = h2f(x[b].d) * e8m0_half(w[b].e);
    sum = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(d), _mm_set_ss(static_cast<float>(hsum_epi32(mxfp4_lanes(w[b], x[b], table)))),
                                     _mm_set_ss(sum)));
  }
  return sum;
}

// ----- dot products: 256-value super-blocks with q8_K -----------------------
//
// Super-block float order. ggml's x86 K-quant and IQ4_XS vec_dot kernels
// (arch/x86/quants.c, the __AVX2__ branch, which every AVX2 and AVX-512
// CPU build of the reference runs; there is no AVX-512 variant) keep the
// integer sums of a super-block in 8 int32 lanes, lane l holding bytes
// 4l..4l+3 of each 32-byte chunk, and never reduce them to one integer:
//   acc = fma(d, float(lane sums), acc)       8 float lanes, per super-block
//   result = hsum8(acc) = ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))
// The mins (Q2_K, Q4_K, Q5_K) and Q6_K's +32 offset enter per lane too:
//   Q2_K  acc = fma(dmin, float(madd(mins, bsums)), acc), before the codes;
//   Q6_K  lane sums minus 32 * madd(scales, bsums), one vector;
//   Q4_K  a second, 4-lane accumulator acc_m = fma(dmin, float(madd(mins,
//         bsum pairs)), acc_m), reduced (l0+l2)+(l1+l3) and added last;
//   Q5_K  a float summs = fma(dmin, float(sum of mins * bsums), summs)
//         (ggml's C, contracted by the compiler), added last.
// d = q8_K d * f16 d and dmin = -(q8_K d * f16 dmin), each rounded once.
// The lane sums are exact, so only their lane layout matters; the kernels
// below lay out their bytes as ggml does. (IQ4_XS: the reference runs this
// only for batches under 8 tokens; larger ones go through its IQ panel GEMM,
// not reproduced; docs/numerics-parity.md.)

float dot_q2_k(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ2_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  const __m256i m3 = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b) {
    const BlockQ2_K& wb = w[b];
    const BlockQ8_K& xb = x[b];
    const float d = xb.d * h2f(wb.d);
    const float dmin = -(xb.d * h2f(wb.dmin));
    // Mins: min * bsum per sub-block, pairs summed into 8 lanes.
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scales));
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_srli_epi16(_mm_and_si128(sc, _mm_set1_epi8(static_cast<char>(0xf0))), 4));
    acc = fmadd_lanes(dmin, _mm256_madd_epi16(mins, loadu(xb.bsums)), acc);
    const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc, _mm_set1_epi8(0x0f)));
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i q = loadu(wb.qs + 32 * h);
      const __m256i half = scales_half(sc16, h);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256i v = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m3);
        const __m256i p = _mm256_maddubs_epi16(v, loadu(xb.qs + 128 * h + 32 * k));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, pair_scales(half, k)));
      }
    }
    acc = fmadd_lanes(d, isum, acc);
  }
  return hsum_ps(acc);
}

float dot_q3_k(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ3_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m256i one = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b) {
    const BlockQ3_K& wb = w[b];
    const BlockQ8_K& xb = x[b];
    int8_t scale[16];
    unpack_q3k_scales(wb.scales, scale);
    const __m256i hm = loadu(wb.hmask);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scale)));
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i q = loadu(wb.qs + 32 * h);
      const __m256i half = scales_half(sc16, h);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256i v = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m3);
        const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + k), one);
        const __m256i sub4 = _mm256_slli_epi16(_mm256_xor_si256(hb, one), 2);  // 4 where the high bit is clear
        const __m256i y = loadu(xb.qs + 128 * h + 32 * k);
        const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(v, y), _mm256_maddubs_epi16(sub4, y));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, pair_scales(half, k)));
      }
    }
    acc = fmadd_lanes(xb.d * h2f(wb.d), isum, acc);
  }
  return hsum_ps(acc);
}

template <bool kFive>
float dot_q45_k(int64_t n, const void* vw, const void* vx) {
  using Block = typename std::conditional<kFive, BlockQ5_K, BlockQ4_K>::type;
  const auto* w = static_cast<const Block*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i one = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  __m128 acc_m = _mm_setzero_ps();  // Q4_K
  float summs = 0.0f;               // Q5_K
  for (int64_t b = 0; b < n / 256; ++b) {
    const Block& wb = w[b];
    const BlockQ8_K& xb = x[b];
    const float d = xb.d * h2f(wb.d);
    const float dmin = -(xb.d * h2f(wb.dmin));
    uint8_t sm[16];
    unpack_k4_scales(wb.scales, sm);
    // Mins times bsum pairs, 4 lanes.
    const __m128i mins = k4_mins_lanes(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm + 8))),
                                       xb.bsums);
    if constexpr (kFive) {
      const __m128i t = _mm_add_epi32(mins, _mm_shuffle_epi32(mins, _MM_SHUFFLE(1, 0, 3, 2)));
      const int summ = _mm_cvtsi128_si32(_mm_add_epi32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(2, 3, 0, 1))));
      summs = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(dmin), _mm_set_ss(static_cast<float>(summ)), _mm_set_ss(summs)));
    } else {
      acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(mins), acc_m);
    }
    __m256i isum = _mm256_setzero_si256();
    __m256i qh;
    if constexpr (kFive) qh = loadu(wb.qh);
    for (int j = 0; j < 4; ++j) {
      const __m256i q = loadu(wb.qs + 32 * j);
      __m256i lo = _mm256_and_si256(q, m4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      if constexpr (kFive) {
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j), one), 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j + 1), one), 4));
      }
      const __m256i p_lo = _mm256_maddubs_epi16(lo, loadu(xb.qs + 64 * j));
      const __m256i p_hi = _mm256_maddubs_epi16(hi, loadu(xb.qs + 64 * j + 32));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p_lo, _mm256_set1_epi16(sm[2 * j])));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p_hi, _mm256_set1_epi16(sm[2 * j + 1])));
    }
    acc = fmadd_lanes(d, isum, acc);
  }
  if constexpr (kFive) return hsum_ps(acc) + summs;
  return hsum_ps(acc) + hsum4_ps(acc_m);
}

float dot_q6_k(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ6_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b) {
    const BlockQ6_K& wb = w[b];
    const BlockQ8_K& xb = x[b];
    // The +32 offset of the codes: 32 * scale * bsum, sub-block pairs in 8 lanes.
    const __m256i sc16 = q6_k_scales16(wb);
    const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(sc16, loadu(xb.bsums)), 5);
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      __m256i q[4];
      q6_k_codes(wb, h, q);
      const __m256i half = scales_half(sc16, h);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256i p = _mm256_maddubs_epi16(q[k], loadu(xb.qs + 128 * h + 32 * k));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, pair_scales(half, k)));
      }
    }
    acc = fmadd_lanes(xb.d * h2f(wb.d), _mm256_sub_epi32(isum, offset), acc);
  }
  return hsum_ps(acc);
}

float dot_iq4_xs(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockIQ4_XS*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  const __m256i table = iq4_table();
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b) {
    const BlockIQ4_XS& wb = w[b];
    const BlockQ8_K& xb = x[b];
    __m256i isum = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = (((wb.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | (((wb.scales_h >> (2 * ib)) & 3) << 4)) - 32;
      const __m256i q = _mm256_shuffle_epi8(table, nibbles32(wb.qs + 16 * ib));
      const __m256i y = loadu(xb.qs + 32 * ib);
      const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(y, q));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, _mm256_set1_epi16(static_cast<int16_t>(ls))));
    }
    acc = fmadd_lanes(h2f(wb.d) * xb.d, isum, acc);
  }
  return hsum_ps(acc);
}

}  // namespace

const QuantKernels* avx2_quant_kernels_novnni() {
  static const QuantKernels k = [] {
    QuantKernels t{};
    t.quantize[static_cast<int>(ActType::F32)] = quantize_f32;
    t.quantize[static_cast<int>(ActType::F16)] = quantize_f16;
    t.quantize[static_cast<int>(ActType::BF16)] = quantize_bf16_scalar;
    t.quantize[static_cast<int>(ActType::Q8_0)] = quantize_q8_32<false>;
    t.quantize[static_cast<int>(ActType::Q8_1)] = quantize_q8_32<true>;
    t.quantize[static_cast<int>(ActType::Q8_K)] = quantize_q8_K;
    t.dot[kSlotF32] = dot_f32;
    t.dot[kSlotF16] = dot_16bit<false>;
    t.dot[kSlotBF16] = dot_16bit<true>;
    t.dot[kSlotQ4_0] = dot_q4_0;
    t.dot[kSlotQ4_1] = dot_q4_1;
    t.dot[kSlotQ5_0] = dot_q5_0;
    t.dot[kSlotQ5_1] = dot_q5_1;
    t.dot[kSlotQ8_0] = dot_q8_0;
    t.dot[kSlotIQ4_NL] = dot_iq4_nl;
    t.dot[kSlotMXFP4] = dot_mxfp4;
    t.dot[kSlotQ2_K] = dot_q2_k;
    t.dot[kSlotQ3_K] = dot_q3_k;
    t.dot[kSlotQ4_K] = dot_q45_k<false>;
    t.dot[kSlotQ5_K] = dot_q45_k<true>;
    t.dot[kSlotQ6_K] = dot_q6_k;
    t.dot[kSlotIQ4_XS] = dot_iq4_xs;
    add_avx2_gemm_kernels(t);
    add_avx2_x8_kernels(t);
    return t;
  }();
  return &k;
}

}  // namespace vtc::cpu::detail
