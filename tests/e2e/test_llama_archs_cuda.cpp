// Every architecture's module through the CUDA pipeline, without a GPU:
// for each model of the llama-archs table (llama.cpp's own generator, or
// ours where it writes none), both steps are lowered for the CUDA target,
// every kernel the code generator emits compiles through NVRTC to PTX for
// sm_90, and the step has the architecture's characteristic kernels (an
// `unsupported` op is a failure that names it). New architectures are
// covered by adding their model to the table, nothing here.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

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
  size_t models = 0;
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
      size_t compiled = 0, attention = 0;
      for (const auto& step : mk.steps) {
        for (const auto& k : step.kernels) attention += k.what.find("attention") != std::string::npos;
        for (const auto* k : step.unique()) {
          INFO(model.name << " @" << step.function << " kernel " << k->entry << ": " << k->what);
          const auto c = nvrtc().compile(*k, 90, vtc::cuda::CodeKind::Ptx);
          CHECK(c.image.find(".entry " + k->entry) != std::string::npos);
          ++compiled;
        }
      }
      fmt::print("llama-archs {}: {} distinct kernels compile to PTX (sm_90), {} attention launches\n", model.name,
                 compiled, attention);
      CHECK(compiled > 10);
      ++models;
    }
  }
  CHECK(models > 0);
}
