// Every architecture's module through the CUDA pipeline, without a GPU:
// for each model of the llama-archs table (llama.cpp's own generator, or
// ours where it writes none), both steps are lowered for the CUDA target,
// every kernel the code generator emits compiles through NVRTC to PTX for
// sm_90, and the step has the architecture's characteristic kernels (an
// `unsupported` op is a failure that names it). New architectures are
// covered by adding their model to the table, nothing here.
//
// A kernel whose source text another model already compiled is not compiled
// again: NVRTC is a pure function of the text and the options, and most
// architectures share most kernels (norms, rope, the matmuls at the
// generator's shapes). That halves the suite's time in CI without leaving
// any text uncompiled.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <unordered_set>

#include "codegen/cuda/model_kernels.h"
#include "codegen/cuda/nvrtc.h"
#include "tests/e2e/llama_archs.h"

namespace la = vtc::test::llama_archs;

namespace {

vtc::cuda::Nvrtc& nvrtc() {
  static std::unique_ptr<vtc::cuda::Nvrtc> n = [] {
    std::string why;
    auto p = vtc::cuda::Nvrtc::load(&why);
    if (!p) FAIL("NVRTC: " << why);
    return p;
  }();
  return *n;
}

// A private kernel cache, so every kernel really compiles.
struct ScopedCache {
  std::filesystem::path dir;
  ScopedCache() {
    dir = std::filesystem::temp_directory_path() / fmt::format("vtc-kcache-archs-{}", ::getpid());
    std::filesystem::remove_all(dir);
    setenv("VTC_KERNEL_CACHE", dir.c_str(), 1);
  }
  ~ScopedCache() {
    std::filesystem::remove_all(dir);
    unsetenv("VTC_KERNEL_CACHE");
  }
};

}  // namespace

TEST_CASE("llama-archs: every architecture's steps lower for CUDA and compile to PTX", "[llama-archs][nvrtc]") {
  ScopedCache cache;
  // Catch runs the case once per section: what was compiled outlives a run.
  static std::unordered_set<std::string> compiled_sources;
  static size_t models = 0, compiled_total = 0;
  for (const la::ArchModel& model : la::arch_models()) {
    DYNAMIC_SECTION(model.name) {
      const std::string path = la::model_path(model, 1, "f32");
      vtc::cuda::ModelKernels mk;
      try {
        mk = vtc::cuda::generate_model_file(path);
      } catch (const std::exception& e) {
        FAIL(model.name << ": CUDA codegen failed: " << e.what());
      }
      REQUIRE(mk.steps.size() == 2);
      size_t distinct = 0, compiled = 0, attention = 0;
      for (const auto& step : mk.steps) {
        for (const auto& k : step.kernels) attention += k.what.find("attention") != std::string::npos;
        for (const auto* k : step.unique()) {
          ++distinct;
          if (!compiled_sources.insert(k->entry + '\n' + k->source).second) continue;
          INFO(model.name << " @" << step.function << " kernel " << k->entry << ": " << k->what);
          const auto c = nvrtc().compile(*k, 90, vtc::cuda::CodeKind::Ptx);
          CHECK(c.image.find(".entry " + k->entry) != std::string::npos);
          ++compiled;
        }
      }
      compiled_total += compiled;
      fmt::print("llama-archs {}: {} distinct kernels compile to PTX (sm_90), {} of them not compiled for an "
                 "earlier model ({} texts so far); {} attention launches\n",
                 model.name, distinct, compiled, compiled_total, attention);
      CHECK(distinct > 10);
      ++models;
    }
  }
  CHECK(models > 0);
}
