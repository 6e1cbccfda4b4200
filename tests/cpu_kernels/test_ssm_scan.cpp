// The selective scan (runtime/cpu/kernels/ssm_scan.h) against a naive
// double-precision recurrence of its rule in docs/ir.md written here, in
// both layouts (Mamba-2: A [H, 1], heads of P rows, grouped B/C; Mamba-1:
// A [H, N], P = 1); plus the state carry properties (a batch split over
// several calls, on any thread count, gives the bits of one call) and one
// IR-level run through the CPU interpreter (a new slot starts at zero).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "runtime/cpu/kernels/ssm_scan.h"
#include "support/error.h"
#include "tests/cpu_kernels/interp_test_util.h"
#include "tests/cpu_kernels/kernel_test_util.h"

using namespace vtc;
using namespace vtc::cpu;
using test::check_close;
using test::f32_values;
using test::state_row;

namespace {

struct ScanCase {
  int64_t h = 4, p = 3, n = 20, g = 2;  // n = 20: two 8-lane blocks and a tail of 4
  bool per_element = false;
  std::vector<std::vector<float>> states;  // per sequence, [H][P][N]
  int64_t state_floats() const { return h * p * n; }
};

struct ScanInputs {
  std::vector<float> x, dt, a, b, c;
  std::vector<int32_t> seq;
};

ScanInputs scan_inputs(const ScanCase& sc, const std::vector<int32_t>& seq, uint32_t seed) {
  const size_t t = seq.size();
  ScanInputs in;
  in.seq = seq;
  in.x = test::random_floats(t * size_t(sc.h * sc.p), seed);
  in.dt = test::random_floats(t * size_t(sc.h), seed + 1, -3.0f, 2.0f);
  in.dt[0] = 25.0f;  // above 20, softplus is the identity
  in.a = test::random_floats(size_t(sc.h * (sc.per_element ? sc.n : 1)), seed + 2, -2.0f, -0.2f);
  in.b = test::random_floats(t * size_t(sc.g * sc.n), seed + 3);
  in.c = test::random_floats(t * size_t(sc.g * sc.n), seed + 4);
  return in;
}

std::vector<float> run_scan(ScanCase& sc, const ScanInputs& in, ThreadPool& pool) {
  SsmScanParams p;
  p.n_tokens = int64_t(in.seq.size());
  p.n_heads = sc.h, p.head_dim = sc.p, p.state_size = sc.n, p.n_groups = sc.g;
  p.per_element_decay = sc.per_element;
  p.n_seqs = int64_t(sc.states.size());
  std::vector<float*> rows;
  for (auto& s : sc.states) rows.push_back(s.data());
  std::vector<float> y(size_t(p.n_tokens * sc.h * sc.p));
  ssm_scan(in.x.data(), in.dt.data(), in.a.data(), in.b.data(), in.c.data(), in.seq.data(), rows.data(), p, y.data(),
           pool);
  return y;
}

// docs/ir.md's rule, in double, one token at a time.
struct NaiveScan {
  ScanCase sc;
  std::vector<std::vector<double>> s;  // per sequence

  std::vector<double> run(const ScanInputs& in) {
    std::vector<double> y(in.seq.size() * size_t(sc.h * sc.p));
    for (size_t t = 0; t < in.seq.size(); ++t) {
      std::vector<double>& st = s[size_t(in.seq[t])];
      for (int64_t h = 0; h < sc.h; ++h) {
        const double v = in.dt[t * size_t(sc.h) + size_t(h)];
        const double d = v > 20.0 ? v : std::log1p(std::exp(v));
        const int64_t g = h / (sc.h / sc.g);
        for (int64_t p = 0; p < sc.p; ++p) {
          const double xd = in.x[(t * size_t(sc.h) + size_t(h)) * size_t(sc.p) + size_t(p)] * d;
          double sum = 0;
          for (int64_t i = 0; i < sc.n; ++i) {
            const double a = sc.per_element ? in.a[size_t(h * sc.n + i)] : in.a[size_t(h)];
            const size_t bi = (t * size_t(sc.g) + size_t(g)) * size_t(sc.n) + size_t(i);
            double& e = st[size_t((h * sc.p + p) * sc.n + i)];
            e = e * std::exp(d * a) + in.b[bi] * xd;
            sum += e * in.c[bi];
          }
          y[(t * size_t(sc.h) + size_t(h)) * size_t(sc.p) + size_t(p)] = sum;
        }
      }
    }
    return y;
  }
};

NaiveScan naive_from(const ScanCase& sc) {
  NaiveScan n{sc, {}};
  for (const auto& s : sc.states) n.s.emplace_back(s.begin(), s.end());
  return n;
}

ScanCase mamba1_case() {
  ScanCase sc;
  sc.h = 6, sc.p = 1, sc.n = 16, sc.g = 1, sc.per_element = true;
  return sc;
}

}  // namespace

TEST_CASE("ssm_scan: two interleaved sequences vs a naive double recurrence", "[cpu][ssm_scan]") {
  for (bool mamba1 : {false, true}) {
    INFO((mamba1 ? "Mamba-1 layout" : "Mamba-2 layout"));
    ThreadPool pool(3);
    ScanCase sc = mamba1 ? mamba1_case() : ScanCase{};
    sc.states = {test::random_floats(size_t(sc.state_floats()), 81, -0.5f, 0.5f),
                 std::vector<float>(size_t(sc.state_floats()))};
    NaiveScan naive = naive_from(sc);
    const auto in = scan_inputs(sc, {0, 1, 1, 0, 1, 0, 0, 1, 0}, 82);
    const auto y = run_scan(sc, in, pool);
    check_close(y, naive.run(in), 2e-6);
    for (size_t s = 0; s < 2; ++s) check_close(sc.states[s], naive.s[s], 2e-6);
  }
}

TEST_CASE("ssm_scan: chunked calls and any thread count give the bits of one call", "[cpu][ssm_scan]") {
  for (bool mamba1 : {false, true}) {
    INFO((mamba1 ? "Mamba-1 layout" : "Mamba-2 layout"));
    ScanCase base = mamba1 ? mamba1_case() : ScanCase{};
    base.states = {std::vector<float>(size_t(base.state_floats())),
                   test::random_floats(size_t(base.state_floats()), 91, -0.5f, 0.5f)};
    const std::vector<int32_t> seq = {1, 0, 0, 1, 1, 0, 1, 0, 0, 0, 1};
    const auto in = scan_inputs(base, seq, 92);
    ThreadPool pool1(1), pool3(3);
    ScanCase one = base;
    const auto whole = run_scan(one, in, pool1);
    ScanCase split = base;
    std::vector<float> parts;
    int64_t t0 = 0;
    const int64_t rows = base.h * base.p, ab = base.g * base.n;
    for (int64_t n : {int64_t{1}, int64_t{3}, int64_t(seq.size()) - 4}) {
      ScanInputs piece;
      piece.seq.assign(seq.begin() + t0, seq.begin() + t0 + n);
      piece.x.assign(in.x.begin() + t0 * rows, in.x.begin() + (t0 + n) * rows);
      piece.dt.assign(in.dt.begin() + t0 * base.h, in.dt.begin() + (t0 + n) * base.h);
      piece.a = in.a;
      piece.b.assign(in.b.begin() + t0 * ab, in.b.begin() + (t0 + n) * ab);
      piece.c.assign(in.c.begin() + t0 * ab, in.c.begin() + (t0 + n) * ab);
      const auto y = run_scan(split, piece, pool3);
      parts.insert(parts.end(), y.begin(), y.end());
      t0 += n;
    }
    CHECK(test::bitwise_equal(parts, whole));
    for (size_t s = 0; s < 2; ++s) CHECK(test::bitwise_equal(split.states[s], one.states[s]));
  }
}

TEST_CASE("ssm_scan: a sequence index outside the batch throws", "[cpu][ssm_scan]") {
  ThreadPool pool(1);
  ScanCase sc;
  sc.states = {std::vector<float>(size_t(sc.state_floats()))};
  CHECK_THROWS_AS(run_scan(sc, scan_inputs(sc, {0, 2}, 95), pool), Error);
}

TEST_CASE("ir: ssm_scan starts a new slot at zero and carries its state", "[cpu][ssm_scan][ir]") {
  test::IrRun r(R"(
state @ssm : plain<S x 4 x 3 x 20 x f32, device>
func @prefill(%x: tensor<T x 4 x 3 x f32, device>, %dt: tensor<T x 4 x f32, device>, %a: tensor<4 x 1 x f32, device>, %b: tensor<T x 2 x 20 x f32, device>, %c: tensor<T x 2 x 20 x f32, device>, %seq: tensor<T x i32, device>) {
  %y = ssm_scan(%x, %dt, %a, %b, %c, %seq) {state = @ssm} : tensor<T x 4 x 3 x f32, device>
  return(%y)
}
)");
  ScanCase sc;  // H = 4, P = 3, N = 20, G = 2
  sc.states.assign(3, std::vector<float>(size_t(sc.state_floats()), 0.0f));  // slots 0..2, all new
  NaiveScan naive = naive_from(sc);                                         // by slot
  const std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> steps = {
      {{1, 2}, {0, 1, 1, 0, 0}}, {{2, 1}, {1, 0, 1}}};
  uint32_t seed = 131;
  for (const auto& [slots, seq] : steps) {
    auto in = scan_inputs(sc, seq, seed += 10);
    in.a = scan_inputs(sc, seq, 7).a;  // A is a weight: the same in both steps
    ScanInputs by_slot = in;
    by_slot.seq.clear();
    for (int32_t s : seq) by_slot.seq.push_back(slots[size_t(s)]);
    const auto want = naive.run(by_slot);
    const int64_t t_n = int64_t(seq.size());
    const auto out = r.run(slots, {{"x", test::f32_tensor({t_n, 4, 3}, in.x)},
                                   {"dt", test::f32_tensor({t_n, 4}, in.dt)},
                                   {"a", test::f32_tensor({4, 1}, in.a)},
                                   {"b", test::f32_tensor({t_n, 2, 20}, in.b)},
                                   {"c", test::f32_tensor({t_n, 2, 20}, in.c)},
                                   {"seq", test::i32_tensor({t_n}, seq)}});
    check_close(f32_values(out.at(0)), want, 2e-6);
  }
  for (int32_t slot : {1, 2}) check_close(state_row(r.host, "ssm", slot), naive.s[size_t(slot)], 2e-6);
  CHECK(test::bitwise_equal(state_row(r.host, "ssm", 0), std::vector<float>(size_t(sc.state_floats()), 0.0f)));
}
