// Compiling a GGUF model: the architecture builder's IR, then the standard
// pass pipeline, giving the lowered module and its memory plans. `vtc
// compile` saves the result as an artifact (artifact.h); `vtc run` and the
// session compile in memory when handed a GGUF.
//
// The standard pipeline of each target is declared once, in
// passes/pipelines.h; standard_pipeline() takes it from there.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "codegen/cuda/kernel.h"
#include "frontends/gguf/gguf.h"
#include "ir/module.h"
#include "passes/memory_plan.h"
#include "passes/pass_manager.h"
#include "support/target.h"

namespace vtc {

struct CompileOptions {
  Target target = Target::Cpu;
  int64_t max_step_tokens = 512;  // T bound: prefill runs in chunks of at most this
  int64_t max_sequences = 4;      // S and R bound: sequences (and logits rows) in one step
  bool optimize = true;           // false: no fusion (canonicalize + lowering only)
  // cpu: the weight-layout pass's `types` (passes/weight_layout.h):
  // "reference" (x8 only where it keeps llama.cpp's arithmetic) or "all".
  std::string weight_layout_types = "reference";
  bool embeddings = false;        // also build @embed (frontends/gguf/arch/arch.h)
  // The KV cache's element types (arch::BuildOptions; --cache-type-k/-v).
  GgmlType cache_type_k = GgmlType::F16, cache_type_v = GgmlType::F16;
  passes::PassManagerOptions manager;  // dumps, disabled passes, timing
  // Called at the start of each phase with a one-line description.
  std::function<void(const std::string&)> progress;
};

std::string standard_pipeline(const CompileOptions& options);

// Op counts of one step function, for reports.
struct StepCounts {
  size_t ops = 0;       // top-level ops
  size_t kernels = 0;   // ops that launch work: not weight, reshape, view or return
  size_t regions = 0;   // fused ops
  size_t body_ops = 0;  // ops inside their bodies
};
StepCounts count_ops(const ir::Function& f);

// A generated CUDA kernel as stored in an artifact.
using KernelSource = cuda::KernelSource;

struct CompiledModel {
  gguf::GgufFile file;
  ir::Module module;                        // lowered
  std::vector<passes::FunctionPlan> plans;  // one per step
  Target target = Target::Cpu;
  std::string pipeline;
  std::map<std::string, StepCounts> before, after;  // by step: as built, lowered
  std::vector<std::string> report;          // weight-layout summary, placement and bind-state artifacts
  double seconds = 0;                       // build + passes
  std::map<std::string, std::vector<KernelSource>> kernels = {};  // cuda target: by step, distinct sources
  // cuda target: every step's kernels and launches, generated once here (or
  // read from the artifact), pointing into `module`; what the executor runs.
  std::vector<cuda::StepKernels> cuda_steps = {};
};

// `vtc compile --stats`: one line per step function (module order):
//   stats: @decode: 2 layers, 61 ops (142 before passes), fused regions per
//   layer: elementwise 0.5, norm_matmul 1, ...; op by op on cpu: 0 of 9 regions
// layers: the GGUF's <arch>.block_count (1 when absent); per layer: the
// step's regions of each kind (every FusedKind, in ir/attr_enums.def order)
// divided by the layers; op by op: the step's regions (all of them, not per
// layer) that the target runs as their body's ops rather than one kernel
// (cpu::FusedKernel::why_op_by_op, cuda::why_op_by_op).
std::vector<std::string> compile_stats(const CompiledModel& m);

// Builds and lowers the model in `file`. Throws vtc::Error.
CompiledModel compile_model(gguf::GgufFile file, const CompileOptions& options);

// A .vtc artifact (artifact.h) or a GGUF, compiled in memory with `options`.
CompiledModel load_model(const std::string& path, const CompileOptions& options);

}  // namespace vtc
