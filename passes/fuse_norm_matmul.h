// fuse-norm-matmul: rms_norm (with its gain) as the prologue of the matmuls
// that read it.
//
// Algorithm, per function, one forward sweep over the `rms_norm` ops N =
// rms_norm(x, g):
//  1. Every user of N must read it as a matmul input: a `matmul` with N as
//     operand 0 only, or a `qk_rope`/`swiglu` region whose body uses the
//     argument bound to N only as operand 0 of matmuls. Otherwise N stays.
//  2. fuse_ops() merges N and all its users into one region, so the norm
//     is computed once for all of them (the Q, K and V projections of a
//     layer with their rope epilogues become one region). A single region
//     user keeps its kind (a swiglu region gains the norm as a prologue);
//     otherwise the region is `norm_matmul`. Ops between the users that
//     read their results move after the region (fuse_ops); if that cannot
//     form one region, N stays as it is.
// The body runs the same ops in the same order, so results do not change.
#pragma once

#include <memory>

#include "passes/pass.h"

namespace vtc::passes {

class FuseNormMatmulPass final : public Pass {
 public:
  std::string_view name() const override { return "fuse-norm-matmul"; }
  bool run(ir::Module& module, PassContext& context) override;
};

std::unique_ptr<Pass> create_fuse_norm_matmul(const PassOptions& options);

}  // namespace vtc::passes
