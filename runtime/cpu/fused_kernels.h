// A fused region (a `fused` op of the fusion passes) run as one CPU kernel.
//
// The interpreter used to run a region's body op by op, so fusion gained
// nothing on the CPU. FusedKernel runs the bodies of norm_matmul, swiglu
// and qk_rope as one matmul_groups call (kernels.h):
//   - prologue: the region's rms_norm, token rows at a time, right before
//     the matmuls convert those rows (so the normed row is still in cache),
//     and the cos/sin table of every rope, computed once per token for all
//     the ropes of the same positions (Q and K share it);
//   - groups: every matmul of the one input; a swiglu pair (gate, up) is
//     one group, so the worker that computes a box of gate rows computes
//     the same box of up rows;
//   - epilogues, on each box just computed: silu(gate) then * up for a
//     swiglu pair, the rotation for a matmul that feeds reshape -> rope
//     (boxes of a whole number of heads).
// The gate, up and pre-rope values stay in the worker's scratch (they never
// reach memory), unless an observer wants every body value (vtc diff,
// --dump) or the body returns them: then each is written to the storage
// the memory plan gives it. The results have the same bits as op by op:
// the matmul values do not depend on the boxes, and each epilogue applies
// the same float kernels to rows of whole 8-value vectors (silu's vector
// and tail paths differ, so a swiglu group needs rows % 8 == 0).
//
// A matmul_epilogue region (one matmul, then a chain of elementwise ops) is
// one matmul_groups group whose box epilogue applies the chain row by row:
// add/mul with a [T, N] operand at the same index or an [N] row broadcast
// over tokens, scale, silu, gelu, each through the kernel the op-by-op
// interpreter calls for that op (exec_Add & co. in op_exec.cpp), in the
// op's operand order; the matmul value and the chain's intermediate values
// stay in the worker's scratch unless materialized. Same bits: add, mul
// and scale round once per element on the vector and tail paths alike,
// gelu is a per-element table lookup, and a chain with silu needs N % 8 ==
// 0 (whole vectors per row, as op by op over the whole tensor).
//
// of() dispatches on the region's kind and takes its body as the verifier
// decoded it (ir/fused_kinds.h): norm_matmul, swiglu and qk_rope regions
// run as one kernel unless a rope chain holds a QK-norm or no reshape;
// matmul_epilogue regions unless a chain op or operand shape is outside
// the list above; elementwise regions have no one-kernel form here. why_op_by_op() says
// which, for vtc compile's report. Left to op-by-op execution at run time
// too: shapes that break a rule above, and a swiglu of fewer than 16
// tokens (decode: pairing gate and up in one work item measured slower
// while the weights stream from DRAM).
#pragma once

#include <memory>
#include <string>

#include "ir/module.h"
#include "runtime/cpu/exec_context.h"

namespace vtc::cpu {

class FusedKernel {
 public:
  // The one-kernel form of a verified `fused` op, chosen by its kind; null
  // when the CPU runs it op by op.
  static std::unique_ptr<FusedKernel> of(const ir::Op& fused);
  // Why the CPU runs this verified region op by op; empty when of() is not
  // null.
  static std::string why_op_by_op(const ir::Op& fused);
  ~FusedKernel();

  // Computes the body's results into ctx.bufs (arguments, result homes and
  // the body's reshapes already bound); with `materialize`, every body
  // value (for an observer), else the matmul values that only an epilogue
  // reads stay in the workers' scratch. False, with nothing written, when
  // this step's shapes do not allow it; the caller then runs the body op
  // by op.
  bool run(ExecContext& ctx, bool materialize) const;

 public:
  struct Plan;  // the classified body (fused_kernels.cpp)

 private:
  explicit FusedKernel(std::unique_ptr<Plan> plan);
  bool run_epilogue(ExecContext& ctx, bool materialize) const;
  std::unique_ptr<Plan> plan_;
};

}  // namespace vtc::cpu
