// Linear-attention kernels (runtime/cpu/kernels/linear_attention.h) and the
// multi-section rope modes, each against a naive double-precision version
// of its rule in docs/ir.md written here; plus the state carry properties
// (a batch split over several calls gives the bits of one call, the state
// holds the newest inputs, a new slot starts at zero), and one IR-level run
// per op through the CPU interpreter.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "frontends/gguf/gguf.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "runtime/cpu/interpreter.h"
#include "runtime/cpu/kernels/linear_attention.h"
#include "support/error.h"
#include "tests/cpu_kernels/interp_test_util.h"
#include "tests/cpu_kernels/kernel_test_util.h"

using namespace vtc;
using namespace vtc::cpu;
using test::check_close;
using test::f32_values;
using test::state_row;

namespace {

using Rows = std::vector<std::vector<double>>;

std::vector<float> slice(const std::vector<float>& v, int64_t begin, int64_t n) {
  return {v.begin() + begin, v.begin() + begin + n};
}

// ---- naive references ------------------------------------------------------

std::vector<double> naive_l2_norm(const std::vector<float>& x, int64_t cols, double eps) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / size_t(cols); ++r) {
    double sum = 0;
    for (int64_t i = 0; i < cols; ++i) sum += double(x[r * cols + i]) * x[r * cols + i];
    const double d = std::max(std::sqrt(sum), eps);
    for (int64_t i = 0; i < cols; ++i) y[r * cols + i] = x[r * cols + i] / d;
  }
  return y;
}

// history[s]: sequence s's inputs so far, oldest first (rows of C); the
// call appends this batch's rows and returns y.
std::vector<double> naive_conv(const std::vector<float>& x, const std::vector<float>& w, const std::vector<int32_t>& seq,
                               int64_t c_n, int64_t k_n, int64_t dil, std::vector<Rows>& history) {
  std::vector<double> y(x.size());
  for (size_t t = 0; t < seq.size(); ++t) {
    Rows& h = history[size_t(seq[t])];
    h.emplace_back(x.begin() + int64_t(t) * c_n, x.begin() + int64_t(t + 1) * c_n);
    const int64_t last = int64_t(h.size()) - 1;
    for (int64_t c = 0; c < c_n; ++c) {
      double sum = 0;
      for (int64_t k = 0; k < k_n; ++k) {
        const int64_t j = last - (k_n - 1 - k) * dil;
        if (j >= 0) sum += double(w[c * k_n + k]) * h[size_t(j)][size_t(c)];
      }
      y[t * c_n + c] = sum;
    }
  }
  return y;
}

struct NaiveDelta {
  int64_t h_n, dk, dv;
  double scale;
  std::vector<Rows> m;  // per (sequence * h_n + head): dv rows of dk
  bool per_key = false;  // g holds dk decays per head, one per key channel (column of m)

  std::vector<double> run(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                          const std::vector<float>& g, const std::vector<float>& beta, const std::vector<int32_t>& seq) {
    std::vector<double> out(seq.size() * size_t(h_n * dv));
    for (size_t t = 0; t < seq.size(); ++t)
      for (int64_t h = 0; h < h_n; ++h) {
        Rows& mat = m[size_t(seq[t] * h_n + h)];
        const int64_t th = int64_t(t) * h_n + h;
        for (auto& row : mat)
          for (int64_t i = 0; i < dk; ++i) row[i] *= std::exp(double(per_key ? g[th * dk + i] : g[th]));
        for (int64_t j = 0; j < dv; ++j) {
          double kv = 0;
          for (int64_t i = 0; i < dk; ++i) kv += mat[j][i] * k[th * dk + i];
          const double d = (v[th * dv + j] - kv) * beta[th];
          for (int64_t i = 0; i < dk; ++i) mat[j][i] += d * k[th * dk + i];
          double o = 0;
          for (int64_t i = 0; i < dk; ++i) o += mat[j][i] * q[th * dk + i];
          out[th * dv + j] = scale * o;
        }
      }
    return out;
  }
};

// The component the doc's rule picks for rotary pair i.
int doc_component(bool interleaved, const std::vector<int>& sec, int64_t i) {
  const int64_t s = i % (sec[0] + sec[1] + sec[2] + sec[3]);
  if (interleaved) {
    if (s % 3 == 1 && s < 3 * sec[1]) return 1;
    if (s % 3 == 2 && s < 3 * sec[2]) return 2;
    if (s % 3 == 0 && s < 3 * sec[0]) return 0;
    return 3;
  }
  if (s < sec[0]) return 0;
  if (s < sec[0] + sec[1]) return 1;
  return s < sec[0] + sec[1] + sec[2] ? 2 : 3;
}

std::vector<double> naive_mrope(const std::vector<float>& x, int64_t t_n, int64_t h_n, int64_t d, int64_t n_rot,
                                double base, const std::vector<int32_t>& pos4, bool interleaved,
                                const std::vector<int>& sec) {
  std::vector<double> y(x.begin(), x.end());
  for (int64_t t = 0; t < t_n; ++t)
    for (int64_t h = 0; h < h_n; ++h)
      for (int64_t i = 0; i < n_rot / 2; ++i) {
        const double p = pos4[t * 4 + doc_component(interleaved, sec, i)];
        const double th = p * std::pow(base, -2.0 * double(i) / double(n_rot));
        const int64_t a = (t * h_n + h) * d + i, b = a + n_rot / 2;
        y[a] = x[a] * std::cos(th) - x[b] * std::sin(th);
        y[b] = x[a] * std::sin(th) + x[b] * std::cos(th);
      }
  return y;
}

// ---- kernel drivers ----------------------------------------------------------

struct ConvCase {
  int64_t c_n = 6, k_n = 4, dil = 1;
  std::vector<float> w;
  std::vector<std::vector<float>> hist;  // per sequence, [(K-1)*dil][C]
  int64_t width() const { return (k_n - 1) * dil; }
};

std::vector<float> run_conv(ConvCase& cc, const std::vector<float>& x, const std::vector<int32_t>& seq,
                            ThreadPool& pool) {
  std::vector<float*> states;
  for (auto& h : cc.hist) states.push_back(h.data());
  CausalConvParams p{int64_t(seq.size()), cc.c_n, cc.k_n, cc.dil, int64_t(cc.hist.size())};
  test::Guarded y(x.size());
  causal_conv1d(x.data(), cc.w.data(), seq.data(), states.data(), p, y.data(), pool);
  CHECK(y.intact());
  return y.values();
}

struct DeltaCase {
  int64_t h_n = 2, dk = 8, dv = 8;
  float scale = 0.35f;
  std::vector<std::vector<float>> states;  // per sequence, [H][dv][dk]
  bool per_key = false;                    // g [T][H][dk] (KDA), not [T][H]
  int64_t g_width() const { return per_key ? dk : 1; }
};

struct DeltaInputs {
  std::vector<float> q, k, v, g, beta;
  std::vector<int32_t> seq;
};

DeltaInputs delta_inputs(const DeltaCase& dc, const std::vector<int32_t>& seq, uint32_t seed) {
  const size_t t_n = seq.size(), th = t_n * size_t(dc.h_n);
  DeltaInputs in{test::random_floats(th * size_t(dc.dk), seed, -0.5f, 0.5f),
                 test::random_floats(th * size_t(dc.dk), seed + 1, -0.4f, 0.4f),
                 test::random_floats(th * size_t(dc.dv), seed + 2),
                 test::random_floats(th * size_t(dc.g_width()), seed + 3, -1.0f, -0.05f),
                 test::random_floats(th, seed + 4, 0.1f, 0.9f),
                 seq};
  return in;
}

// Rows [t0, t0 + n) of every input.
DeltaInputs delta_slice(const DeltaCase& dc, const DeltaInputs& in, int64_t t0, int64_t n) {
  const int64_t h = dc.h_n;
  return {slice(in.q, t0 * h * dc.dk, n * h * dc.dk), slice(in.k, t0 * h * dc.dk, n * h * dc.dk),
          slice(in.v, t0 * h * dc.dv, n * h * dc.dv), slice(in.g, t0 * h * dc.g_width(), n * h * dc.g_width()),
          slice(in.beta, t0 * h, n * h), {in.seq.begin() + t0, in.seq.begin() + t0 + n}};
}

std::vector<float> run_delta(DeltaCase& dc, const DeltaInputs& in, ThreadPool& pool) {
  std::vector<float*> states;
  for (auto& s : dc.states) states.push_back(s.data());
  DeltaRuleParams p{int64_t(in.seq.size()), dc.h_n, dc.dk, dc.dv, int64_t(dc.states.size()), dc.scale, dc.per_key};
  test::Guarded out(in.seq.size() * size_t(dc.h_n * dc.dv));
  delta_rule(in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), in.seq.data(), states.data(), p,
             out.data(), pool);
  CHECK(out.intact());
  return out.values();
}

NaiveDelta naive_from(const DeltaCase& dc) {
  NaiveDelta nd{dc.h_n, dc.dk, dc.dv, dc.scale, {}, dc.per_key};
  for (const auto& s : dc.states)
    for (int64_t h = 0; h < dc.h_n; ++h) {
      Rows mat(size_t(dc.dv), std::vector<double>(size_t(dc.dk)));
      for (int64_t j = 0; j < dc.dv; ++j)
        for (int64_t i = 0; i < dc.dk; ++i) mat[j][i] = s[size_t((h * dc.dv + j) * dc.dk + i)];
      nd.m.push_back(mat);
    }
  return nd;
}

}  // namespace

// ---- l2_norm -----------------------------------------------------------------

TEST_CASE("l2_norm: rows against a double reference, and eps bounds tiny and zero rows", "[cpu][linear_attention]") {
  const int64_t cols = 37;
  auto x = test::random_floats(size_t(4 * cols), 11, -3.0f, 3.0f);
  for (int64_t i = 0; i < cols; ++i) x[size_t(2 * cols + i)] = 0.0f;      // all zero: 0 * 1/eps, not NaN
  for (int64_t i = 0; i < cols; ++i) x[size_t(3 * cols + i)] *= 1e-9f;  // norm below eps: x / eps
  const float eps = 1e-6f;
  test::Guarded y(x.size());
  l2_norm(x.data(), eps, 4, cols, y.data());
  CHECK(y.intact());
  const auto got = y.values();
  check_close(got, naive_l2_norm(x, cols, eps), 1e-6);
  for (int64_t i = 0; i < cols; ++i) CHECK(got[size_t(2 * cols + i)] == 0.0f);
  CHECK(got[size_t(3 * cols)] == Approx(x[size_t(3 * cols)] / eps).epsilon(1e-6));
  // In place gives the same bits.
  auto inplace = x;
  l2_norm(inplace.data(), eps, 4, cols, inplace.data());
  CHECK(test::bitwise_equal(inplace, got));
}

// ---- causal_conv1d --------------------------------------------------------------

TEST_CASE("causal_conv1d: interleaved sequences with history vs a naive convolution", "[cpu][linear_attention]") {
  for (int64_t dil : {1, 3}) {
    for (Isa isa : test::available_isas()) {
      test::IsaScope scope(isa);
      INFO("dilation " << dil << ", isa " << isa_name(isa));
      ThreadPool pool(3);
      ConvCase cc;
      cc.dil = dil;
      cc.w = test::random_floats(size_t(cc.c_n * cc.k_n), 21);
      cc.hist = {test::random_floats(size_t(cc.width() * cc.c_n), 22), std::vector<float>(size_t(cc.width() * cc.c_n))};
      // The naive version sees each history as earlier inputs of its sequence.
      std::vector<Rows> naive_hist(2);
      for (size_t s = 0; s < 2; ++s)
        for (int64_t r = 0; r < cc.width(); ++r)
          naive_hist[s].emplace_back(cc.hist[s].begin() + r * cc.c_n, cc.hist[s].begin() + (r + 1) * cc.c_n);
      const std::vector<int32_t> seq = {0, 1, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 1};
      const auto x = test::random_floats(seq.size() * size_t(cc.c_n), 23);
      const auto y = run_conv(cc, x, seq, pool);
      check_close(y, naive_conv(x, cc.w, seq, cc.c_n, cc.k_n, dil, naive_hist), 1e-6);
      // Each history now holds its sequence's newest inputs, oldest first.
      for (size_t s = 0; s < 2; ++s) {
        const Rows& h = naive_hist[s];
        for (int64_t r = 0; r < cc.width(); ++r)
          for (int64_t c = 0; c < cc.c_n; ++c)
            CHECK(cc.hist[s][size_t(r * cc.c_n + c)] == float(h[h.size() - size_t(cc.width() - r)][size_t(c)]));
      }
    }
  }
}

TEST_CASE("causal_conv1d: a batch split over calls gives the bits of one call", "[cpu][linear_attention]") {
  ThreadPool pool(2);
  for (int64_t dil : {1, 3}) {
    INFO("dilation " << dil);
    ConvCase one;
    one.dil = dil;
    one.w = test::random_floats(size_t(one.c_n * one.k_n), 31);
    const size_t n_hist = size_t(one.width() * one.c_n);
    one.hist = {std::vector<float>(n_hist), test::random_floats(n_hist, 32)};
    ConvCase split = one;
    const std::vector<int32_t> seq = {1, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0};
    const auto x = test::random_floats(seq.size() * size_t(one.c_n), 33);
    const auto whole = run_conv(one, x, seq, pool);
    // Chunks of 1, 2 and the rest: fewer new rows than the history width
    // keeps part of the old history (dilation 3: width 9).
    std::vector<float> parts;
    int64_t t0 = 0;
    for (int64_t n : {int64_t{1}, int64_t{2}, int64_t(seq.size()) - 3}) {
      const std::vector<int32_t> s(seq.begin() + t0, seq.begin() + t0 + n);
      const auto y = run_conv(split, slice(x, t0 * one.c_n, n * one.c_n), s, pool);
      parts.insert(parts.end(), y.begin(), y.end());
      t0 += n;
    }
    CHECK(test::bitwise_equal(parts, whole));
    for (size_t s = 0; s < 2; ++s) CHECK(test::bitwise_equal(split.hist[s], one.hist[s]));
  }
}

TEST_CASE("causal_conv1d: a sequence index outside the batch throws", "[cpu][linear_attention]") {
  ThreadPool pool(1);
  ConvCase cc;
  cc.w = test::random_floats(size_t(cc.c_n * cc.k_n), 41);
  cc.hist = {std::vector<float>(size_t(cc.width() * cc.c_n))};
  const auto x = test::random_floats(size_t(2 * cc.c_n), 42);
  CHECK_THROWS_AS(run_conv(cc, x, {0, 1}, pool), Error);
}

// ---- delta_rule -----------------------------------------------------------------

TEST_CASE("delta_rule: two interleaved sequences vs a naive double recurrence", "[cpu][linear_attention]") {
  // 8: the leftover-only path of the dot products; 72 / 24: whole SIMD
  // blocks plus leftovers, and dk != dv. Each with one decay per head and
  // with one per key channel (KDA).
  for (auto [dk, dv] : {std::pair<int64_t, int64_t>{8, 8}, {72, 24}}) {
    for (bool per_key : {false, true}) {
      for (Isa isa : test::available_isas()) {
        test::IsaScope scope(isa);
        INFO("dk " << dk << ", dv " << dv << ", per-key gate " << per_key << ", isa " << isa_name(isa));
        ThreadPool pool(3);
        DeltaCase dc;
        dc.dk = dk, dc.dv = dv, dc.per_key = per_key;
        const size_t n_state = size_t(dc.h_n * dc.dv * dc.dk);
        dc.states = {test::random_floats(n_state, 51, -0.2f, 0.2f), std::vector<float>(n_state)};
        NaiveDelta naive = naive_from(dc);
        const auto in = delta_inputs(dc, {0, 1, 1, 0, 1, 0, 0, 1, 0}, 52);
        const auto out = run_delta(dc, in, pool);
        check_close(out, naive.run(in.q, in.k, in.v, in.g, in.beta, in.seq), 2e-6);
        std::vector<double> want_state;
        for (const auto& mat : naive.m)
          for (const auto& row : mat) want_state.insert(want_state.end(), row.begin(), row.end());
        std::vector<float> got_state = dc.states[0];
        got_state.insert(got_state.end(), dc.states[1].begin(), dc.states[1].end());
        check_close(got_state, want_state, 2e-6);
      }
    }
  }
}

TEST_CASE("delta_rule: chunked calls and any thread count give the bits of one call", "[cpu][linear_attention]") {
  for (bool per_key : {false, true}) {
    INFO("per-key gate " << per_key);
    DeltaCase base;
    base.per_key = per_key;
    const size_t n_state = size_t(base.h_n * base.dv * base.dk);
    base.states = {std::vector<float>(n_state), test::random_floats(n_state, 61, -0.2f, 0.2f)};
    const auto in = delta_inputs(base, {1, 0, 0, 1, 1, 0, 1, 0, 0, 0, 1}, 62);
    ThreadPool pool1(1), pool3(3);
    DeltaCase one = base;
    const auto whole = run_delta(one, in, pool1);
    DeltaCase split = base;
    std::vector<float> parts;
    int64_t t0 = 0;
    for (int64_t n : {int64_t{1}, int64_t{3}, int64_t(in.seq.size()) - 4}) {
      const auto y = run_delta(split, delta_slice(split, in, t0, n), pool3);
      parts.insert(parts.end(), y.begin(), y.end());
      t0 += n;
    }
    CHECK(test::bitwise_equal(parts, whole));
    for (size_t s = 0; s < 2; ++s) CHECK(test::bitwise_equal(split.states[s], one.states[s]));
  }
}

TEST_CASE("delta_rule: a sequence index outside the batch throws", "[cpu][linear_attention]") {
  ThreadPool pool(1);
  DeltaCase dc;
  dc.states = {std::vector<float>(size_t(dc.h_n * dc.dv * dc.dk))};
  CHECK_THROWS_AS(run_delta(dc, delta_inputs(dc, {0, 2}, 71), pool), Error);
}

// ---- rope multi / imulti -----------------------------------------------------------

TEST_CASE("rope multi/imulti: equal components give neox bit for bit", "[cpu][linear_attention][rope]") {
  const int64_t t_n = 5, h_n = 3, d = 64;
  const auto x = test::random_floats(size_t(t_n * h_n * d), 81);
  const std::vector<int32_t> pos = {0, 3, 17, 250, 4093};
  std::vector<int32_t> pos4;
  for (int32_t p : pos) pos4.insert(pos4.end(), {p, p, p, p});
  for (int64_t n_rot : {64, 48}) {
    for (bool yarn : {false, true}) {
      RopeParams p;
      p.n_dims = n_rot;
      p.freq_base = 1e6f;
      if (yarn) {
        p.freq_scale = 0.25f;
        p.ext_factor = 1.0f;
        rope_yarn_corr_dims(n_rot, 4096, p.freq_base, 32.0f, 1.0f, p.corr_dims);
      }
      p.mode = RopeMode::Neox;
      std::vector<float> want(x.size());
      rope(x.data(), t_n, h_n, d, pos.data(), p, want.data());
      for (RopeMode mode : {RopeMode::Multi, RopeMode::IMulti}) {
        INFO("n_rot " << n_rot << ", yarn " << yarn << ", mode " << int(mode));
        p.mode = mode;
        // Sections summing to less than the pairs wrap around (sector = i mod 11).
        p.sections[0] = 5, p.sections[1] = 3, p.sections[2] = 3, p.sections[3] = 0;
        std::vector<float> got(x.size());
        rope(x.data(), t_n, h_n, d, pos4.data(), p, got.data());
        CHECK(test::bitwise_equal(got, want));
      }
    }
  }
}

TEST_CASE("rope multi/imulti: distinct components follow the sections", "[cpu][linear_attention][rope]") {
  const int64_t t_n = 3, h_n = 2, d = 40, n_rot = 32;  // 16 pairs, 8 dims passed through
  const auto x = test::random_floats(size_t(t_n * h_n * d), 91);
  // Components far apart, so picking the wrong one is a large error.
  const std::vector<int32_t> pos4 = {5, 37, 81, 123, 0, 60, 2, 9, 400, 7, 95, 31};
  const std::vector<std::vector<int>> sections = {{2, 3, 2, 1}, {4, 2, 2, 0}, {3, 3, 2, 1}};
  for (bool interleaved : {false, true}) {
    for (const auto& sec : sections) {
      INFO("interleaved " << interleaved << ", sections " << sec[0] << sec[1] << sec[2] << sec[3]);
      RopeParams p;
      p.n_dims = n_rot;
      p.freq_base = 100.0f;
      p.mode = interleaved ? RopeMode::IMulti : RopeMode::Multi;
      for (int j = 0; j < 4; ++j) p.sections[j] = sec[size_t(j)];
      test::Guarded y(x.size());
      rope(x.data(), t_n, h_n, d, pos4.data(), p, y.data());
      CHECK(y.intact());
      check_close(y.values(), naive_mrope(x, t_n, h_n, d, n_rot, 100.0, pos4, interleaved, sec), 2e-4);
    }
  }
  RopeParams bad;
  bad.n_dims = n_rot;
  bad.mode = RopeMode::Multi;  // all sections zero
  std::vector<float> y(x.size());
  CHECK_THROWS_AS(rope(x.data(), t_n, h_n, d, pos4.data(), bad, y.data()), Error);
}

// ---- through the interpreter ------------------------------------------------------

namespace {

using test::f32_tensor;
using test::i32_tensor;

using test::IrRun;

}  // namespace

TEST_CASE("ir: l2_norm through the interpreter", "[cpu][linear_attention][ir]") {
  IrRun r(R"(
func @prefill(%x: tensor<T x 3 x 16 x f32, device>) {
  %y = l2_norm(%x) {eps = 1e-06} : tensor<T x 3 x 16 x f32, device>
  return(%y)
}
)");
  auto x = test::random_floats(2 * 3 * 16, 101);
  for (int i = 0; i < 16; ++i) x[size_t(16 + i)] = 0.0f;
  const auto y = r.run({0}, {{"x", f32_tensor({2, 3, 16}, x)}});
  check_close(f32_values(y.at(0)), naive_l2_norm(x, 16, 1e-6), 1e-6);
}

TEST_CASE("ir: causal_conv1d carries its state across steps", "[cpu][linear_attention][ir]") {
  // C = 5, K = 4, dilation 2: the state keeps the last 6 inputs.
  IrRun r(R"(
state @conv : plain<S x 6 x 5 x f32, device>
func @prefill(%x: tensor<T x 5 x f32, device>, %w: tensor<5 x 4 x f32, device>, %seq: tensor<T x i32, device>) {
  %y = causal_conv1d(%x, %w, %seq) {state = @conv, dilation = 2} : tensor<T x 5 x f32, device>
  return(%y)
}
)");
  const auto w = test::random_floats(20, 111);
  std::vector<Rows> naive_hist(3);  // by slot; a new slot starts from zeros
  for (auto& h : naive_hist) h.assign(6, std::vector<double>(5, 0.0));
  // Step 1: slots 2 and 0 interleaved; step 2: slot 0 alone, then 2 and 0.
  const std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> steps = {
      {{2, 0}, {0, 0, 1, 0, 1, 1, 0}}, {{0}, {0, 0}}, {{2, 0}, {1, 0, 0, 1}}};
  uint32_t seed = 112;
  for (const auto& [slots, seq] : steps) {
    const auto x = test::random_floats(seq.size() * 5, seed++);
    std::vector<Rows> by_index;
    for (int32_t s : slots) by_index.push_back(naive_hist[size_t(s)]);
    const auto want = naive_conv(x, w, seq, 5, 4, 2, by_index);
    for (size_t i = 0; i < slots.size(); ++i) naive_hist[size_t(slots[i])] = by_index[i];
    const auto y = r.run(slots, {{"x", f32_tensor({int64_t(seq.size()), 5}, x)},
                                 {"w", f32_tensor({5, 4}, w)},
                                 {"seq", i32_tensor({int64_t(seq.size())}, seq)}});
    check_close(f32_values(y.at(0)), want, 1e-6);
  }
  for (int32_t slot : {0, 2}) {
    const Rows& h = naive_hist[size_t(slot)];
    std::vector<double> last6;
    for (size_t i = h.size() - 6; i < h.size(); ++i) last6.insert(last6.end(), h[i].begin(), h[i].end());
    check_close(state_row(r.host, "conv", slot), last6, 0.0);
  }
  CHECK(test::bitwise_equal(state_row(r.host, "conv", 1), std::vector<float>(30, 0.0f)));
}

TEST_CASE("ir: delta_rule starts a new slot at zero and carries its state", "[cpu][linear_attention][ir]") {
  // g [T, 2] (one decay per head) and [T, 2, 8] (one per key channel).
  for (bool per_key : {false, true}) {
    INFO("per-key gate " << per_key);
    const std::string g_type = per_key ? "T x 2 x 8" : "T x 2";
    IrRun r(fmt::format(R"(
  state @ssm : plain<S x 2 x 8 x 8 x f32, device>
  func @prefill(%q: tensor<T x 2 x 8 x f32, device>, %k: tensor<T x 2 x 8 x f32, device>, %v: tensor<T x 2 x 8 x f32, device>, %g: tensor<{} x f32, device>, %beta: tensor<T x 2 x f32, device>, %seq: tensor<T x i32, device>) {{
    %o = delta_rule(%q, %k, %v, %g, %beta, %seq) {{state = @ssm, scale = 0.35355339}} : tensor<T x 2 x 8 x f32, device>
    return(%o)
  }}
  )", g_type));
    DeltaCase dc;  // H = 2, dk = dv = 8
    dc.scale = 0.35355339f;
    dc.per_key = per_key;
    dc.states.assign(3, std::vector<float>(128, 0.0f));  // slots 0..2, all new
    NaiveDelta naive = naive_from(dc);                     // by slot
    const std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> steps = {
        {{1, 2}, {0, 1, 1, 0, 0}}, {{2, 1}, {1, 0, 1}}};
    uint32_t seed = 121;
    for (const auto& [slots, seq] : steps) {
      const auto in = delta_inputs(dc, seq, seed += 10);
      // The naive recurrence indexed by slot: map each token's index to its slot.
      std::vector<int32_t> by_slot;
      for (int32_t s : seq) by_slot.push_back(slots[size_t(s)]);
      const auto want = naive.run(in.q, in.k, in.v, in.g, in.beta, by_slot);
      const int64_t t_n = int64_t(seq.size());
      const auto out = r.run(slots, {{"q", f32_tensor({t_n, 2, 8}, in.q)},
                                     {"k", f32_tensor({t_n, 2, 8}, in.k)},
                                     {"v", f32_tensor({t_n, 2, 8}, in.v)},
                                     {"g", per_key ? f32_tensor({t_n, 2, 8}, in.g) : f32_tensor({t_n, 2}, in.g)},
                                     {"beta", f32_tensor({t_n, 2}, in.beta)},
                                     {"seq", i32_tensor({t_n}, seq)}});
      check_close(f32_values(out.at(0)), want, 2e-6);
    }
    for (int32_t slot : {1, 2}) {
      std::vector<double> want;
      for (int64_t h = 0; h < 2; ++h)
        for (const auto& row : naive.m[size_t(slot * 2 + h)]) want.insert(want.end(), row.begin(), row.end());
      check_close(state_row(r.host, "ssm", slot), want, 2e-6);
    }
    CHECK(test::bitwise_equal(state_row(r.host, "ssm", 0), std::vector<float>(128, 0.0f)));
  }
}

TEST_CASE("ir: rope multi and imulti through the interpreter", "[cpu][linear_attention][ir][rope]") {
  IrRun r(R"(
func @prefill(%x: tensor<T x 2 x 32 x f32, device>, %pos: tensor<T x i32, device>, %pos4: tensor<T x 4 x i32, device>) {
  %n = rope(%x, %pos) {mode = neox, n_rot = 32, base = 10000.0} : tensor<T x 2 x 32 x f32, device>
  %m = rope(%x, %pos4) {mode = multi, n_rot = 32, base = 10000.0, sections = [3, 2, 2, 1]} : tensor<T x 2 x 32 x f32, device>
  %i = rope(%x, %pos4) {mode = imulti, n_rot = 32, base = 10000.0, sections = [3, 2, 2, 1]} : tensor<T x 2 x 32 x f32, device>
  return(%n, %m, %i)
}
)");
  const auto x = test::random_floats(3 * 2 * 32, 131);
  const std::vector<int32_t> pos = {4, 9, 30};
  SECTION("text tokens: equal components equal neox") {
    std::vector<int32_t> pos4;
    for (int32_t p : pos) pos4.insert(pos4.end(), {p, p, p, p});
    const auto y = r.run({0}, {{"x", f32_tensor({3, 2, 32}, x)}, {"pos", i32_tensor({3}, pos)},
                               {"pos4", i32_tensor({3, 4}, pos4)}});
    CHECK(test::bitwise_equal(f32_values(y.at(1)), f32_values(y.at(0))));
    CHECK(test::bitwise_equal(f32_values(y.at(2)), f32_values(y.at(0))));
  }
  SECTION("distinct components") {
    const std::vector<int32_t> pos4 = {4, 50, 7, 90, 9, 1, 66, 3, 30, 12, 0, 44};
    const auto y = r.run({0}, {{"x", f32_tensor({3, 2, 32}, x)}, {"pos", i32_tensor({3}, pos)},
                               {"pos4", i32_tensor({3, 4}, pos4)}});
    check_close(f32_values(y.at(1)), naive_mrope(x, 3, 2, 32, 32, 10000.0, pos4, false, {3, 2, 2, 1}), 2e-4);
    check_close(f32_values(y.at(2)), naive_mrope(x, 3, 2, 32, 32, 10000.0, pos4, true, {3, 2, 2, 1}), 2e-4);
  }
}
