// The `sample` op (docs/ir.md "### sample") through the CPU interpreter:
// greedy rows are the argmax op's, top_k = 1 is the argmax at any
// temperature, a draw depends only on (seed, pos, logits), ~2000 draws
// follow the kept, renormalized softmax and never leave the kept set, and
// an independent reimplementation (a full sort of the vocabulary, the
// rules of docs/ir.md written out here) picks the same token on random
// rows. Plus the shape function's messages for bad operands.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "support/error.h"
#include "tests/cpu_kernels/interp_test_util.h"

using namespace vtc;
using namespace vtc::cpu;
using Catch::Matchers::Contains;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

struct Params {
  float temperature = 1.0f, top_k = 0.0f, top_p = 1.0f, min_p = 0.0f;
};

// One batch of rows for the op: logits [rows, V], per row its params, its
// 64-bit seed and its position.
struct Batch {
  int64_t vocab;
  std::vector<float> logits;
  std::vector<Params> params;
  std::vector<uint64_t> seeds;
  std::vector<int32_t> pos;
  void add(const std::vector<float>& row, Params p, uint64_t seed, int32_t at) {
    REQUIRE(int64_t(row.size()) == vocab);
    logits.insert(logits.end(), row.begin(), row.end());
    params.push_back(p), seeds.push_back(seed), pos.push_back(at);
  }
  int64_t rows() const { return int64_t(params.size()); }
};

struct Tokens {
  std::vector<int32_t> sampled, argmax;
};

// Runs `sample` and `argmax` on the same logits through the interpreter.
Tokens run_sample(const Batch& b, int64_t max_k) {
  test::IrRun run(fmt::format(R"(
func @prefill(%logits: tensor<T x {0} x f32, device>, %params: tensor<T x 4 x f32, device>, %seed: tensor<T x 2 x i32, device>, %pos: tensor<T x i32, device>) {{
  %tok = sample(%logits, %params, %seed, %pos) {{max_k = {1}}} : tensor<T x i32, device>
  %am = argmax(%logits) : tensor<T x i32, device>
  return(%tok, %am)
}}
)",
                              b.vocab, max_k));
  std::vector<float> params;
  std::vector<int32_t> seeds;
  for (int64_t r = 0; r < b.rows(); ++r) {
    const Params& p = b.params[size_t(r)];
    params.insert(params.end(), {p.temperature, p.top_k, p.top_p, p.min_p});
    seeds.push_back(int32_t(uint32_t(b.seeds[size_t(r)])));
    seeds.push_back(int32_t(uint32_t(b.seeds[size_t(r)] >> 32)));
  }
  const int64_t n = b.rows();
  const auto out = run.run({0}, {{"logits", test::f32_tensor({n, b.vocab}, b.logits)},
                                 {"params", test::f32_tensor({n, 4}, params)},
                                 {"seed", test::i32_tensor({n, 2}, seeds)},
                                 {"pos", test::i32_tensor({n}, b.pos)}});
  REQUIRE(out.size() == 2);
  Tokens t;
  t.sampled.assign(out[0].i32_data(), out[0].i32_data() + n);
  t.argmax.assign(out[1].i32_data(), out[1].i32_data() + n);
  return t;
}

// ---- the independent reimplementation ---------------------------------------

// argmax's rule: the first value above every earlier one, starting from
// -inf, so NaN never wins and a row with nothing above -inf gives 0.
int32_t ref_argmax(const std::vector<float>& row) {
  int32_t best = 0;
  float max = -kInf;
  for (size_t i = 0; i < row.size(); ++i)
    if (row[i] > max) max = row[i], best = int32_t(i);
  return best;
}

// The whole vocabulary sorted: NaN last, value descending; a stable sort
// keeps the lower index first among equal values.
std::vector<int32_t> ref_order(const std::vector<float>& row) {
  std::vector<int32_t> order(row.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const float va = row[size_t(a)], vb = row[size_t(b)];
    if (std::isnan(va) || std::isnan(vb)) return !std::isnan(va) && std::isnan(vb);
    return va > vb;
  });
  return order;
}

uint64_t ref_splitmix(uint64_t seed, int32_t pos) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * uint64_t(int64_t(pos) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// docs/ir.md's steps 2-4, f32 in the documented order.
int32_t ref_sample(const std::vector<float>& row, Params p, uint64_t seed, int32_t pos, int64_t max_k) {
  if (!(p.temperature > 0.0f)) return ref_argmax(row);
  int64_t k = max_k;
  if (p.top_k >= 1.0f && p.top_k < float(max_k)) k = int64_t(std::trunc(p.top_k));
  k = std::min<int64_t>(k, int64_t(row.size()));
  const std::vector<int32_t> order = ref_order(row);
  std::vector<float> e(size_t(k), 0.0f);
  float total = 0.0f;
  for (size_t j = 0; j < e.size(); ++j) {
    e[j] = std::exp((row[size_t(order[j])] - row[size_t(order[0])]) / p.temperature);
    total += e[j];
  }
  size_t keep = e.size();
  float mass = 0.0f;
  for (size_t j = 0; j < e.size(); ++j) {
    if (e[j] < p.min_p * e[0]) {
      keep = j;
      break;
    }
    mass += e[j] / total;
    if (mass >= p.top_p) {
      keep = j + 1;
      break;
    }
  }
  keep = std::max<size_t>(keep, 1);
  const float kept = std::accumulate(e.begin(), e.begin() + ptrdiff_t(keep), 0.0f);
  const float u = float(ref_splitmix(seed, pos) >> 40) / 16777216.0f * kept;
  float acc = 0.0f;
  for (size_t j = 0; j < keep; ++j)
    if (u < (acc += e[j])) return order[j];
  return order[keep - 1];
}

// ---- the distribution ----------------------------------------------------------

// In double: the kept candidates (by index) and their renormalized
// probabilities, for logits whose cuts are far from any rounding boundary.
std::vector<std::pair<int32_t, double>> kept_softmax(const std::vector<float>& row, Params p, int64_t max_k) {
  const std::vector<int32_t> order = ref_order(row);
  int64_t k = p.top_k >= 1.0f ? std::min<int64_t>(int64_t(p.top_k), max_k) : max_k;
  k = std::min<int64_t>(k, int64_t(row.size()));
  std::vector<double> e;
  const double v0 = row[size_t(order[0])];
  for (int64_t j = 0; j < k; ++j) e.push_back(std::exp((double(row[size_t(order[size_t(j)])]) - v0) / p.temperature));
  const double total = std::accumulate(e.begin(), e.end(), 0.0);
  std::vector<std::pair<int32_t, double>> kept;
  double mass = 0;
  for (size_t j = 0; j < e.size(); ++j) {
    if (e[j] < p.min_p * e[0]) break;
    kept.push_back({order[j], e[j]});
    if ((mass += e[j] / total) >= p.top_p) break;
  }
  double sum = 0;
  for (const auto& [i, w] : kept) sum += w;
  for (auto& [i, w] : kept) w /= sum;
  return kept;
}

// 2000 draws of one row at positions 0..1999: every token is kept, and
// each kept token's frequency is within 5 standard errors of its
// probability. Returns the kept set's size.
size_t check_distribution(const std::vector<float>& row, Params p, int64_t max_k) {
  constexpr int32_t kDraws = 2000;
  Batch b{int64_t(row.size()), {}, {}, {}, {}};
  for (int32_t i = 0; i < kDraws; ++i) b.add(row, p, 0x5eedULL, i);
  const Tokens t = run_sample(b, max_k);
  const auto kept = kept_softmax(row, p, max_k);
  std::vector<int> count(row.size(), 0);
  for (int32_t tok : t.sampled) {
    REQUIRE(tok >= 0);
    REQUIRE(tok < int32_t(row.size()));
    ++count[size_t(tok)];
  }
  std::set<int32_t> in_kept;
  for (const auto& [i, q] : kept) {
    in_kept.insert(i);
    const double f = double(count[size_t(i)]) / kDraws, se = std::sqrt(q * (1 - q) / kDraws);
    INFO("token " << i << ": frequency " << f << ", probability " << q);
    CHECK(std::abs(f - q) <= 5 * se + 1e-9);
  }
  for (size_t i = 0; i < row.size(); ++i) {
    INFO("token " << i << " is not kept");
    if (!in_kept.count(int32_t(i))) CHECK(count[i] == 0);
  }
  return kept.size();
}

std::vector<float> random_row(std::mt19937& rng, int64_t n, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> row(static_cast<size_t>(n));
  for (auto& v : row) v = dist(rng);
  return row;
}

}  // namespace

TEST_CASE("sample: greedy rows are the argmax op's, ties and NaNs included", "[cpu][sample]") {
  Batch b{6, {}, {}, {}, {}};
  const std::vector<std::vector<float>> rows = {
      {1, 3, 3, 2, -1, 0},                      // tie: the first maximum
      {kNaN, 2, kNaN, 2, 1, kNaN},              // NaN never wins
      {kNaN, kNaN, kNaN, kNaN, kNaN, kNaN},     // all NaN: 0
      {kNaN, -kInf, -kInf, -kInf, -kInf, kNaN},  // nothing above -inf: 0
      {-kInf, -kInf, -kInf, -kInf, -kInf, -kInf},
      {-5, -kInf, kInf, kInf, kNaN, 7},
      {0.0f, -0.0f, 0.0f, -1, -2, -3},  // -0 ties +0: the first
  };
  std::mt19937 rng(7);
  int32_t at = 0;
  for (float temperature : {0.0f, -1.0f, -0.0f, kNaN})
    for (const auto& row : rows) b.add(row, {temperature, 3, 0.5f, 0.1f}, rng(), at++);
  for (int i = 0; i < 20; ++i) b.add(random_row(rng, 6, 1.0f), {0.0f, 0, 1, 0}, rng(), at++);
  const Tokens t = run_sample(b, 4);
  CHECK(t.sampled == t.argmax);
  CHECK(std::vector<int32_t>(t.sampled.begin(), t.sampled.begin() + 7) == std::vector<int32_t>{1, 1, 0, 0, 0, 2, 0});
}

TEST_CASE("sample: top_k = 1 is the argmax at any temperature", "[cpu][sample]") {
  std::mt19937 rng(11);
  Batch b{50, {}, {}, {}, {}};
  int32_t at = 0;
  for (float temperature : {1e-3f, 0.5f, 1.0f, 7.0f, 1e30f})
    for (float top_k : {1.0f, 1.9f})
      for (int i = 0; i < 10; ++i) {
        std::vector<float> row = random_row(rng, 50, 2.0f);
        for (auto& v : row) v = std::round(v);  // many ties
        b.add(row, {temperature, top_k, float(rng() % 100) / 100.0f, float(rng() % 10) / 20.0f}, rng(), at++);
      }
  const Tokens t = run_sample(b, 64);
  CHECK(t.sampled == t.argmax);
  // max_k = 1 bounds an unlimited top_k the same way.
  for (auto& p : b.params) p.top_k = 0.0f;
  const Tokens one = run_sample(b, 1);
  CHECK(one.sampled == one.argmax);
}

TEST_CASE("sample: a draw depends only on (seed, pos, logits)", "[cpu][sample]") {
  const std::vector<float> flat(32, 0.0f);  // 32 equally likely tokens
  const Params p{1.0f, 0.0f, 1.0f, 0.0f};
  Batch b{32, {}, {}, {}, {}};
  for (int32_t i = 0; i < 400; ++i) b.add(flat, p, 42, i);
  const Tokens first = run_sample(b, 32);
  // The same rows again, and in another batch order: the same tokens.
  CHECK(run_sample(b, 32).sampled == first.sampled);
  Batch reversed{32, {}, {}, {}, {}};
  for (int32_t i = 399; i >= 0; --i) reversed.add(flat, p, 42, i);
  std::vector<int32_t> back = run_sample(reversed, 32).sampled;
  std::reverse(back.begin(), back.end());
  CHECK(back == first.sampled);
  // Another position draws anew: consecutive positions mostly differ and
  // reach most tokens.
  int changes = 0;
  for (size_t i = 1; i < first.sampled.size(); ++i) changes += first.sampled[i] != first.sampled[i - 1];
  CHECK(changes > 350);
  CHECK(std::set<int32_t>(first.sampled.begin(), first.sampled.end()).size() >= 30);
  // Another seed (here only its high word) draws another sequence.
  Batch other{32, {}, {}, {}, {}};
  for (int32_t i = 0; i < 400; ++i) other.add(flat, p, 42 | (1ULL << 32), i);
  const Tokens t = run_sample(other, 32);
  int same = 0;
  for (size_t i = 0; i < t.sampled.size(); ++i) same += t.sampled[i] == first.sampled[i];
  CHECK(same < 40);
}

TEST_CASE("sample: 2000 draws follow the kept, renormalized softmax", "[cpu][sample]") {
  // Logits 0, -0.5, -1, ... at scattered indices; the cuts below fall
  // between candidates, far from a rounding boundary.
  std::vector<float> row(24, -20.0f);
  const std::vector<int32_t> at = {17, 3, 9, 21, 0, 12, 5, 14};
  for (size_t j = 0; j < at.size(); ++j) row[size_t(at[j])] = -0.5f * float(j);
  SECTION("top_k cuts") { CHECK(check_distribution(row, {1.0f, 3.0f, 1.0f, 0.0f}, 64) == 3); }
  SECTION("max_k cuts an unlimited top_k") { CHECK(check_distribution(row, {1.0f, 0.0f, 1.0f, 0.0f}, 5) == 5); }
  SECTION("min_p cuts") { CHECK(check_distribution(row, {1.0f, 0.0f, 1.0f, 0.3f}, 64) == 3); }
  SECTION("top_p cuts") { CHECK(check_distribution(row, {1.0f, 0.0f, 0.85f, 0.0f}, 64) == 4); }
  SECTION("a sharper temperature, all three filters set") {
    CHECK(check_distribution(row, {0.5f, 6.0f, 0.8f, 0.1f}, 64) == 2);
  }
}

TEST_CASE("sample: an independent reimplementation picks the same tokens", "[cpu][sample]") {
  std::mt19937 rng(2024);
  for (int64_t max_k : {1, 7, 40, 256}) {
    const int64_t vocab = max_k == 256 ? 100 : 300;  // 256 > V: k stops at V
    Batch b{vocab, {}, {}, {}, {}};
    for (int i = 0; i < 300; ++i) {
      std::vector<float> row = random_row(rng, vocab, 0.5f + float(rng() % 40) / 10.0f);
      if (i % 5 == 0)
        for (auto& v : row) v = std::round(v);  // ties
      if (i % 7 == 0) row[rng() % size_t(vocab)] = -kInf;
      if (i % 11 == 0) row[rng() % size_t(vocab)] = kNaN;
      Params p;
      p.temperature = i % 9 == 0 ? -1.0f : 0.05f + float(rng() % 300) / 100.0f;
      const int top_k = int(rng() % 80) - 5;
      p.top_k = float(top_k) + (i % 2 ? 0.5f : 0.0f);
      p.top_p = float(rng() % 120) / 100.0f;
      p.min_p = i % 3 == 0 ? 0.0f : float(rng() % 50) / 100.0f;
      const uint64_t seed = uint64_t(rng()) << 32 | rng();
      b.add(row, p, seed, int32_t(rng() % 100000) - 10);
    }
    const Tokens t = run_sample(b, max_k);
    for (int64_t r = 0; r < b.rows(); ++r) {
      const std::vector<float> row(b.logits.begin() + r * vocab, b.logits.begin() + (r + 1) * vocab);
      const Params& p = b.params[size_t(r)];
      INFO("max_k " << max_k << " row " << r << ": temperature " << p.temperature << ", top_k " << p.top_k
                    << ", top_p " << p.top_p << ", min_p " << p.min_p);
      CHECK(t.sampled[size_t(r)] == ref_sample(row, p, b.seeds[size_t(r)], b.pos[size_t(r)], max_k));
    }
  }
}

namespace {

const char* kSampleFn = R"(func @decode(%logits: tensor<S x 50 x f32, device>, %params: tensor<S x 4 x f32, device>, %seed: tensor<S x 2 x i32, device>, %pos: tensor<S x i32, device>) {
  %tok = sample(%logits, %params, %seed, %pos) {max_k = 40} : tensor<S x i32, device>
  return(%tok)
}
)";

std::string with(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("sample: the verifier names the bad operand", "[cpu][sample][ir]") {
  CHECK_NOTHROW(test::parse_verified(kSampleFn));
  const struct {
    const char* from;
    const char* to;
    const char* message;
  } cases[] = {
      {"%logits: tensor<S x 50 x f32", "%logits: tensor<S x 50 x f16",
       "[type] logits (operand 0) must be [S, V] f32, got tensor<S x 50 x f16, device>"},
      {"%logits: tensor<S x 50 x f32", "%logits: tensor<S x 2 x 50 x f32",
       "[type] logits (operand 0) must be [S, V] f32, got tensor<S x 2 x 50 x f32, device>"},
      {"%logits: tensor<S x 50 x f32", "%logits: tensor<S x 0 x f32",
       "[type] logits (operand 0) must have at least one column"},
      {"%params: tensor<S x 4 x f32", "%params: tensor<S x 3 x f32",
       "[type] params (operand 1) must be [S, 4] f32, got tensor<S x 3 x f32, device>"},
      {"%params: tensor<S x 4 x f32", "%params: tensor<T x 4 x f32",
       "[type] params (operand 1) must be [S, 4] f32, got tensor<T x 4 x f32, device> (rows T != S)"},
      {"%params: tensor<S x 4 x f32", "%params: tensor<S x 4 x i32",
       "[type] params (operand 1) must be [S, 4] f32, got tensor<S x 4 x i32, device>"},
      {"%seed: tensor<S x 2 x i32", "%seed: tensor<S x 2 x i64",
       "[type] seed (operand 2) must be [S, 2] i32, got tensor<S x 2 x i64, device>"},
      {"%seed: tensor<S x 2 x i32", "%seed: tensor<S x 1 x i32",
       "[type] seed (operand 2) must be [S, 2] i32, got tensor<S x 1 x i32, device>"},
      {"%pos: tensor<S x i32", "%pos: tensor<S x 1 x i32",
       "[type] pos (operand 3) must be [S] i32, got tensor<S x 1 x i32, device>"},
      {"%pos: tensor<S x i32", "%pos: tensor<S+1 x i32",
       "[type] pos (operand 3) must be [S] i32, got tensor<S+1 x i32, device> (rows S+1 != S)"},
      {"{max_k = 40}", "{max_k = 0}", "[type] max_k = 0 must be in [1, 256]"},
      {"{max_k = 40}", "{max_k = 257}", "[type] max_k = 257 must be in [1, 256]"},
      {"{max_k = 40}", "", "[attr]"},
      {": tensor<S x i32, device>\n  return", ": tensor<S x i64, device>\n  return",
       "[type] result 0 is tensor<S x i64, device> but the op produces tensor<S x i32, device>"},
  };
  for (const auto& c : cases) {
    INFO(c.to);
    CHECK_THROWS_WITH(test::parse_verified(with(kSampleFn, c.from, c.to)), Contains(c.message));
  }
  const std::string three = with(kSampleFn, "sample(%logits, %params, %seed, %pos)", "sample(%logits, %params, %seed)");
  CHECK_THROWS_WITH(test::parse_verified(three), Contains("[arity] expects 4 operands, got 3"));
}

TEST_CASE("sample: Builder::sample infers [S] i32 and rejects a bad max_k", "[cpu][sample][ir]") {
  ir::Module m;
  ir::Builder b(m, "decode");
  const ir::Dim S = ir::Dim::symbol("S");
  auto t = [](ir::Shape s, ir::ElemType e) { return ir::TensorType{e, std::move(s), ir::Placement::Device}; };
  ir::Value logits = b.arg("logits", t({S, 50}, ir::ElemType::F32));
  ir::Value params = b.arg("params", t({S, 4}, ir::ElemType::F32));
  ir::Value seed = b.arg("seed", t({S, 2}, ir::ElemType::I32));
  ir::Value pos = b.arg("pos", t({S}, ir::ElemType::I32));
  CHECK(b.sample(logits, params, seed, pos, 40).type().str() == "tensor<S x i32, device>");
  CHECK_THROWS_WITH(b.sample(logits, params, seed, pos, 300), Contains("max_k = 300 must be in [1, 256]"));
  CHECK_THROWS_WITH(b.sample(logits, seed, params, pos, 40), Contains("params (operand 1) must be [S, 4] f32"));
}
