// MoE kernels (runtime/cpu/kernels/moe.h): the router's gating, top-k ties,
// renormalization and clamp; the expert FFN against the same experts run
// token by token through the dense matmul and swiglu kernels; a merged
// gate_up stack against the split stacks it was stacked from (bit for bit);
// per-expert scales against plain float math in the reference's order.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/cpu/kernels/moe.h"
#include "support/error.h"
#include "tests/cpu_kernels/interp_test_util.h"
#include "tests/cpu_kernels/kernel_test_util.h"

using namespace vtc;
using namespace vtc::cpu;

namespace {

MoeRouteParams route(int64_t k, MoeGating gating, bool norm, float scale) {
  MoeRouteParams p;
  p.k = k, p.gating = gating, p.norm = norm, p.scale = scale;
  return p;
}

}  // namespace

TEST_CASE("moe_route: softmax top-k, ties to the lowest expert, renormalized", "[cpu][moe]") {
  const std::vector<float> logits = {1, 3, 3, 0,   // tie between experts 1 and 2
                                     2, 2, 2, 2};  // all tied
  std::vector<float> w(4);
  std::vector<int32_t> ids(4);
  moe_route(logits.data(), 2, 4, route(2, MoeGating::Softmax, true, 0.0f), w.data(), ids.data());
  CHECK(ids == std::vector<int32_t>{1, 2, 0, 1});
  for (float x : w) CHECK(x == Approx(0.5f));
  // Without norm the weights are the softmax probabilities themselves.
  moe_route(logits.data(), 1, 4, route(2, MoeGating::Softmax, false, 0.0f), w.data(), ids.data());
  const double z = std::exp(1.0) + 2 * std::exp(3.0) + 1.0;
  CHECK(w[0] == Approx(std::exp(3.0) / z));
  // scale multiplies after the renormalization; 0 and 1 mean none.
  moe_route(logits.data(), 1, 4, route(2, MoeGating::Softmax, true, 2.5f), w.data(), ids.data());
  CHECK(w[0] == Approx(1.25f));
}

TEST_CASE("moe_route: sigmoid gating and the clamped renormalization", "[cpu][moe]") {
  const std::vector<float> logits = {-30, -20, -40, -25};
  std::vector<float> w(2);
  std::vector<int32_t> ids(2);
  moe_route(logits.data(), 1, 4, route(2, MoeGating::Sigmoid, true, 0.0f), w.data(), ids.data());
  CHECK(ids == std::vector<int32_t>{1, 3});
  // The sum (~2e-9) is below the clamp, so the weights stay tiny.
  const float s1 = 1.0f / (1.0f + std::exp(20.0f));
  CHECK(w[0] == Approx(s1 / 6.103515625e-5f));
  CHECK(w[0] < 1e-4f);
}

TEST_CASE("moe_route: softmax_weight picks on the logits, then softmaxes the k picked", "[cpu][moe]") {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.0f};
  std::vector<float> w(2);
  std::vector<int32_t> ids(2);
  moe_route(logits.data(), 1, 4, route(2, MoeGating::SoftmaxWeight, false, 0.0f), w.data(), ids.data());
  CHECK(ids == std::vector<int32_t>{1, 3});
  const double z = std::exp(0.0) + std::exp(-1.0);  // shifted by the max logit 2
  CHECK(w[0] == Approx(1.0 / z));
  CHECK(w[1] == Approx(std::exp(-1.0) / z));
}

TEST_CASE("moe_route: a selection bias steers the pick, the weights stay unbiased", "[cpu][moe]") {
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f, -1.0f};
  const std::vector<float> bias = {0.0f, 0.0f, 0.0f, 0.9f};  // sigmoid(-1) + 0.9 beats sigmoid(1)
  std::vector<float> w(2);
  std::vector<int32_t> ids(2);
  MoeRouteParams p = route(2, MoeGating::Sigmoid, false, 0.0f);
  p.selection_bias = bias.data();
  moe_route(logits.data(), 1, 4, p, w.data(), ids.data());
  CHECK(ids == std::vector<int32_t>{3, 0});
  CHECK(w[0] == Approx(1.0 / (1.0 + std::exp(1.0))));
  CHECK(w[1] == Approx(1.0 / (1.0 + std::exp(-2.0))));
}

TEST_CASE("moe_route: grouped routing keeps the experts of the best groups only", "[cpu][moe]") {
  // Groups of 2: {0,1} sums 0.9+0.0, {2,3} sums 0.5+0.5, {4,5} 0.8+0.05.
  // With 1 group used, expert 0 (the best single score) is out of reach.
  const std::vector<float> logits = {0.9f, 0.0f, 0.5f, 0.5f, 0.8f, 0.05f};
  std::vector<float> w(2);
  std::vector<int32_t> ids(2);
  MoeRouteParams p = route(2, MoeGating::SoftmaxWeight, false, 0.0f);
  p.groups = 3, p.groups_used = 1;
  moe_route(logits.data(), 1, 6, p, w.data(), ids.data());
  CHECK(ids == std::vector<int32_t>{2, 3});
  p.groups_used = 2;  // groups {2,3} and {0,1}: 0.9 first, then the tie 0.5/0.5 to expert 2
  moe_route(logits.data(), 1, 6, p, w.data(), ids.data());
  CHECK(ids == std::vector<int32_t>{0, 2});
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
    moe_route(logits.data(), n, n_expert, route(k, MoeGating::Softmax, true, 0.0f), w.data(), ids.data());
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

// ggml_swiglu_oai for one value, as its CPU loop spells it.
float swiglu_oai_ref(float g, float u, float alpha, float limit) {
  const float x = std::min(g, limit), y = std::clamp(u, -limit, limit);
  return x / (1.0f + std::exp(alpha * (-x))) * (y + 1.0f);
}

// What moe_naive applies besides the matmuls; null means none.
struct NaiveExtras {
  const float *gs = nullptr, *us = nullptr, *ds = nullptr;  // per-expert scales [E]
  const float *gb = nullptr, *ub = nullptr, *db = nullptr;  // per-expert biases [E][rows]
  bool swiglu_oai = false;                                  // gpt-oss's activation (1.702, 7)
};

NaiveExtras scales(const float* gs, const float* us, const float* ds) {
  NaiveExtras ex;
  ex.gs = gs, ex.us = us, ex.ds = ds;
  return ex;
}

// Plain float math for f32 stacks, the reference's order: g = (gate_e x) *
// gs[e] + gb[e], u = (up_e x) * us[e] + ub[e], y = (down_e act(g, u)) *
// ds[e] + db[e], out += w * y in slot order, act = silu(g) * u or
// swiglu_oai. Dots in double.
std::vector<float> moe_naive(const float* gate, const float* up, const float* down, const NaiveExtras& ex, int64_t f,
                             int64_t dm, const std::vector<float>& x, int64_t n, const std::vector<float>& w,
                             const std::vector<int32_t>& ids, int64_t k) {
  auto scale = [](const float* s, int64_t e) { return s ? s[e] : 1.0f; };
  auto bias = [](const float* b, int64_t i) { return b ? b[i] : 0.0f; };
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
        const float gv = float(g) * scale(ex.gs, e) + bias(ex.gb, e * f + r);
        const float uv = float(u) * scale(ex.us, e) + bias(ex.ub, e * f + r);
        h[size_t(r)] = ex.swiglu_oai ? swiglu_oai_ref(gv, uv, 1.702f, 7.0f) : gv / (1.0f + std::exp(-gv)) * uv;
      }
      for (int64_t i = 0; i < dm; ++i) {
        double y = 0;
        for (int64_t r = 0; r < f; ++r) y += double(down[(e * dm + i) * f + r]) * h[size_t(r)];
        out[size_t(t * dm + i)] += (float(y) * scale(ex.ds, e) + bias(ex.db, e * dm + i)) * w[size_t(t * k + j)];
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
    moe_route(logits.data(), n, n_expert, route(k, MoeGating::Softmax, true, 0.0f), w.data(), ids.data());
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
  CHECK(test::nmse(unscaled, moe_naive(gf, uf, df, scales(nullptr, nullptr, nullptr), in.f, in.dm, in.x, in.n, in.w, in.ids,
                                       in.k)) < 1e-11);
  SECTION("split stacks, all three scales") {
    g.scale = gs.data(), u.scale = us.data(), d.scale = ds.data();
    const auto got = in.run(g, u, d, pool);
    const auto want = moe_naive(gf, uf, df, scales(gs.data(), us.data(), ds.data()), in.f, in.dm, in.x, in.n, in.w, in.ids, in.k);
    CHECK(test::nmse(got, want) < 1e-11);
    CHECK(test::nmse(got, unscaled) > 1e-2);  // the scales matter
  }
  SECTION("one scale at a time lands on its own matmul") {
    for (int which = 0; which < 3; ++which) {
      INFO("scale on " << (which == 0 ? "gate" : which == 1 ? "up" : "down"));
      ExpertStack gi = g, ui = u, di = d;
      (which == 0 ? gi : which == 1 ? ui : di).scale = (which == 0 ? gs : which == 1 ? us : ds).data();
      const auto want = moe_naive(gf, uf, df,
                                  scales(which == 0 ? gs.data() : nullptr, which == 1 ? us.data() : nullptr,
                                         which == 2 ? ds.data() : nullptr),
                                  in.f, in.dm, in.x, in.n, in.w, in.ids, in.k);
      CHECK(test::nmse(in.run(gi, ui, di, pool), want) < 1e-11);
    }
  }
  SECTION("merged gate_up with a down scale") {
    const auto merged = stack_gate_up(g, u);
    d.scale = ds.data();
    const auto got = in.run(merged_half(GgmlType::F32, merged, in.n_expert, in.f, in.dm, 0),
                            merged_half(GgmlType::F32, merged, in.n_expert, in.f, in.dm, 1), d, pool);
    const auto want = moe_naive(gf, uf, df, scales(nullptr, nullptr, ds.data()), in.f, in.dm, in.x, in.n, in.w, in.ids, in.k);
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
namespace {

// An f32 expert stack (raw bytes) as an interpreter argument.
HostTensor stack_arg(std::vector<int64_t> shape, const std::vector<uint8_t>& bytes) {
  HostTensor t;
  t.elem = ir::ElemType::F32;
  t.shape = std::move(shape);
  t.bytes = bytes;
  return t;
}

}  // namespace

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

namespace {

// Biases wide enough that many gate and up values pass the limit of 7.
struct BiasedExperts {
  const MoeInputs& in;
  std::vector<uint8_t> gw, uw, dw;
  std::vector<float> gb, ub, db;
  explicit BiasedExperts(const MoeInputs& inputs) : in(inputs) {
    gw = test::random_weights(GgmlType::F32, in.n_expert * in.f, in.dm, 61);
    uw = test::random_weights(GgmlType::F32, in.n_expert * in.f, in.dm, 62);
    dw = test::random_weights(GgmlType::F32, in.n_expert * in.dm, in.f, 63);
    gb = test::random_floats(size_t(in.n_expert * in.f), 64, -10.0f, 10.0f);
    ub = test::random_floats(size_t(in.n_expert * in.f), 65, -10.0f, 10.0f);
    db = test::random_floats(size_t(in.n_expert * in.dm), 66, -5.0f, 5.0f);
  }
  const float* f32(const std::vector<uint8_t>& b) const { return reinterpret_cast<const float*>(b.data()); }
  std::vector<float> naive() const {
    NaiveExtras ex;
    ex.gb = gb.data(), ex.ub = ub.data(), ex.db = db.data(), ex.swiglu_oai = true;
    return moe_naive(f32(gw), f32(uw), f32(dw), ex, in.f, in.dm, in.x, in.n, in.w, in.ids, in.k);
  }
};

const MoeActivationParams kOai{MoeActivationParams::Kind::SwigluOai, 1.702f, 7.0f};

}  // namespace

TEST_CASE("moe_activation: swiglu_oai clamps as ggml_swiglu_oai", "[cpu][moe]") {
  const std::vector<float> g = {-9.0f, -1.0f, 0.0f, 0.5f, 6.9f, 7.0f, 12.0f, 3.0f},
                           u = {-20.0f, -7.5f, 0.3f, 8.0f, 7.0f, -1.0f, 2.0f, 6.99f};
  std::vector<float> y(g.size());
  moe_activation(kOai, g.data(), u.data(), y.data(), int64_t(g.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("g " << g[i] << " u " << u[i]);
    CHECK(y[i] == swiglu_oai_ref(g[i], u[i], 1.702f, 7.0f));
  }
  // g = 12 is cut to 7 and u = -20 to -7: the clamps are there.
  CHECK(y[6] == swiglu_oai_ref(7.0f, 2.0f, 1.702f, 7.0f));
  CHECK(y[0] == swiglu_oai_ref(-9.0f, -7.0f, 1.702f, 7.0f));
  // The silu kind is the dense swiglu.
  std::vector<float> s(g.size()), want(g.size());
  moe_activation({}, g.data(), u.data(), s.data(), int64_t(g.size()));
  swiglu(g.data(), u.data(), want.data(), int64_t(g.size()));
  CHECK(same_bits(s, want));
}

TEST_CASE("moe_ffn: per-expert biases and swiglu_oai follow the reference's order", "[cpu][moe]") {
  ThreadPool pool(2);
  const MoeInputs in;
  const BiasedExperts b(in);
  const GgmlType f32 = GgmlType::F32;
  ExpertStack g{f32, b.gw.data(), in.n_expert, in.f, in.dm}, u{f32, b.uw.data(), in.n_expert, in.f, in.dm},
      d{f32, b.dw.data(), in.n_expert, in.dm, in.f};
  auto run = [&](const ExpertStack& gs, const ExpertStack& us, const ExpertStack& ds) {
    std::vector<float> out(size_t(in.n * in.dm));
    moe_ffn(gs, us, ds, in.x.data(), in.n, in.w.data(), in.ids.data(), in.k, out.data(), pool, kOai);
    return out;
  };
  g.bias = b.gb.data(), u.bias = b.ub.data(), d.bias = b.db.data();
  const auto want = b.naive();
  const auto got = run(g, u, d);
  CHECK(test::nmse(got, want) < 1e-11);
  SECTION("each bias lands on its own matmul") {
    for (int which = 0; which < 3; ++which) {
      INFO("bias dropped from " << (which == 0 ? "gate" : which == 1 ? "up" : "down"));
      ExpertStack gi = g, ui = u, di = d;
      (which == 0 ? gi : which == 1 ? ui : di).bias = nullptr;
      CHECK(test::nmse(run(gi, ui, di), want) > 1e-4);
    }
  }
  SECTION("a merged gate_up stack with its [E, 2F] bias equals the split form") {
    const auto merged = stack_gate_up(g, u);
    std::vector<float> gub;
    for (int64_t e = 0; e < in.n_expert; ++e) {
      gub.insert(gub.end(), b.gb.begin() + e * in.f, b.gb.begin() + (e + 1) * in.f);
      gub.insert(gub.end(), b.ub.begin() + e * in.f, b.ub.begin() + (e + 1) * in.f);
    }
    ExpertStack gm = merged_half(f32, merged, in.n_expert, in.f, in.dm, 0),
                um = merged_half(f32, merged, in.n_expert, in.f, in.dm, 1);
    gm.bias = um.bias = gub.data();
    CHECK(same_bits(run(gm, um, d), got));
  }
  SECTION("silu instead of swiglu_oai differs") {
    std::vector<float> out(size_t(in.n * in.dm));
    moe_ffn(g, u, d, in.x.data(), in.n, in.w.data(), in.ids.data(), in.k, out.data(), pool);
    CHECK(test::nmse(out, want) > 1e-3);
  }
}

// exec_MoeFfn decodes the biased operand forms and the activation
// attributes: each result equals the kernel called directly.
TEST_CASE("moe_ffn's biased forms and swiglu_oai through the interpreter", "[cpu][moe][ir]") {
  const std::string text = R"(func @prefill(%x: tensor<T x 64 x f32, device>, %w: tensor<T x 3 x f32, device>, %ids: tensor<T x 3 x i32, device>, %g: tensor<4 x 96 x 64 x f32, device>, %u: tensor<4 x 96 x 64 x f32, device>, %gu: tensor<4 x 192 x 64 x f32, device>, %d: tensor<4 x 64 x 96 x f32, device>, %gb: tensor<4 x 96 x f32, device>, %ub: tensor<4 x 96 x f32, device>, %gub: tensor<4 x 192 x f32, device>, %db: tensor<4 x 64 x f32, device>) {
  %split = moe_ffn(%x, %w, %ids, %g, %u, %d, %gb, %ub, %db) {biased = true, activation = swiglu_oai, alpha = 1.702, limit = 7.0} : tensor<T x 64 x f32, device>
  %merged = moe_ffn(%x, %w, %ids, %gu, %d, %gub, %db) {biased = true, activation = swiglu_oai, alpha = 1.702, limit = 7.0} : tensor<T x 64 x f32, device>
  %silu = moe_ffn(%x, %w, %ids, %g, %u, %d, %gb, %ub, %db) {biased = true} : tensor<T x 64 x f32, device>
  return(%split, %merged, %silu)
})";
  const MoeInputs in;
  const BiasedExperts b(in);
  const GgmlType f32 = GgmlType::F32;
  ExpertStack g{f32, b.gw.data(), in.n_expert, in.f, in.dm}, u{f32, b.uw.data(), in.n_expert, in.f, in.dm},
      d{f32, b.dw.data(), in.n_expert, in.dm, in.f};
  const auto gu = stack_gate_up(g, u);
  std::vector<float> gub;
  for (int64_t e = 0; e < in.n_expert; ++e) {
    gub.insert(gub.end(), b.gb.begin() + e * in.f, b.gb.begin() + (e + 1) * in.f);
    gub.insert(gub.end(), b.ub.begin() + e * in.f, b.ub.begin() + (e + 1) * in.f);
  }
  test::IrRun r(text);
  const auto out = r.run({0}, {{"x", test::f32_tensor({in.n, in.dm}, in.x)},
                               {"w", test::f32_tensor({in.n, in.k}, in.w)},
                               {"ids", test::i32_tensor({in.n, in.k}, in.ids)},
                               {"g", stack_arg({in.n_expert, in.f, in.dm}, b.gw)},
                               {"u", stack_arg({in.n_expert, in.f, in.dm}, b.uw)},
                               {"gu", stack_arg({in.n_expert, 2 * in.f, in.dm}, gu)},
                               {"d", stack_arg({in.n_expert, in.dm, in.f}, b.dw)},
                               {"gb", test::f32_tensor({in.n_expert, in.f}, b.gb)},
                               {"ub", test::f32_tensor({in.n_expert, in.f}, b.ub)},
                               {"gub", test::f32_tensor({in.n_expert, 2 * in.f}, gub)},
                               {"db", test::f32_tensor({in.n_expert, in.dm}, b.db)}});
  REQUIRE(out.size() == 3);
  auto values = [](const HostTensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); };
  g.bias = b.gb.data(), u.bias = b.ub.data(), d.bias = b.db.data();
  std::vector<float> want(size_t(in.n * in.dm)), silu(size_t(in.n * in.dm));
  moe_ffn(g, u, d, in.x.data(), in.n, in.w.data(), in.ids.data(), in.k, want.data(), pool_of_two(), kOai);
  moe_ffn(g, u, d, in.x.data(), in.n, in.w.data(), in.ids.data(), in.k, silu.data(), pool_of_two());
  CHECK(same_bits(values(out[0]), want));
  CHECK(same_bits(values(out[1]), want));
  CHECK(same_bits(values(out[2]), silu));
  CHECK(test::nmse(want, b.naive()) < 1e-11);
}

// MXFP4 expert stacks (gpt-oss's expert type, E8M0 scales) go through the
// matmul kernel per expert: on every ISA, moe_ffn equals the selected
// experts run token by token, bit for bit, and the two ISAs agree bit for
// bit (dot_mxfp4 has one float order everywhere).
TEST_CASE("moe_ffn on MXFP4 stacks equals the experts run token by token, on every ISA", "[cpu][moe][mxfp4]") {
  ThreadPool pool(2);
  const GgmlType type = GgmlType::MXFP4;
  const int64_t n_expert = 4, dm = 64, f = 96, n = 7, k = 2;
  auto gw = test::random_weights(type, n_expert * f, dm, 21), uw = test::random_weights(type, n_expert * f, dm, 22),
       dw = test::random_weights(type, n_expert * dm, f, 23);
  const ExpertStack g{type, gw.data(), n_expert, f, dm}, u{type, uw.data(), n_expert, f, dm},
      d{type, dw.data(), n_expert, dm, f};
  const auto x = test::random_floats(size_t(n * dm), 24);
  std::vector<float> logits = test::random_floats(size_t(n * n_expert), 25), w(size_t(n * k));
  std::vector<int32_t> ids(size_t(n * k));
  moe_route(logits.data(), n, n_expert, route(k, MoeGating::Softmax, true, 0.0f), w.data(), ids.data());
  std::vector<std::vector<float>> per_isa;
  for (Isa isa : test::available_isas()) {
    test::IsaScope scope(isa);
    std::vector<float> out(size_t(n * dm));
    moe_ffn(g, u, d, x.data(), n, w.data(), ids.data(), k, out.data(), pool);
    const auto want = moe_by_token(g, u, d, x.data(), n, w.data(), ids.data(), k, pool);
    INFO(isa_name(isa));
    CHECK(test::bitwise_equal(out, want));
    CHECK(test::nmse(out, std::vector<float>(out.size(), 0.0f)) > 0);  // not vacuous
    per_isa.push_back(out);
  }
  for (const auto& o : per_isa) CHECK(test::bitwise_equal(o, per_isa.front()));
}

// llama4's weight_before_ffn (moe_ffn `weight_input`): slot j runs its
// expert on the f32 product x[t] * w[t][j] and the slot outputs add
// unweighted, in slot order; against the experts run token by token on
// the weighted rows, and through the interpreter bit for bit. Weights far
// from 1 make the two placements of the weight differ (silu is not linear).
TEST_CASE("moe_ffn with weight_input scales each slot's input by its routing weight", "[cpu][moe][weight_input]") {
  ThreadPool pool(2);
  const int64_t n_expert = 4, dm = 64, f = 96, n = 5, k = 2;
  for (GgmlType type : {GgmlType::F32, GgmlType::Q8_0}) {
    auto gw = test::random_weights(type, n_expert * f, dm, 11), uw = test::random_weights(type, n_expert * f, dm, 12),
         dw = test::random_weights(type, n_expert * dm, f, 13);
    const ExpertStack g{type, gw.data(), n_expert, f, dm}, u{type, uw.data(), n_expert, f, dm},
        d{type, dw.data(), n_expert, dm, f};
    const auto x = test::random_floats(size_t(n * dm), 14, -3.0f, 3.0f);
    std::vector<float> logits = test::random_floats(size_t(n * n_expert), 15, -4.0f, 4.0f), w(size_t(n * k));
    std::vector<int32_t> ids(size_t(n * k));
    moe_route(logits.data(), n, n_expert, route(k, MoeGating::Sigmoid, false, 0.0f), w.data(), ids.data());
    std::vector<float> out(size_t(n * dm)), weighted_out(size_t(n * dm));
    moe_ffn(g, u, d, x.data(), n, w.data(), ids.data(), k, out.data(), pool, {}, true);
    moe_ffn(g, u, d, x.data(), n, w.data(), ids.data(), k, weighted_out.data(), pool);
    // Token by token: each slot's input row times its weight, weight 1 after.
    std::vector<float> want(size_t(n * dm), 0.0f), xs(static_cast<size_t>(dm)), one(1, 1.0f);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < k; ++j) {
        for (int64_t i = 0; i < dm; ++i) xs[size_t(i)] = x[size_t(t * dm + i)] * w[size_t(t * k + j)];
        const auto y = moe_by_token(g, u, d, xs.data(), 1, one.data(), &ids[size_t(t * k + j)], 1, pool);
        for (int64_t i = 0; i < dm; ++i) want[size_t(t * dm + i)] += y[size_t(i)];
      }
    INFO(ggml_type_name(type));
    CHECK(test::nmse(out, want) < 1e-12);
    CHECK(test::nmse(weighted_out, want) > 1e-4);  // the placement matters

    if (type != GgmlType::F32) continue;
    const std::string text = R"(func @prefill(%x: tensor<T x 64 x f32, device>, %w: tensor<T x 2 x f32, device>, %ids: tensor<T x 2 x i32, device>, %g: tensor<4 x 96 x 64 x f32, device>, %u: tensor<4 x 96 x 64 x f32, device>, %d: tensor<4 x 64 x 96 x f32, device>) {
  %y = moe_ffn(%x, %w, %ids, %g, %u, %d) {weight_input = true} : tensor<T x 64 x f32, device>
  return(%y)
})";
    test::IrRun r(text);
    const auto res = r.run({0}, {{"x", test::f32_tensor({n, dm}, x)},
                                 {"w", test::f32_tensor({n, k}, w)},
                                 {"ids", test::i32_tensor({n, k}, ids)},
                                 {"g", stack_arg({n_expert, f, dm}, gw)},
                                 {"u", stack_arg({n_expert, f, dm}, uw)},
                                 {"d", stack_arg({n_expert, dm, f}, dw)}});
    REQUIRE(res.size() == 1);
    CHECK(same_bits(std::vector<float>(res[0].f32(), res[0].f32() + res[0].numel()), out));
  }
}
