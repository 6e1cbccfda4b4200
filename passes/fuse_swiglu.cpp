#include "passes/fuse_swiglu.h"

#include <fmt/format.h>

#include "passes/fusion.h"
#include "support/error.h"

namespace vtc::passes {
namespace {

using ir::OpKind;

// The ops of mul(silu(x @ Wg), x @ Wu) rooted at `mul` with the gate on
// operand `gate_side`, or empty.
std::vector<ir::Op*> swiglu_ops(const ir::Function& f, ir::Op& mul, size_t gate_side) {
  ir::Op* silu = single_use_def(f, mul.operands[gate_side], OpKind::Silu);
  ir::Op* up = single_use_def(f, mul.operands[1 - gate_side], OpKind::Matmul);
  if (!silu || !up || mul.operands[0] == mul.operands[1]) return {};
  ir::Op* gate = single_use_def(f, silu->operands[0], OpKind::Matmul);
  if (!gate || gate == up || !(gate->operands[0] == up->operands[0])) return {};
  return {gate, silu, up, &mul};
}

}  // namespace

bool FuseSwigluPass::run(ir::Module& module, PassContext&) {
  bool changed = false;
  for (auto& fn : module.functions) {
    for (ir::Op* mul : ops_of_kind(*fn, OpKind::Mul)) {
      std::vector<ir::Op*> ops = swiglu_ops(*fn, *mul, 0);
      if (ops.empty()) ops = swiglu_ops(*fn, *mul, 1);
      if (ops.empty()) continue;
      fuse_ops(*fn, ops, {mul->results[0]}, "swiglu");
      changed = true;
    }
  }
  return changed;
}

std::unique_ptr<Pass> create_fuse_swiglu(const PassOptions& options) {
  require_no_options("fuse-swiglu", options);
  return std::make_unique<FuseSwigluPass>();
}

}  // namespace vtc::passes
