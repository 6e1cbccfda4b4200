// The QSA lightning indexer (runtime/cpu/kernels/indexer.h) and attention's
// selected-positions mask: the heap-select replica against libstdc++'s
// std::partial_sort, indexer_select through the interpreter against a naive
// reference written from docs/ir.md, and sparse attention against dense
// attention and a naive softmax.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "frontends/gguf/dequant.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "runtime/cpu/interpreter.h"
#include "runtime/cpu/kernels/indexer.h"
#include "tests/cpu_kernels/interp_test_util.h"
#include "tests/cpu_kernels/kernel_test_util.h"

using namespace vtc;
using namespace vtc::cpu;
using test::f32_values;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// std::partial_sort with the comparator of the reference's CPU top_k.
std::vector<int32_t> std_top(const std::vector<float>& value, int64_t width) {
  std::vector<int32_t> idx(value.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + width, idx.end(),
                    [&](int32_t a, int32_t b) { return value[size_t(a)] > value[size_t(b)]; });
  return idx;
}

std::vector<int32_t> sorted_prefix(const std::vector<int32_t>& v, int64_t n) {
  std::vector<int32_t> s(v.begin(), v.begin() + n);
  std::sort(s.begin(), s.end());
  return s;
}

// n values from `levels` distinct finite levels (heavy ties), some +-inf.
std::vector<float> tied_values(int64_t n, int levels, std::mt19937& rng) {
  std::uniform_int_distribution<int> pick(0, levels + 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) {
    const int l = pick(rng);
    x = l == levels ? kInf : l == levels + 1 ? -kInf : 0.25f * float(l);
  }
  return v;
}

// --- indexer_select through the interpreter --------------------------------

constexpr int64_t kHeads = 2, kDim = 16, kRatio = 4, kTopK = 8, kWidth = kTopK + kRatio - 1;

using test::f32_tensor;
using test::i32_tensor;

std::vector<int32_t> i32_values(const HostTensor& t) { return {t.i32_data(), t.i32_data() + t.numel()}; }

using test::IrRun;

std::string indexer_module(const std::string& elem, const std::string& attrs) {
  return fmt::format(R"(
state @idx : paged<1 x P x 8 x {1} x {0}, device>
func @prefill(%q: tensor<T x {2} x {1} x f32, device>, %k: tensor<T x {1} x f32, device>, %w: tensor<{1} x f32, device>, %pos: tensor<T x i32, device>, %seq: tensor<T x i32, device>) {{
  %s = indexer_select(%q, %k, %w, %pos, %seq) {{state = @idx, ratio = {3}, top_k = {4}, {5}}} : tensor<T x {6} x i32, device>
  return(%s)
}}
)",
                     elem, kDim, kHeads, kRatio, kTopK, attrs, kWidth);
}

// One step's inputs: token t is at position pos[t] of sequence seq[t].
struct Step {
  std::vector<int32_t> slots, pos, seq;
  std::vector<float> q, k;  // [T][H][D], [T][D]
};

Step make_step(std::vector<int32_t> slots, std::vector<int32_t> pos, std::vector<int32_t> seq, uint32_t seed) {
  Step s{std::move(slots), std::move(pos), std::move(seq), {}, {}};
  s.q = test::random_floats(s.pos.size() * kHeads * kDim, seed);
  s.k = test::random_floats(s.pos.size() * kDim, seed + 1, -2.0f, 2.0f);
  return s;
}

// indexer_select written from docs/ir.md in double (scores rounded to float
// once), selecting with std::partial_sort itself.
struct NaiveIndexer {
  bool f16 = false;
  bool neox = true;  // else normal-mode rope (pairs 2i, 2i+1)
  double eps = 1e-6;
  std::vector<float> w;
  std::map<int32_t, std::map<int32_t, std::vector<float>>> cache = {};  // slot -> position -> stored key
  // Closest distinct pair of block scores and smallest |head dot| seen: the
  // comparison holds only while both are far above the kernel's f32 error.
  double min_gap = 1e300, min_dot = 1e300;

  std::vector<double> block_key(int32_t slot, int64_t b) const {
    std::vector<double> x(size_t(kDim), 0.0);
    for (int64_t i = 0; i < kRatio; ++i)
      for (int64_t d = 0; d < kDim; ++d) x[size_t(d)] += cache.at(slot).at(int32_t(b * kRatio + i))[size_t(d)];
    double ss = 0;
    for (auto& v : x) v /= double(kRatio), ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / double(kDim) + eps);
    for (int64_t d = 0; d < kDim; ++d) x[size_t(d)] *= inv * w[size_t(d)];
    const double p = double(b * kRatio);
    for (int64_t i = 0; i < kDim / 2; ++i) {
      const double theta = p * std::pow(10000.0, -2.0 * double(i) / double(kDim));
      const size_t a = size_t(neox ? i : 2 * i), c = size_t(neox ? i + kDim / 2 : 2 * i + 1);
      const double x0 = x[a], x1 = x[c];
      x[a] = x0 * std::cos(theta) - x1 * std::sin(theta);
      x[c] = x0 * std::sin(theta) + x1 * std::cos(theta);
    }
    return x;
  }

  float score(const float* q, const std::vector<double>& key) {
    double sum = 0;
    for (int64_t h = 0; h < kHeads; ++h) {
      double d = 0;
      for (int64_t i = 0; i < kDim; ++i) d += double(q[h * kDim + i]) * key[size_t(i)];
      min_dot = std::min(min_dot, std::abs(d));
      sum += std::max(d, 0.0);
    }
    return float(sum);
  }

  std::vector<int32_t> select(const float* q, int32_t slot, int32_t p) {
    const int64_t n_full = (p + 1) / kRatio, n = std::max<int64_t>(kWidth, p + 1);
    std::vector<float> scores;
    for (int64_t b = 0; b < n_full; ++b) scores.push_back(score(q, block_key(slot, b)));
    std::vector<float> gaps = scores;
    std::sort(gaps.begin(), gaps.end());
    for (size_t i = 1; i < gaps.size(); ++i)
      if (gaps[i] != gaps[i - 1]) min_gap = std::min(min_gap, double(gaps[i]) - gaps[i - 1]);
    std::vector<float> value(static_cast<size_t>(n));
    for (int64_t c = 0; c < n; ++c)
      value[size_t(c)] = c < n_full * kRatio ? scores[size_t(c / kRatio)] : c <= p ? kInf : -kInf;
    const auto idx = std_top(value, kWidth);
    std::vector<int32_t> row;
    for (int64_t i = 0; i < kWidth; ++i)
      if (value[size_t(idx[size_t(i)])] > -kInf) row.push_back(idx[size_t(i)]);
    std::sort(row.begin(), row.end());
    row.resize(size_t(kWidth), -1);
    return row;
  }

  // Stores the step's keys, then selects for each token.
  std::vector<int32_t> run(const Step& s) {
    for (size_t t = 0; t < s.pos.size(); ++t) {
      std::vector<float> key(s.k.begin() + long(t * kDim), s.k.begin() + long((t + 1) * kDim));
      if (f16)
        for (auto& v : key) v = fp16_to_fp32(fp32_to_fp16(v));
      cache[s.slots[size_t(s.seq[t])]][s.pos[t]] = key;
    }
    std::vector<int32_t> out;
    for (size_t t = 0; t < s.pos.size(); ++t) {
      const auto row = select(s.q.data() + t * kHeads * kDim, s.slots[size_t(s.seq[t])], s.pos[t]);
      out.insert(out.end(), row.begin(), row.end());
    }
    return out;
  }
};

std::vector<int32_t> run_indexer(IrRun& r, const Step& s, const std::vector<float>& w) {
  std::map<int32_t, int64_t> need;
  for (size_t t = 0; t < s.pos.size(); ++t) {
    int64_t& n = need[s.slots[size_t(s.seq[t])]];
    n = std::max<int64_t>(n, s.pos[t] + 1);
  }
  r.reserve(need);
  const int64_t n = int64_t(s.pos.size());
  const auto out = r.run(s.slots, {{"q", f32_tensor({n, kHeads, kDim}, s.q)},
                                   {"k", f32_tensor({n, kDim}, s.k)},
                                   {"w", f32_tensor({kDim}, w)},
                                   {"pos", i32_tensor({n}, s.pos)},
                                   {"seq", i32_tensor({n}, s.seq)}});
  return i32_values(out.at(0));
}

// Positions 0..n-1 of one sequence (index 0).
Step one_sequence(int32_t slot, int32_t from, int32_t to, uint32_t seed) {
  std::vector<int32_t> pos(size_t(to - from));
  std::iota(pos.begin(), pos.end(), from);
  return make_step({slot}, pos, std::vector<int32_t>(pos.size(), 0), seed);
}

// Two sequences of n0 and n1 tokens from position 0, interleaved at random.
Step two_sequences(int32_t n0, int32_t n1, uint32_t seed) {
  std::vector<int32_t> seq(size_t(n0), 0);
  seq.resize(size_t(n0 + n1), 1);
  std::shuffle(seq.begin(), seq.end(), std::mt19937(seed));
  std::vector<int32_t> pos, next = {0, 0};
  for (int32_t s : seq) pos.push_back(next[size_t(s)]++);
  return make_step({2, 0}, pos, seq, seed);
}

struct IndexerCase {
  const char* name;
  const char* attrs;  // eps and rope
  bool neox;
  double eps;
};
const IndexerCase kIndexerCases[] = {
    {"neox", "eps = 1e-06, mode = neox, n_rot = 16, base = 10000.0", true, 1e-6},
    {"normal", "eps = 1e-06, mode = normal, n_rot = 16, base = 10000.0", false, 1e-6},
    // Equal components make multi rope neox, bit for bit.
    {"multi", "eps = 1e-06, mode = multi, n_rot = 16, base = 10000.0, sections = [4, 2, 2, 0]", true, 1e-6},
    // rms_norm hides the pooling's 1/r unless eps is as large as the keys' mean square.
    {"large eps", "eps = 0.25, mode = neox, n_rot = 16, base = 10000.0", true, 0.25},
};

void check_rows(const std::vector<int32_t>& got, const std::vector<int32_t>& want, const NaiveIndexer& naive) {
  REQUIRE(got.size() == want.size());
  for (size_t t = 0; t < got.size() / kWidth; ++t) {
    INFO("token " << t);
    CHECK(std::vector<int32_t>(got.begin() + long(t * kWidth), got.begin() + long((t + 1) * kWidth)) ==
          std::vector<int32_t>(want.begin() + long(t * kWidth), want.begin() + long((t + 1) * kWidth)));
  }
  // Far from the f32 error of the kernel's scores, so no flipped order.
  CHECK(naive.min_gap > 1e-5);
  CHECK(naive.min_dot > 1e-5);
}

// --- attention with selected positions -------------------------------------

struct Cache {
  std::vector<uint8_t> k, v;
  std::vector<float> kf, vf;  // the stored values, as floats
};

Cache make_cache(GgmlType t, int64_t n_kv, int64_t n_head_kv, int64_t d, uint32_t seed) {
  Cache c;
  c.kf = test::random_floats(size_t(n_kv * n_head_kv * d), seed, -2.0f, 2.0f);
  c.vf = test::random_floats(size_t(n_kv * n_head_kv * d), seed + 1);
  for (auto* f : {&c.kf, &c.vf}) {
    auto& out = f == &c.kf ? c.k : c.v;
    out.resize(f->size() * (t == GgmlType::F32 ? 4 : 2));
    for (size_t i = 0; i < f->size(); ++i) {
      if (t == GgmlType::F32) {
        std::memcpy(out.data() + 4 * i, &(*f)[i], 4);
        continue;
      }
      const uint16_t h = fp32_to_fp16((*f)[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
      (*f)[i] = fp16_to_fp32(h);
    }
  }
  return c;
}

AttentionParams sparse_params(GgmlType kv_type) {
  AttentionParams p;
  p.n_tokens = 6;
  p.n_head = 4;
  p.n_head_kv = 2;
  p.head_dim = 32;
  p.n_kv = 40;
  p.k_type = p.v_type = kv_type;
  p.depth_kernel = false;  // the reference's one-row order, pinned
  p.scale = 1.0f / std::sqrt(32.0f);
  return p;
}

std::vector<float> run_attention(const float* q, const Cache& c, const std::vector<int32_t>& qpos,
                                 const AttentionParams& p, ThreadPool& pool) {
  test::Guarded out(size_t(p.n_tokens * p.n_head * p.head_dim));
  attention(q, c.k.data(), c.v.data(), qpos.data(), nullptr, p, out.data(), pool);
  REQUIRE(out.intact());
  return out.values();
}

// Softmax attention over the keys at positions listed in the query's row
// (and at or before the query's position), in double.
std::vector<double> naive_sparse(const std::vector<float>& q, const Cache& c, const std::vector<int32_t>& qpos,
                                 const std::vector<int32_t>& selected, int64_t width, const AttentionParams& p) {
  const int64_t d = p.head_dim, group = p.n_head / p.n_head_kv;
  std::vector<double> out(size_t(p.n_tokens * p.n_head * d), 0.0);
  for (int64_t t = 0; t < p.n_tokens; ++t) {
    std::vector<int64_t> keys;
    for (int64_t i = 0; i < width; ++i) {
      const int32_t j = selected[size_t(t * width + i)];
      if (j >= 0 && j <= qpos[size_t(t)]) keys.push_back(j);
    }
    for (int64_t h = 0; h < p.n_head; ++h) {
      const int64_t hk = h / group;
      std::vector<double> s;
      for (int64_t j : keys) {
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) dot += double(q[size_t((t * p.n_head + h) * d + i)]) * c.kf[size_t((j * p.n_head_kv + hk) * d + i)];
        s.push_back(dot * p.scale);
      }
      if (s.empty()) continue;
      const double m = *std::max_element(s.begin(), s.end());
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - m));
      for (size_t k = 0; k < keys.size(); ++k)
        for (int64_t i = 0; i < d; ++i)
          out[size_t((t * p.n_head + h) * d + i)] += s[k] / sum * c.vf[size_t((keys[k] * p.n_head_kv + hk) * d + i)];
    }
  }
  return out;
}

}  // namespace

TEST_CASE("heap_select_top: libstdc++'s partial_sort selection on tied values", "[indexer]") {
  std::mt19937 rng(7);
  const auto comp = [](const std::vector<float>& v) {
    return [&v](int32_t a, int32_t b) { return v[size_t(a)] > v[size_t(b)]; };
  };
  int cases = 0;
  for (int64_t width : {1, 2, 3, 4, 7, 11, 16, 35})
    for (int64_t n : {width, width + 1, width + 5, 3 * width + 2, int64_t(200)})
      for (int levels : {1, 2, 3, 6})
        for (int rep = 0; rep < 25; ++rep, ++cases) {
          const auto value = tied_values(n, levels, rng);
          std::vector<int32_t> idx(static_cast<size_t>(n));
          std::iota(idx.begin(), idx.end(), 0);
          heap_select_top(value.data(), idx.data(), width, n);
          const auto want = std_top(value, width);
          INFO(fmt::format("width {} n {} levels {} rep {}", width, n, levels, rep));
          REQUIRE(sorted_prefix(idx, width) == sorted_prefix(want, width));
          // The very same heap: finishing it as partial_sort does (sort_heap)
          // gives partial_sort's whole permutation.
          std::sort_heap(idx.begin(), idx.begin() + width, comp(value));
          REQUIRE(idx == want);
        }
  CHECK(cases == 8 * 5 * 4 * 25);
}

TEST_CASE("indexer_select: one prefill vs the naive reference, f32 and f16 caches", "[indexer]") {
  for (Isa isa : test::available_isas()) {
    test::IsaScope scope(isa);
    for (const IndexerCase& ic : kIndexerCases) {
      for (const char* elem : {"f32", "f16"}) {
        INFO(fmt::format("{} {} cache {}", isa_name(isa), ic.name, elem));
        IrRun r(indexer_module(elem, ic.attrs));
        NaiveIndexer naive{.f16 = std::string(elem) == "f16", .neox = ic.neox, .eps = ic.eps,
                           .w = test::random_floats(kDim, 41, 0.5f, 1.5f)};
        // Positions 0..43: p < W, then every tail length 0..3, 11 blocks.
        const Step s = one_sequence(1, 0, 44, 42);
        const auto got = run_indexer(r, s, naive.w);
        check_rows(got, naive.run(s), naive);
        // While p < W every visible position is selected.
        for (int32_t p = 0; p < kWidth; ++p)
          for (int32_t i = 0; i < kWidth; ++i) CHECK(got[size_t(p * kWidth + i)] == (i <= p ? i : -1));
      }
    }
  }
}

TEST_CASE("indexer_select: two interleaved sequences select from their own positions", "[indexer]") {
  for (const char* elem : {"f32", "f16"}) {
    INFO(elem);
    IrRun r(indexer_module(elem, kIndexerCases[0].attrs));
    NaiveIndexer naive{.f16 = std::string(elem) == "f16", .w = test::random_floats(kDim, 51, 0.5f, 1.5f)};
    const Step s = two_sequences(37, 30, 52);
    check_rows(run_indexer(r, s, naive.w), naive.run(s), naive);
    // A decode step of both sequences, the later one first.
    const Step d = make_step({0, 2}, {30, 37}, {0, 1}, 53);
    check_rows(run_indexer(r, d, naive.w), naive.run(d), naive);
  }
}

TEST_CASE("indexer_select: chunked calls give the result of one call", "[indexer]") {
  const auto w = test::random_floats(kDim, 61, 0.5f, 1.5f);
  const Step all = one_sequence(0, 0, 41, 62);
  IrRun one(indexer_module("f16", kIndexerCases[0].attrs));
  const auto want = run_indexer(one, all, w);
  for (int32_t split : {1, 11, 12, 26, 40}) {
    INFO("split at " << split);
    IrRun chunked(indexer_module("f16", kIndexerCases[0].attrs));
    auto part = [&](int32_t from, int32_t to) {
      Step s = one_sequence(0, from, to, 0);
      s.q.assign(all.q.begin() + from * kHeads * kDim, all.q.begin() + to * kHeads * kDim);
      s.k.assign(all.k.begin() + from * kDim, all.k.begin() + to * kDim);
      return run_indexer(chunked, s, w);
    };
    auto got = part(0, split);
    const auto rest = part(split, 41);
    got.insert(got.end(), rest.begin(), rest.end());
    CHECK(got == want);
  }
}

TEST_CASE("indexer_select: bad inputs throw", "[indexer]") {
  IrRun r(indexer_module("f32", kIndexerCases[0].attrs));
  const auto w = test::random_floats(kDim, 71, 0.5f, 1.5f);
  auto run = [&](const Step& s) {
    const int64_t n = int64_t(s.pos.size());
    return r.run(s.slots, {{"q", f32_tensor({n, kHeads, kDim}, s.q)}, {"k", f32_tensor({n, kDim}, s.k)},
                           {"w", f32_tensor({kDim}, w)}, {"pos", i32_tensor({n}, s.pos)},
                           {"seq", i32_tensor({n}, s.seq)}});
  };
  r.reserve({{0, 8}});
  Step s = one_sequence(0, 0, 4, 72);
  s.seq[2] = 1;  // the step has one sequence
  CHECK_THROWS_WITH(run(s), Catch::Matchers::Contains("sequence index 1"));
  CHECK_THROWS_WITH(run(one_sequence(0, 8, 9, 73)), Catch::Matchers::Contains("no KV page for position 8"));
  CHECK_THROWS_WITH(run(one_sequence(0, 64, 65, 74)), Catch::Matchers::Contains("outside the context of 64"));
}

TEST_CASE("attention: selected rows listing every visible key give the dense bits", "[indexer][attention]") {
  ThreadPool pool(3);
  for (GgmlType kvt : {GgmlType::F32, GgmlType::F16}) {
    AttentionParams p = sparse_params(kvt);
    const Cache c = make_cache(kvt, p.n_kv, p.n_head_kv, p.head_dim, 81);
    const auto q = test::random_floats(size_t(p.n_tokens * p.n_head * p.head_dim), 82, -2.0f, 2.0f);
    const std::vector<int32_t> qpos = {34, 35, 36, 37, 38, 39};
    const auto dense = run_attention(q.data(), c, qpos, p, pool);
    // Rows in any order, with -1 padding mixed in and future positions
    // (still masked causally).
    const int64_t width = 48;
    std::vector<int32_t> selected;
    std::mt19937 rng(83);
    for (size_t t = 0; t < qpos.size(); ++t) {
      std::vector<int32_t> row(size_t(width), -1);
      std::iota(row.begin(), row.begin() + p.n_kv, 0);
      std::shuffle(row.begin(), row.end(), rng);
      selected.insert(selected.end(), row.begin(), row.end());
    }
    p.selected = selected.data();
    p.selected_width = width;
    INFO(ggml_type_name(kvt));
    CHECK(test::bitwise_equal(run_attention(q.data(), c, qpos, p, pool), dense));
  }
}

TEST_CASE("attention: a subset of keys vs a naive softmax, and -1 entries select nothing", "[indexer][attention]") {
  ThreadPool pool(2);
  for (GgmlType kvt : {GgmlType::F32, GgmlType::F16}) {
    AttentionParams p = sparse_params(kvt);
    const Cache c = make_cache(kvt, p.n_kv, p.n_head_kv, p.head_dim, 91);
    const auto q = test::random_floats(size_t(p.n_tokens * p.n_head * p.head_dim), 92, -2.0f, 2.0f);
    const std::vector<int32_t> qpos = {3, 20, 36, 37, 38, 39};
    const int64_t width = 12;
    std::vector<int32_t> selected;
    std::mt19937 rng(93);
    for (size_t t = 0; t < qpos.size(); ++t) {
      std::vector<int32_t> all(size_t(p.n_kv));
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), rng);
      all.resize(size_t(width));
      for (size_t i = 0; i < all.size(); i += 3) all[i] = -1;
      if (t == 1) std::fill(all.begin(), all.end(), -1);  // selects nothing: zeros
      selected.insert(selected.end(), all.begin(), all.end());
    }
    p.selected = selected.data();
    p.selected_width = width;
    const auto got = run_attention(q.data(), c, qpos, p, pool);
    INFO(ggml_type_name(kvt));
    CHECK(test::nmse(got, naive_sparse(q, c, qpos, selected, width, p)) < (kvt == GgmlType::F32 ? 1e-11 : 3e-6));
    for (int64_t i = 0; i < p.n_head * p.head_dim; ++i) CHECK(got[size_t(p.n_head * p.head_dim + i)] == 0.0f);
    // The same rows with their -1 entries dropped (narrower rows) or doubled
    // (wider ones) give the same bits.
    for (int64_t pad : {int64_t(-4), int64_t(7)}) {
      const int64_t w2 = width + pad;
      std::vector<int32_t> other;
      for (int64_t t = 0; t < p.n_tokens; ++t) {
        std::vector<int32_t> row;
        for (int64_t i = 0; i < width; ++i)
          if (selected[size_t(t * width + i)] >= 0) row.push_back(selected[size_t(t * width + i)]);
        row.resize(size_t(w2), -1);
        std::rotate(row.begin(), row.begin() + 1, row.end());
        other.insert(other.end(), row.begin(), row.end());
      }
      AttentionParams p2 = p;
      p2.selected = other.data();
      p2.selected_width = w2;
      CHECK(test::bitwise_equal(run_attention(q.data(), c, qpos, p2, pool), got));
    }
  }
}

TEST_CASE("ir: attention's selected operand, per sequence of an interleaved batch", "[indexer][attention][ir]") {
  IrRun r(R"(
state @kv.a : paged<2 x P x 8 x 2 x 16 x f32, device>
state @kv.b : paged<2 x P x 8 x 2 x 16 x f32, device>
func @prefill(%q: tensor<T x 4 x 16 x f32, device>, %k: tensor<T x 2 x 16 x f32, device>, %v: tensor<T x 2 x 16 x f32, device>, %pos: tensor<T x i32, device>, %seq: tensor<T x i32, device>, %sel: tensor<T x 5 x i32, device>) {
  %dense = attention(%q, %k, %v, %pos, %seq) {state = @kv.a, scale = 0.25, causal = true} : tensor<T x 4 x 16 x f32, device>
  %sparse = attention(%q, %k, %v, %pos, %seq, %sel) {state = @kv.b, scale = 0.25, causal = true} : tensor<T x 4 x 16 x f32, device>
  return(%dense, %sparse)
}
)");
  auto step = [&](const std::vector<int32_t>& pos, const std::vector<int32_t>& seq, const std::vector<int32_t>& sel,
                  uint32_t seed) {
    const int64_t n = int64_t(pos.size());
    std::map<int32_t, int64_t> need;
    for (size_t t = 0; t < pos.size(); ++t) need[seq[t] == 0 ? 2 : 0] = std::max<int64_t>(need[seq[t] == 0 ? 2 : 0], pos[t] + 1);
    r.reserve(need);
    const auto v = test::random_floats(size_t(n * 32), seed + 2);
    auto out = r.run({2, 0}, {{"q", f32_tensor({n, 4, 16}, test::random_floats(size_t(n * 64), seed))},
                              {"k", f32_tensor({n, 2, 16}, test::random_floats(size_t(n * 32), seed + 1))},
                              {"v", f32_tensor({n, 2, 16}, v)},
                              {"pos", i32_tensor({n}, pos)},
                              {"seq", i32_tensor({n}, seq)},
                              {"sel", i32_tensor({n, 5}, sel)}});
    return std::make_tuple(f32_values(out.at(0)), f32_values(out.at(1)), v);
  };
  // Step 1: every visible position of its own sequence (positions < 5).
  const std::vector<int32_t> pos1 = {0, 0, 1, 2, 1, 3, 2, 4};
  const std::vector<int32_t> seq1 = {0, 1, 0, 0, 1, 0, 1, 0};
  std::vector<int32_t> sel1;
  for (int32_t p : pos1)
    for (int32_t i = 0; i < 5; ++i) sel1.push_back(i <= p ? i : -1);
  const auto [dense, sparse, v1] = step(pos1, seq1, sel1, 101);
  CHECK(test::bitwise_equal(sparse, dense));
  // Step 2: each token selects only its own position, so it reads its own V
  // row (head h reads kv head h / 2), as f16: an f32 cache attends as f16,
  // as llama.cpp's flash attention casts it.
  const std::vector<int32_t> pos2 = {3, 5, 4, 6};
  const std::vector<int32_t> seq2 = {1, 0, 1, 0};
  std::vector<int32_t> sel2;
  for (int32_t p : pos2) sel2.insert(sel2.end(), {-1, p, -1, -1, -1});
  const auto [dense2, sparse2, v2] = step(pos2, seq2, sel2, 111);
  CHECK_FALSE(test::bitwise_equal(sparse2, dense2));
  for (size_t t = 0; t < pos2.size(); ++t)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t i = 0; i < 16; ++i)
        CHECK(sparse2[size_t((int64_t(t) * 4 + h) * 16 + i)] ==
              fp16_to_fp32(fp32_to_fp16(v2[size_t((int64_t(t) * 2 + h / 2) * 16 + i)])));
}
