// A model's CUDA kernels, from the GGUF file: build the module with the
// architecture's frontend, lower it with the CUDA pipeline, generate every
// step's kernels. Used by `vtc kernels`, the CUDA executor and the tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/cuda/kernel.h"
#include "ir/module.h"

namespace vtc::cuda {

// The pass pipeline that prepares a module for the CUDA target: the
// rewriting part of the standard CUDA pipeline (passes/pipelines.h), so
// fused regions reach the codegen as they do in `vtc compile --target cuda`
// and in a CUDA session.
std::string cuda_rewrite_pipeline();

struct ModelKernels {
  std::unique_ptr<ir::Module> module;   // lowered; the kernels point into it
  std::vector<StepKernels> steps;       // one per function, module order
};

// Lowers `module` with `pipeline` (remarks are discarded) and generates the
// kernels of every function. Throws vtc::Error on any failure.
// An empty `pipeline` is cuda_rewrite_pipeline().
ModelKernels generate_model(ir::Module module, const std::string& pipeline = "");
// The same, starting from a GGUF file.
ModelKernels generate_model_file(const std::string& gguf_path, const std::string& pipeline = "");

}  // namespace vtc::cuda
