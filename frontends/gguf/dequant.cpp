// Dequantization of ggml block-quantized tensors to f32.
//
// Every quantized type stores a row as a sequence of fixed-size blocks; a
// block holds `block_size` values (ggml_traits(type).block_size) in
// `block_bytes` bytes. All multi-byte fields are little-endian; "half" is an
// IEEE binary16 scale. Layouts, field by field in storage order:
//
// Simple 32-value blocks (value i of the block, i in [0, 32)):
//   Q4_0   half d; u8 qs[16]                 x = (q - 8) * d
//   Q4_1   half d, m; u8 qs[16]              x = q * d + m
//          (4-bit q: value j in the low nibble of qs[j], value j+16 in the
//           high nibble of qs[j])
//   Q5_0   half d; u8 qh[4]; u8 qs[16]       x = (q - 16) * d
//   Q5_1   half d, m; u8 qh[4]; u8 qs[16]    x = q * d + m
//          (low 4 bits as Q4_*, bit 4 of value i is bit i of the u32 qh)
//   Q8_0   half d; i8 qs[32]                 x = qs[i] * d
//   IQ4_NL half d; u8 qs[16]                 x = d * kvalues[q], q as Q4_0,
//          kvalues a fixed non-uniform 16-entry codebook.
//   MXFP4  u8 e; u8 qs[16]                   x = kvalues_fp4[q] * e8m0_half(e),
//          q as Q4_0 (OCP microscaling FP4: an E2M1 value per nibble, a
//          shared power-of-two E8M0 scale). kvalues_fp4 holds the E2M1
//          values doubled (0, 1, 2, 3, 4, 6, 8, 12 and their negatives), so
//          the scale is taken as half of 2^(e-127): 2^(e-128), which for
//          e < 2 is the subnormal 2^-128 or 2^-127 (ggml_e8m0_to_fp32_half).
//          Every product is exact (a small integer times a power of two).
//
// K-quants, 256-value super-blocks split into sub-blocks:
//   Q2_K   u8 scales[16]; u8 qs[64]; half d, dmin
//          16 sub-blocks of 16. scales[s] = scale (low nibble) | min (high).
//          x = (d * sc) * q - (dmin * mn), q 2 bits.
//   Q3_K   u8 hmask[32]; u8 qs[64]; u8 scales[12]; half d
//          16 sub-blocks of 16, 6-bit signed scales (stored +32) packed as
//          16 low nibbles in bytes 0..7 and 16 high bit-pairs in 8..11.
//          x = (d * (sc - 32)) * (q - (hmask bit ? 0 : 4)), q 2 bits.
//   Q4_K   half d, dmin; u8 scales[12]; u8 qs[128]
//          8 sub-blocks of 32, 6-bit scale and 6-bit min each, packed in the
//          12 bytes (see scale_min_k4). x = (d * sc) * q - (dmin * mn).
//   Q5_K   half d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]
//          as Q4_K with a fifth bit from qh.
//   Q6_K   u8 ql[128]; u8 qh[64]; i8 scales[16]; half d
//          16 sub-blocks of 16, 8-bit signed scales, 6-bit q stored +32.
//          x = (d * sc) * (q - 32).
//
// The 2-bit/4-bit packing of Q2_K, Q3_K, Q6_K (and Q4_K/Q5_K nibbles) walks
// the super-block in 128-value halves: within a half, 32 consecutive qs
// bytes carry 4 (or 2) groups of 32 values at bit shifts 0,2,4,6 (or 0,4).
//
// i-quants:
//   IQ4_XS half d; u16 scales_h; u8 scales_l[4]; u8 qs[128]
//          8 sub-blocks of 32, 6-bit scales (low 4 bits in scales_l nibbles,
//          high 2 bits in scales_h), x = (d * (ls - 32)) * kvalues[q].
//   IQ3_XXS half d; u8 qs[64]; u8 scales_and_signs[32]
//          8 sub-blocks of 32. Each 8-value group takes two grid indices
//          from qs; a grid entry is 4 magnitudes packed in a u32. Per
//          sub-block a u32 of scales_and_signs holds 4x7 sign bits (the
//          8th sign of each group makes its count of negative signs even)
//          and a 4-bit scale s in bits 28..31:
//          x = ((d * (0.5 + s)) * 0.5) * grid * sign.
//   IQ3_S  half d; u8 qs[64]; u8 qh[8]; u8 signs[32]; u8 scales[4]
//          8 sub-blocks of 32; a grid index is 9 bits (8 from qs, the 9th
//          from qh[sub-block]), every value has an explicit sign bit, and
//          each sub-block a 4-bit scale (two per byte):
//          x = (d * (1 + 2 s)) * grid * sign.
//
// Arithmetic: each formula is evaluated in float, in the same order and with
// the same intermediate roundings as the reference's dequantize_row_* (which
// is what makes the results bit-exact). This file must not be compiled with
// -ffast-math or FMA contraction (-ffp-contract=fast with -mfma): a fused
// multiply-add rounds once instead of twice and changes the bits.
// tests/quant compares every type bit-for-bit against the reference.

#include "frontends/gguf/dequant.h"

#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "support/error.h"

#if defined(__FAST_MATH__)
#error "dequant.cpp must be bit-exact with the reference: do not build it with -ffast-math"
#endif

namespace vtc {

// ---------------------------------------------------------------------------
// Scalar conversions.

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    // Inf stays Inf; NaN keeps its payload and becomes quiet, as an FPU
    // conversion (and the reference's multiply-based one) does.
    bits = sign | 0x7f800000u | (mant << 13) | (mant ? 0x00400000u : 0u);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal half: normalize. value = mant * 2^-24.
    int e = -1;
    do {
      mant <<= 1;
      ++e;
    } while ((mant & 0x400u) == 0);
    mant &= 0x3ffu;
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t fp32_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;  // NaN -> canonical quiet NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: Inf
  const int32_t exp = static_cast<int32_t>(abs >> 23) - 127;
  if (exp >= -14) {
    // Normal half. Round the 23-bit mantissa to 10 bits, nearest even; a
    // carry into the exponent is correct (it becomes the next binade).
    const uint32_t m = abs & 0x7fffffu;
    uint32_t h = (static_cast<uint32_t>(exp + 15) << 10) | (m >> 13);
    const uint32_t rest = m & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  if (exp < -25) return sign;  // below half the smallest subnormal: +-0
  // Subnormal half: value = q * 2^-24 with q in [0, 1024].
  // value = m * 2^(exp - 23), so q = m * 2^(exp + 1) = m >> shift, with
  // shift in [14, 24]; round the shifted-out bits to nearest even.
  const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
  const int shift = -exp - 1;
  uint32_t q = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t fp32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

namespace {

constexpr int kQK = 32;    // values per simple block
constexpr int kQK_K = 256;  // values per K-quant / i-quant super-block

uint16_t load_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (static_cast<uint16_t>(p[1]) << 8));
}
uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
float load_half(const uint8_t* p) { return fp16_to_fp32(load_u16(p)); }

// The IQ4_NL / IQ4_XS codebook.
constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};

// IQ3 grids: each entry packs 4 unsigned magnitudes, byte j = value j.
// Transcribed as data from the reference's ggml-common.h (iq3xxs_grid,
// iq3s_grid); they are the output of an offline lattice search and cannot be
// derived here.
constexpr uint32_t kIq3XxsGrid[256] = {
    0x04040404, 0x04040414, 0x04040424, 0x04040c0c, 0x04040c1c, 0x04040c3e, 0x04041404, 0x04041414,
    0x04041c0c, 0x04042414, 0x04043e1c, 0x04043e2c, 0x040c040c, 0x040c041c, 0x040c0c04, 0x040c0c14,
    0x040c140c, 0x040c142c, 0x040c1c04, 0x040c1c14, 0x040c240c, 0x040c2c24, 0x040c3e04, 0x04140404,
    0x04140414, 0x04140424, 0x04140c0c, 0x04141404, 0x04141414, 0x04141c0c, 0x04141c1c, 0x04141c3e,
    0x04142c0c, 0x04142c3e, 0x04143e2c, 0x041c040c, 0x041c043e, 0x041c0c04, 0x041c0c14, 0x041c142c,
    0x041c3e04, 0x04240c1c, 0x04241c3e, 0x04242424, 0x04242c3e, 0x04243e1c, 0x04243e2c, 0x042c040c,
    0x042c043e, 0x042c1c14, 0x042c2c14, 0x04341c2c, 0x04343424, 0x043e0c04, 0x043e0c24, 0x043e0c34,
    0x043e241c, 0x043e340c, 0x0c04040c, 0x0c04041c, 0x0c040c04, 0x0c040c14, 0x0c04140c, 0x0c04141c,
    0x0c041c04, 0x0c041c14, 0x0c041c24, 0x0c04243e, 0x0c042c04, 0x0c0c0404, 0x0c0c0414, 0x0c0c0c0c,
    0x0c0c1404, 0x0c0c1414, 0x0c14040c, 0x0c14041c, 0x0c140c04, 0x0c140c14, 0x0c14140c, 0x0c141c04,
    0x0c143e14, 0x0c1c0404, 0x0c1c0414, 0x0c1c1404, 0x0c1c1c0c, 0x0c1c2434, 0x0c1c3434, 0x0c24040c,
    0x0c24042c, 0x0c242c04, 0x0c2c1404, 0x0c2c1424, 0x0c2c2434, 0x0c2c3e0c, 0x0c34042c, 0x0c3e1414,
    0x0c3e2404, 0x14040404, 0x14040414, 0x14040c0c, 0x14040c1c, 0x14041404, 0x14041414, 0x14041434,
    0x14041c0c, 0x14042414, 0x140c040c, 0x140c041c, 0x140c042c, 0x140c0c04, 0x140c0c14, 0x140c140c,
    0x140c1c04, 0x140c341c, 0x140c343e, 0x140c3e04, 0x14140404, 0x14140414, 0x14140c0c, 0x14140c3e,
    0x14141404, 0x14141414, 0x14141c3e, 0x14142404, 0x14142c2c, 0x141c040c, 0x141c0c04, 0x141c0c24,
    0x141c3e04, 0x141c3e24, 0x14241c2c, 0x14242c1c, 0x142c041c, 0x142c143e, 0x142c240c, 0x142c3e24,
    0x143e040c, 0x143e041c, 0x143e0c34, 0x143e242c, 0x1c04040c, 0x1c040c04, 0x1c040c14, 0x1c04140c,
    0x1c04141c, 0x1c042c04, 0x1c04342c, 0x1c043e14, 0x1c0c0404, 0x1c0c0414, 0x1c0c1404, 0x1c0c1c0c,
    0x1c0c2424, 0x1c0c2434, 0x1c14040c, 0x1c14041c, 0x1c140c04, 0x1c14142c, 0x1c142c14, 0x1c143e14,
    0x1c1c0c0c, 0x1c1c1c1c, 0x1c241c04, 0x1c24243e, 0x1c243e14, 0x1c2c0404, 0x1c2c0434, 0x1c2c1414,
    0x1c2c2c2c, 0x1c340c24, 0x1c341c34, 0x1c34341c, 0x1c3e1c1c, 0x1c3e3404, 0x24040424, 0x24040c3e,
    0x24041c2c, 0x24041c3e, 0x24042c1c, 0x24042c3e, 0x240c3e24, 0x24141404, 0x24141c3e, 0x24142404,
    0x24143404, 0x24143434, 0x241c043e, 0x241c242c, 0x24240424, 0x24242c0c, 0x24243424, 0x242c142c,
    0x242c241c, 0x242c3e04, 0x243e042c, 0x243e0c04, 0x243e0c14, 0x243e1c04, 0x2c040c14, 0x2c04240c,
    0x2c043e04, 0x2c0c0404, 0x2c0c0434, 0x2c0c1434, 0x2c0c2c2c, 0x2c140c24, 0x2c141c14, 0x2c143e14,
    0x2c1c0414, 0x2c1c2c1c, 0x2c240c04, 0x2c24141c, 0x2c24143e, 0x2c243e14, 0x2c2c0414, 0x2c2c1c0c,
    0x2c342c04, 0x2c3e1424, 0x2c3e2414, 0x34041424, 0x34042424, 0x34042434, 0x34043424, 0x340c140c,
    0x340c340c, 0x34140c3e, 0x34143424, 0x341c1c04, 0x341c1c34, 0x34242424, 0x342c042c, 0x342c2c14,
    0x34341c1c, 0x343e041c, 0x343e140c, 0x3e04041c, 0x3e04042c, 0x3e04043e, 0x3e040c04, 0x3e041c14,
    0x3e042c14, 0x3e0c1434, 0x3e0c2404, 0x3e140c14, 0x3e14242c, 0x3e142c14, 0x3e1c0404, 0x3e1c0c2c,
    0x3e1c1c1c, 0x3e1c3404, 0x3e24140c, 0x3e24240c, 0x3e2c0404, 0x3e2c0414, 0x3e2c1424, 0x3e341c04,
};

constexpr uint32_t kIq3SGrid[512] = {
    0x01010101, 0x01010103, 0x01010105, 0x0101010b, 0x0101010f, 0x01010301, 0x01010303, 0x01010305,
    0x01010309, 0x0101030d, 0x01010501, 0x01010503, 0x0101050b, 0x01010707, 0x01010901, 0x01010905,
    0x0101090b, 0x0101090f, 0x01010b03, 0x01010b07, 0x01010d01, 0x01010d05, 0x01010f03, 0x01010f09,
    0x01010f0f, 0x01030101, 0x01030103, 0x01030105, 0x01030109, 0x01030301, 0x01030303, 0x0103030b,
    0x01030501, 0x01030507, 0x0103050f, 0x01030703, 0x0103070b, 0x01030909, 0x01030d03, 0x01030d0b,
    0x01030f05, 0x01050101, 0x01050103, 0x0105010b, 0x0105010f, 0x01050301, 0x01050307, 0x0105030d,
    0x01050503, 0x0105050b, 0x01050701, 0x01050709, 0x01050905, 0x0105090b, 0x0105090f, 0x01050b03,
    0x01050b07, 0x01050f01, 0x01050f07, 0x01070107, 0x01070303, 0x0107030b, 0x01070501, 0x01070505,
    0x01070703, 0x01070707, 0x0107070d, 0x01070909, 0x01070b01, 0x01070b05, 0x01070d0f, 0x01070f03,
    0x01070f0b, 0x01090101, 0x01090307, 0x0109030f, 0x01090503, 0x01090509, 0x01090705, 0x01090901,
    0x01090907, 0x01090b03, 0x01090f01, 0x010b0105, 0x010b0109, 0x010b0501, 0x010b0505, 0x010b050d,
    0x010b0707, 0x010b0903, 0x010b090b, 0x010b090f, 0x010b0d0d, 0x010b0f07, 0x010d010d, 0x010d0303,
    0x010d0307, 0x010d0703, 0x010d0b05, 0x010d0f03, 0x010f0101, 0x010f0105, 0x010f0109, 0x010f0501,
    0x010f0505, 0x010f050d, 0x010f0707, 0x010f0b01, 0x010f0b09, 0x03010101, 0x03010103, 0x03010105,
    0x03010109, 0x03010301, 0x03010303, 0x03010307, 0x0301030b, 0x0301030f, 0x03010501, 0x03010505,
    0x03010703, 0x03010709, 0x0301070d, 0x03010b09, 0x03010b0d, 0x03010d03, 0x03010f05, 0x03030101,
    0x03030103, 0x03030107, 0x0303010d, 0x03030301, 0x03030309, 0x03030503, 0x03030701, 0x03030707,
    0x03030903, 0x03030b01, 0x03030b05, 0x03030f01, 0x03030f0d, 0x03050101, 0x03050305, 0x0305030b,
    0x0305030f, 0x03050501, 0x03050509, 0x03050705, 0x03050901, 0x03050907, 0x03050b0b, 0x03050d01,
    0x03050f05, 0x03070103, 0x03070109, 0x0307010f, 0x03070301, 0x03070307, 0x03070503, 0x0307050f,
    0x03070701, 0x03070709, 0x03070903, 0x03070d05, 0x03070f01, 0x03090107, 0x0309010b, 0x03090305,
    0x03090309, 0x03090703, 0x03090707, 0x03090905, 0x0309090d, 0x03090b01, 0x03090b09, 0x030b0103,
    0x030b0301, 0x030b0307, 0x030b0503, 0x030b0701, 0x030b0705, 0x030b0b03, 0x030d0501, 0x030d0509,
    0x030d050f, 0x030d0909, 0x030d090d, 0x030f0103, 0x030f0107, 0x030f0301, 0x030f0305, 0x030f0503,
    0x030f070b, 0x030f0903, 0x030f0d05, 0x030f0f01, 0x05010101, 0x05010103, 0x05010107, 0x0501010b,
    0x0501010f, 0x05010301, 0x05010305, 0x05010309, 0x0501030d, 0x05010503, 0x05010507, 0x0501050f,
    0x05010701, 0x05010705, 0x05010903, 0x05010907, 0x0501090b, 0x05010b01, 0x05010b05, 0x05010d0f,
    0x05010f01, 0x05010f07, 0x05010f0b, 0x05030101, 0x05030105, 0x05030301, 0x05030307, 0x0503030f,
    0x05030505, 0x0503050b, 0x05030703, 0x05030709, 0x05030905, 0x05030b03, 0x05050103, 0x05050109,
    0x0505010f, 0x05050503, 0x05050507, 0x05050701, 0x0505070f, 0x05050903, 0x05050b07, 0x05050b0f,
    0x05050f03, 0x05050f09, 0x05070101, 0x05070105, 0x0507010b, 0x05070303, 0x05070505, 0x05070509,
    0x05070703, 0x05070707, 0x05070905, 0x05070b01, 0x05070d0d, 0x05090103, 0x0509010f, 0x05090501,
    0x05090507, 0x05090705, 0x0509070b, 0x05090903, 0x05090f05, 0x05090f0b, 0x050b0109, 0x050b0303,
    0x050b0505, 0x050b070f, 0x050b0901, 0x050b0b07, 0x050b0f01, 0x050d0101, 0x050d0105, 0x050d010f,
    0x050d0503, 0x050d0b0b, 0x050d0d03, 0x050f010b, 0x050f0303, 0x050f050d, 0x050f0701, 0x050f0907,
    0x050f0b01, 0x07010105, 0x07010303, 0x07010307, 0x0701030b, 0x0701030f, 0x07010505, 0x07010703,
    0x07010707, 0x0701070b, 0x07010905, 0x07010909, 0x0701090f, 0x07010b03, 0x07010d07, 0x07010f03,
    0x07030103, 0x07030107, 0x0703010b, 0x07030309, 0x07030503, 0x07030507, 0x07030901, 0x07030d01,
    0x07030f05, 0x07030f0d, 0x07050101, 0x07050305, 0x07050501, 0x07050705, 0x07050709, 0x07050b01,
    0x07070103, 0x07070301, 0x07070309, 0x07070503, 0x07070507, 0x0707050f, 0x07070701, 0x07070903,
    0x07070907, 0x0707090f, 0x07070b0b, 0x07070f07, 0x07090107, 0x07090303, 0x0709030d, 0x07090505,
    0x07090703, 0x07090b05, 0x07090d01, 0x07090d09, 0x070b0103, 0x070b0301, 0x070b0305, 0x070b050b,
    0x070b0705, 0x070b0909, 0x070b0b0d, 0x070b0f07, 0x070d030d, 0x070d0903, 0x070f0103, 0x070f0107,
    0x070f0501, 0x070f0505, 0x070f070b, 0x09010101, 0x09010109, 0x09010305, 0x09010501, 0x09010509,
    0x0901050f, 0x09010705, 0x09010903, 0x09010b01, 0x09010f01, 0x09030105, 0x0903010f, 0x09030303,
    0x09030307, 0x09030505, 0x09030701, 0x0903070b, 0x09030907, 0x09030b03, 0x09030b0b, 0x09050103,
    0x09050107, 0x09050301, 0x0905030b, 0x09050503, 0x09050707, 0x09050901, 0x09050b0f, 0x09050d05,
    0x09050f01, 0x09070109, 0x09070303, 0x09070307, 0x09070501, 0x09070505, 0x09070703, 0x0907070b,
    0x09090101, 0x09090105, 0x09090509, 0x0909070f, 0x09090901, 0x09090f03, 0x090b010b, 0x090b010f,
    0x090b0503, 0x090b0d05, 0x090d0307, 0x090d0709, 0x090d0d01, 0x090f0301, 0x090f030b, 0x090f0701,
    0x090f0907, 0x090f0b03, 0x0b010105, 0x0b010301, 0x0b010309, 0x0b010505, 0x0b010901, 0x0b010909,
    0x0b01090f, 0x0b010b05, 0x0b010d0d, 0x0b010f09, 0x0b030103, 0x0b030107, 0x0b03010b, 0x0b030305,
    0x0b030503, 0x0b030705, 0x0b030f05, 0x0b050101, 0x0b050303, 0x0b050507, 0x0b050701, 0x0b05070d,
    0x0b050b07, 0x0b070105, 0x0b07010f, 0x0b070301, 0x0b07050f, 0x0b070909, 0x0b070b03, 0x0b070d0b,
    0x0b070f07, 0x0b090103, 0x0b090109, 0x0b090501, 0x0b090705, 0x0b09090d, 0x0b0b0305, 0x0b0b050d,
    0x0b0b0b03, 0x0b0b0b07, 0x0b0d0905, 0x0b0f0105, 0x0b0f0109, 0x0b0f0505, 0x0d010303, 0x0d010307,
    0x0d01030b, 0x0d010703, 0x0d010707, 0x0d010d01, 0x0d030101, 0x0d030501, 0x0d03050f, 0x0d030d09,
    0x0d050305, 0x0d050709, 0x0d050905, 0x0d050b0b, 0x0d050d05, 0x0d050f01, 0x0d070101, 0x0d070309,
    0x0d070503, 0x0d070901, 0x0d09050b, 0x0d090907, 0x0d090d05, 0x0d0b0101, 0x0d0b0107, 0x0d0b0709,
    0x0d0b0d01, 0x0d0d010b, 0x0d0d0901, 0x0d0f0303, 0x0d0f0307, 0x0f010101, 0x0f010109, 0x0f01010f,
    0x0f010501, 0x0f010505, 0x0f01070d, 0x0f010901, 0x0f010b09, 0x0f010d05, 0x0f030105, 0x0f030303,
    0x0f030509, 0x0f030907, 0x0f03090b, 0x0f050103, 0x0f050109, 0x0f050301, 0x0f05030d, 0x0f050503,
    0x0f050701, 0x0f050b03, 0x0f070105, 0x0f070705, 0x0f07070b, 0x0f070b07, 0x0f090103, 0x0f09010b,
    0x0f090307, 0x0f090501, 0x0f090b01, 0x0f0b0505, 0x0f0b0905, 0x0f0d0105, 0x0f0d0703, 0x0f0f0101,
};

uint8_t grid_byte(uint32_t entry, int j) { return static_cast<uint8_t>(entry >> (8 * j)); }

// IQ3_XXS stores 7 sign bits per 8 values; the 8th makes the count of
// negative signs even.
uint8_t even_parity_signs(uint32_t seven_bits) {
  const uint32_t s = seven_bits & 127u;
  return static_cast<uint8_t>(s | ((std::popcount(s) & 1) << 7));
}

float sign_of(uint8_t signs, int bit) { return (signs >> bit) & 1u ? -1.f : 1.f; }

// ----- simple blocks -------------------------------------------------------

void deq_q4_0(const uint8_t* b, float* y) {
  const float d = load_half(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<float>((qs[j] & 0xf) - 8) * d;
    y[j + kQK / 2] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

void deq_q4_1(const uint8_t* b, float* y) {
  const float d = load_half(b);
  const float m = load_half(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<float>(qs[j] & 0xf) * d + m;
    y[j + kQK / 2] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

// Fifth bits of Q5_0 / Q5_1: bit i of qh belongs to value i.
int q5_value(const uint8_t* qs, uint32_t qh, int i) {
  const int lo = i < kQK / 2 ? (qs[i] & 0xf) : (qs[i - kQK / 2] >> 4);
  return lo | static_cast<int>(((qh >> i) & 1u) << 4);
}

void deq_q5_0(const uint8_t* b, float* y) {
  const float d = load_half(b);
  const uint32_t qh = load_u32(b + 2);
  const uint8_t* qs = b + 6;
  for (int i = 0; i < kQK; ++i) y[i] = static_cast<float>(q5_value(qs, qh, i) - 16) * d;
}

void deq_q5_1(const uint8_t* b, float* y) {
  const float d = load_half(b);
  const float m = load_half(b + 2);
  const uint32_t qh = load_u32(b + 4);
  const uint8_t* qs = b + 8;
  for (int i = 0; i < kQK; ++i) y[i] = static_cast<float>(q5_value(qs, qh, i)) * d + m;
}

void deq_q8_0(const uint8_t* b, float* y) {
  const float d = load_half(b);
  for (int i = 0; i < kQK; ++i) y[i] = static_cast<float>(static_cast<int8_t>(b[2 + i])) * d;
}

void deq_iq4_nl(const uint8_t* b, float* y) {
  const float d = load_half(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = d * static_cast<float>(kIq4Values[qs[j] & 0xf]);
    y[j + kQK / 2] = d * static_cast<float>(kIq4Values[qs[j] >> 4]);
  }
}

// E8M0 exponent byte -> 2^(e - 128), built from its bits as the reference
// does (e = 0xff would be 2^127 here, not NaN: the reference ignores NaN too).
float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
  return std::bit_cast<float>(bits);
}

// The E2M1 values, doubled (ggml's kvalues_fp4).
constexpr int8_t kFp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

void deq_mxfp4(const uint8_t* b, float* y) {
  const float d = e8m0_half(b[0]);
  const uint8_t* qs = b + 1;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<float>(kFp4Values[qs[j] & 0xf]) * d;
    y[j + kQK / 2] = static_cast<float>(kFp4Values[qs[j] >> 4]) * d;
  }
}

// ----- K-quants ------------------------------------------------------------

void deq_q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;        // 16
  const uint8_t* q = b + 16;        // 64
  const float d = load_half(b + 80);
  const float dmin = load_half(b + 82);
  int s = 0;
  for (int half = 0; half < 2; ++half, q += 32) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int part = 0; part < 2; ++part, ++s) {
        const float dl = d * static_cast<float>(scales[s] & 0xf);
        const float ml = dmin * static_cast<float>(scales[s] >> 4);
        for (int l = 0; l < 16; ++l)
          *y++ = dl * static_cast<float>((q[16 * part + l] >> shift) & 3) - ml;
      }
    }
  }
}

void deq_q3_k(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;         // 32
  const uint8_t* q = b + 32;        // 64
  const uint8_t* sc = b + 96;       // 12
  const float d = load_half(b + 108);
  int scale[16];
  for (int s = 0; s < 16; ++s) {
    const int lo = s < 8 ? (sc[s] & 0xf) : (sc[s - 8] >> 4);
    const int hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
    scale[s] = (lo | (hi << 4)) - 32;
  }
  int s = 0;
  int bit = 0;
  for (int half = 0; half < 2; ++half, q += 32) {
    for (int shift = 0; shift < 8; shift += 2, ++bit) {
      for (int part = 0; part < 2; ++part, ++s) {
        const float dl = d * static_cast<float>(scale[s]);
        for (int l = 16 * part; l < 16 * part + 16; ++l) {
          const int v = ((q[l] >> shift) & 3) - (((hmask[l] >> bit) & 1) ? 0 : 4);
          *y++ = dl * static_cast<float>(v);
        }
      }
    }
  }
}

// Q4_K / Q5_K: sub-block j's 6-bit scale and min. Sub-blocks 0..3 use the
// low 6 bits of bytes j and j+4; 4..7 take their low 4 bits from byte j+4's
// nibbles and their top 2 bits from the spare top bits of bytes j-4 and j.
void scale_min_k4(int j, const uint8_t* q, int& sc, int& mn) {
  if (j < 4) {
    sc = q[j] & 63;
    mn = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
    mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void deq_q4_k(const uint8_t* b, float* y) {
  const float d = load_half(b);
  const float dmin = load_half(b + 2);
  const uint8_t* scales = b + 4;    // 12
  const uint8_t* q = b + 16;        // 128
  for (int j = 0; j < 4; ++j, q += 32) {
    for (int nib = 0; nib < 2; ++nib) {
      int sc, mn;
      scale_min_k4(2 * j + nib, scales, sc, mn);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(mn);
      for (int l = 0; l < 32; ++l)
        *y++ = dl * static_cast<float>((q[l] >> (4 * nib)) & 0xf) - ml;
    }
  }
}

void deq_q5_k(const uint8_t* b, float* y) {
  const float d = load_half(b);
  const float dmin = load_half(b + 2);
  const uint8_t* scales = b + 4;    // 12
  const uint8_t* qh = b + 16;       // 32
  const uint8_t* q = b + 48;        // 128
  for (int j = 0; j < 4; ++j, q += 32) {
    for (int nib = 0; nib < 2; ++nib) {
      int sc, mn;
      scale_min_k4(2 * j + nib, scales, sc, mn);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(mn);
      const int hbit = 2 * j + nib;
      for (int l = 0; l < 32; ++l) {
        const int v = ((q[l] >> (4 * nib)) & 0xf) + (((qh[l] >> hbit) & 1) ? 16 : 0);
        *y++ = dl * static_cast<float>(v) - ml;
      }
    }
  }
}

void deq_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;                                       // 128
  const uint8_t* qh = b + 128;                                 // 64
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);  // 16
  const float d = load_half(b + 208);
  for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, y += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
  }
}

// ----- i-quants ------------------------------------------------------------

void deq_iq4_xs(const uint8_t* b, float* y) {
  const float d = load_half(b);
  const uint16_t scales_h = load_u16(b + 2);
  const uint8_t* scales_l = b + 4;  // 4
  const uint8_t* qs = b + 8;        // 128
  for (int ib = 0; ib < 8; ++ib, qs += 16, y += 32) {
    const int ls = ((scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | (((scales_h >> (2 * ib)) & 3) << 4);
    const float dl = d * static_cast<float>(ls - 32);
    for (int j = 0; j < 16; ++j) {
      y[j] = dl * static_cast<float>(kIq4Values[qs[j] & 0xf]);
      y[j + 16] = dl * static_cast<float>(kIq4Values[qs[j] >> 4]);
    }
  }
}

void deq_iq3_xxs(const uint8_t* b, float* y) {
  const float d = load_half(b);
  const uint8_t* qs = b + 2;                       // 64 grid indices
  const uint8_t* scales_and_signs = b + 2 + 64;    // 8 x u32
  for (int ib = 0; ib < 8; ++ib, qs += 8) {
    const uint32_t aux = load_u32(scales_and_signs + 4 * ib);
    const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
    for (int l = 0; l < 4; ++l, y += 8) {
      const uint8_t signs = even_parity_signs(aux >> (7 * l));
      const uint32_t g1 = kIq3XxsGrid[qs[2 * l]];
      const uint32_t g2 = kIq3XxsGrid[qs[2 * l + 1]];
      for (int j = 0; j < 4; ++j) {
        y[j] = db * static_cast<float>(grid_byte(g1, j)) * sign_of(signs, j);
        y[j + 4] = db * static_cast<float>(grid_byte(g2, j)) * sign_of(signs, j + 4);
      }
    }
  }
}

void deq_iq3_s(const uint8_t* b, float* y) {
  const float d = load_half(b);
  const uint8_t* qs = b + 2;        // 64 low index bytes
  const uint8_t* qh = b + 66;       // 8: index bit 8, one byte per sub-block
  const uint8_t* signs = b + 74;    // 32: one sign bit per value
  const uint8_t* scales = b + 106;  // 4: one nibble per sub-block
  for (int ib = 0; ib < 8; ++ib, qs += 8, signs += 4) {
    const int s = (scales[ib / 2] >> (4 * (ib % 2))) & 0xf;
    const float db = d * static_cast<float>(1 + 2 * s);
    for (int l = 0; l < 4; ++l, y += 8) {
      const uint32_t g1 = kIq3SGrid[qs[2 * l] | (((qh[ib] >> (2 * l)) & 1) << 8)];
      const uint32_t g2 = kIq3SGrid[qs[2 * l + 1] | (((qh[ib] >> (2 * l + 1)) & 1) << 8)];
      for (int j = 0; j < 4; ++j) {
        y[j] = db * static_cast<float>(grid_byte(g1, j)) * sign_of(signs[l], j);
        y[j + 4] = db * static_cast<float>(grid_byte(g2, j)) * sign_of(signs[l], j + 4);
      }
    }
  }
}

using BlockFn = void (*)(const uint8_t* block, float* out);

BlockFn block_fn(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0: return deq_q4_0;
    case GgmlType::Q4_1: return deq_q4_1;
    case GgmlType::Q5_0: return deq_q5_0;
    case GgmlType::Q5_1: return deq_q5_1;
    case GgmlType::Q8_0: return deq_q8_0;
    case GgmlType::Q2_K: return deq_q2_k;
    case GgmlType::Q3_K: return deq_q3_k;
    case GgmlType::Q4_K: return deq_q4_k;
    case GgmlType::Q5_K: return deq_q5_k;
    case GgmlType::Q6_K: return deq_q6_k;
    case GgmlType::IQ4_NL: return deq_iq4_nl;
    case GgmlType::MXFP4: return deq_mxfp4;
    case GgmlType::IQ4_XS: return deq_iq4_xs;
    case GgmlType::IQ3_XXS: return deq_iq3_xxs;
    case GgmlType::IQ3_S: return deq_iq3_s;
    default: return nullptr;
  }
}

}  // namespace

bool can_dequantize(GgmlType type) {
  return type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16 ||
         block_fn(type) != nullptr;
}

void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
  const GgmlTypeTraits* traits = find_ggml_type(static_cast<uint32_t>(type));
  if (traits == nullptr)
    throw Error(fmt::format("dequantize: unknown ggml type {}", static_cast<uint32_t>(type)));
  if (!can_dequantize(type))
    throw Error(fmt::format("dequantize: type {} is not supported", traits->name));
  if (n < 0 || n % traits->block_size != 0)
    throw Error(fmt::format("dequantize: {} values of {} is not a whole number of {}-value blocks",
                            n, traits->name, traits->block_size));
  const auto* in = static_cast<const uint8_t*>(src);
  switch (type) {
    case GgmlType::F32:
      if (n > 0) std::memcpy(dst, in, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(load_u16(in + 2 * i));
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(load_u16(in + 2 * i));
      return;
    default:
      break;
  }
  const BlockFn fn = block_fn(type);
  const int64_t n_blocks = n / traits->block_size;
  for (int64_t i = 0; i < n_blocks; ++i)
    fn(in + i * traits->block_bytes, dst + i * traits->block_size);
}

}  // namespace vtc
