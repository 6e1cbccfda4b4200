// canonicalize: local simplification, CSE and DCE, to a fixed point.
//
// Algorithm, per function, repeated until nothing changes:
//  1. Fold (one forward sweep; each fold replaces all uses of the op's
//     result and leaves the op dead):
//     - reshape(x) to x's own shape            -> x
//     - reshape(reshape(x))                    -> one reshape(x)
//     - transpose(x) with the identity perm    -> x
//     - transpose(transpose(x, p), q)          -> transpose(x, p∘q), or x if
//       the composition is the identity
//     - cast(x) to x's own element type        -> x
//     - scale(x) by 1.0                        -> x
//  2. CSE: pure ops (Effect::Pure) with the same kind, operands, attributes
//     and result types are merged into the first; weight loads included.
//  3. DCE: an op is live if it is a root — side effects (state_write,
//     attention, transfers: ir::has_side_effect) or the terminator — or one
//     of its results is used by a live op. Dead ops are erased. state_read
//     has no side effect and is removed when unused.
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
