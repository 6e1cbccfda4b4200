// fuse-qk-rope: a Q or K projection and its epilogue in one region.
//
// Algorithm, per function, one forward sweep over the `rope` ops:
//  1. From the rope's input walk back through single-use producers:
//     an optional `rms_norm` (the QK-norm, on operand 0), an optional
//     `reshape` (from [T, H*D] to [T, H, D]), and then a `matmul` (the
//     projection). The chain must reach a matmul; otherwise the rope stays.
//  2. fuse_ops() moves matmul [+ reshape] [+ rms_norm] + rope into one
//     `fused {kind = qk_rope}` region; the projection input, the weights,
//     the positions (and rope's frequency factors) become its operands.
// The V projection has no rope and is left to fuse-norm-matmul. Results are
// unchanged: the body runs the same ops in the same order.
#pragma once

#include <memory>

#include "passes/pass.h"

namespace vtc::passes {

class FuseQkRopePass final : public Pass {
 public:
  std::string_view name() const override { return "fuse-qk-rope"; }
  bool run(ir::Module& module, PassContext& context) override;
};

std::unique_ptr<Pass> create_fuse_qk_rope(const PassOptions& options);

}  // namespace vtc::passes
