// vtc-cuda-kernels: the CUDA kernels generated for a .vtcir file, for golden
// tests (tests/cuda/golden) and for debugging codegen without a GGUF model.
//
//   vtc-cuda-kernels FILE [--split-input-file] [--pipeline P] [--compile ARCH]
//
// Per case (cases split at "// -----"), per function: a line
// "// launch @fn: entry what" per launch ("// launch @prefill (T <= 16): ..."
// where the launch depends on the bucket's rows, kernel.h's RowsGuard),
// then every distinct kernel's source. With --compile, every distinct kernel also goes through NVRTC for
// compute_ARCH and "// compiled: entry" is printed. Errors print as
// "error: ..." and, with --split-input-file, do not stop later cases.
#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "codegen/cuda/model_kernels.h"
#include "codegen/cuda/nvrtc.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "support/error.h"

int main(int argc, char** argv) {
  std::string path, pipeline;
  bool split = false;
  int arch = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--split-input-file")) split = true;
    else if (!std::strcmp(argv[i], "--pipeline") && i + 1 < argc) pipeline = argv[++i];
    else if (!std::strcmp(argv[i], "--compile") && i + 1 < argc) arch = std::atoi(argv[++i]);
    else path = argv[i];
  }
  std::ifstream in(path);
  if (path.empty() || !in) {
    fmt::print(stderr, "usage: vtc-cuda-kernels FILE.vtcir [--split-input-file] [--pipeline P] [--compile ARCH]\n");
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  std::unique_ptr<vtc::cuda::Nvrtc> nvrtc;
  if (arch) {
    std::string why;
    nvrtc = vtc::cuda::Nvrtc::load(&why);
    if (!nvrtc) {
      fmt::print(stderr, "vtc-cuda-kernels: {}\n", why);
      return 77;
    }
  }
  int status = 0;
  bool first = true;
  for (const auto& c : vtc::ir::split_source_cases(text.str(), split)) {
    if (!first) fmt::print("// -----\n");
    first = false;
    try {
      vtc::ir::Module m = vtc::ir::parse(c.text, {c.first_line});
      vtc::ir::verify(m);
      auto mk = vtc::cuda::generate_model(std::move(m), pipeline);
      for (const auto& s : mk.steps) {
        // A guarded launch (@prefill's two forms, RowsGuard) names its bucket.
        for (const auto& k : s.kernels)
          fmt::print("// launch @{}{}: {}  {}\n", s.function,
                     k.guard == vtc::cuda::RowsGuard::FewRows    ? fmt::format(" (T <= {})", vtc::cuda::kDecodeFormRows)
                     : k.guard == vtc::cuda::RowsGuard::ManyRows ? fmt::format(" (T > {})", vtc::cuda::kDecodeFormRows)
                                                                 : "",
                     k.entry, k.what);
        for (const auto* k : s.unique()) {
          fmt::print("{}", k->source);
          if (nvrtc) {
            nvrtc->compile(*k, arch, vtc::cuda::CodeKind::Ptx);
            fmt::print("// compiled: {}\n", k->entry);
          }
        }
      }
    } catch (const vtc::Error& e) {
      fmt::print("error: {}\n", e.what());
      if (!split) status = 1;
    }
  }
  return status;
}
