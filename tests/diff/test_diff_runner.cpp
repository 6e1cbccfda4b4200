// The differential runner on tiny models, through the library: the two CPU
// arms agree over 16 decode steps on llama and qwen3, every declared state
// and every op result is compared, and the stale-ids injection (the seed
// failure) is named at step 1 as the value read from @last_ids.
#include <catch2/catch.hpp>

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "frontends/gguf/arch/arch.h"
#include "frontends/gguf/gguf.h"
#include "codegen/cuda/kernel.h"
#include "codegen/cuda/model_kernels.h"
#include "passes/memory_plan.h"
#include "passes/pass_manager.h"
#include "runtime/compile/compile.h"
#include "runtime/session.h"
#include "runtime/diff/inject.h"
#include "runtime/diff/runner.h"
#include "runtime/diff/value_index.h"
#include "support/error.h"
#include "tests/diff/diff_fixtures.h"

using namespace vtc;

namespace {
struct Captured {
  diff::DiffResult result;
  std::string text;
};
Captured run_diff(diff::DiffOptions o) {
  const std::string path = test::unique_temp_path("diff_report.txt");
  std::FILE* f = std::fopen(path.c_str(), "w");
  REQUIRE(f);
  Captured c;
  try {
    c.result = diff::run_diff(o, f);
  } catch (...) {
    std::fclose(f);
    throw;
  }
  std::fclose(f);
  std::stringstream ss;
  ss << std::ifstream(path).rdbuf();
  c.text = ss.str();
  std::remove(path.c_str());
  return c;
}
diff::DiffOptions cpu_arms(const std::string& arch, int steps) {
  diff::DiffOptions o;
  o.model = test::tiny_model(arch);
  o.prompt = test::diff_prompt();
  o.steps = steps;
  o.arms = {"cpu", "cpu-unfused"};
  o.threads = 2;
  return o;
}
}  // namespace

TEST_CASE("cpu and cpu-unfused agree over 16 decode steps", "[diff][reference]") {
  for (const std::string arch : {"llama", "qwen3"}) {
    DYNAMIC_SECTION(arch) {
      const Captured c = run_diff(cpu_arms(arch, 16));
      INFO(c.text.substr(c.text.size() > 3000 ? c.text.size() - 3000 : 0));
      CHECK_FALSE(c.result.diverged);
      CHECK(c.result.steps_run == 17);
      CHECK(c.result.tokens.size() == 16);
      // Every state of the module is compared at the last step, and the op
      // results are too: the diff is not vacuous.
      gguf::GgufFile file = gguf::GgufFile::open(test::tiny_model(arch));
      const ir::Module m = arch::build_module(file);
      const size_t last = c.text.rfind("== step 16:");
      REQUIRE(last != std::string::npos);
      for (const auto& s : m.states) CHECK(c.text.find("@" + s.name + " ", last) != std::string::npos);
      CHECK(c.text.find("%ids ", last) != std::string::npos);
      CHECK(c.text.find("%logits ", last) != std::string::npos);
      CHECK(c.text.find("step 16: 0 compared") == std::string::npos);
      CHECK(c.text.find("no divergence: 17 steps") != std::string::npos);
    }
  }
}

#ifdef VTC_TEST_HOOKS  // without hooks, CMake registers a SKIPPED stand-in
TEST_CASE("stale-ids injection is named at step 1 as the embedding input", "[diff][reference][hooks]") {
  for (const std::string arch : {"llama", "qwen3"}) {
    DYNAMIC_SECTION(arch) {
      diff::DiffOptions o = cpu_arms(arch, 4);
      o.inject = "stale-ids";
      const Captured c = run_diff(o);
      INFO(c.text.substr(0, 4000));
      // Precondition: the stale copy (0, @last_ids of a fresh sequence)
      // differs from the token actually sampled, or nothing could diverge.
      REQUIRE_FALSE(c.result.tokens.empty());
      REQUIRE(c.result.tokens[0] != 0);
      CHECK(c.result.diverged);
      CHECK(c.result.first_step == 1);
      CHECK(c.result.first_name == "%ids");
      CHECK(c.result.first_op == "state_read @last_ids");
      CHECK_THAT(c.result.first_line, Catch::StartsWith("first divergence: step 1, %ids (op state_read @last_ids, read by embed)"));
      CHECK(c.result.steps_run == 2);  // stops after the first divergent step
    }
  }
}
#endif

TEST_CASE("the runner rejects bad options before running", "[diff]") {
  diff::DiffOptions o;
  o.model = "unused.gguf";
  o.prompt = {1, 2};
  o.arms = {"cpu"};
  CHECK_THROWS_WITH(diff::run_diff(o, stdout), Catch::Contains("exactly two arms"));
  o.arms = {"cpu", "cpu"};
  CHECK_THROWS_WITH(diff::run_diff(o, stdout), Catch::Contains("both arms are 'cpu'"));
  o.arms = {"cpu", "gpu"};
  o.steps = -1;
  CHECK_THROWS_WITH(diff::run_diff(o, stdout), Catch::Contains("--steps must be >= 0"));
  o.steps = 4;
  o.n_ctx = 3;
  CHECK_THROWS_WITH(diff::run_diff(o, stdout), Catch::Contains("cannot hold the 2 prompt tokens and 4 decode steps"));
  CHECK_THROWS_WITH(diff::make_arm("gpu", {}), Catch::Contains("unknown arm 'gpu' (known: cpu, cpu-unfused, cuda)"));
}

TEST_CASE("the cuda arm names why it cannot run", "[diff]") {
  // Forced: without a driver the arm must refuse with the reason, on any machine.
  const char* before = std::getenv("VTC_CUDA_LIBRARY");
  const std::string saved = before ? before : "";
  ::setenv("VTC_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
  auto restore = [&] { before ? ::setenv("VTC_CUDA_LIBRARY", saved.c_str(), 1) : ::unsetenv("VTC_CUDA_LIBRARY"); };
  try {
    CHECK_THROWS_WITH(diff::make_arm("cuda", {}),
                      Catch::StartsWith("cuda target unavailable: the CUDA driver (libcuda.so.1) is not installed"));
  } catch (...) {
    restore();
    throw;
  }
  restore();
}

TEST_CASE("value names follow the printer and keys match across modules", "[diff][reference]") {
  gguf::GgufFile file = gguf::GgufFile::open(test::tiny_model("llama"));
  const ir::Module m = arch::build_module(file);
  const ir::Function& decode = *m.find_function("decode");
  const diff::ValueIndex index(decode);
  const ir::Op& first = *decode.ops.front();
  REQUIRE(first.kind == ir::OpKind::StateRead);
  const diff::ValueInfo* ids = index.find(first.results[0].data());
  REQUIRE(ids);
  CHECK(ids->name == "%ids");
  CHECK(ids->op == "state_read @last_ids");
  CHECK(ids->users == std::vector<std::string>{"embed"});
  // A second build of the same model gives the same keys, value by value.
  const ir::Module again = arch::build_module(file);
  const ir::Function& decode2 = *again.find_function("decode");
  const diff::ValueIndex index2(decode2);
  REQUIRE(decode.ops.size() == decode2.ops.size());
  for (size_t i = 0; i < decode.ops.size(); ++i)
    for (size_t r = 0; r < decode.ops[i]->results.size(); ++r)
      CHECK(index.find(decode.ops[i]->results[r].data())->key == index2.find(decode2.ops[i]->results[r].data())->key);
}

namespace {
// Keys of the op results an arm's observer reports (computing top-level
// ops: no weights, aliases, transfers or return).
std::set<std::string> observed_keys(const ir::Function& fn) {
  const diff::ValueIndex index(fn);
  std::set<std::string> keys;
  for (const auto& op : fn.ops) {
    if (op->info().is_alias()) continue;
    for (const auto& r : op->results) keys.insert(index.find(r.data())->key);
  }
  return keys;
}
}  // namespace

// Without a GPU the cuda arm cannot run, but its module can be built: the
// standard CUDA pipeline's module (what the cuda arm's session runs) must be indexable (printer names line up with its
// fused regions) and its taps must meet the CPU arm's, or a GPU diff would
// compare states only.
TEST_CASE("the cuda arm's module is indexed and its taps match the cpu arm's", "[diff][reference]") {
  for (const std::string arch : {"llama", "qwen3"}) {
    DYNAMIC_SECTION(arch) {
      const std::string path = test::tiny_model(arch);
      CompileOptions cuda_options;
      cuda_options.target = vtc::Target::Cuda;
      cuda_options.max_sequences = 1;
      const ir::Module lowered = compile_model(gguf::GgufFile::open(path), cuda_options).module;
      Session session(path, {.threads = 1, .n_ctx = 32, .n_slots = 1});
      for (const std::string step : {"prefill", "decode"}) {
        const std::set<std::string> gpu = observed_keys(*lowered.find_function(step));
        const std::set<std::string> host = observed_keys(*session.module().find_function(step));
        std::vector<std::string> shared;
        std::set_intersection(gpu.begin(), gpu.end(), host.begin(), host.end(), std::back_inserter(shared));
        INFO(step << ": cuda " << gpu.size() << " keys, cpu " << host.size() << ", shared " << shared.size());
        for (const std::string named : {"name:%x", "name:%logits"})
          CHECK(std::find(shared.begin(), shared.end(), named) != shared.end());
        if (step == "decode") CHECK(std::find(shared.begin(), shared.end(), "name:%ids") != shared.end());
        // Most results are matched (the two pipelines fuse alike today).
        CHECK(shared.size() * 2 >= std::min(gpu.size(), host.size()));
      }
    }
  }
}
