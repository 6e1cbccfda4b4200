#include "codegen/cuda/model_kernels.h"

#include <sstream>

#include "frontends/gguf/arch/arch.h"
#include "frontends/gguf/gguf.h"
#include "passes/pass_manager.h"
#include "passes/pipelines.h"

namespace vtc::cuda {

std::string cuda_rewrite_pipeline() { return passes::rewrite_pipeline({.target = Target::Cuda}); }

ModelKernels generate_model(ir::Module module, const std::string& pipeline) {
  ModelKernels out;
  out.module = std::make_unique<ir::Module>(std::move(module));
  std::ostringstream remarks;
  passes::PassManagerOptions options;
  options.log = &remarks;
  passes::PassManager pm(options);
  pm.add_pipeline(pipeline.empty() ? cuda_rewrite_pipeline() : pipeline);
  pm.run(*out.module);
  for (const auto& fn : out.module->functions) out.steps.push_back(generate_step(*out.module, *fn));
  return out;
}

ModelKernels generate_model_file(const std::string& gguf_path, const std::string& pipeline) {
  gguf::GgufFile file = gguf::GgufFile::open(gguf_path);
  return generate_model(arch::build_module(file), pipeline);
}

}  // namespace vtc::cuda
