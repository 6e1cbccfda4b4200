// MoE kernels (runtime/cpu/kernels/moe.h): the router's gating, top-k ties,
// renormalization and clamp; the expert FFN against the same experts run
// token by token through the dense matmul and swiglu kernels.
#include <catch2/catch.hpp>

#include <cmath>

#include "runtime/cpu/kernels/moe.h"
#include "support/error.h"
#include "tests/cpu_kernels/kernel_test_util.h"

using namespace vtc;
using namespace vtc::cpu;

TEST_CASE("moe_route: softmax top-k, ties to the lowest expert, renormalized", "[cpu][moe]") {
  const std::vector<float> logits = {1, 3, 3, 0,   // tie between experts 1 and 2
                                     2, 2, 2, 2};  // all tied
  std::vector<float> w(4);
  std::vector<int32_t> ids(4);
  moe_route(logits.data(), 2, 4, 2, MoeGating::Softmax, true, 0.0f, w.data(), ids.data());
  CHECK(ids == std::vector<int32_t>{1, 2, 0, 1});
  for (float x : w) CHECK(x == Approx(0.5f));
  // Without norm the weights are the softmax probabilities themselves.
  moe_route(logits.data(), 1, 4, 2, MoeGating::Softmax, false, 0.0f, w.data(), ids.data());
  const double z = std::exp(1.0) + 2 * std::exp(3.0) + 1.0;
  CHECK(w[0] == Approx(std::exp(3.0) / z));
  // scale multiplies after the renormalization; 0 and 1 mean none.
  moe_route(logits.data(), 1, 4, 2, MoeGating::Softmax, true, 2.5f, w.data(), ids.data());
  CHECK(w[0] == Approx(1.25f));
}

TEST_CASE("moe_route: sigmoid gating and the clamped renormalization", "[cpu][moe]") {
  const std::vector<float> logits = {-30, -20, -40, -25};
  std::vector<float> w(2);
  std::vector<int32_t> ids(2);
  moe_route(logits.data(), 1, 4, 2, MoeGating::Sigmoid, true, 0.0f, w.data(), ids.data());
  CHECK(ids == std::vector<int32_t>{1, 3});
  // The sum (~2e-9) is below the clamp, so the weights stay tiny.
  const float s1 = 1.0f / (1.0f + std::exp(20.0f));
  CHECK(w[0] == Approx(s1 / 6.103515625e-5f));
  CHECK(w[0] < 1e-4f);
}

namespace {

// Token-by-token reference: out[t] = sum_j w * down(swiglu(gate x, up x)).
std::vector<float> moe_by_token(const ExpertStack& g, const ExpertStack& u, const ExpertStack& d, const float* x,
                                int64_t n, const float* w, const int32_t* ids, int64_t k, ThreadPool& pool) {
  const int64_t dm = g.cols, f = g.rows;
  auto mat = [](const ExpertStack& s, int64_t e) {
    return s.data + e * s.rows * int64_t(*ggml_bytes_for(s.type, uint64_t(s.cols)));
  };
  std::vector<float> out(static_cast<size_t>(n * dm), 0.0f), a(static_cast<size_t>(f)), b(static_cast<size_t>(f)),
      y(static_cast<size_t>(dm));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = ids[t * k + j];
      matmul(g.type, mat(g, e), f, dm, x + t * dm, 1, a.data(), pool);
      matmul(u.type, mat(u, e), f, dm, x + t * dm, 1, b.data(), pool);
      swiglu(a.data(), b.data(), a.data(), f);
      matmul(d.type, mat(d, e), dm, f, a.data(), 1, y.data(), pool);
      for (int64_t i = 0; i < dm; ++i) out[size_t(t * dm + i)] += y[size_t(i)] * w[t * k + j];
    }
  return out;
}

}  // namespace

TEST_CASE("moe_ffn equals the selected experts run token by token", "[cpu][moe]") {
  ThreadPool pool(2);
  const int64_t n_expert = 4, dm = 64, f = 96, n = 7, k = 2;
  for (GgmlType type : {GgmlType::F32, GgmlType::Q8_0, GgmlType::Q4_0}) {
    auto gw = test::random_weights(type, n_expert * f, dm, 1), uw = test::random_weights(type, n_expert * f, dm, 2),
         dw = test::random_weights(type, n_expert * dm, f, 3);
    const ExpertStack g{type, gw.data(), n_expert, f, dm}, u{type, uw.data(), n_expert, f, dm},
        d{type, dw.data(), n_expert, dm, f};
    const auto x = test::random_floats(size_t(n * dm), 4);
    std::vector<float> logits = test::random_floats(size_t(n * n_expert), 5), w(size_t(n * k));
    std::vector<int32_t> ids(size_t(n * k));
    moe_route(logits.data(), n, n_expert, k, MoeGating::Softmax, true, 0.0f, w.data(), ids.data());
    std::vector<float> out(size_t(n * dm));
    moe_ffn(g, u, d, x.data(), n, w.data(), ids.data(), k, out.data(), pool);
    const auto want = moe_by_token(g, u, d, x.data(), n, w.data(), ids.data(), k, pool);
    INFO(ggml_type_name(type));
    CHECK(test::nmse(out, want) < 1e-12);
    CHECK(test::nmse(out, std::vector<float>(out.size(), 0.0f)) > 0);  // not vacuous
    ids[3] = int32_t(n_expert);
    CHECK_THROWS_AS(moe_ffn(g, u, d, x.data(), n, w.data(), ids.data(), k, out.data(), pool), Error);
  }
}
