// A `vtc compile --target cuda` artifact: it loads, its stored kernels are
// exactly what codegen emits for its lowered IR (what the executor checks
// before it runs them), and they compile through NVRTC to PTX. No GPU
// needed; the PTX part needs libnvrtc ([nvrtc]).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <unistd.h>

#include "codegen/cuda/kernel.h"
#include "codegen/cuda/nvrtc.h"
#include "samples/synthetic_model.h"
#include "runtime/compile/artifact.h"
#include "runtime/compile/compile.h"
#include "runtime/cuda/executor.h"
#include "runtime/session.h"
#include "support/error.h"

namespace {

using vtc::CompiledModel;

std::string tiny_gguf() {
  const auto dir = std::filesystem::path(VTC_TEST_DATA_DIR) / "cuda";
  std::filesystem::create_directories(dir);
  const auto path = (dir / "llama-artifact-tiny.gguf").string();
  if (!std::filesystem::exists(path)) {
    vtc::synth::Options o;
    o.size = "tiny";
    o.vocab_path = vtc::synth::find_default_vocab("llama");
    vtc::synth::write_model(o, path + ".partial");
    std::filesystem::rename(path + ".partial", path);
  }
  return path;
}

// The artifact of the tiny llama compiled for cuda, written once per run.
const std::string& cuda_artifact() {
  static const std::string path = [] {
    const std::string gguf = tiny_gguf();
    const std::string out = (std::filesystem::temp_directory_path() / fmt::format("vtc-cuda-{}.vtc", ::getpid())).string();
    vtc::CompileOptions o;
    o.target = vtc::Target::Cuda;
    o.max_sequences = 2;
    vtc::save_artifact(vtc::compile_model(vtc::gguf::GgufFile::open(gguf), o), out, {});
    return out;
  }();
  return path;
}

}  // namespace

TEST_CASE("a cuda artifact loads and stores exactly the kernels codegen emits for its IR", "[artifact][reference]") {
  CompiledModel m = vtc::load_artifact(cuda_artifact());
  CHECK(m.target == vtc::Target::Cuda);
  CHECK(m.pipeline.find("placement{target=cuda},memory-plan{") != std::string::npos);
  REQUIRE(m.kernels.size() == m.module.functions.size());
  size_t kernels = 0;
  for (const auto& fn : m.module.functions) {
    INFO("@" << fn->name);
    const vtc::cuda::StepKernels step = vtc::cuda::generate_step(m.module, *fn);
    const auto& stored = m.kernels.at(fn->name);
    REQUIRE(stored.size() == step.unique().size());
    CHECK_NOTHROW(vtc::cuda::check_stored_kernels(step, stored));
    kernels += stored.size();
    // Any change to what is stored is caught, naming the kernel.
    auto edited = stored;
    edited[0].source += "\n// edited";  // the code, not the header comment
    CHECK_THROWS_WITH(vtc::cuda::check_stored_kernels(step, edited),
                      Catch::Contains(stored[0].entry) && Catch::Contains("differs from what it generates"));
    auto missing = stored;
    missing.pop_back();
    CHECK_THROWS_WITH(vtc::cuda::check_stored_kernels(step, missing), Catch::Contains("is not in the artifact"));
    auto extra = stored;
    extra.push_back({"stray_0123", "a kernel of another build", "extern \"C\" __global__ void stray_0123() {}"});
    CHECK_THROWS_WITH(vtc::cuda::check_stored_kernels(step, extra), Catch::Contains("stray_0123"));
  }
  CHECK(kernels > 20);
  // The stored launches keep each kernel's buckets (RowsGuard): an
  // artifact's @prefill runs its decode form at few rows, as the GGUF does.
  REQUIRE(m.cuda_steps.size() == m.module.functions.size());
  size_t few_rows = 0;
  for (const auto& st : m.cuda_steps) {
    INFO("stored launches of @" << st.function);
    const vtc::cuda::StepKernels step = vtc::cuda::generate_step(m.module, *m.module.find_function(st.function));
    REQUIRE(st.kernels.size() == step.kernels.size());
    for (size_t i = 0; i < st.kernels.size(); ++i) {
      CHECK(st.kernels[i].entry == step.kernels[i].entry);
      CHECK(st.kernels[i].guard == step.kernels[i].guard);
      few_rows += st.kernels[i].guard == vtc::cuda::RowsGuard::FewRows;
    }
  }
  CHECK(few_rows > 0);
}

TEST_CASE("a cuda artifact's stored kernels compile through NVRTC to PTX", "[artifact][nvrtc][reference]") {
  std::string why;
  auto nvrtc = vtc::cuda::Nvrtc::load(&why);
  if (!nvrtc) FAIL("NVRTC: " << why);
  CompiledModel m = vtc::load_artifact(cuda_artifact());
  size_t compiled = 0;
  for (const auto& [step, stored] : m.kernels)
    for (const vtc::KernelSource& s : stored) {
      INFO("@" << step << " kernel " << s.entry << ": " << s.what);
      vtc::cuda::Kernel k;
      k.entry = s.entry, k.what = s.what, k.source = s.source;
      const auto c = nvrtc->compile(k, 80, vtc::cuda::CodeKind::Ptx);
      CHECK(c.image.find(".entry " + s.entry) != std::string::npos);
      ++compiled;
    }
  CHECK(compiled > 20);
}

TEST_CASE("a session refuses a cuda artifact on the cpu, and the cuda target where it cannot run", "[artifact][reference]") {
  CHECK_THROWS_WITH(vtc::Session(cuda_artifact(), {.target = vtc::Target::Cpu}),
                    Catch::Contains("compiled for target cuda") && Catch::Contains("--target cpu"));
  if (std::string why = vtc::cuda::cuda_unavailable_reason(); !why.empty()) {
    CHECK_THROWS_WITH(vtc::Session(cuda_artifact(), {.target = vtc::Target::Cuda}),
                      Catch::Contains("the cuda target is unavailable here") && Catch::Contains(why));
  } else {  // a GPU: the artifact runs as stored
    vtc::Session s(cuda_artifact(), {.target = vtc::Target::Cuda, .n_ctx = 64});
    const std::vector<int32_t> prompt = {1, 450, 4996, 17354};
    CHECK(s.prefill(0, prompt, 0).shape == std::vector<int64_t>{1, s.n_vocab()});
  }
}
