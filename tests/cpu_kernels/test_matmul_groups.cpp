// matmul_groups, the kernel under the CPU's fused regions: every output box
// reaches the epilogue exactly once with the bits of a plain matmul (in
// scratch or in y), the prologue writes every input row before it is read,
// and the sequential fallback (no shared activation type) keeps the same
// contract. Every ISA, 1 to 4 threads, 1 to 17 tokens, rows that leave a
// partial last box. At the end: matmul_epilogue regions through the
// interpreter, fused against op by op, bit for bit.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include "runtime/cpu/fused_kernels.h"
#include "tests/cpu_kernels/interp_test_util.h"
#include "tests/cpu_kernels/kernel_test_util.h"

using namespace vtc;
using namespace vtc::cpu;
using namespace vtc::cpu::test;

namespace {

struct Weight {
  GgmlType type;
  int64_t rows;
  WeightLayout layout;
  std::vector<uint8_t> stored;  // in `layout`
};

Weight make_weight(GgmlType type, int64_t rows, int64_t cols, WeightLayout layout, uint32_t seed) {
  Weight w{type, rows, layout, random_weights(type, rows, cols, seed)};
  if (layout != WeightLayout::Rows) {
    const std::vector<uint8_t> in_rows = w.stored;
    repack_weight(type, layout, in_rows.data(), rows, cols, w.stored.data());
  }
  return w;
}

// The same weight through a plain matmul call (the reference for the bits).
std::vector<float> plain_matmul(const Weight& w, int64_t cols, int64_t n_tokens, const std::vector<float>& x,
                                ThreadPool& pool) {
  std::vector<float> y(size_t(w.rows * n_tokens));
  matmul(w.type, w.stored.data(), w.rows, cols, x.data(), n_tokens, y.data(), pool, w.layout);
  return y;
}

// What the epilogue saw: the values of each output at each (token, row)
// and how often each was visited.
struct Seen {
  int64_t rows = 0, n_outputs = 0;
  std::vector<std::vector<float>> values;
  std::vector<int> visits;

  static void record(const void* context, const TileBox& box) {
    auto& s = *const_cast<Seen*>(static_cast<const Seen*>(context));
    for (int64_t t = box.t0; t < box.t1; ++t)
      for (int64_t r = box.r0; r < box.r1; ++r) {
        ++s.visits[size_t(t * s.rows + r)];
        for (int64_t i = 0; i < s.n_outputs; ++i)
          s.values[size_t(i)][size_t(t * s.rows + r)] = box.out[i][(t - box.t0) * box.ld + (r - box.r0)];
      }
  }
};

// The prologue copies source rows into x (which starts as NaN: a row read
// before its prologue poisons that token's outputs).
struct CopyRows {
  const float* src;
  float* x;
  int64_t cols;
  std::vector<int>* calls;
  static void run(const void* context, int64_t t0, int64_t t1) {
    const auto& c = *static_cast<const CopyRows*>(context);
    for (int64_t t = t0; t < t1; ++t) {
      std::memcpy(c.x + t * c.cols, c.src + t * c.cols, size_t(c.cols) * 4);
      ++(*c.calls)[size_t(t)];
    }
  }
};

struct GroupCase {
  std::vector<Weight> weights;
  int64_t item_rows;
};

void check_groups(std::vector<GroupCase>& cases, int64_t cols, int64_t n_tokens, bool in_scratch, ThreadPool& pool,
                  const std::string& what) {
  const auto src = random_floats(size_t(cols * n_tokens), 300 + uint32_t(n_tokens));
  std::vector<float> x(src.size(), std::numeric_limits<float>::quiet_NaN());
  std::vector<int> prologue_calls(size_t(n_tokens), 0);
  CopyRows copy{src.data(), x.data(), cols, &prologue_calls};
  std::vector<std::vector<MatmulOutput>> outputs(cases.size());
  std::vector<std::vector<Guarded>> ys(cases.size());
  std::vector<Seen> seen(cases.size());
  std::vector<MatmulGroup> groups;
  for (size_t g = 0; g < cases.size(); ++g) {
    const int64_t rows = cases[g].weights[0].rows;
    seen[g] = {rows, int64_t(cases[g].weights.size()), {}, std::vector<int>(size_t(rows * n_tokens), 0)};
    for (size_t i = 0; i < cases[g].weights.size(); ++i) {
      ys[g].emplace_back(size_t(rows * n_tokens));
      seen[g].values.emplace_back(size_t(rows * n_tokens), -1.0f);
    }
    for (size_t i = 0; i < cases[g].weights.size(); ++i) {
      const Weight& w = cases[g].weights[i];
      outputs[g].push_back({w.type, w.stored.data(), w.rows, in_scratch ? nullptr : ys[g][i].data(), w.layout});
    }
    groups.push_back({outputs[g].data(), outputs[g].size(), cases[g].item_rows, {&Seen::record, &seen[g]}, in_scratch});
  }
  matmul_groups(groups.data(), groups.size(), cols, x.data(), n_tokens, pool, {&CopyRows::run, &copy});
  INFO(what);
  for (int64_t t = 0; t < n_tokens; ++t) CHECK(prologue_calls[size_t(t)] == 1);
  for (size_t g = 0; g < cases.size(); ++g) {
    for (int v : seen[g].visits) REQUIRE(v == 1);
    for (size_t i = 0; i < cases[g].weights.size(); ++i) {
      const Weight& w = cases[g].weights[i];
      const auto alone = plain_matmul(w, cols, n_tokens, src, pool);
      INFO(fmt::format("group {} output {} ({}, {}), {}", g, i, ggml_type_name(w.type), weight_layout_name(w.layout),
                       in_scratch ? "in scratch" : "in y"));
      CHECK(bitwise_equal(seen[g].values[i], alone));
      REQUIRE(ys[g][i].intact());
      if (!in_scratch) CHECK(bitwise_equal(ys[g][i].values(), alone));
      else CHECK(ys[g][i].values() == std::vector<float>(ys[g][i].size(), -12345.0f));  // never written
    }
  }
}

}  // namespace

TEST_CASE("matmul_groups: each box once to its epilogue, with matmul's bits, and the prologue first",
          "[matmul][fused]") {
  const int64_t cols = 512;
  for (Isa isa : available_isas()) {
    IsaScope scope(isa);
    for (int threads : {1, 2, 3, 4}) {
      ThreadPool pool(threads);
      for (int64_t n_tokens : {1, 2, 5, 17}) {
        for (bool in_scratch : {false, true}) {
          // Shared q8_K activations: a swiglu-like x8 pair, a Q6_K group of
          // 40 rows in boxes of 32 (partial last box), x8 Q4_K in boxes of 64.
          std::vector<GroupCase> shared = {
              {{make_weight(GgmlType::Q4_K, 48, cols, WeightLayout::Interleaved8, 1),
                make_weight(GgmlType::Q4_K, 48, cols, WeightLayout::Interleaved8, 2)}, 0},
              {{make_weight(GgmlType::Q6_K, 40, cols, WeightLayout::Rows, 3)}, 32},
              {{make_weight(GgmlType::Q4_K, 80, cols, WeightLayout::Interleaved8, 4)}, 64}};
          check_groups(shared, cols, n_tokens, in_scratch, pool,
                       fmt::format("shared, {} threads, {} tokens, {}", threads, n_tokens, isa_name(isa)));
          // Q8_0 (q8_0 activations) with F32: no shared type, in sequence.
          std::vector<GroupCase> mixed = {{{make_weight(GgmlType::Q8_0, 24, cols, WeightLayout::Rows, 5)}, 0},
                                          {{make_weight(GgmlType::F32, 16, cols, WeightLayout::Rows, 6),
                                            make_weight(GgmlType::F32, 16, cols, WeightLayout::Rows, 7)}, 16}};
          check_groups(mixed, cols, n_tokens, in_scratch, pool,
                       fmt::format("mixed, {} threads, {} tokens, {}", threads, n_tokens, isa_name(isa)));
        }
      }
    }
  }
}

TEST_CASE("matmul_groups: bad groups are errors", "[matmul][fused]") {
  ThreadPool pool(1);
  const auto w = random_weights(GgmlType::Q8_0, 16, 64, 9);
  const auto w8 = random_weights(GgmlType::Q8_0, 8, 64, 9);
  std::vector<float> x(64, 1.0f), y(16), y8(8);
  const MatmulOutput a{GgmlType::Q8_0, w.data(), 16, y.data()}, b{GgmlType::Q8_0, w8.data(), 8, y8.data()};
  const MatmulOutput pair[] = {a, b};
  const MatmulGroup mixed_rows{pair, 2, 0, {}};
  CHECK_THROWS_WITH(matmul_groups(&mixed_rows, 1, 64, x.data(), 1, pool), Catch::Contains("mixes 16 and 8 rows"));
  const MatmulGroup odd_box{&a, 1, 24, {}};
  CHECK_THROWS_WITH(matmul_groups(&odd_box, 1, 64, x.data(), 1, pool), Catch::Contains("item_rows 24"));
}

// --- matmul_epilogue regions through the interpreter -------------------------
// A `matmul_epilogue` region (ir/fused_kinds.h) runs as one matmul_groups
// call with its chain as the box epilogue (runtime/cpu/fused_kernels.h);
// op by op (set_fused_kernels(false)) runs matmul then each chain op. The
// two must give the same bits, for the region's result and, with an
// observer (every body value materialized), for every body value.

namespace {

struct EpilogueCase {
  std::string name;
  std::string chain;       // body ops after `%o = matmul(%x, %w)`, ending in %y
  bool fused_on_cpu = true;
};

// The region's operands: %x [T, K], %w [N, K] of `wtype`, %res [T, N],
// %bias [N], %gain [N].
std::string epilogue_module(const std::string& wtype, int64_t n, int64_t k, const std::string& chain) {
  return fmt::format(R"(
func @prefill(%h: tensor<T x {1} x f32, device>, %wo: tensor<{0} x {1} x {2}, device>, %r: tensor<T x {0} x f32, device>, %b: tensor<{0} x f32, device>, %g: tensor<{0} x f32, device>) {{
  %out = fused(%h, %wo, %r, %b, %g) {{kind = matmul_epilogue}} : tensor<T x {0} x f32, device> body(%x: tensor<T x {1} x f32, device>, %w: tensor<{0} x {1} x {2}, device>, %res: tensor<T x {0} x f32, device>, %bias: tensor<{0} x f32, device>, %gain: tensor<{0} x f32, device>) {{
    %o = matmul(%x, %w) : tensor<T x {0} x f32, device>
{3}
    return(%y)
  }}
  return(%out)
}}
)",
                     n, k, wtype, chain);
}

struct EpilogueRun {
  std::vector<uint8_t> result;
  std::map<std::string, std::vector<uint8_t>> observed;  // body values by name, with an observer
  bool ran_fused = false;
};

EpilogueRun run_epilogue(IrRun& run, bool fused, bool observe, const std::map<std::string, HostTensor>& args) {
  run.interp.set_fused_kernels(fused);
  run.interp.set_profiling(true);
  EpilogueRun out;
  if (observe)
    run.interp.set_observer([&](const ir::Op& op, const std::vector<std::optional<HostTensor>>& results) {
      for (size_t i = 0; i < results.size(); ++i)
        if (results[i] && !op.results[i]->name.empty()) out.observed[op.results[i]->name] = results[i]->bytes;
    });
  else
    run.interp.set_observer({});
  const uint64_t before = run.interp.profile().by_op.count("fused matmul_epilogue")
                              ? run.interp.profile().by_op.at("fused matmul_epilogue").calls
                              : 0;
  const auto results = run.run({0}, args);
  REQUIRE(results.size() == 1);
  out.result = results[0].bytes;
  const auto& by_op = run.interp.profile().by_op;
  out.ran_fused = by_op.count("fused matmul_epilogue") && by_op.at("fused matmul_epilogue").calls > before;
  return out;
}

HostTensor weight_tensor(GgmlType type, const std::string& elem, int64_t n, int64_t k, uint32_t seed) {
  HostTensor t;
  t.elem = *ir::ElemType::from_name(elem);
  t.shape = {n, k};
  t.bytes = random_weights(type, n, k, seed);
  return t;
}

}  // namespace

TEST_CASE("matmul_epilogue regions as one CPU kernel give the bits of op by op", "[fused][epilogue]") {
  const int64_t k = 64;
  const std::vector<EpilogueCase> cases = {
      {"residual add", "    %y = add(%o, %res) : tensor<T x {N} x f32, device>"},
      {"residual add, operands swapped", "    %y = add(%res, %o) : tensor<T x {N} x f32, device>"},
      {"bias add then gelu",
       "    %a = add(%o, %bias) : tensor<T x {N} x f32, device>\n"
       "    %y = gelu(%a) : tensor<T x {N} x f32, device>"},
      {"bias, silu, [N] scale, scale, residual",
       "    %a = add(%o, %bias) : tensor<T x {N} x f32, device>\n"
       "    %s = silu(%a) : tensor<T x {N} x f32, device>\n"
       "    %m = mul(%s, %gain) : tensor<T x {N} x f32, device>\n"
       "    %c = scale(%m) {factor = 0.125} : tensor<T x {N} x f32, device>\n"
       "    %y = add(%c, %res) : tensor<T x {N} x f32, device>"},
      {"tanh: op by op", "    %y = tanh(%o) : tensor<T x {N} x f32, device>", false},
  };
  struct WeightKind {
    GgmlType type;
    std::string elem;
  };
  const std::vector<WeightKind> weights = {{GgmlType::F32, "f32"}, {GgmlType::F16, "f16"}, {GgmlType::Q8_0, "q8_0"},
                                           {GgmlType::Q4_0, "q4_0"}};
  for (int64_t n : {40, 36}) {  // 40: a partial last box of 16 rows; 36: N % 8 != 0 (silu runs op by op)
    for (const EpilogueCase& c : cases) {
      std::string chain = c.chain;
      for (size_t at; (at = chain.find("{N}")) != std::string::npos;) chain.replace(at, 3, std::to_string(n));
      const bool silu = chain.find("silu") != std::string::npos;
      const bool expect_fused = c.fused_on_cpu && !(silu && n % 8 != 0);
      for (const WeightKind& wk : weights) {
        IrRun run(epilogue_module(wk.elem, n, k, chain));
        const ir::Op& region = *run.module.find_function("prefill")->ops[0];
        CHECK(FusedKernel::why_op_by_op(region).empty() == expect_fused);
        for (Isa isa : available_isas()) {
          IsaScope scope(isa);
          for (int64_t t : {1, 37}) {
            INFO(fmt::format("{}, N = {}, {} weight, {} tokens, {}", c.name, n, wk.elem, t, isa_name(isa)));
            const std::map<std::string, HostTensor> args = {
                {"h", f32_tensor({t, k}, random_floats(size_t(t * k), 11))},
                {"wo", weight_tensor(wk.type, wk.elem, n, k, 12)},
                {"r", f32_tensor({t, n}, random_floats(size_t(t * n), 13, -4.0f, 4.0f))},
                {"b", f32_tensor({n}, random_floats(size_t(n), 14))},
                {"g", f32_tensor({n}, random_floats(size_t(n), 15, 0.5f, 2.0f))}};
            const EpilogueRun op_by_op = run_epilogue(run, false, false, args);
            const EpilogueRun fused = run_epilogue(run, true, false, args);
            CHECK_FALSE(op_by_op.ran_fused);
            CHECK(fused.ran_fused == expect_fused);
            REQUIRE(fused.result.size() == op_by_op.result.size());
            CHECK(std::memcmp(fused.result.data(), op_by_op.result.data(), fused.result.size()) == 0);
            // Observed (materialize): every body value with op by op's bits.
            const EpilogueRun fused_observed = run_epilogue(run, true, true, args);
            const EpilogueRun op_by_op_observed = run_epilogue(run, false, true, args);
            CHECK(fused_observed.ran_fused == expect_fused);
            CHECK(fused_observed.result == op_by_op.result);
            CHECK(fused_observed.observed.count("o") == 1);
            CHECK(fused_observed.observed == op_by_op_observed.observed);
          }
        }
      }
    }
  }
}

TEST_CASE("matmul_epilogue: bodies that break the contract are verifier errors naming the kind", "[fused][epilogue]") {
  auto broken = [](const std::string& body) {
    return fmt::format(R"(
func @prefill(%h: tensor<T x 64 x f32, device>, %wo: tensor<8 x 64 x f32, device>, %r: tensor<T x 8 x f32, device>) {{
  %out = fused(%h, %wo, %r) {{kind = matmul_epilogue}} : tensor<T x 8 x f32, device> body(%x: tensor<T x 64 x f32, device>, %w: tensor<8 x 64 x f32, device>, %res: tensor<T x 8 x f32, device>) {{
{}
  }}
  return(%out)
}}
)",
                       body);
  };
  auto rejects = [&](const std::string& body, const std::string& why) {
    INFO(body);
    CHECK_THROWS_WITH(parse_verified(broken(body)), Catch::Contains("matmul_epilogue") && Catch::Contains(why));
  };
  rejects("    %o = matmul(%x, %w) : tensor<T x 8 x f32, device>\n    return(%o)", "op #1 'return' ends the body before any epilogue op");
  rejects("    %a = add(%res, %res) : tensor<T x 8 x f32, device>\n    return(%a)", "op #0 'add' must be the region's matmul");
  rejects("    %o = matmul(%x, %w) : tensor<T x 8 x f32, device>\n"
          "    %a = add(%o, %o) : tensor<T x 8 x f32, device>\n    return(%a)",
          "op #1 'add' must read the previous epilogue value exactly once");
  rejects("    %o = matmul(%x, %w) : tensor<T x 8 x f32, device>\n"
          "    %a = silu(%o) : tensor<T x 8 x f32, device>\n"
          "    %b = add(%a, %o) : tensor<T x 8 x f32, device>\n    return(%b)",
          "op #2 'add' must read the previous epilogue value and otherwise only arguments");
  rejects("    %o = matmul(%x, %w) : tensor<T x 8 x f32, device>\n"
          "    %a = softmax(%o) : tensor<T x 8 x f32, device>\n    return(%a)",
          "op #1 'softmax' is not an elementwise epilogue op");
  rejects("    %o = matmul(%x, %w) : tensor<T x 8 x f32, device>\n"
          "    %a = add(%o, %res) : tensor<T x 8 x f32, device>\n    return(%o)",
          "op #2 'return' must return the last epilogue value only");
  CHECK_NOTHROW(parse_verified(broken("    %o = matmul(%x, %w) : tensor<T x 8 x f32, device>\n"
                                      "    %a = add(%o, %res) : tensor<T x 8 x f32, device>\n    return(%a)")));
}
