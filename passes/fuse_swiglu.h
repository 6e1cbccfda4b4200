// fuse-swiglu: the gated feed-forward input, mul(silu(x @ Wg), x @ Wu), as
// one region.
//
// Algorithm, per function, one forward sweep over the `mul` ops:
//  1. One operand of the mul is a single-use `silu` of a single-use
//     `matmul(x, Wg)`; the other is a single-use `matmul(x, Wu)` of the same
//     x (either operand order).
//  2. fuse_ops() moves the two matmuls, the silu and the mul into one
//     `fused {kind = swiglu}` region with operands x, Wg, Wu.
// The down projection stays outside (its input is the region's result).
// Results are unchanged: the body runs the same ops.
#pragma once

#include <memory>

#include "passes/pass.h"

namespace vtc::passes {

class FuseSwigluPass final : public Pass {
 public:
  std::string_view name() const override { return "fuse-swiglu"; }
  bool run(ir::Module& module, PassContext& context) override;
};

std::unique_ptr<Pass> create_fuse_swiglu(const PassOptions& options);

}  // namespace vtc::passes
