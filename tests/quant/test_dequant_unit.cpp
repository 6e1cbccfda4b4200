// dequantize_row on hand-built blocks: layout sanity and error handling.
// Bit-exactness against the reference on real data is in
// test_quant_reference.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "frontends/gguf/dequant.h"
#include "support/error.h"
#include "support/ggml_type.h"

using vtc::GgmlType;

namespace {

void put_half(std::vector<uint8_t>& b, size_t at, float v) {
  const uint16_t h = vtc::fp32_to_fp16(v);
  b[at] = static_cast<uint8_t>(h);
  b[at + 1] = static_cast<uint8_t>(h >> 8);
}

std::vector<float> deq(GgmlType t, const std::vector<uint8_t>& bytes, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n), -12345.0f);
  vtc::dequantize_row(t, bytes.data(), out.data(), n);
  return out;
}

const std::array<GgmlType, 18> kSupported = {
    GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,   GgmlType::Q4_0,    GgmlType::Q4_1,  GgmlType::Q5_0,
    GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K,   GgmlType::Q3_K,    GgmlType::Q4_K,  GgmlType::Q5_K,
    GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::IQ3_S, GgmlType::IQ3_XXS, GgmlType::MXFP4};

}  // namespace

TEST_CASE("can_dequantize covers exactly the supported types", "[dequant]") {
  for (auto it = vtc::ggml_type_table_begin(); it != vtc::ggml_type_table_end(); ++it) {
    const bool expect = std::find(kSupported.begin(), kSupported.end(), it->type) != kSupported.end();
    INFO(it->name);
    CHECK(vtc::can_dequantize(it->type) == expect);
  }
}

TEST_CASE("dequantize_row rejects bad requests", "[dequant]") {
  std::vector<uint8_t> bytes(1024);
  std::vector<float> out(1024);
  CHECK_THROWS_AS(vtc::dequantize_row(GgmlType::Q4_0, bytes.data(), out.data(), 31), vtc::Error);
  CHECK_THROWS_AS(vtc::dequantize_row(GgmlType::Q4_K, bytes.data(), out.data(), 32), vtc::Error);
  CHECK_THROWS_AS(vtc::dequantize_row(GgmlType::Q4_0, bytes.data(), out.data(), -32), vtc::Error);
  CHECK_THROWS_AS(vtc::dequantize_row(GgmlType::IQ2_XXS, bytes.data(), out.data(), 256), vtc::Error);
  CHECK_THROWS_AS(vtc::dequantize_row(static_cast<GgmlType>(4), bytes.data(), out.data(), 32), vtc::Error);
  CHECK_NOTHROW(vtc::dequantize_row(GgmlType::Q4_0, bytes.data(), out.data(), 0));
}

TEST_CASE("scalar types", "[dequant]") {
  const std::vector<float> src = {1.5f, -0.0f, 3e38f, -7.25f};
  std::vector<uint8_t> f32(16), f16(8), bf16(8);
  std::memcpy(f32.data(), src.data(), 16);
  for (size_t i = 0; i < 4; ++i) {
    const uint16_t h = vtc::fp32_to_fp16(src[i]), b = vtc::fp32_to_bf16(src[i]);
    std::memcpy(&f16[2 * i], &h, 2);
    std::memcpy(&bf16[2 * i], &b, 2);
  }
  CHECK(deq(GgmlType::F32, f32, 4) == src);
  CHECK(deq(GgmlType::F16, f16, 4) == std::vector<float>{1.5f, -0.0f, INFINITY, -7.25f});
  const auto b = deq(GgmlType::BF16, bf16, 4);
  CHECK(b[0] == 1.5f);
  CHECK(b[3] == -7.25f);
}

TEST_CASE("Q4_0 and Q8_0 block layout", "[dequant]") {
  SECTION("Q4_0: value j in the low nibble of qs[j], value j+16 in the high") {
    std::vector<uint8_t> b(18 * 2);
    for (int blk = 0; blk < 2; ++blk) {
      put_half(b, 18 * blk, blk == 0 ? 0.5f : -2.0f);
      for (int j = 0; j < 16; ++j) b[18 * blk + 2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    }
    const auto y = deq(GgmlType::Q4_0, b, 64);
    for (int blk = 0; blk < 2; ++blk) {
      const float d = blk == 0 ? 0.5f : -2.0f;
      for (int j = 0; j < 16; ++j) {
        CHECK(y[32 * blk + j] == static_cast<float>(j - 8) * d);
        CHECK(y[32 * blk + j + 16] == static_cast<float>(7 - j) * d);
      }
    }
  }
  SECTION("Q8_0: signed bytes times the scale") {
    std::vector<uint8_t> b(34);
    put_half(b, 0, 0.25f);
    for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 128));
    const auto y = deq(GgmlType::Q8_0, b, 32);
    for (int j = 0; j < 32; ++j) CHECK(y[j] == static_cast<float>(j * 8 - 128) * 0.25f);
  }
  SECTION("Q5_0: bit i of qh is the fifth bit of value i") {
    std::vector<uint8_t> b(22);
    put_half(b, 0, 1.0f);
    const uint32_t qh = 0x80000001u;  // values 0 and 31
    std::memcpy(&b[2], &qh, 4);
    const auto y = deq(GgmlType::Q5_0, b, 32);
    CHECK(y[0] == 0.0f);     // 16 - 16
    CHECK(y[1] == -16.0f);
    CHECK(y[31] == 0.0f);
    CHECK(y[16] == -16.0f);
  }
}

TEST_CASE("K-quant scale packing", "[dequant]") {
  SECTION("Q4_K: 6-bit scales and mins of the 8 sub-blocks") {
    std::vector<uint8_t> b(144, 0);
    put_half(b, 0, 1.0f);   // d
    put_half(b, 2, 1.0f);   // dmin
    // sub-block s gets scale s+1 and min 2s; qs all 1 (low and high nibble)
    const int sc[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const int mn[8] = {0, 2, 4, 6, 40, 42, 60, 63};
    uint8_t* s = &b[4];
    for (int j = 0; j < 4; ++j) {
      s[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
      s[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
      s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xf) | ((mn[j + 4] & 0xf) << 4));
    }
    std::memset(&b[16], 0x11, 128);
    const auto y = deq(GgmlType::Q4_K, b, 256);
    for (int sub = 0; sub < 8; ++sub)
      for (int l = 0; l < 32; ++l) {
        INFO("sub-block " << sub << " value " << l);
        REQUIRE(y[32 * sub + l] == static_cast<float>(sc[sub]) - static_cast<float>(mn[sub]));
      }
  }
  SECTION("Q6_K: signed 8-bit scales and 6-bit values stored +32") {
    std::vector<uint8_t> b(210, 0);
    for (int s = 0; s < 16; ++s) b[192 + s] = static_cast<uint8_t>(static_cast<int8_t>(s - 8));
    put_half(b, 208, 0.5f);
    // all ql/qh zero: every q is -32
    const auto y = deq(GgmlType::Q6_K, b, 256);
    for (int i = 0; i < 256; ++i) {
      // value i belongs to sub-block i/16
      REQUIRE(y[i] == 0.5f * static_cast<float>(i / 16 - 8) * -32.0f);
    }
  }
}

TEST_CASE("MXFP4 block layout and E8M0 scales", "[dequant]") {
  // Block: u8 e, then 16 bytes of nibbles (value j low, j + 16 high).
  // Codes 0..15 are the doubled E2M1 values 0 1 2 3 4 6 8 12 and their
  // negatives (code 8 is -0 = 0); the scale is 2^(e - 128).
  std::vector<uint8_t> b(17 * 3, 0);
  b[0] = 128;  // scale 1
  for (int j = 0; j < 16; ++j) b[1 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  b[17] = 0;    // 2^-128, subnormal
  b[18] = 0x07;  // value 0: code 7 = 12
  b[34] = 254;  // 2^126
  b[35] = 0xd0;  // value 0: code 0 = 0, value 16: code 13 = -6
  const auto y = deq(GgmlType::MXFP4, b, 96);
  const float kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  for (int j = 0; j < 16; ++j) {
    CHECK(y[static_cast<size_t>(j)] == kv[j]);
    CHECK(y[static_cast<size_t>(j + 16)] == kv[15 - j]);
  }
  CHECK(y[32] == std::ldexp(12.0f, -128));
  CHECK(y[33] == 0.0f);
  CHECK(y[64] == 0.0f);
  CHECK(y[80] == std::ldexp(-6.0f, 126));
}
