// The pass pipelines of each target, declared once.
//
// rewrite_pipeline(target): what changes the module —
//   canonicalize, fuse{target=T} (qk_rope, swiglu, norm_matmul, [cpu:
//   matmul_epilogue,] elementwise), canonicalize, [weight-layout{target=cpu},]
//   placement{target=T}
// standard_pipeline(spec): the rewrite, then the lowering's plans —
//   ..., memory-plan{T=N,R=M,S=M}, bind-state
// with N the largest step in tokens (prefill chunks) and M the most
// sequences (logits rows) per step. Fusion runs before placement so regions
// are placed as one kernel; weight-layout (cpu only) runs after fusion, so
// it follows the weights into the regions' bodies (passes/weight_layout.h);
// the memory plan comes after every rewrite, as it must. `vtc compile`,
// the Session (both targets) and `vtc kernels` all take their pipeline
// from here.
#pragma once

#include <cstdint>
#include <string>

#include "support/target.h"

namespace vtc::passes {

struct PipelineSpec {
  Target target = Target::Cpu;
  int64_t max_step_tokens = 512;  // T bound
  int64_t max_sequences = 4;      // S and R bound
  bool optimize = true;           // false: no fusion
  std::string weight_layout_types = "reference";  // cpu: weight-layout's `types`
};

// Throws vtc::Error for a bad bound or layout choice.
std::string rewrite_pipeline(const PipelineSpec& spec);
std::string standard_pipeline(const PipelineSpec& spec);

}  // namespace vtc::passes
