// Interleaved-8 weights (support/weight_layout.h): repacking, and matmul on
// the x8 layout against the double reference of the row layout, across ISAs,
// thread counts, token counts and shapes.
//
// What must hold:
//  - a token's value does not depend on the tile or the thread count, and
//    only on the batch through its group of 4 (bitwise): matmul hands the
//    kernels 4-aligned groups of tokens, and Q4_K sums a full group in the
//    order of llama.cpp's gemm and a short last group in its gemv's order;
//    the other types compute each token from its own activations alone;
//  - the scalar and AVX2 kernels give the same bits (internal.h, PackedFn);
//  - against the double reference over the activations as matmul sees them,
//    only float reassociation remains (NMSE < 1e-10, as the row kernels).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "kernel_test_util.h"
#include "runtime/cpu/kernels/kernels.h"
#include "support/error.h"

using namespace vtc;
using namespace vtc::cpu;
using namespace vtc::cpu::test;

namespace {

struct Case {
  GgmlType type;
  int64_t rows, cols;
};

// Rows: one group, several groups, more than a row tile (16) and not a
// multiple of it. Columns: one block, odd block counts, the 0.56B model's.
const Case kCases[] = {
    {GgmlType::Q4_0, 8, 32},   {GgmlType::Q4_0, 24, 96},   {GgmlType::Q4_0, 40, 1280},
    {GgmlType::Q8_0, 8, 32},   {GgmlType::Q8_0, 24, 96},   {GgmlType::Q8_0, 40, 1280},
    {GgmlType::Q4_K, 8, 256},  {GgmlType::Q4_K, 24, 768},  {GgmlType::Q4_K, 40, 1280},
    {GgmlType::Q6_K, 8, 256},  {GgmlType::Q6_K, 24, 768},  {GgmlType::Q6_K, 40, 1280},
};

std::vector<uint8_t> packed(const Case& c, const std::vector<uint8_t>& w) {
  std::vector<uint8_t> out(w.size(), 0xcd);
  repack_weight(c.type, WeightLayout::Interleaved8, w.data(), c.rows, c.cols, out.data());
  return out;
}

std::vector<float> run_x8(const Case& c, const std::vector<uint8_t>& w8, const std::vector<float>& x, int64_t n_tokens,
                          ThreadPool& pool, TokenOrder order = TokenOrder::Batched) {
  Guarded y(static_cast<size_t>(c.rows * n_tokens));
  matmul(c.type, w8.data(), c.rows, c.cols, x.data(), n_tokens, y.data(), pool, WeightLayout::Interleaved8, order);
  REQUIRE(y.intact());
  return y.values();
}

std::string describe(const Case& c, int64_t n_tokens) {
  return fmt::format("{} {}x{} tokens={}", ggml_type_name(c.type), c.rows, c.cols, n_tokens);
}

}  // namespace

TEST_CASE("packed x8: repacking permutes the bytes and refuses what it cannot store", "[matmul][x8]") {
  for (const Case& c : kCases) {
    const auto w = random_weights(c.type, c.rows, c.cols, 21);
    const auto p = packed(c, w);
    INFO(describe(c, 0));
    CHECK(p != w);
    auto sorted_w = w, sorted_p = p;
    std::sort(sorted_w.begin(), sorted_w.end());
    std::sort(sorted_p.begin(), sorted_p.end());
    CHECK(sorted_w == sorted_p);  // a permutation: nothing lost, nothing re-encoded
  }
  std::vector<uint8_t> buf(18 * 12 * 4);
  CHECK_THROWS_WITH(repack_weight(GgmlType::Q4_0, WeightLayout::Interleaved8, buf.data(), 12, 32, buf.data() + 0),
                    Catch::Contains("12-row q4_0"));
  CHECK_THROWS_WITH(repack_weight(GgmlType::Q5_0, WeightLayout::Interleaved8, buf.data(), 8, 32, buf.data()),
                    Catch::Contains("x8 layout"));
  CHECK_FALSE(matmul_layout_supported(GgmlType::Q5_K, WeightLayout::Interleaved8, 8));
  CHECK(matmul_layout_supported(GgmlType::Q4_K, WeightLayout::Interleaved8, 16));
  ThreadPool pool(1);
  std::vector<float> x(32), y(12);
  CHECK_THROWS_WITH(matmul(GgmlType::Q4_0, buf.data(), 12, 32, x.data(), 1, y.data(), pool, WeightLayout::Interleaved8),
                    Catch::Contains("cannot be read in the x8 layout"));
}

TEST_CASE("packed x8: matmul against the double reference, every ISA, 1 to 17 tokens", "[matmul][x8]") {
  ThreadPool pool(2);
  for (const Case& c : kCases) {
    const auto w = random_weights(c.type, c.rows, c.cols, 1000 + static_cast<uint32_t>(c.rows));
    const auto w8 = packed(c, w);
    const auto wf = dequant_all(c.type, w, c.rows, c.cols);
    for (int64_t n_tokens = 1; n_tokens <= 17; n_tokens += (n_tokens < 6 ? 1 : 5)) {
      const auto x = random_floats(static_cast<size_t>(c.cols * n_tokens), 7 + static_cast<uint32_t>(n_tokens));
      const auto ref = reference(wf, activations_as_seen(c.type, x, c.cols, n_tokens), c.rows, c.cols, n_tokens);
      std::vector<std::vector<float>> by_isa;
      for (Isa isa : available_isas()) {
        IsaScope scope(isa);
        by_isa.push_back(run_x8(c, w8, x, n_tokens, pool));
        const double e = nmse(by_isa.back(), ref);
        INFO(fmt::format("{} isa={}: nmse {:.3g}", describe(c, n_tokens), isa_name(isa), e));
        CHECK(e < 1e-10);
      }
      INFO(describe(c, n_tokens));
      for (const auto& y : by_isa) CHECK(bitwise_equal(y, by_isa.front()));
    }
  }
}

// TokenOrder::Batched groups tokens by 4, as llama.cpp's gemm: a token
// depends on the batch only through its group, and Q4_K's full groups sum
// in the gemm's order. TokenOrder::EachAsOne (a speculative verify chunk)
// gives every token its one-token bits (internal.h, PackedFn).
TEST_CASE("packed x8: a token's outputs depend on the batch only through its group of 4", "[matmul][x8][threads]") {
  ThreadPool p1(1), p2(2), p3(3), p4(4);
  ThreadPool* pools[] = {&p1, &p2, &p3, &p4};
  for (const Case& c : kCases)
    for (const TokenOrder order : {TokenOrder::Batched, TokenOrder::EachAsOne}) {
      const bool each = order == TokenOrder::EachAsOne;
      const int64_t n_tokens = 19;  // groups of 4 across two 16-token tiles, and a short last group
      const auto w8 = packed(c, random_weights(c.type, c.rows, c.cols, 5));
      const auto x = random_floats(static_cast<size_t>(c.cols * n_tokens), 6);
      const auto batch = run_x8(c, w8, x, n_tokens, p1, order);
      INFO(describe(c, n_tokens) << (each ? " each as one" : " batched"));
      for (ThreadPool* pool : pools) CHECK(bitwise_equal(batch, run_x8(c, w8, x, n_tokens, *pool, order)));
      auto slice = [&](int64_t t0, int64_t n) {
        return run_x8(c, w8, std::vector<float>(x.begin() + t0 * c.cols, x.begin() + (t0 + n) * c.cols), n, p2, order);
      };
      for (int64_t g = 0; g < n_tokens; g += 4) {
        const int64_t n = std::min<int64_t>(4, n_tokens - g);
        const auto group = slice(g, n);
        CHECK(std::memcmp(group.data(), batch.data() + g * c.rows, group.size() * sizeof(float)) == 0);
      }
      // One token alone equals its value in a batch wherever the sums are
      // per token: every type each as one or in a short group, all but Q4_K
      // in a full batched group.
      int64_t differs_in_full_groups = 0;
      for (int64_t t = 0; t < n_tokens; ++t) {
        const auto alone = slice(t, 1);
        const bool same = std::memcmp(alone.data(), batch.data() + t * c.rows, alone.size() * sizeof(float)) == 0;
        if (each || t >= n_tokens - n_tokens % 4 || c.type != GgmlType::Q4_K) CHECK(same);
        else differs_in_full_groups += !same;
      }
      // The Q4_K gemm order is really in use when batched.
      if (!each && c.type == GgmlType::Q4_K && c.cols >= 768) CHECK(differs_in_full_groups > 0);
    }
}

TEST_CASE("packed x8: shared-input matmuls mix x8 and row weights", "[matmul][x8]") {
  ThreadPool pool(2);
  const int64_t cols = 512, n_tokens = 3;
  const Case a{GgmlType::Q4_K, 16, cols}, b{GgmlType::Q4_K, 24, cols};
  const auto wa = random_weights(a.type, a.rows, cols, 31), wb = random_weights(b.type, b.rows, cols, 32);
  const auto wa8 = packed(a, wa);
  const auto x = random_floats(static_cast<size_t>(cols * n_tokens), 33);
  std::vector<float> ya(size_t(a.rows * n_tokens)), yb(size_t(b.rows * n_tokens));
  const MatmulOutput outs[] = {{a.type, wa8.data(), a.rows, ya.data(), WeightLayout::Interleaved8},
                               {b.type, wb.data(), b.rows, yb.data(), WeightLayout::Rows}};
  matmul_shared_input(outs, 2, cols, x.data(), n_tokens, pool);
  CHECK(bitwise_equal(ya, run_x8(a, wa8, x, n_tokens, pool)));
  std::vector<float> yb_alone(yb.size());
  matmul(b.type, wb.data(), b.rows, cols, x.data(), n_tokens, yb_alone.data(), pool);
  CHECK(bitwise_equal(yb, yb_alone));
}
