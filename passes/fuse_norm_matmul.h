// fuse-norm-matmul: rms_norm (with its gain) as the prologue of the matmuls
// that read it.
//
// Algorithm, per function, one forward sweep over the `rms_norm` ops N =
// rms_norm(x, g):
//  1. Every user of N must read it as a matmul input: a `matmul` with N as
//     operand 0 only, or a `qk_rope`/`swiglu` region whose body uses the
//     argument bound to N only as operand 0 of matmuls. Otherwise N stays.
//  2. For each user U: a copy of N is placed just before U and fuse_ops()
//     merges the copy and U into one region: `norm_matmul` for a plain
//     matmul, U's own kind for a region (the norm becomes its prologue).
//     N is then dead and removed.
// Each region recomputes the norm of its input row. That is cheap (one pass
// over K values per row against K x N for the matmul) and bit-identical,
// since every copy runs the same kernel on the same data, so the results
// do not change.
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
