// The kinds of `fused` region: the contract between the fusion passes that
// form them (passes/fuse_*.cpp) and the backends that run them.
//
// A region's `kind` attribute names the shape of its body. The pass that
// sets a kind forms only that shape, the verifier checks it (a malformed
// body is an error naming the kind), and a backend dispatches on the kind
// and reads the decoded body below instead of pattern-matching ops again.
//
//   elementwise  every body op is an Elementwise op of the op table.
//   norm_matmul  a projection region (below) with its rms_norm prologue.
//   swiglu       a projection region holding one silu(x @ Wg) * (x @ Wu)
//                pair and nothing else, with or without the prologue.
//   qk_rope      a projection region holding one matmul -> reshape ->
//                [rms_norm] -> rope chain and nothing else, with or without
//                the prologue.
//   matmul_epilogue  one matmul(input arg, weight arg), then a chain of one
//                or more elementwise ops (the op table's Elementwise class:
//                a bias or residual add, an activation, a scale), each
//                reading the previous chain value (the matmul's value for
//                the first) exactly once, every other operand an argument
//                (a [T, N] residual, an [N] bias or scale); then the return
//                of the last chain value only (EpilogueRegion below).
//
// A projection region's body, in order: at most one rms_norm(arg, gain arg
// [D]) as prologue; matmuls that all read one value (the prologue's result,
// or else one argument) with weight arguments; then per matmul at most one
// epilogue: silu/mul over a gate and an up matmul, or reshape -> optional
// rms_norm (QK-norm, gain an argument) -> rope (positions and frequency
// factors arguments); then the return.
#pragma once

#include <vector>

#include "ir/attr_enums.h"
#include "ir/module.h"

namespace vtc::ir {

// FusedKind, the `kind` attribute's enum, is declared in ir/attr_enums.def.

// The kind of a `fused` op; throws vtc::Error for a missing or unknown one.
FusedKind fused_kind(const Op& fused);

// A decoded projection region (norm_matmul, swiglu, qk_rope).
struct ProjectionRegion {
  struct SwigluPair {
    const Op *gate, *silu, *up, *mul;
  };
  struct RopeChain {
    const Op *matmul, *reshape, *qk_norm, *rope;  // qk_norm: null when absent
  };
  const Op* norm = nullptr;          // the prologue, or null
  Value input;                       // what every matmul reads
  std::vector<const Op*> matmuls;    // all of them, in body order
  std::vector<const Op*> plain;      // matmuls with no epilogue
  std::vector<SwigluPair> swiglu;
  std::vector<RopeChain> ropes;
  // The body returns a matmul, silu or reshape value (one a backend's
  // epilogue could otherwise keep out of memory).
  bool intermediates_returned = false;
};

// Decodes the body of a projection region of this kind; throws vtc::Error
// naming the kind and the first body op that breaks the contract.
ProjectionRegion decode_projection_region(FusedKind kind, const Function& body);

// A decoded matmul_epilogue region: the matmul, then the chain in body
// order (chain.back() is the returned value's op).
struct EpilogueRegion {
  const Op* matmul = nullptr;
  std::vector<const Op*> chain;
};

// Decodes the body of a matmul_epilogue region; throws vtc::Error naming
// the kind and the first body op that breaks the contract.
EpilogueRegion decode_epilogue_region(const Function& body);

// Checks a fused op's body against its kind (the verifier's check); throws
// vtc::Error naming the kind.
void check_fused_body(const Op& fused);

}  // namespace vtc::ir
