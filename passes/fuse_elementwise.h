// fuse-elementwise: chains of elementwise ops into one region.
//
// Algorithm, per function, to a fixed point:
//  1. A consumer C is an elementwise op (ops.def fusion class Elementwise:
//     add, mul, silu, gelu, sigmoid, softplus, exp, neg, scale, cast) or an
//     `elementwise` region.
//  2. If an operand of C is the only use of a single-result producer P that
//     is also elementwise, fuse_ops() merges P and C into one `fused {kind =
//     elementwise}` region (a region consumer or producer is inlined, so
//     chains grow one link at a time), and the sweep restarts.
// Ops with several users are not duplicated, so no value is computed twice.
// A lone elementwise op stays as it is. Results are unchanged: the body runs
// the same ops in the same order.
#pragma once

#include <memory>

#include "passes/pass.h"

namespace vtc::passes {

class FuseElementwisePass final : public Pass {
 public:
  std::string_view name() const override { return "fuse-elementwise"; }
  bool run(ir::Module& module, PassContext& context) override;
};

std::unique_ptr<Pass> create_fuse_elementwise(const PassOptions& options);

}  // namespace vtc::passes
