// Float ops against double references, on every available ISA, with
// sentinel-guarded outputs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "frontends/gguf/dequant.h"
#include "frontends/gguf/gguf.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "kernel_test_util.h"
#include "runtime/cpu/interpreter.h"
#include "runtime/cpu/kernels/kernels.h"

using namespace vtc;
using namespace vtc::cpu;
using namespace vtc::cpu::test;

TEST_CASE("rms_norm vs double reference", "[float][rms_norm]") {
  const int64_t shapes[][2] = {{1, 7}, {3, 64}, {5, 4096}, {2, 33}};
  for (Isa isa : available_isas()) {
    IsaScope scope(isa);
    for (const auto& s : shapes) {
      const int64_t rows = s[0], cols = s[1];
      const auto x = random_floats(static_cast<size_t>(rows * cols), 1, -4.0f, 4.0f);
      const auto w = random_floats(static_cast<size_t>(cols), 2, 0.5f, 1.5f);
      for (bool with_weight : {true, false}) {
        Guarded y(x.size());
        rms_norm(x.data(), with_weight ? w.data() : nullptr, 1e-6f, rows, cols, y.data());
        REQUIRE(y.intact());
        std::vector<double> ref(x.size());
        for (int64_t r = 0; r < rows; ++r) {
          double ss = 0;
          for (int64_t c = 0; c < cols; ++c) ss += double(x[r * cols + c]) * x[r * cols + c];
          const double sc = 1.0 / std::sqrt(ss / cols + 1e-6);
          for (int64_t c = 0; c < cols; ++c) ref[r * cols + c] = x[r * cols + c] * sc * (with_weight ? w[c] : 1.0);
        }
        const double e = nmse(y.values(), ref);
        INFO(fmt::format("{} {}x{} weight={} nmse {:.3g}", isa_name(isa), rows, cols, with_weight, e));
        CHECK(e < 1e-12);
      }
      // In place.
      std::vector<float> inplace = x;
      rms_norm(inplace.data(), w.data(), 1e-6f, rows, cols, inplace.data());
      Guarded y(x.size());
      rms_norm(x.data(), w.data(), 1e-6f, rows, cols, y.data());
      CHECK(bitwise_equal(inplace, y.values()));
    }
  }
}

TEST_CASE("elementwise ops vs double reference", "[float][elementwise]") {
  const int64_t n = 1037;  // not a multiple of the vector width
  const auto a = random_floats(n, 3, -8.0f, 8.0f);
  const auto b = random_floats(n, 4, -8.0f, 8.0f);
  struct Unary {
    const char* name;
    void (*fn)(const float*, float*, int64_t);
    double (*ref)(double);
    double tol;
  };
  const Unary unary[] = {
      {"neg", neg, [](double x) { return -x; }, 0},
      {"abs", absolute, [](double x) { return std::fabs(x); }, 0},
      {"sign", sgn, [](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }, 0},
      {"clamp[-2.5,3]", [](const float* x, float* y, int64_t k) { clamp_values(x, -2.5f, 3.0f, y, k); },
       [](double x) { return std::min(std::max(x, -2.5), 3.0); }, 0},
      {"exp", vtc::cpu::exp, [](double x) { return std::exp(x); }, 1e-13},
      {"silu", silu, [](double x) { return x / (1 + std::exp(-x)); }, 1e-13},
      {"sigmoid", sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, 1e-13},
      {"softplus", softplus, [](double x) { return x > 20 ? x : std::log1p(std::exp(x)); }, 1e-13},
      // ggml's gelu goes through an f16 table: f16 precision.
      {"gelu", gelu, [](double x) { return 0.5 * x * (1 + std::tanh(0.7978845608028654 * x * (1 + 0.044715 * x * x))); }, 1e-6},
  };
  for (Isa isa : available_isas()) {
    IsaScope scope(isa);
    for (const auto& u : unary) {
      Guarded y(n);
      u.fn(a.data(), y.data(), n);
      REQUIRE(y.intact());
      std::vector<double> ref(n);
      for (int64_t i = 0; i < n; ++i) ref[i] = u.ref(a[i]);
      const double e = nmse(y.values(), ref);
      INFO(fmt::format("{} {} nmse {:.3g}", isa_name(isa), u.name, e));
      CHECK(e <= u.tol);
    }
    // sqrtf is correctly rounded: exactly the double root rounded to float.
    Guarded yr(n);
    std::vector<float> mag(n);
    for (int64_t i = 0; i < n; ++i) mag[i] = std::fabs(a[i]);
    square_root(mag.data(), yr.data(), n);
    REQUIRE(yr.intact());
    const auto roots = yr.values();
    for (int64_t i = 0; i < n; ++i) CHECK(roots[i] == float(std::sqrt(double(mag[i]))));
    Guarded ya(n), ym(n), ys(n), yg(n);
    add(a.data(), b.data(), ya.data(), n);
    mul(a.data(), b.data(), ym.data(), n);
    scale(a.data(), 0.37f, ys.data(), n);
    swiglu(a.data(), b.data(), yg.data(), n);
    REQUIRE((ya.intact() && ym.intact() && ys.intact() && yg.intact()));
    const auto va = ya.values(), vm = ym.values(), vs = ys.values(), vg = yg.values();
    for (int64_t i = 0; i < n; ++i) {
      CHECK(va[i] == a[i] + b[i]);
      CHECK(vm[i] == a[i] * b[i]);
      CHECK(vs[i] == a[i] * 0.37f);
    }
    std::vector<double> rg(n);
    for (int64_t i = 0; i < n; ++i) rg[i] = a[i] / (1 + std::exp(-double(a[i]))) * b[i];
    CHECK(nmse(vg, rg) < 1e-13);
  }
  // gelu's ggml clamps.
  const float edge[] = {-11.0f, 12.0f};
  float out[2];
  gelu(edge, out, 2);
  CHECK(out[0] == 0.0f);
  CHECK(out[1] == 12.0f);
}

TEST_CASE("abs, sign, sqrt and clamp at ggml's edge values", "[float][elementwise]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {-0.0f, 0.0f, nan, -inf, inf, -1e-30f, 1e-7f, -3.0f};
  const int64_t n = int64_t(x.size());
  std::vector<float> y(x.size());
  absolute(x.data(), y.data(), n);
  CHECK(!std::signbit(y[0]));
  CHECK(std::isnan(y[2]));
  CHECK(y[3] == inf);
  sgn(x.data(), y.data(), n);  // -0 and NaN give +0, like ggml's op_sgn
  CHECK(bitwise_equal(y, {0.0f, 0.0f, 0.0f, -1.0f, 1.0f, -1.0f, 1.0f, -1.0f}));
  square_root(x.data(), y.data(), n);
  CHECK((std::signbit(y[0]) && y[0] == 0.0f));  // IEEE: sqrt(-0) = -0
  CHECK((std::isnan(y[2]) && std::isnan(y[3]) && std::isnan(y[7])));
  CHECK(y[4] == inf);
  // qwen4exp's clamp(|s|, 1e-6, inf); NaN becomes max as in ggml's MIN/MAX macros.
  clamp_values(x.data(), 1e-6f, inf, y.data(), n);
  CHECK(bitwise_equal(y, {1e-6f, 1e-6f, inf, 1e-6f, inf, 1e-6f, 1e-6f, 1e-6f}));
  clamp_values(x.data(), 0.0f, 2.0f, y.data(), n);  // -0 vs a 0 bound: the bound (+0)
  CHECK(bitwise_equal(y, {0.0f, 0.0f, 2.0f, 0.0f, 2.0f, 0.0f, 1e-7f, 0.0f}));
  clamp_values(x.data(), -inf, inf, y.data(), n);  // open on both sides: identity except NaN
  CHECK(y[2] == inf);
  CHECK(y[7] == -3.0f);
}

TEST_CASE("sum_rows vs double reference", "[float][sum]") {
  const int64_t shapes[][2] = {{1, 1}, {3, 64}, {5, 4097}, {7, 33}};
  for (const auto& s : shapes) {
    const int64_t rows = s[0], cols = s[1];
    const auto x = random_floats(size_t(rows * cols), 21, -4.0f, 4.0f);
    Guarded y(static_cast<size_t>(rows));
    sum_rows(x.data(), rows, cols, y.data());
    REQUIRE(y.intact());
    const auto got = y.values();
    for (int64_t r = 0; r < rows; ++r) {
      double ref = 0;  // ggml_vec_sum_f32: double accumulator, rounded once
      for (int64_t c = 0; c < cols; ++c) ref += x[r * cols + c];
      INFO(fmt::format("{}x{} row {}", rows, cols, r));
      CHECK(got[r] == float(ref));
    }
  }
  // A float accumulator would lose the ones next to 1e8 (float spacing 8
  // there) and return 0.5; the double one keeps them.
  const std::vector<float> cancel = {1e8f, 1.0f, 1.0f, -1e8f, 0.5f};
  float y = -1;
  sum_rows(cancel.data(), 1, 5, &y);
  CHECK(y == 2.5f);
  sum_rows(cancel.data(), 1, 0, &y);  // an empty row sums to 0
  CHECK(y == 0.0f);
}

TEST_CASE("softmax vs double reference", "[float][softmax]") {
  const int64_t rows = 4, cols = 301;
  const auto x = random_floats(rows * cols, 8, -20.0f, 20.0f);
  for (float sc : {1.0f, 0.125f}) {
    Guarded y(x.size());
    softmax(x.data(), rows, cols, sc, y.data());
    REQUIRE(y.intact());
    std::vector<double> ref(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      double m = -1e300, s = 0;
      for (int64_t c = 0; c < cols; ++c) m = std::max(m, double(x[r * cols + c]) * sc);
      for (int64_t c = 0; c < cols; ++c) s += std::exp(double(x[r * cols + c]) * sc - m);
      for (int64_t c = 0; c < cols; ++c) ref[r * cols + c] = std::exp(double(x[r * cols + c]) * sc - m) / s;
    }
    CHECK(nmse(y.values(), ref) < 1e-12);
  }
}

namespace {
// RoPE reference in double: theta_i = pos * freq_scale * base^(-2i/n_dims) / ff_i.
std::vector<double> rope_ref(const std::vector<float>& x, int64_t n_tokens, int64_t n_heads, int64_t hd,
                             const std::vector<int32_t>& pos, const RopeParams& p) {
  std::vector<double> y(x.begin(), x.end());
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t base = (t * n_heads + h) * hd;
      for (int64_t i = 0; i < p.n_dims / 2; ++i) {
        const double ff = p.freq_factors ? p.freq_factors[i] : 1.0;
        const double th = pos[t] * double(p.freq_scale) * std::pow(double(p.freq_base), -2.0 * i / p.n_dims) / ff;
        const int64_t a = p.mode == RopeMode::Neox ? i : 2 * i;
        const int64_t b = p.mode == RopeMode::Neox ? i + p.n_dims / 2 : 2 * i + 1;
        const double x0 = x[base + a], x1 = x[base + b];
        y[base + a] = (x0 * std::cos(th) - x1 * std::sin(th)) * p.attn_factor;
        y[base + b] = (x0 * std::sin(th) + x1 * std::cos(th)) * p.attn_factor;
      }
    }
  return y;
}
}  // namespace

TEST_CASE("rope (normal, neox, partial, freq factors) vs double reference", "[float][rope]") {
  const int64_t n_tokens = 5, n_heads = 3, hd = 64;
  const std::vector<int32_t> pos = {0, 1, 7, 100, 511};
  const auto x = random_floats(n_tokens * n_heads * hd, 9);
  std::vector<float> ff(32);
  for (size_t i = 0; i < ff.size(); ++i) ff[i] = 1.0f + 0.25f * float(i % 5);
  struct Case {
    RopeMode mode;
    int64_t n_dims;
    float base, fscale, attn;
    bool factors;
  };
  const Case cases[] = {{RopeMode::Normal, 64, 10000.f, 1.f, 1.f, false}, {RopeMode::Neox, 64, 1000000.f, 1.f, 1.f, false},
                        {RopeMode::Normal, 32, 10000.f, 0.5f, 1.f, false}, {RopeMode::Neox, 48, 500000.f, 1.f, 1.f, true},
                        {RopeMode::Neox, 64, 10000.f, 0.25f, 1.2f, true}};
  for (const auto& c : cases) {
    RopeParams p;
    p.mode = c.mode;
    p.n_dims = c.n_dims;
    p.freq_base = c.base;
    p.freq_scale = c.fscale;
    p.attn_factor = c.attn;
    p.freq_factors = c.factors ? ff.data() : nullptr;
    Guarded y(x.size());
    rope(x.data(), n_tokens, n_heads, hd, pos.data(), p, y.data());
    REQUIRE(y.intact());
    const auto got = y.values();
    const double e = nmse(got, rope_ref(x, n_tokens, n_heads, hd, pos, p));
    INFO(fmt::format("mode {} n_dims {} nmse {:.3g}", int(c.mode), c.n_dims, e));
    CHECK(e < 1e-10);
    // Unrotated tail copied exactly; position 0 is the identity (times attn_factor).
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int64_t h = 0; h < n_heads; ++h)
        for (int64_t i = c.n_dims; i < hd; ++i) CHECK(got[(t * n_heads + h) * hd + i] == x[(t * n_heads + h) * hd + i]);
    // In place gives the same bits.
    std::vector<float> inplace = x;
    rope(inplace.data(), n_tokens, n_heads, hd, pos.data(), p, inplace.data());
    CHECK(bitwise_equal(inplace, got));
  }
  RopeParams bad;
  bad.n_dims = 65;
  std::vector<float> out(x.size());
  CHECK_THROWS(rope(x.data(), n_tokens, n_heads, hd, pos.data(), bad, out.data()));
}

TEST_CASE("argmax and top_k", "[float][sampling]") {
  const float x[] = {0.5f, 3.0f, -1.0f, 3.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f, 7.0f};
  CHECK(argmax(x, 7) == 6);
  CHECK(argmax(x, 4) == 1);  // first of the ties
  CHECK(argmax(x, 0) == -1);
  int32_t idx[8] = {};
  CHECK(top_k(x, 7, 4, idx) == 4);
  CHECK(idx[0] == 6);
  CHECK(idx[1] == 1);
  CHECK(idx[2] == 3);
  CHECK(idx[3] == 5);
  CHECK(top_k(x, 7, 100, idx) == 7);
  CHECK(idx[6] == 4);  // NaN last
  CHECK(top_k(x, 7, 0, idx) == 0);
}

// The interpreter's sum/abs/clamp/sqrt/sign (op_exec.cpp) on qwen4exp's
// PLE gate, sign(s) * sqrt(clamp(|s|, 1e-6, inf)) with s = sum_rows(x), vs
// the same formula in float from a double row sum: bit-exact.
TEST_CASE("ir: the PLE gate ops through the interpreter", "[float][sum][ir]") {
  ir::Module m = ir::parse(R"(
func @prefill(%x: tensor<T x 3 x 40 x f32, device>) {
  %s = sum(%x) : tensor<T x 3 x 1 x f32, device>
  %a = abs(%s) : tensor<T x 3 x 1 x f32, device>
  %c = clamp(%a) {min = 1e-06, max = inf} : tensor<T x 3 x 1 x f32, device>
  %q = sqrt(%c) : tensor<T x 3 x 1 x f32, device>
  %g = sign(%s) : tensor<T x 3 x 1 x f32, device>
  %p = mul(%g, %q) : tensor<T x 3 x 1 x f32, device>
  return(%p, %s)
}
)");
  ir::verify(m);
  StateStore states(m, StateStoreConfig{1, 64, 0});
  HostStates host(states);
  ThreadPool pool(2);
  Interpreter interp(m, empty_gguf(), host, pool);
  auto x = random_floats(2 * 3 * 40, 31, -2.0f, 2.0f);
  for (int i = 0; i < 40; ++i) x[size_t(40 + i)] = i < 20 ? 0.25f : -0.25f;  // a row summing to 0
  HostTensor in;
  in.shape = {2, 3, 40};
  in.bytes.resize(x.size() * 4);
  std::memcpy(in.bytes.data(), x.data(), in.bytes.size());
  const auto out = interp.run(StepRequest{"prefill", {0}, {{"x", in}}});
  REQUIRE(out.size() == 2);
  REQUIRE((out[1].shape == std::vector<int64_t>{2, 3, 1}));
  for (int64_t r = 0; r < 6; ++r) {
    double acc = 0;
    for (int64_t c = 0; c < 40; ++c) acc += x[size_t(r * 40 + c)];
    const float s = float(acc);
    const float gate = (s > 0 ? 1.0f : s < 0 ? -1.0f : 0.0f) * std::sqrt(std::max(std::fabs(s), 1e-6f));
    INFO("row " << r << " sum " << s);
    CHECK(out[1].f32()[r] == s);
    CHECK(out[0].f32()[r] == gate);
  }
  CHECK(out[1].f32()[1] == 0.0f);
}

// The reference-matching variants (docs/numerics-parity.md): both AVX2
// float tables (ggml's 8-lane and 16-lane orders) stay accurate, and the
// vector silu handles the exp overflow/underflow ranges.
#include "runtime/cpu/kernels/internal.h"

TEST_CASE("reference-order f16 dot and vector silu variants", "[float][parity]") {
  namespace d = vtc::cpu::detail;
  std::vector<const d::FloatKernels*> tables = {&d::scalar_float_kernels()};
  if (isa_supported(Isa::Avx2)) {
    tables.push_back(d::avx2_float_kernels());
    tables.push_back(d::avx2_float_kernels_l16());
  } else {
    WARN("SKIPPED: no AVX2, only the scalar table is checked");
  }
  for (int64_t n : {1, 31, 64, 100, 128, 200}) {
    const auto a = random_floats(n, 11, -2.0f, 2.0f);
    const auto b = random_floats(n, 12, -2.0f, 2.0f);
    std::vector<uint16_t> ha(n), hb(n);
    d::scalar_float_kernels().f32_to_f16(a.data(), ha.data(), n);
    d::scalar_float_kernels().f32_to_f16(b.data(), hb.data(), n);
    const float* t = d::fp16_table();
    double ref = 0, mag = 0;
    for (int64_t i = 0; i < n; ++i) ref += double(t[ha[i]]) * t[hb[i]], mag += std::fabs(double(t[ha[i]]) * t[hb[i]]);
    for (const auto* k : tables) {
      const float got = k->dot_f16(ha.data(), hb.data(), n);
      INFO("n " << n);
      CHECK(std::fabs(got - ref) <= 1e-6 * mag + 1e-30);
    }
  }
  std::vector<float> x = {-200.f, -150.f, -100.f, -90.f, -88.f, -20.f, -1.f, -0.f, 0.f, 1e-8f, 0.5f, 3.f, 20.f, 87.f, 90.f, 100.f, 150.f, 200.f};
  x.resize(24, 1.25f);  // three full vectors
  for (const auto* k : tables) {
    std::vector<float> y(x.size());
    k->silu(x.data(), y.data(), int64_t(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const double r = double(x[i]) / (1 + std::exp(-double(x[i])));
      INFO("x " << x[i] << " got " << y[i] << " ref " << r);
      CHECK(std::fabs(y[i] - r) <= 4e-7 * std::fabs(r) + 1e-37);
    }
  }
}
