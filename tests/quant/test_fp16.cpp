// fp16 / bf16 conversions (frontends/gguf/dequant.h), checked against
// independent oracles: the compiler's _Float16 where it has one, and exact
// nearest-value searches. The reference's own f16/bf16 -> f32 is compared
// on all 65536 bit patterns in test_quant_reference.cpp.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "frontends/gguf/dequant.h"

namespace {

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }
float from_bits(uint32_t u) { return std::bit_cast<float>(u); }
bool is_nan16(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

// Round-to-nearest-even fp32 -> fp16 computed in double from the definition:
// the representable neighbours below and above, and the tie rule.
uint16_t oracle_fp16(float f) {
  if (std::isnan(f)) return static_cast<uint16_t>((std::signbit(f) ? 0x8000 : 0) | 0x7e00);
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return sign | 0x7c00;
  // Find the largest non-negative finite half <= a by binary search on the
  // ordered bit patterns 0..0x7bff.
  uint16_t lo = 0, hi = 0x7bff;
  while (lo < hi) {
    const uint16_t mid = static_cast<uint16_t>((lo + hi + 1) / 2);
    if (static_cast<double>(vtc::fp16_to_fp32(mid)) <= a) lo = mid; else hi = mid - 1;
  }
  if (lo == 0x7bff) return sign | lo;  // (65504, 65520): rounds down
  const double below = vtc::fp16_to_fp32(lo), above = vtc::fp16_to_fp32(lo + 1);
  const double d_lo = a - below, d_hi = above - a;
  uint16_t r = lo;
  if (d_hi < d_lo || (d_hi == d_lo && (lo & 1))) r = lo + 1;
  return sign | r;
}

uint16_t oracle_bf16(float f) {
  const uint32_t x = bits(f);
  if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x40);
  const uint32_t lo = x & 0xffff0000u;
  const double dl = std::fabs(static_cast<double>(f) - static_cast<double>(from_bits(lo)));
  // The next pattern up (in magnitude); 0x7f7f.. + 1 is Inf, which is right.
  const uint32_t up = lo + 0x10000u;
  if ((x & 0xffffu) == 0) return static_cast<uint16_t>(x >> 16);
  const double upv = (up & 0x7fffffffu) == 0x7f800000u
                         ? std::ldexp(1.0, 128) * (std::signbit(f) ? -1 : 1)
                         : static_cast<double>(from_bits(up));
  const double dh = std::fabs(upv - static_cast<double>(f));
  if (dh < dl || (dh == dl && ((lo >> 16) & 1))) return static_cast<uint16_t>(up >> 16);
  return static_cast<uint16_t>(lo >> 16);
}

// Floats around every rounding boundary of the half grid: for each of the
// 2^19 high-bit patterns, the low 13 bits at the edges and the tie point.
std::vector<float> boundary_floats() {
  std::vector<float> v;
  for (uint32_t hi = 0; hi < (1u << 19); ++hi)
    for (uint32_t lo : {0x0000u, 0x0001u, 0x0fffu, 0x1000u, 0x1001u, 0x1fffu})
      v.push_back(from_bits((hi << 13) | lo));
  return v;
}

}  // namespace

TEST_CASE("fp16 -> fp32 is exact for every finite half", "[fp16]") {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto u = static_cast<uint16_t>(h);
    const float f = vtc::fp16_to_fp32(u);
    const int exp = (h >> 10) & 0x1f;
    const int mant = h & 0x3ff;
    const double mag = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
    const double expect = (h & 0x8000) ? -mag : mag;
    if (exp == 31) {
      if (mant == 0) {
        REQUIRE(std::isinf(f));
        REQUIRE(std::signbit(f) == bool(h & 0x8000));
      } else {
        REQUIRE(std::isnan(f));
        // payload kept in the top mantissa bits, quiet bit set
        REQUIRE(((bits(f) >> 13) & 0x1ff) == (mant & 0x1ff));
        REQUIRE((bits(f) & 0x00400000u) != 0);
      }
      continue;
    }
    REQUIRE(static_cast<double>(f) == expect);
    REQUIRE(std::signbit(f) == bool(h & 0x8000));
  }
}

TEST_CASE("fp16 round trip is the identity on every non-NaN half", "[fp16]") {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto u = static_cast<uint16_t>(h);
    if (is_nan16(u)) {
      REQUIRE((vtc::fp32_to_fp16(vtc::fp16_to_fp32(u)) & 0x7fff) == 0x7e00);
      continue;
    }
    REQUIRE(vtc::fp32_to_fp16(vtc::fp16_to_fp32(u)) == u);
  }
}

TEST_CASE("fp32 -> fp16 rounds to nearest even", "[fp16]") {
  SECTION("named values") {
    CHECK(vtc::fp32_to_fp16(0.0f) == 0x0000);
    CHECK(vtc::fp32_to_fp16(-0.0f) == 0x8000);
    CHECK(vtc::fp32_to_fp16(1.0f) == 0x3c00);
    CHECK(vtc::fp32_to_fp16(-2.0f) == 0xc000);
    CHECK(vtc::fp32_to_fp16(65504.0f) == 0x7bff);
    CHECK(vtc::fp32_to_fp16(65519.99f) == 0x7bff);
    CHECK(vtc::fp32_to_fp16(65520.0f) == 0x7c00);
    CHECK(vtc::fp32_to_fp16(1e10f) == 0x7c00);
    CHECK(vtc::fp32_to_fp16(-INFINITY) == 0xfc00);
    CHECK(vtc::fp32_to_fp16(std::ldexp(1.0f, -24)) == 0x0001);       // smallest subnormal
    CHECK(vtc::fp32_to_fp16(std::ldexp(1.0f, -25)) == 0x0000);       // tie -> even (0)
    CHECK(vtc::fp32_to_fp16(std::ldexp(1.5f, -25)) == 0x0001);
    CHECK(vtc::fp32_to_fp16(std::ldexp(3.0f, -25)) == 0x0002);       // 1.5 ulp tie -> even (2)
    CHECK(vtc::fp32_to_fp16(std::ldexp(1023.0f, -24)) == 0x03ff);    // largest subnormal
    CHECK(vtc::fp32_to_fp16(std::ldexp(1023.5f, -24)) == 0x0400);    // rounds into the normals
    CHECK(vtc::fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);  // tie -> even
    CHECK(vtc::fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
    CHECK((vtc::fp32_to_fp16(NAN) & 0x7fff) == 0x7e00);
  }
  SECTION("every rounding boundary, against an exact oracle") {
    for (float f : boundary_floats()) {
      INFO("f = " << f << " bits 0x" << std::hex << bits(f));
      REQUIRE(vtc::fp32_to_fp16(f) == oracle_fp16(f));
    }
  }
#if defined(__FLT16_MAX__)
  SECTION("random floats, against the compiler's _Float16") {
    std::mt19937 rng(1234);
    for (int i = 0; i < 2'000'000; ++i) {
      const float f = from_bits(rng());
      if (std::isnan(f)) continue;
      const _Float16 h = static_cast<_Float16>(f);
      uint16_t expect;
      std::memcpy(&expect, &h, 2);
      INFO("f = " << f << " bits 0x" << std::hex << bits(f));
      REQUIRE(vtc::fp32_to_fp16(f) == expect);
    }
  }
#endif
}

TEST_CASE("bf16 conversions", "[bf16]") {
  SECTION("bf16 -> fp32 is the top half of the float") {
    for (uint32_t h = 0; h < 0x10000; ++h)
      REQUIRE(bits(vtc::bf16_to_fp32(static_cast<uint16_t>(h))) == h << 16);
  }
  SECTION("round trip on every non-NaN bf16") {
    for (uint32_t h = 0; h < 0x10000; ++h) {
      const float f = vtc::bf16_to_fp32(static_cast<uint16_t>(h));
      if (std::isnan(f)) {
        REQUIRE(vtc::fp32_to_bf16(f) == (h | 0x40));  // made quiet, payload kept
        continue;
      }
      REQUIRE(vtc::fp32_to_bf16(f) == h);
    }
  }
  SECTION("named values") {
    CHECK(vtc::fp32_to_bf16(1.0f) == 0x3f80);
    CHECK(vtc::fp32_to_bf16(from_bits(0x3f808000u)) == 0x3f80);  // tie -> even
    CHECK(vtc::fp32_to_bf16(from_bits(0x3f818000u)) == 0x3f82);  // tie -> even (up)
    CHECK(vtc::fp32_to_bf16(from_bits(0x3f808001u)) == 0x3f81);
    CHECK(vtc::fp32_to_bf16(from_bits(0x7f7fffffu)) == 0x7f80);  // FLT_MAX rounds to Inf
    CHECK(vtc::fp32_to_bf16(from_bits(0x7f800001u)) == 0x7fc0);  // sNaN made quiet
  }
  SECTION("rounding boundaries and random floats, against an exact oracle") {
    std::mt19937 rng(99);
    for (uint32_t hi = 0; hi < 0x10000; ++hi) {
      const uint32_t random_low = static_cast<uint32_t>(rng() & 0xffffu);
      for (uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu, random_low}) {
        const float f = from_bits((hi << 16) | lo);
        INFO("bits 0x" << std::hex << bits(f));
        REQUIRE(vtc::fp32_to_bf16(f) == oracle_bf16(f));
      }
    }
  }
}
