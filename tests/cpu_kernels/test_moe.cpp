// MoE kernels (runtime/cpu/kernels/moe.h): the router's gating, top-k ties,
// renormalization and clamp; the expert FFN against the same experts run
// token by token through the dense matmul and swiglu kernels; a merged
// gate_up stack against the split stacks it was stacked from (bit for bit);
// per-expert scales against plain float math in the reference's order.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "runtime/cpu/kernels/moe.h"
#include "support/error.h"
#include "tests/cpu_kernels/interp_test_util.h"
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

namespace {

uint64_t matrix_bytes(const ExpertStack& s) { return uint64_t(s.rows) * *ggml_bytes_for(s.type, uint64_t(s.cols)); }

// The merged [E][2F][D] stack of gate and up: per expert its F gate rows,
// then its F up rows (the ffn_gate_up_exps layout).
std::vector<uint8_t> stack_gate_up(const ExpertStack& g, const ExpertStack& u) {
  const uint64_t m = matrix_bytes(g);
  std::vector<uint8_t> out;
  for (int64_t e = 0; e < g.n_expert; ++e) {
    out.insert(out.end(), g.data + e * m, g.data + (e + 1) * m);
    out.insert(out.end(), u.data + e * m, u.data + (e + 1) * m);
  }
  return out;
}

// The gate (half 0) or up (half 1) view of a merged stack, as exec_MoeFfn builds it.
ExpertStack merged_half(GgmlType type, const std::vector<uint8_t>& merged, int64_t n_expert, int64_t f, int64_t dm,
                        int half) {
  return ExpertStack{type, merged.data(), n_expert, f, dm, half * f, 2 * f};
}

// Plain float math for f32 stacks, the reference's order: g = (gate_e x) *
// gs[e], u = (up_e x) * us[e], y = (down_e (silu(g) * u)) * ds[e], out +=
// w * y. A null scale is none. Dots in double.
std::vector<float> moe_naive(const float* gate, const float* up, const float* down, const float* gs, const float* us,
                             const float* ds, int64_t f, int64_t dm, const std::vector<float>& x, int64_t n,
                             const std::vector<float>& w, const std::vector<int32_t>& ids, int64_t k) {
  std::vector<float> out(size_t(n * dm), 0.0f), h(static_cast<size_t>(f));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = ids[size_t(t * k + j)];
      for (int64_t r = 0; r < f; ++r) {
        double g = 0, u = 0;
        for (int64_t i = 0; i < dm; ++i) {
          g += double(gate[(e * f + r) * dm + i]) * x[size_t(t * dm + i)];
          u += double(up[(e * f + r) * dm + i]) * x[size_t(t * dm + i)];
        }
        const float gv = float(g) * (gs ? gs[e] : 1.0f), uv = float(u) * (us ? us[e] : 1.0f);
        h[size_t(r)] = gv / (1.0f + std::exp(-gv)) * uv;
      }
      for (int64_t i = 0; i < dm; ++i) {
        double y = 0;
        for (int64_t r = 0; r < f; ++r) y += double(down[(e * dm + i) * f + r]) * h[size_t(r)];
        out[size_t(t * dm + i)] += float(y) * (ds ? ds[e] : 1.0f) * w[size_t(t * k + j)];
      }
    }
  return out;
}

struct MoeInputs {
  int64_t n_expert = 4, dm = 64, f = 96, n = 9, k = 3;  // k = 3: slot order shows in the bits
  std::vector<float> x, w;
  std::vector<int32_t> ids;
  MoeInputs() {
    x = test::random_floats(size_t(n * dm), 14);
    const auto logits = test::random_floats(size_t(n * n_expert), 15, -3.0f, 3.0f);
    w.resize(size_t(n * k));
    ids.resize(size_t(n * k));
    moe_route(logits.data(), n, n_expert, k, MoeGating::Softmax, true, 0.0f, w.data(), ids.data());
  }
  std::vector<float> run(const ExpertStack& g, const ExpertStack& u, const ExpertStack& d, ThreadPool& pool) const {
    std::vector<float> out(size_t(n * dm));
    moe_ffn(g, u, d, x.data(), n, w.data(), ids.data(), k, out.data(), pool);
    return out;
  }
};

ThreadPool& pool_of_two() {
  static ThreadPool pool(2);
  return pool;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

}  // namespace

TEST_CASE("moe_ffn: a merged gate_up stack equals the split stacks bit for bit", "[cpu][moe]") {
  ThreadPool pool(2);
  const MoeInputs in;
  for (GgmlType type : {GgmlType::F32, GgmlType::Q8_0}) {
    INFO(ggml_type_name(type));
    auto gw = test::random_weights(type, in.n_expert * in.f, in.dm, 21),
         uw = test::random_weights(type, in.n_expert * in.f, in.dm, 22),
         dw = test::random_weights(type, in.n_expert * in.dm, in.f, 23);
    const ExpertStack g{type, gw.data(), in.n_expert, in.f, in.dm}, u{type, uw.data(), in.n_expert, in.f, in.dm},
        d{type, dw.data(), in.n_expert, in.dm, in.f};
    const auto merged = stack_gate_up(g, u);
    REQUIRE(merged.size() == 2 * gw.size());
    const auto split = in.run(g, u, d, pool);
    const auto got = in.run(merged_half(type, merged, in.n_expert, in.f, in.dm, 0),
                            merged_half(type, merged, in.n_expert, in.f, in.dm, 1), d, pool);
    CHECK(same_bits(got, split));
    CHECK(test::nmse(split, std::vector<float>(split.size(), 0.0f)) > 0);  // not vacuous
    // The halves are not interchangeable: swapping gate and up changes the result.
    const auto swapped = in.run(merged_half(type, merged, in.n_expert, in.f, in.dm, 1),
                                merged_half(type, merged, in.n_expert, in.f, in.dm, 0), d, pool);
    CHECK(test::nmse(swapped, split) > 1e-3);
  }
}

TEST_CASE("moe_ffn: per-expert scales follow the reference's order", "[cpu][moe]") {
  ThreadPool pool(2);
  const MoeInputs in;
  const auto gw = test::random_weights(GgmlType::F32, in.n_expert * in.f, in.dm, 31),
             uw = test::random_weights(GgmlType::F32, in.n_expert * in.f, in.dm, 32),
             dw = test::random_weights(GgmlType::F32, in.n_expert * in.dm, in.f, 33);
  const float *gf = reinterpret_cast<const float*>(gw.data()), *uf = reinterpret_cast<const float*>(uw.data()),
              *df = reinterpret_cast<const float*>(dw.data());
  // Distinct per expert, some negative, large enough to move silu off its linear part.
  const std::vector<float> gs = {1.5f, 0.25f, -2.0f, 3.0f}, us = {0.5f, 2.0f, 1.25f, -0.75f},
                           ds = {2.5f, -0.5f, 0.125f, 4.0f};
  ExpertStack g{GgmlType::F32, gw.data(), in.n_expert, in.f, in.dm}, u{GgmlType::F32, uw.data(), in.n_expert, in.f, in.dm},
      d{GgmlType::F32, dw.data(), in.n_expert, in.dm, in.f};
  const auto unscaled = in.run(g, u, d, pool);
  CHECK(test::nmse(unscaled, moe_naive(gf, uf, df, nullptr, nullptr, nullptr, in.f, in.dm, in.x, in.n, in.w, in.ids,
                                       in.k)) < 1e-11);
  SECTION("split stacks, all three scales") {
    g.scale = gs.data(), u.scale = us.data(), d.scale = ds.data();
    const auto got = in.run(g, u, d, pool);
    const auto want = moe_naive(gf, uf, df, gs.data(), us.data(), ds.data(), in.f, in.dm, in.x, in.n, in.w, in.ids, in.k);
    CHECK(test::nmse(got, want) < 1e-11);
    CHECK(test::nmse(got, unscaled) > 1e-2);  // the scales matter
  }
  SECTION("one scale at a time lands on its own matmul") {
    for (int which = 0; which < 3; ++which) {
      INFO("scale on " << (which == 0 ? "gate" : which == 1 ? "up" : "down"));
      ExpertStack gi = g, ui = u, di = d;
      (which == 0 ? gi : which == 1 ? ui : di).scale = (which == 0 ? gs : which == 1 ? us : ds).data();
      const auto want = moe_naive(gf, uf, df, which == 0 ? gs.data() : nullptr, which == 1 ? us.data() : nullptr,
                                  which == 2 ? ds.data() : nullptr, in.f, in.dm, in.x, in.n, in.w, in.ids, in.k);
      CHECK(test::nmse(in.run(gi, ui, di, pool), want) < 1e-11);
    }
  }
  SECTION("merged gate_up with a down scale") {
    const auto merged = stack_gate_up(g, u);
    d.scale = ds.data();
    const auto got = in.run(merged_half(GgmlType::F32, merged, in.n_expert, in.f, in.dm, 0),
                            merged_half(GgmlType::F32, merged, in.n_expert, in.f, in.dm, 1), d, pool);
    const auto want = moe_naive(gf, uf, df, nullptr, nullptr, ds.data(), in.f, in.dm, in.x, in.n, in.w, in.ids, in.k);
    CHECK(test::nmse(got, want) < 1e-11);
  }
}

TEST_CASE("moe_ffn: an unscaled call is bit-identical to the expert-batched dense path", "[cpu][moe]") {
  // The pre-scale algorithm, spelled out: per expert, its rows in token
  // order through matmul(gate), matmul(up), swiglu, matmul(down), then each
  // token adds weight * y in slot order. Unit scales change nothing either.
  ThreadPool pool(2);
  const MoeInputs in;
  for (GgmlType type : {GgmlType::F32, GgmlType::Q8_0, GgmlType::Q4_0}) {
    INFO(ggml_type_name(type));
    auto gw = test::random_weights(type, in.n_expert * in.f, in.dm, 41),
         uw = test::random_weights(type, in.n_expert * in.f, in.dm, 42),
         dw = test::random_weights(type, in.n_expert * in.dm, in.f, 43);
    ExpertStack g{type, gw.data(), in.n_expert, in.f, in.dm}, u{type, uw.data(), in.n_expert, in.f, in.dm},
        d{type, dw.data(), in.n_expert, in.dm, in.f};
    const auto got = in.run(g, u, d, pool);
    const int64_t f = in.f, dm = in.dm, k = in.k;
    std::vector<float> y(size_t(in.n * k * dm)), want(size_t(in.n * dm));
    for (int32_t e = 0; e < in.n_expert; ++e) {
      std::vector<int64_t> rows;
      for (int64_t r = 0; r < in.n * k; ++r)
        if (in.ids[size_t(r)] == e) rows.push_back(r);
      if (rows.empty()) continue;
      const int64_t nr = int64_t(rows.size());
      std::vector<float> xs(size_t(nr * dm)), a(size_t(nr * f)), b(size_t(nr * f)), ys(size_t(nr * dm));
      for (int64_t i = 0; i < nr; ++i)
        std::memcpy(&xs[size_t(i * dm)], &in.x[size_t(rows[size_t(i)] / k * dm)], size_t(dm) * 4);
      matmul(type, g.data + e * matrix_bytes(g), f, dm, xs.data(), nr, a.data(), pool);
      matmul(type, u.data + e * matrix_bytes(u), f, dm, xs.data(), nr, b.data(), pool);
      swiglu(a.data(), b.data(), a.data(), nr * f);
      matmul(type, d.data + e * matrix_bytes(d), dm, f, a.data(), nr, ys.data(), pool);
      for (int64_t i = 0; i < nr; ++i)
        std::memcpy(&y[size_t(rows[size_t(i)] * dm)], &ys[size_t(i * dm)], size_t(dm) * 4);
    }
    for (int64_t t = 0; t < in.n; ++t)
      for (int64_t j = 0; j < k; ++j)
        for (int64_t i = 0; i < dm; ++i) {
          const float v = y[size_t((t * k + j) * dm + i)] * in.w[size_t(t * k + j)];
          want[size_t(t * dm + i)] = j == 0 ? v : want[size_t(t * dm + i)] + v;
        }
    CHECK(same_bits(got, want));
    const std::vector<float> ones(size_t(in.n_expert), 1.0f);
    g.scale = u.scale = d.scale = ones.data();
    CHECK(same_bits(in.run(g, u, d, pool), got));
  }
}

// exec_MoeFfn decodes the four operand forms (docs/ir.md: moe_ffn) into the
// kernel's stacks: each result equals the kernel called directly. f32
// stacks, as the interpreter takes no quantized function argument.
TEST_CASE("moe_ffn's four operand forms through the interpreter", "[cpu][moe][ir]") {
  const std::string text = R"(func @prefill(%x: tensor<T x 64 x f32, device>, %w: tensor<T x 3 x f32, device>, %ids: tensor<T x 3 x i32, device>, %g: tensor<4 x 96 x 64 x f32, device>, %u: tensor<4 x 96 x 64 x f32, device>, %gu: tensor<4 x 192 x 64 x f32, device>, %d: tensor<4 x 64 x 96 x f32, device>, %gs: tensor<4 x f32, device>, %us: tensor<4 x f32, device>, %ds: tensor<4 x f32, device>) {
  %split = moe_ffn(%x, %w, %ids, %g, %u, %d) : tensor<T x 64 x f32, device>
  %merged = moe_ffn(%x, %w, %ids, %gu, %d) : tensor<T x 64 x f32, device>
  %split_s = moe_ffn(%x, %w, %ids, %g, %u, %d, %gs, %us, %ds) {scaled = true} : tensor<T x 64 x f32, device>
  %merged_s = moe_ffn(%x, %w, %ids, %gu, %d, %ds) {scaled = true} : tensor<T x 64 x f32, device>
  return(%split, %merged, %split_s, %merged_s)
})";
  const MoeInputs in;
  const GgmlType f32 = GgmlType::F32;
  auto gw = test::random_weights(f32, in.n_expert * in.f, in.dm, 51), uw = test::random_weights(f32, in.n_expert * in.f, in.dm, 52),
       dw = test::random_weights(f32, in.n_expert * in.dm, in.f, 53);
  ExpertStack g{f32, gw.data(), in.n_expert, in.f, in.dm}, u{f32, uw.data(), in.n_expert, in.f, in.dm},
      d{f32, dw.data(), in.n_expert, in.dm, in.f};
  const auto gu = stack_gate_up(g, u);
  const std::vector<float> gs = {1.5f, 0.25f, -2.0f, 3.0f}, us = {0.5f, 2.0f, 1.25f, -0.75f},
                           ds = {2.5f, -0.5f, 0.125f, 4.0f};
  auto stack_arg = [&](std::vector<int64_t> shape, const std::vector<uint8_t>& bytes) {
    HostTensor t;
    t.elem = ir::ElemType::F32;
    t.shape = std::move(shape);
    t.bytes = bytes;
    return t;
  };
  test::IrRun r(text);
  const auto out = r.run({0}, {{"x", test::f32_tensor({in.n, in.dm}, in.x)},
                               {"w", test::f32_tensor({in.n, in.k}, in.w)},
                               {"ids", test::i32_tensor({in.n, in.k}, in.ids)},
                               {"g", stack_arg({in.n_expert, in.f, in.dm}, gw)},
                               {"u", stack_arg({in.n_expert, in.f, in.dm}, uw)},
                               {"gu", stack_arg({in.n_expert, 2 * in.f, in.dm}, gu)},
                               {"d", stack_arg({in.n_expert, in.dm, in.f}, dw)},
                               {"gs", test::f32_tensor({in.n_expert}, gs)},
                               {"us", test::f32_tensor({in.n_expert}, us)},
                               {"ds", test::f32_tensor({in.n_expert}, ds)}});
  REQUIRE(out.size() == 4);
  auto values = [](const HostTensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); };
  const auto split = in.run(g, u, d, pool_of_two());
  CHECK(same_bits(values(out[0]), split));
  CHECK(same_bits(values(out[1]), split));
  ExpertStack gsc = g, usc = u, dsc = d;
  gsc.scale = gs.data(), usc.scale = us.data(), dsc.scale = ds.data();
  const auto split_s = in.run(gsc, usc, dsc, pool_of_two());
  CHECK(same_bits(values(out[2]), split_s));
  CHECK(test::nmse(split_s, split) > 1e-2);
  // The merged form's only scale is down's.
  const auto merged_s = in.run(g, u, dsc, pool_of_two());
  CHECK(same_bits(values(out[3]), merged_s));
  CHECK(test::nmse(merged_s, split_s) > 1e-2);
}
