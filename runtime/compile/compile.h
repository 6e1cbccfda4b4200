// Compiling a GGUF model: the architecture builder's IR, then the standard
// pass pipeline, giving the lowered module and its memory plans. `vtc
// compile` saves the result as an artifact (artifact.h); `vtc run` and the
// session compile in memory when handed a GGUF.
//
// The standard pipeline (standard_pipeline()):
//   canonicalize, fuse-qk-rope, fuse-swiglu, fuse-norm-matmul,
//   fuse-elementwise, canonicalize, [weight-layout{target=cpu},]
//   placement{target=T}, memory-plan{T=N,R=M,S=M}, bind-state
// with N the largest step in tokens (prefill chunks) and M the most
// sequences (logits rows) per step; a step beyond the bounds (all-row
// logits, for instance) is planned for its own sizes by the same planner.
// Fusion runs before placement so regions are placed as one kernel;
// weight-layout (cpu target only) runs after fusion, so it follows the
// weights into the regions' bodies, and chooses the x8 layout for the
// q4_0/q4_k matmul weights (q8_0/q6_k too with types=all:
// CompileOptions::weight_layout_types; passes/weight_layout.h); `--disable-pass
// weight-layout` (--no-weight-layout) keeps the rows layout. The memory
// plan comes after every rewrite, as it must.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "frontends/gguf/gguf.h"
#include "ir/module.h"
#include "passes/memory_plan.h"
#include "passes/pass_manager.h"

namespace vtc {

struct CompileOptions {
  std::string target = "cpu";     // cpu | cuda
  int64_t max_step_tokens = 512;  // T bound: prefill runs in chunks of at most this
  int64_t max_sequences = 4;      // S and R bound: sequences (and logits rows) in one step
  bool optimize = true;           // false: no fusion (canonicalize + lowering only)
  // cpu: the weight-layout pass's `types` (passes/weight_layout.h):
  // "reference" (x8 only where it keeps llama.cpp's arithmetic) or "all".
  std::string weight_layout_types = "reference";
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
struct KernelSource {
  std::string entry;   // extern "C" name (unique per source)
  std::string what;    // the op it implements, for messages
  std::string source;  // CUDA C++ translation unit
};

struct CompiledModel {
  gguf::GgufFile file;
  ir::Module module;                        // lowered
  std::vector<passes::FunctionPlan> plans;  // one per step
  std::string target;
  std::string pipeline;
  std::map<std::string, StepCounts> before, after;  // by step: as built, lowered
  std::vector<std::string> report;          // weight-layout summary, placement and bind-state artifacts
  double seconds = 0;                       // build + passes
  std::map<std::string, std::vector<KernelSource>> kernels = {};  // cuda target: by step, distinct sources
};

// Builds and lowers the model in `file`. Throws vtc::Error.
CompiledModel compile_model(gguf::GgufFile file, const CompileOptions& options);

// A .vtc artifact (artifact.h) or a GGUF, compiled in memory with `options`.
CompiledModel load_model(const std::string& path, const CompileOptions& options);

}  // namespace vtc
