// `vtc kernels MODEL --target cuda`: the CUDA kernels vtc generates for a
// model. Prints a launch summary per step, or every kernel's source
// (--print), writes them to a folder (-o DIR: DIR/<step>/NN-<entry>.cu and
// DIR/<step>/launches.txt), and with --compile runs each distinct kernel
// through NVRTC for sm_<arch> (PTX; no GPU needed), failing on the first
// kernel that does not compile with the offending source lines.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "codegen/cuda/model_kernels.h"
#include "codegen/cuda/nvrtc.h"
#include "support/error.h"
#include "support/target.h"
#include "tools/vtc/commands.h"

namespace vtc::cli {
namespace {

struct KernelsOptions {
  std::string model, target = "cuda", out_dir, step, pipeline = cuda::cuda_rewrite_pipeline();
  bool print = false, compile = false;
  int arch = 90;
};

void write_step(const cuda::StepKernels& s, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  std::ofstream index(dir / "launches.txt");
  int n = 0;
  for (const auto* k : s.unique()) {
    std::ofstream(dir / fmt::format("{:02}-{}.cu", n++, k->entry)) << k->source;
  }
  for (const auto& k : s.kernels) index << k.entry << "  " << k.what << "\n";
}

int compile_all(const cuda::ModelKernels& mk, const KernelsOptions& o) {
  std::string why;
  auto nvrtc = cuda::Nvrtc::load(&why);
  if (!nvrtc) throw Error("kernels: --compile needs NVRTC: " + why);
  int compiled = 0, cached = 0;
  double ms = 0;
  for (const auto& s : mk.steps) {
    if (!o.step.empty() && s.function != o.step) continue;
    for (const auto* k : s.unique()) {
      auto c = nvrtc->compile(*k, o.arch, cuda::CodeKind::Ptx);
      (c.from_cache ? cached : compiled)++;
      ms += c.compile_ms;
    }
  }
  fmt::print(stderr, "kernels: NVRTC {}: {} compiled ({:.0f} ms), {} from the cache, sm_{}\n", nvrtc->version(),
             compiled, ms, cached, o.arch);
  return 0;
}

int run(const KernelsOptions& o) {
  if (parse_target(o.target) != Target::Cuda) throw Error("kernels: --target must be cuda (the only code-generating target)");
  cuda::ModelKernels mk = cuda::generate_model_file(o.model, o.pipeline);
  bool found = o.step.empty();
  for (const auto& s : mk.steps) {
    if (!o.step.empty() && s.function != o.step) continue;
    found = true;
    if (o.print) {
      for (const auto* k : s.unique()) fmt::print("{}\n", k->source);
    } else if (o.out_dir.empty()) {
      fmt::print("@{}: {} launches, {} distinct kernels\n", s.function, s.kernels.size(), s.unique().size());
      for (const auto* k : s.unique()) fmt::print("  {}  {}\n", k->entry, k->what);
    }
    if (!o.out_dir.empty()) write_step(s, std::filesystem::path(o.out_dir) / s.function);
  }
  if (!found) throw Error("kernels: the model has no step @" + o.step);
  if (!o.out_dir.empty()) fmt::print(stderr, "kernels: wrote {}\n", o.out_dir);
  return o.compile ? compile_all(mk, o) : 0;
}

}  // namespace

Runner add_kernels(CLI::App& app) {
  auto* cmd = app.add_subcommand("kernels", "Dump (and optionally compile) the CUDA kernels generated for a model");
  auto o = std::make_shared<KernelsOptions>();
  cmd->add_option("model", o->model, "GGUF model")->required()->check(CLI::ExistingFile);
  cmd->add_option("--target", o->target, "Code-generating target")->capture_default_str();
  cmd->add_option("-o,--output", o->out_dir, "Write DIR/<step>/NN-<entry>.cu and DIR/<step>/launches.txt");
  cmd->add_option("--step", o->step, "Only this step (prefill, decode)");
  cmd->add_option("--pipeline", o->pipeline, "Pass pipeline run before code generation")->capture_default_str();
  cmd->add_flag("--print", o->print, "Print every distinct kernel's source");
  cmd->add_flag("--compile", o->compile, "Compile every distinct kernel with NVRTC (PTX, no GPU needed)");
  cmd->add_option("--arch", o->arch, "Compute capability for --compile, e.g. 80 or 90")->capture_default_str();
  return [o] { return run(*o); };
}

}  // namespace vtc::cli
