// The AVX2 K-quant and IQ4_XS dot products against an emulation of the float
// order of ggml's x86 vec_dot kernels (ggml-cpu/arch/x86/quants.c, __AVX2__
// branch, which the reference's haswell and AVX-512 CPU builds both run).
//
// The emulation decodes every weight code from the block bytes (as
// ggml-common.h lays them out), forms ggml's 8 int32 lane sums per
// super-block (lane l: bytes 4l..4l+3 of each 32-value chunk; the mins and
// the Q6_K offset by pairs of 16-value groups), then combines them in float
// exactly as ggml does (docs/numerics-parity.md, "K-quant dot products").
// Integer sums are exact, so any other lane layout or float order shows up
// as a last-bit difference in some of the many random rows.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "kernel_test_util.h"
#include "runtime/cpu/kernels/internal.h"
#include "runtime/cpu/kernels/kernels.h"

using namespace vtc;
using namespace vtc::cpu;
using namespace vtc::cpu::test;

namespace {

using detail::BlockQ8_K;

// ggml's hsum_float_8: high half + low half, then (0+2)+(1+3).
float hsum8(const float a[8]) {
  const float s0 = a[0] + a[4], s1 = a[1] + a[5], s2 = a[2] + a[6], s3 = a[3] + a[7];
  return (s0 + s2) + (s1 + s3);
}
float hsum4(const float a[4]) { return (a[0] + a[2]) + (a[1] + a[3]); }

int lane_of(int e) { return (e % 32) / 4; }

// Per super-block: code lanes (sum of scale * code * q8 per lane) and the
// per-type extra terms, for one weight row.
struct Decoded {
  int64_t lanes[8] = {};  // int64 only to catch overflow; ggml's are int32
  int64_t extra[8] = {};  // Q2_K mins (8 lanes), Q4_K mins (4 lanes), Q5_K mins (lane 0), Q6_K offset
  float d = 0, dmin = 0;
};

uint8_t k4_scale(const uint8_t* q, int j) {  // ggml's get_scale_min_k4, scale part
  return j < 4 ? q[j] & 63 : (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
}
uint8_t k4_min(const uint8_t* q, int j) {
  return j < 4 ? q[j + 4] & 63 : (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
}

Decoded decode(GgmlType t, const uint8_t* blk, const BlockQ8_K& y) {
  Decoded r;
  int code[256], scale[256];
  switch (t) {
    case GgmlType::Q2_K: {
      const auto& b = *reinterpret_cast<const detail::BlockQ2_K*>(blk);
      for (int e = 0; e < 256; ++e) {
        const int h = e / 128, k = (e % 128) / 32, i = e % 32;
        code[e] = (b.qs[32 * h + i] >> (2 * k)) & 3;
        scale[e] = b.scales[e / 16] & 0xF;
      }
      for (int g = 0; g < 16; ++g) r.extra[g / 2] += (b.scales[g] >> 4) * y.bsums[g];
      r.d = y.d * fp16_to_fp32(b.d);
      r.dmin = -(y.d * fp16_to_fp32(b.dmin));
      break;
    }
    case GgmlType::Q3_K: {
      const auto& b = *reinterpret_cast<const detail::BlockQ3_K*>(blk);
      int8_t sc[16];
      detail::unpack_q3k_scales(b.scales, sc);
      for (int e = 0; e < 256; ++e) {
        const int h = e / 128, k = (e % 128) / 32, i = e % 32;
        const bool high = (b.hmask[i] >> (4 * h + k)) & 1;
        code[e] = ((b.qs[32 * h + i] >> (2 * k)) & 3) - (high ? 0 : 4);
        scale[e] = sc[e / 16];
      }
      r.d = y.d * fp16_to_fp32(b.d);
      break;
    }
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: {
      const bool five = t == GgmlType::Q5_K;
      const uint8_t* scales = five ? reinterpret_cast<const detail::BlockQ5_K*>(blk)->scales
                                   : reinterpret_cast<const detail::BlockQ4_K*>(blk)->scales;
      const uint8_t* qs = five ? reinterpret_cast<const detail::BlockQ5_K*>(blk)->qs
                               : reinterpret_cast<const detail::BlockQ4_K*>(blk)->qs;
      uint16_t d, dmin;
      std::memcpy(&d, blk, 2);
      std::memcpy(&dmin, blk + 2, 2);
      for (int e = 0; e < 256; ++e) {
        const int j = e / 64, hi = (e % 64) / 32, i = e % 32;
        code[e] = hi ? qs[32 * j + i] >> 4 : qs[32 * j + i] & 0xF;
        if (five) code[e] |= ((reinterpret_cast<const detail::BlockQ5_K*>(blk)->qh[i] >> (2 * j + hi)) & 1) << 4;
        scale[e] = k4_scale(scales, e / 32);
      }
      // ggml: madd(mins, hadd(bsums)) -> 4 lanes, lane k = mins 2k, 2k+1.
      for (int s = 0; s < 8; ++s) r.extra[s / 2] += k4_min(scales, s) * (y.bsums[2 * s] + y.bsums[2 * s + 1]);
      r.d = y.d * fp16_to_fp32(d);
      r.dmin = -(y.d * fp16_to_fp32(dmin));
      break;
    }
    case GgmlType::Q6_K: {
      const auto& b = *reinterpret_cast<const detail::BlockQ6_K*>(blk);
      for (int e = 0; e < 256; ++e) {
        const int h = e / 128, k = (e % 128) / 32, i = e % 32;
        const uint8_t l = b.ql[64 * h + 32 * (k % 2) + i];
        code[e] = (k < 2 ? l & 0xF : l >> 4) | (((b.qh[32 * h + i] >> (2 * k)) & 3) << 4);
        scale[e] = b.scales[e / 16];
      }
      for (int g = 0; g < 16; ++g) r.extra[g / 2] += 32 * b.scales[g] * y.bsums[g];
      r.d = y.d * fp16_to_fp32(b.d);
      break;
    }
    case GgmlType::IQ4_XS: {
      const auto& b = *reinterpret_cast<const detail::BlockIQ4_XS*>(blk);
      for (int e = 0; e < 256; ++e) {
        const int ib = e / 32, i = e % 32;
        const uint8_t q = b.qs[16 * ib + i % 16];
        code[e] = detail::kIq4nlValues[i < 16 ? q & 0xF : q >> 4];
        scale[e] = (((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b.scales_h >> (2 * ib)) & 3) << 4)) - 32;
      }
      r.d = fp16_to_fp32(b.d) * y.d;
      break;
    }
    default: FAIL("not a super-block type");
  }
  for (int e = 0; e < 256; ++e) r.lanes[lane_of(e)] += int64_t(scale[e]) * code[e] * y.qs[e];
  return r;
}

// ggml's float combination over the super-blocks of one row.
float ggml_order_dot(GgmlType t, const uint8_t* row, size_t block_bytes, const BlockQ8_K* y, int64_t nb) {
  float acc[8] = {}, acc_m[4] = {}, summs = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const Decoded r = decode(t, row + b * block_bytes, y[b]);
    float v[8];
    for (int l = 0; l < 8; ++l) {
      int64_t lane = r.lanes[l] - (t == GgmlType::Q6_K ? r.extra[l] : 0);
      REQUIRE(std::abs(lane) < (int64_t(1) << 31));
      v[l] = static_cast<float>(static_cast<int32_t>(lane));
    }
    if (t == GgmlType::Q2_K)
      for (int l = 0; l < 8; ++l) acc[l] = std::fma(r.dmin, static_cast<float>(r.extra[l]), acc[l]);
    if (t == GgmlType::Q4_K)
      for (int k = 0; k < 4; ++k) acc_m[k] = std::fma(r.dmin, static_cast<float>(r.extra[k]), acc_m[k]);
    if (t == GgmlType::Q5_K)
      summs = std::fma(r.dmin, static_cast<float>(r.extra[0] + r.extra[1] + r.extra[2] + r.extra[3]), summs);
    for (int l = 0; l < 8; ++l) acc[l] = std::fma(r.d, v[l], acc[l]);
  }
  if (t == GgmlType::Q4_K) return hsum8(acc) + hsum4(acc_m);
  if (t == GgmlType::Q5_K) return hsum8(acc) + summs;
  return hsum8(acc);
}

}  // namespace

TEST_CASE("matmul: SIMD K-quant dots follow ggml's x86 float order bit for bit", "[matmul][isa]") {
  if (!isa_supported(Isa::Avx2)) {
    WARN("SKIPPED: AVX2 is not available here");
    return;
  }
  for (Isa isa : simd_isas()) {
    INFO(isa_name(isa));
    const auto& k = detail::quant_kernels(isa);
    const GgmlType types[] = {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                              GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS};
    const int64_t rows = 64, cols = 2048, nb = cols / 256;
    for (GgmlType t : types) {
      const int slot = static_cast<int>(t);
      const size_t block_bytes = ggml_traits(t).block_bytes;
      const auto w = random_weights(t, rows, cols, 61);
      const int64_t stride = static_cast<int64_t>(w.size()) / rows;
      for (uint32_t seed = 0; seed < 4; ++seed) {
        // Mixed magnitudes across super-blocks, so that the lane sums' float
        // roundings depend on the order.
        auto xf = random_floats(static_cast<size_t>(cols), 70 + seed, -2.0f, 2.0f);
        for (int64_t i = 0; i < cols; ++i) xf[static_cast<size_t>(i)] *= float(1 + (i / 256) * 7 % 5);
        std::vector<BlockQ8_K> xq(static_cast<size_t>(nb));
        k.quantize[static_cast<int>(detail::ActType::Q8_K)](xf.data(), xq.data(), cols);
        std::vector<float> want(rows), got1(rows), got4(rows);
        for (int64_t r = 0; r < rows; ++r) {
          want[static_cast<size_t>(r)] = ggml_order_dot(t, w.data() + r * stride, block_bytes, xq.data(), nb);
          got1[static_cast<size_t>(r)] = k.dot[slot](cols, w.data() + r * stride, xq.data());
        }
        // The multi-token tiles, one token at a time (fn[1]): rows per tile.
        const detail::GemmKernels& g = k.gemm[slot];
        if (g.rows > 0)
          for (int64_t r = 0; r + g.rows <= rows; r += g.rows)
            g.fn[1](cols, w.data() + r * stride, stride, xq.data(), 0, got4.data() + r, 1);
        else
          got4 = got1;
        size_t diff1 = 0, diff4 = 0;
        for (int64_t r = 0; r < rows; ++r) {
          diff1 += std::memcmp(&want[size_t(r)], &got1[size_t(r)], 4) != 0;
          diff4 += std::memcmp(&want[size_t(r)], &got4[size_t(r)], 4) != 0;
        }
        INFO(fmt::format("{} seed {}: {} of {} rows differ (dot), {} (tile); row 0 {:.9g} vs {:.9g}", ggml_type_name(t),
                         seed, diff1, rows, diff4, want[0], got1[0]));
        CHECK(diff1 == 0);
        CHECK(diff4 == 0);
      }
    }
  }
}
