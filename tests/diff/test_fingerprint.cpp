// Fingerprints and value comparison on small tensors whose summaries are
// computed by hand, including NaN, Inf, f16/bf16 and integer types.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/diff/compare.h"
#include "runtime/diff/fingerprint.h"
#include "support/error.h"

using namespace vtc;
using namespace vtc::diff;

namespace {
template <typename T>
HostTensor tensor(ir::ElemType elem, const std::vector<T>& values) {
  HostTensor t{elem, {int64_t(values.size())}, std::vector<uint8_t>(values.size() * sizeof(T))};
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

TEST_CASE("fingerprint of an f32 tensor with NaN and Inf", "[fingerprint]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const Fingerprint f = fingerprint(widen(tensor(ir::ElemType::F32, std::vector<float>{1.5f, -2, 0, 3, nan, inf, -inf, 0.25f})));
  CHECK(f.count == 8);
  CHECK(f.nonfinite == 3);
  CHECK(f.nonzero == 7);     // NaN and the infinities are not zero
  CHECK(f.max_abs == 3);     // finite values only
  CHECK(f.sum_abs == 6.75);  // 1.5 + 2 + 3 + 0.25
  CHECK(f.first == std::vector<double>{1.5, -2, 0, 3});
  CHECK(format_fingerprint(f) == "nonfinite=3 nonzero=7 max|x|=3 sum|x|=6.75 first=[1.5, -2, 0, 3]");

  // NaN among the first four prints as nan; all non-finite: max and sum 0.
  const Fingerprint g = fingerprint(std::vector<double>{kNaN, -kInf});
  CHECK(g.nonfinite == 2);
  CHECK(g.max_abs == 0);
  CHECK(g.sum_abs == 0);
  CHECK(format_fingerprint(g) == "nonfinite=2 nonzero=2 max|x|=0 sum|x|=0 first=[nan, -inf]");
}

TEST_CASE("fingerprint of f16, bf16 and integer tensors", "[fingerprint]") {
  // f16: 1, -2, 65504 (largest), NaN, the smallest subnormal 2^-24.
  const Fingerprint h = fingerprint(widen(tensor(ir::ElemType::F16, std::vector<uint16_t>{0x3C00, 0xC000, 0x7BFF, 0x7E00, 0x0001})));
  CHECK(h.nonfinite == 1);
  CHECK(h.nonzero == 5);
  CHECK(h.max_abs == 65504);
  CHECK(h.sum_abs == 1 + 2 + 65504 + std::ldexp(1.0, -24));
  CHECK(h.first.size() == 4);
  CHECK(std::isnan(h.first[3]));

  // bf16: 1, -3, +Inf.
  const Fingerprint b = fingerprint(widen(tensor(ir::ElemType::BF16, std::vector<uint16_t>{0x3F80, 0xC040, 0x7F80})));
  CHECK(b.first == std::vector<double>{1, -3, kInf});
  CHECK(b.nonfinite == 1);
  CHECK(b.sum_abs == 4);

  const Fingerprint i = fingerprint(widen(tensor(ir::ElemType::I32, std::vector<int32_t>{-5, 0, 7})));
  CHECK(format_fingerprint(i) == "nonfinite=0 nonzero=2 max|x|=7 sum|x|=12 first=[-5, 0, 7]");
  const Fingerprint l = fingerprint(widen(tensor(ir::ElemType::I64, std::vector<int64_t>{int64_t(1) << 40, -1})));
  CHECK(l.max_abs == std::ldexp(1.0, 40));
  const Fingerprint u = fingerprint(widen(tensor(ir::ElemType::U8, std::vector<uint8_t>{255, 0, 1})));
  CHECK(u.first == std::vector<double>{255, 0, 1});
  CHECK(u.nonzero == 2);

  const Fingerprint empty = fingerprint(std::vector<double>{});
  CHECK(empty.count == 0);
  CHECK(empty.first.empty());
}

TEST_CASE("widen dequantizes a KV cache's blocks, and rejects partial blocks and short buffers", "[fingerprint]") {
  // One q8_0 block: d = 0.5 (f16 0x3800), codes 0, 1, ..., 31.
  std::vector<uint8_t> bytes(34);
  bytes[0] = 0x00, bytes[1] = 0x38;
  for (int i = 0; i < 32; ++i) bytes[size_t(2 + i)] = uint8_t(i);
  const auto v = widen(ir::ElemType::quant(GgmlType::Q8_0), bytes, 32);
  REQUIRE(v.size() == 32);
  CHECK(v[0] == 0.0);
  CHECK(v[31] == 15.5);
  CHECK_THROWS_WITH(widen(ir::ElemType::quant(GgmlType::Q8_0), bytes, 31), Catch::Contains("not whole blocks"));
  CHECK_THROWS_WITH(widen(ir::ElemType::quant(GgmlType::Q8_0), bytes, 64), Catch::Contains("not whole blocks"));
  CHECK_THROWS_WITH(widen(ir::ElemType::F32, bytes, 9), Catch::Contains("need 36 bytes, got 34"));
}

TEST_CASE("relative L2 and non-finite agreement", "[fingerprint]") {
  CHECK(compare_values(std::vector<double>{3, 4}, std::vector<double>{3, 4}).rel_l2 == 0);
  CHECK(compare_values(std::vector<double>{3, 4}, std::vector<double>{3, 5}).rel_l2 == Approx(0.2));
  CHECK(compare_values(std::vector<double>{0, 0}, std::vector<double>{0, 0}).rel_l2 == 0);
  CHECK(std::isinf(compare_values(std::vector<double>{0, 0}, std::vector<double>{0, 1}).rel_l2));
  // NaN against NaN and Inf against the same Inf agree; anything else does not.
  CHECK(compare_values(std::vector<double>{kNaN, kInf, 1}, std::vector<double>{kNaN, kInf, 1}).nonfinite_mismatches == 0);
  CHECK(compare_values(std::vector<double>{kNaN, kInf, 1, 2}, std::vector<double>{1, -kInf, kNaN, 2}).nonfinite_mismatches == 3);
  CHECK_THROWS_WITH(compare_values(std::vector<double>{1}, std::vector<double>{1, 2}), Catch::Contains("1 values against 2"));
}

TEST_CASE("tolerances per dtype and their overrides", "[fingerprint]") {
  Tolerances t;
  CHECK(t.of(ir::ElemType::I32) == 0);
  CHECK(t.of(ir::ElemType::F32) == 1e-3);
  t.set("f32=1e-5");
  t.set("int=2");
  CHECK(t.of(ir::ElemType::F32) == 1e-5);
  CHECK(t.of(ir::ElemType::I64) == 2);
  CHECK_THROWS_WITH(t.set("f33=1"), Catch::Contains("DTYPE one of f32, f16, bf16, int"));
  CHECK_THROWS_WITH(t.set("f32"), Catch::Contains("expected DTYPE=VALUE"));
  CHECK_THROWS_WITH(t.set("f32=abc"), Catch::Contains("finite number >= 0"));
  CHECK_THROWS_WITH(t.set("f32=-1"), Catch::Contains("finite number >= 0"));
}
