// memory-plan{T=..,S=..,..,align=64}: activation arena offsets per step.
//
// plan_function() is the one planner: the pass publishes its result, `vtc
// compile` stores it, and the CPU interpreter executes with it (a plan made
// at the compiled bounds serves every step within them, because every size
// is a polynomial in the step symbols with non-negative coefficients).
//
// Algorithm:
//  1. Storage classes. Weights are mapped from the GGUF: not planned.
//     Aliases share their root's storage: `reshape` and `view` results (of
//     their operand), a fused body's arguments (of the op's operands), and
//     a value a body returns, when a body op defines it and it is returned
//     once (of the fused op's result). Everything else is a buffer: the
//     function's arguments (copied in by the runtime), every op result
//     (`state_read` included: it gathers the step's slots) and the other
//     values a fused body defines.
//  2. Size: product of the dims, evaluated with the symbol bindings (an
//     unbound symbol is an error naming it) times the element size.
//  3. Liveness, in op indices of the function: arguments from -1; a result
//     from its op to its last reader (through aliases; values returned live
//     to the `return`); body intermediates only during their fused op.
//  4. Offsets: passes/buffer_plan.h's greedy first fit (IREE
//     layout_slices style) with the alignment (default 64), one arena per
//     placement (host, device), checked with plan_is_valid.
// The pass publishes the plans (plans()) as the "memory-plan" artifact: per
// function a header with the arena peak and the naive sum of all buffer
// sizes, then one line per buffer. The module is not changed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "passes/pass.h"

namespace vtc::passes {

struct PlannedBuffer {
  // Stable position of the value in its function, so a plan stored in an
  // artifact maps back onto the re-parsed IR: "arg#2", "op#5.r#0",
  // "op#7.body.op#1.r#0".
  std::string key;
  std::string value;   // description for printing
  std::string op;      // "op #5 'silu'" or "arg #0"
  ir::Placement placement = ir::Placement::Host;
  uint64_t bytes = 0;
  uint64_t offset = 0;  // in the arena of its placement
  int64_t first = 0, last = 0;
};

struct FunctionPlan {
  std::string function;
  std::map<std::string, int64_t> bindings;  // the bounds it was made for
  uint64_t alignment = 64;
  uint64_t host_arena_bytes = 0;    // planner's peak, per placement
  uint64_t device_arena_bytes = 0;
  uint64_t naive_bytes = 0;         // sum of all buffer sizes
  std::vector<PlannedBuffer> buffers;

  uint64_t arena_bytes() const { return host_arena_bytes + device_arena_bytes; }
  std::vector<std::string> lines() const;  // the artifact text
};

// The values a fused body writes straight into the op's results: each
// return operand that a body op defines and that is returned once, mapped
// to its result. Other returned values are copied out after the body.
std::unordered_map<const ir::ValueData*, ir::Value> body_result_homes(const ir::Op& fused);

// Plans one function. Throws vtc::Error for an unbound symbol or a
// quantized activation.
FunctionPlan plan_function(const ir::Function& f, const std::map<std::string, int64_t>& bindings,
                           uint64_t alignment = 64);

// Key of every value of `f` (args, results, body values), for resolving a
// plan against a function.
std::map<std::string, const ir::ValueData*> plan_keys(const ir::Function& f);

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
