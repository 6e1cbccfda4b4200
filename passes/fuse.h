// fuse: the fusion partitioner. One pass forms every kind of `fused`
// region, from the table in passes/fusion_rules.h.
//
// Algorithm, per row of the table in order (qk_rope, swiglu, norm_matmul,
// matmul_epilogue, elementwise), per function: the row's shape becomes one
// rewrite pattern on the greedy driver (passes/pattern_driver.h), which
// visits every op once and again whenever a fusion touches it:
//  - Epilogue (qk_rope, matmul_epilogue): at an anchor (a plain matmul)
//    whose result has one use, walk forward through the chain steps: the
//    value's one user must be the step's op kind (or pattern kind), read
//    the value in the step's operand, and pass the step's condition;
//    optional steps are skipped when the user does not match, a repeated
//    step extends while it matches and the value has one use. When every
//    required step matched, the anchor and the chain become one region whose
//    output is the chain's last value.
//  - GatedPair (swiglu): at a join op (mul), one operand is the single-use
//    activation of a single-use matmul (the gate), the other a single-use
//    matmul of the same input (the up), either order.
//  - Prologue (norm_matmul): at an rms_norm with a [D] gain whose every
//    user reads it as a matmul input (a matmul's operand 0 only, or a
//    region of an absorbing kind whose body feeds it only to matmuls'
//    operand 0), the norm and all its users, in function order, become one
//    region; a single region user keeps its kind (a swiglu gains the norm).
//  - Chain (elementwise): at an op of an elementwise or broadcast pattern
//    kind (or an elementwise region), a single-result producer of such a
//    kind whose one use is this op merges into it; repeated while one does.
// Use queries are the values' def-use chains, O(uses). fuse_ops()
// (passes/fusion.h) builds each region; a set it refuses (an op between
// the members that one region cannot hold) is left as it is.
// Options: kinds=K1+K2 (only these rows; default all), target=cpu|cuda
// (only rows whose backends run the kind as one kernel, fusion_rules.h).
// Results are unchanged: a body runs the same ops in the same order.
#pragma once

#include <memory>
#include <vector>

#include "passes/fusion_rules.h"
#include "passes/pass.h"

namespace vtc::passes {

class FusePass final : public Pass {
 public:
  explicit FusePass(std::vector<const FusionRule*> rules) : rules_(std::move(rules)) {}
  std::string_view name() const override { return "fuse"; }
  bool run(ir::Module& module, PassContext& context) override;

 private:
  std::vector<const FusionRule*> rules_;
};

std::unique_ptr<Pass> create_fuse(const PassOptions& options);

}  // namespace vtc::passes
