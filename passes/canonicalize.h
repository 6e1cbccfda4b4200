// canonicalize: local simplification, CSE and DCE, to a fixed point.
//
// Algorithm, per function, repeated until nothing changes:
//  1. Fold patterns on the rewrite driver (passes/pattern_driver.h), which
//     also erases the ops they leave dead; `--debug-passes` logs each:
//     - reshape(x) to x's own shape            -> x
//     - reshape(reshape(x))                    -> one reshape(x)
//     - transpose(x) with the identity perm    -> x
//     - transpose(transpose(x, p), q)          -> transpose(x, p∘q), or x if
//       the composition is the identity
//     - cast(x) to x's own element type        -> x
//     - scale(x) by 1.0                        -> x
//  2. CSE: pure ops (Effect::Pure) with the same kind, operands, attributes
//     and result types are merged into the first; weight loads included.
//  3. DCE, by the driver: an op with no side effect (state_write,
//     attention and transfers have one: ir::has_side_effect) that is not the
//     terminator and whose results have no uses is erased, and its
//     operands' definers are revisited, so dead chains go in one run.
//     state_read has no side effect and is removed when unused.
// The pass never changes a step's outputs or effects.
#pragma once

#include <memory>

#include "passes/pass.h"

namespace vtc::passes {

class CanonicalizePass final : public Pass {
 public:
  std::string_view name() const override { return "canonicalize"; }
  bool run(ir::Module& module, PassContext& context) override;
};

std::unique_ptr<Pass> create_canonicalize(const PassOptions& options);

}  // namespace vtc::passes
