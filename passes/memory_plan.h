// memory-plan{T=..,S=..,..,align=64}: activation arena offsets per step.
//
// Algorithm (planning only; the executor frees nothing, it uses offsets):
//  1. Buffers: every op result except `weight` (mapped from the GGUF) and
//     `state_read` (state-store memory). View-like ops (reshape, view,
//     slice) get their own buffer too: conservative, never aliased.
//     Function arguments are inputs owned by the caller, not planned.
//  2. Size: product of the dims, evaluated with the symbol bindings given
//     as options (an option whose key starts with an uppercase letter binds
//     that step symbol, e.g. T=512,S=1,R=1), times the element size. An
//     unbound symbol is an error naming it.
//  3. Liveness: the closed interval [defining op, last op using it]; a
//     value returned lives until the `return`.
//  4. Offsets: runtime/buffer_plan.h's greedy first fit (IREE layout_slices
//     style) with the given alignment (default 64), checked with
//     plan_is_valid.
// The plan is a side structure (plans()), published as the "memory-plan"
// artifact: per function a header line with the arena peak and the naive
// sum of all buffer sizes, then one line per buffer with its op index,
// size, offset and live interval. The module itself is not changed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace vtc::passes {

struct PlannedBuffer {
  size_t op = 0;       // index in the function's ops
  unsigned result = 0;
  std::string value;   // description for printing
  uint64_t bytes = 0;
  uint64_t offset = 0;
  int64_t first = 0, last = 0;
};

struct FunctionPlan {
  std::string function;
  uint64_t arena_bytes = 0;  // planner's peak
  uint64_t naive_bytes = 0;  // sum of all buffer sizes
  std::vector<PlannedBuffer> buffers;
};

class MemoryPlanPass final : public Pass {
 public:
  MemoryPlanPass(std::map<std::string, int64_t> bindings, uint64_t alignment);
  std::string_view name() const override { return "memory-plan"; }
  bool run(ir::Module& module, PassContext& context) override;
  const std::vector<FunctionPlan>& plans() const { return plans_; }

 private:
  std::map<std::string, int64_t> bindings_;
  uint64_t alignment_;
  std::vector<FunctionPlan> plans_;
};

std::unique_ptr<Pass> create_memory_plan(const PassOptions& options);

}  // namespace vtc::passes
