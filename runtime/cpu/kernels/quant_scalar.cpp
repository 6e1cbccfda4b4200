// Scalar activation quantizers and quantized dot products.
//
// Each dot product works on whole blocks: the products of the integer weight
// codes and the integer activation codes are summed exactly in int32 per
// block (per super-block for K-quants), and only the block sum is scaled in
// float, as ggml does. The K-quant and IQ4_XS kernels scale once per
// super-block with the same float expression as the AVX2 versions, so the
// two ISAs agree bit for bit on those types; the 32-value block types
// accumulate in a different order and agree up to float reassociation.
//
// Activation quantization (identical bits on both ISAs):
//   q8_0 / q8_1  per 32 values: amax = max|x|, d = amax/127, id = 127/amax,
//                q = round-half-even(x*id); q8_1 also stores s = f16(d*sum q).
//                (ggml's x86 quantize_row_q8_0 / _q8_1.)
//   q8_K         per 256 values: max = the first x with the largest |x|,
//                iscale = -127/max, q = min(127, round-half-even(iscale*x)),
//                d = 1/iscale, bsums = sums of 16 q. (quantize_row_q8_K_ref.)
#include <cmath>
#include <cstring>
#include <type_traits>

#include "frontends/gguf/dequant.h"
#include "runtime/cpu/kernels/internal.h"

namespace vtc::cpu::detail {

const int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
const int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

const float* fp16_table() {
  static const float* table = [] {
    static float t[65536];
    for (uint32_t i = 0; i < 65536; ++i) t[i] = vtc::fp16_to_fp32(static_cast<uint16_t>(i));
    return t;
  }();
  return table;
}

void unpack_k4_scales(const uint8_t* packed, uint8_t out[16]) {
  constexpr uint32_t kLow6 = 0x3f3f3f3fu, kLow4 = 0x0f0f0f0fu, kLow2 = 0x03030303u;
  uint32_t u[3];
  std::memcpy(u, packed, 12);
  uint32_t r[4];
  r[0] = u[0] & kLow6;                                        // sc 0..3
  r[1] = (u[2] & kLow4) | (((u[0] >> 6) & kLow2) << 4);       // sc 4..7
  r[2] = u[1] & kLow6;                                        // m 0..3
  r[3] = ((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kLow2) << 4);  // m 4..7
  std::memcpy(out, r, 16);
}

void unpack_q3k_scales(const uint8_t* sc, int8_t out[16]) {
  for (int s = 0; s < 16; ++s) {
    const int lo = s < 8 ? (sc[s] & 0xf) : (sc[s - 8] >> 4);
    const int hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
    out[s] = static_cast<int8_t>((lo | (hi << 4)) - 32);
  }
}

namespace {

inline float h2f(uint16_t h) { return fp16_table()[h]; }

// ----- activation quantizers ------------------------------------------------

void quantize_f32(const float* x, void* y, int64_t n) { std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float)); }

void quantize_f16(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<uint16_t*>(vy);
  for (int64_t i = 0; i < n; ++i) y[i] = vtc::fp32_to_fp16(x[i]);
}

template <bool kWithSum>
void quantize_q8_32(const float* x, void* vy, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.f;
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    int8_t* qs;
    int sum = 0;
    if constexpr (kWithSum) {
      auto* blk = static_cast<BlockQ8_1*>(vy) + b;
      blk->d = vtc::fp32_to_fp16(d);
      qs = blk->qs;
    } else {
      auto* blk = static_cast<BlockQ8_0*>(vy) + b;
      blk->d = vtc::fp32_to_fp16(d);
      qs = blk->qs;
    }
    for (int j = 0; j < 32; ++j) {
      const int q = static_cast<int>(std::nearbyint(x[j] * id));
      qs[j] = static_cast<int8_t>(q);
      sum += q;
    }
    if constexpr (kWithSum) static_cast<BlockQ8_1*>(vy)[b].s = vtc::fp32_to_fp16(d * static_cast<float>(sum));
  }
}

// Round half to even for |v| < 2^22, as ggml's nearest_int.
inline int nearest_int(float v) {
  float t = v + 12582912.f;
  int32_t i;
  std::memcpy(&i, &t, sizeof(i));
  return (i & 0x007fffff) - 0x00400000;
}

}  // namespace

void quantize_q8_K_scalar(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(vy);
  for (int64_t b = 0; b < n / 256; ++b, x += 256) {
    float max = 0.0f, amax = 0.0f;
    for (int j = 0; j < 256; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    BlockQ8_K& blk = y[b];
    if (amax == 0.0f) {
      std::memset(&blk, 0, sizeof(blk));
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < 256; ++j) {
      const int v = nearest_int(iscale * x[j]);
      blk.qs[j] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += blk.qs[16 * g + j];
      blk.bsums[g] = static_cast<int16_t>(sum);
    }
    blk.d = 1 / iscale;
  }
}

void quantize_bf16_scalar(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<uint16_t*>(vy);
  for (int64_t i = 0; i < n; ++i) y[i] = vtc::fp32_to_bf16(x[i]);
}

namespace {

// ----- dot products ---------------------------------------------------------

float dot_f32(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const float*>(vw);
  const auto* x = static_cast<const float*>(vx);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(w[i] * x[i]);
  return static_cast<float>(sum);
}

float dot_f16(int64_t n, const void* vw, const void* vx) {
  const float* t = fp16_table();
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* x = static_cast<const uint16_t*>(vx);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(t[w[i]] * t[x[i]]);
  return static_cast<float>(sum);
}

float dot_bf16(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* x = static_cast<const uint16_t*>(vx);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i)
    sum += static_cast<double>(vtc::bf16_to_fp32(w[i]) * vtc::bf16_to_fp32(x[i]));
  return static_cast<float>(sum);
}

inline int lo4(uint8_t b) { return b & 0xf; }
inline int hi4(uint8_t b) { return b >> 4; }
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

float dot_q4_0(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ4_0*>(vw);
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / 32; ++b) {
    int isum = 0;
    for (int j = 0; j < 16; ++j)
      isum += (lo4(w[b].qs[j]) - 8) * x[b].qs[j] + (hi4(w[b].qs[j]) - 8) * x[b].qs[j + 16];
    sum += (h2f(w[b].d) * h2f(x[b].d)) * static_cast<float>(isum);
  }
  return sum;
}

float dot_q4_1(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ4_1*>(vw);
  const auto* x = static_cast<const BlockQ8_1*>(vx);
  float sum = 0.0f, summ = 0.0f;
  for (int64_t b = 0; b < n / 32; ++b) {
    int isum = 0;
    for (int j = 0; j < 16; ++j) isum += lo4(w[b].qs[j]) * x[b].qs[j] + hi4(w[b].qs[j]) * x[b].qs[j + 16];
    sum += (h2f(w[b].d) * h2f(x[b].d)) * static_cast<float>(isum);
    summ += h2f(w[b].m) * h2f(x[b].s);
  }
  return sum + summ;
}

float dot_q5_0(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ5_0*>(vw);
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint32_t qh = load_u32(w[b].qh);
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      const int q0 = (lo4(w[b].qs[j]) | static_cast<int>(((qh >> j) & 1u) << 4)) - 16;
      const int q1 = (hi4(w[b].qs[j]) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4)) - 16;
      isum += q0 * x[b].qs[j] + q1 * x[b].qs[j + 16];
    }
    sum += (h2f(w[b].d) * h2f(x[b].d)) * static_cast<float>(isum);
  }
  return sum;
}

float dot_q5_1(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ5_1*>(vw);
  const auto* x = static_cast<const BlockQ8_1*>(vx);
  float sum = 0.0f, summ = 0.0f;
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint32_t qh = load_u32(w[b].qh);
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      const int q0 = lo4(w[b].qs[j]) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int q1 = hi4(w[b].qs[j]) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      isum += q0 * x[b].qs[j] + q1 * x[b].qs[j + 16];
    }
    sum += (h2f(w[b].d) * h2f(x[b].d)) * static_cast<float>(isum);
    summ += h2f(w[b].m) * h2f(x[b].s);
  }
  return sum + summ;
}

float dot_q8_0(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ8_0W*>(vw);
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / 32; ++b) {
    int isum = 0;
    for (int j = 0; j < 32; ++j) isum += w[b].qs[j] * x[b].qs[j];
    sum += (h2f(w[b].d) * h2f(x[b].d)) * static_cast<float>(isum);
  }
  return sum;
}

float dot_iq4_nl(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockIQ4_NL*>(vw);
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / 32; ++b) {
    int isum = 0;
    for (int j = 0; j < 16; ++j)
      isum += kIq4nlValues[lo4(w[b].qs[j])] * x[b].qs[j] + kIq4nlValues[hi4(w[b].qs[j])] * x[b].qs[j + 16];
    sum += (h2f(w[b].d) * h2f(x[b].d)) * static_cast<float>(isum);
  }
  return sum;
}

// 2^(e - 128): half the E8M0 scale (ggml_e8m0_to_fp32_half).
float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// MXFP4 x q8_0 in the float order of ggml's x86 AVX2 kernel (which its
// AVX2 and AVX-512 CPU builds run), so that this and quant_avx2.cpp's
// dot_mxfp4 give the same bits as each other and as the reference:
//   lane l of a block = the exact integer sum of values 4l..4l+3 (l < 4)
//   or 16+4(l-4)..+3 (l >= 4); pairs of blocks (2p, 2p+1) go to two 8-lane
//   accumulators, acc_k[l] = fma(d_k, float(lane l), acc_k[l]), with
//   d = f16(x.d) * e8m0_half(w.e); then hsum8(acc_0 + acc_1) =
//   ((s0+s4)+(s2+s6)) + ((s1+s5)+(s3+s7)); an odd last block is added as
//   fma(d, float(its integer sum), sum).
float dot_mxfp4(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockMXFP4*>(vw);
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  const int64_t nb = n / 32;
  float acc[2][8] = {};
  auto lane_sum = [&](int64_t b, int l) {
    const int base = (l & 3) * 4;
    int s = 0;
    for (int i = 0; i < 4; ++i) {
      const uint8_t q = w[b].qs[base + i];
      s += l < 4 ? kMxfp4Values[lo4(q)] * x[b].qs[base + i] : kMxfp4Values[hi4(q)] * x[b].qs[16 + base + i];
    }
    return s;
  };
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    for (int k = 0; k < 2; ++k) {
      const float d = h2f(x[b + k].d) * e8m0_half(w[b + k].e);
      for (int l = 0; l < 8; ++l) acc[k][l] = std::fma(d, static_cast<float>(lane_sum(b + k, l)), acc[k][l]);
    }
  }
  float s[8];
  for (int l = 0; l < 8; ++l) s[l] = acc[0][l] + acc[1][l];
  float sum = ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
  if (b < nb) {
    int isum = 0;
    for (int l = 0; l < 8; ++l) isum += lane_sum(b, l);
    sum = std::fma(h2f(x[b].d) * e8m0_half(w[b].e), static_cast<float>(isum), sum);
  }
  return sum;
}

float dot_q2_k(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ2_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / 256; ++b) {
    const BlockQ2_K& wb = w[b];
    const BlockQ8_K& xb = x[b];
    int summ = 0;
    for (int s = 0; s < 16; ++s) summ += (wb.scales[s] >> 4) * xb.bsums[s];
    int isum = 0;
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 4; ++k) {
        for (int part = 0; part < 2; ++part) {
          const int s = 8 * h + 2 * k + part;
          int sub = 0;
          for (int l = 0; l < 16; ++l)
            sub += ((wb.qs[32 * h + 16 * part + l] >> (2 * k)) & 3) * xb.qs[128 * h + 32 * k + 16 * part + l];
          isum += (wb.scales[s] & 0xf) * sub;
        }
      }
    }
    const float d = xb.d * h2f(wb.d);
    const float dmin = xb.d * h2f(wb.dmin);
    sum += d * static_cast<float>(isum) - dmin * static_cast<float>(summ);
  }
  return sum;
}

float dot_q3_k(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ3_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / 256; ++b) {
    const BlockQ3_K& wb = w[b];
    const BlockQ8_K& xb = x[b];
    int8_t scale[16];
    unpack_q3k_scales(wb.scales, scale);
    int isum = 0;
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 4; ++k) {
        const int bit = 4 * h + k;
        for (int part = 0; part < 2; ++part) {
          int sub = 0;
          for (int l = 16 * part; l < 16 * part + 16; ++l) {
            const int v = ((wb.qs[32 * h + l] >> (2 * k)) & 3) - (((wb.hmask[l] >> bit) & 1) ? 0 : 4);
            sub += v * xb.qs[128 * h + 32 * k + l];
          }
          isum += scale[8 * h + 2 * k + part] * sub;
        }
      }
    }
    const float d = xb.d * h2f(wb.d);
    sum += d * static_cast<float>(isum);
  }
  return sum;
}

template <bool kFive>
float dot_q45_k(int64_t n, const void* vw, const void* vx) {
  using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
  const auto* w = static_cast<const Block*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / 256; ++b) {
    const Block& wb = w[b];
    const BlockQ8_K& xb = x[b];
    uint8_t sm[16];
    unpack_k4_scales(wb.scales, sm);
    int summ = 0;
    for (int s = 0; s < 8; ++s) summ += sm[8 + s] * (xb.bsums[2 * s] + xb.bsums[2 * s + 1]);
    int isum = 0;
    for (int j = 0; j < 4; ++j) {
      int sub_lo = 0, sub_hi = 0;
      for (int l = 0; l < 32; ++l) {
        int q_lo = lo4(wb.qs[32 * j + l]);
        int q_hi = hi4(wb.qs[32 * j + l]);
        if constexpr (kFive) {
          q_lo |= ((wb.qh[l] >> (2 * j)) & 1) << 4;
          q_hi |= ((wb.qh[l] >> (2 * j + 1)) & 1) << 4;
        }
        sub_lo += q_lo * xb.qs[64 * j + l];
        sub_hi += q_hi * xb.qs[64 * j + 32 + l];
      }
      isum += sm[2 * j] * sub_lo + sm[2 * j + 1] * sub_hi;
    }
    const float d = xb.d * h2f(wb.d);
    const float dmin = xb.d * h2f(wb.dmin);
    sum += d * static_cast<float>(isum) - dmin * static_cast<float>(summ);
  }
  return sum;
}

float dot_q6_k(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ6_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / 256; ++b) {
    const BlockQ6_K& wb = w[b];
    const BlockQ8_K& xb = x[b];
    int sub[16] = {};
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = wb.ql + 64 * h;
      const uint8_t* qh = wb.qh + 32 * h;
      const int8_t* y = xb.qs + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int q1 = ((ql[l] & 0xf) | ((qh[l] & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        const int s = 8 * h + l / 16;
        sub[s] += q1 * y[l];
        sub[s + 2] += q2 * y[l + 32];
        sub[s + 4] += q3 * y[l + 64];
        sub[s + 6] += q4 * y[l + 96];
      }
    }
    int isum = 0;
    for (int s = 0; s < 16; ++s) isum += wb.scales[s] * sub[s];
    const float d = xb.d * h2f(wb.d);
    sum += d * static_cast<float>(isum);
  }
  return sum;
}

float dot_iq4_xs(int64_t n, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockIQ4_XS*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / 256; ++b) {
    const BlockIQ4_XS& wb = w[b];
    const BlockQ8_K& xb = x[b];
    int isum = 0;
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = (((wb.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | (((wb.scales_h >> (2 * ib)) & 3) << 4)) - 32;
      const uint8_t* qs = wb.qs + 16 * ib;
      const int8_t* y = xb.qs + 32 * ib;
      int sub = 0;
      for (int j = 0; j < 16; ++j) sub += kIq4nlValues[lo4(qs[j])] * y[j] + kIq4nlValues[hi4(qs[j])] * y[j + 16];
      isum += ls * sub;
    }
    const float d = h2f(wb.d) * xb.d;
    sum += d * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace

const QuantKernels& scalar_quant_kernels() {
  static const QuantKernels k = [] {
    QuantKernels t{};
    t.quantize[static_cast<int>(ActType::F32)] = quantize_f32;
    t.quantize[static_cast<int>(ActType::F16)] = quantize_f16;
    t.quantize[static_cast<int>(ActType::BF16)] = quantize_bf16_scalar;
    t.quantize[static_cast<int>(ActType::Q8_0)] = quantize_q8_32<false>;
    t.quantize[static_cast<int>(ActType::Q8_1)] = quantize_q8_32<true>;
    t.quantize[static_cast<int>(ActType::Q8_K)] = quantize_q8_K_scalar;
    t.dot[kSlotF32] = dot_f32;
    t.dot[kSlotF16] = dot_f16;
    t.dot[kSlotBF16] = dot_bf16;
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
    add_scalar_x8_kernels(t);
    return t;
  }();
  return k;
}

}  // namespace vtc::cpu::detail
