// weight-layout{target=cpu|cuda}: chooses how each weight's bytes are
// arranged for the target's kernels, and records it in the weight's element
// type (support/weight_layout.h, docs/ir.md): q4_k -> q4_k_x8.
//
// Algorithm (target=cpu; target=cuda changes nothing, its kernels read
// ggml's rows layout):
//  1. Uses: every `weight` op result is traced to its declaration, and
//     through every fused op that takes it to the body argument bound to it.
//     A use is "matmul weight" if it is operand 1 of a `matmul` (at top
//     level or in a fused body); any other use (embed, moe_ffn, reshape,
//     return, ...) pins the declaration to the rows layout.
//  2. A declaration becomes Interleaved8 (x8) when its type has an x8
//     layout (weight_layout_supports: q4_0, q8_0, ...) and is in rows, it
//     is 2-D with a constant row count (dim 0) that is a multiple of 8, it
//     has at least one use and every use is a matmul weight; and every
//     other declaration naming the same GGUF tensor qualifies too (one
//     tensor is stored in one layout: `vtc compile --pack` rewrites its
//     bytes). A tied embedding (token_embd read by embed and the output
//     matmul) therefore stays rows.
//  3. Rewrite: the declaration's type, the result type of each of its
//     `weight` ops and the type of each fused-body argument bound to one get
//     the new layout, so the verifier's [type] and [layout] rules hold. No
//     op is added, removed or moved.
//  4. Report: one remark, also the first line of the "weight-layout"
//     artifact: "weight-layout: 5 of 25 weights -> x8 (q4_k 4, q4_0 1)";
//     then one artifact line per weight of such a type that stays rows, and why
//     ("@token_embd stays rows: read by embed").
// The pass is idempotent: a weight already in x8 is left as it is.
// `--disable-pass weight-layout` (vtc bench/run/compile --no-weight-layout)
// keeps every weight in the rows layout.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace vtc::passes {

class WeightLayoutPass final : public Pass {
 public:
  enum class Target { Cpu, Cuda };
  explicit WeightLayoutPass(Target target) : target_(target) {}
  std::string_view name() const override { return "weight-layout"; }
  bool run(ir::Module& module, PassContext& context) override;
  // Weight declarations (names, without '@') the last run changed.
  const std::vector<std::string>& changed_weights() const { return changed_; }

 private:
  Target target_;
  std::vector<std::string> changed_;
};

std::unique_ptr<Pass> create_weight_layout(const PassOptions& options);

}  // namespace vtc::passes
