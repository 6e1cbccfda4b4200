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
//     layout (weight_layout_supports: q4_0, q8_0, ...) that the `types`
//     option allows and is in rows, it
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
// Option types=reference (default) allows q4_0 and q4_k: their x8 kernels
// sum in the float order of llama.cpp's repacked x86 kernels, its CPU
// default, so the logits stay those of the reference. types=all adds q8_0
// and q6_k, whose x8 kernels are faster for prefill (2x for q8_0 on Zen 3)
// but differ from every llama.cpp path by float reassociation; on small
// models that shifts activation roundings enough to move logits by ~1e-2.
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
  using Target = vtc::Target;
  explicit WeightLayoutPass(Target target, bool all_types = false) : target_(target), all_types_(all_types) {}
  std::string_view name() const override { return "weight-layout"; }
  bool run(ir::Module& module, PassContext& context) override;
  // Weight declarations (names, without '@') the last run changed.
  const std::vector<std::string>& changed_weights() const { return changed_; }

 private:
  bool is_candidate(const ir::WeightDecl& w) const;

  Target target_;
  bool all_types_;
  std::vector<std::string> changed_;
};

std::unique_ptr<Pass> create_weight_layout(const PassOptions& options);

}  // namespace vtc::passes
