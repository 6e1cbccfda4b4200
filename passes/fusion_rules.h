// The fusion table: one row per region kind the partitioner (passes/fuse.h)
// forms, in the order it tries them. A row names a shape — one of four
// generic growers, written once in fuse.cpp — and the op kinds or pattern
// kinds (ir/ops.def) that fill it. A new fusion whose shape exists is one
// row here, the region kind's contract (ir/fused_kinds.h) and its backend
// kernels; `docs/passes.md` "Where to add a fusion" lists the steps.
//
// Shapes:
//   Epilogue   an anchor op whose only use starts a forward chain of
//              single-use consumers, matched step by step (`steps`); the
//              last step's result is the region's one output.
//   GatedPair  join(gate_step(anchor(x, Wg)), anchor(x, Wu)): two anchors
//              over one input, an activation on the gate, a binary join.
//   Prologue   an op every user of which reads it as an anchor's input (a
//              plain anchor's operand 0, or a region of an `absorbs` kind
//              whose body feeds it only to anchors' operand 0): the op and
//              all its users become one region, so it is computed once.
//   Chain      producer-consumer links: a single-use, single-result
//              producer merges into its consumer when both have a pattern
//              kind in `patterns` (or are regions of this row's kind).
#pragma once

#include <llvm/ADT/ArrayRef.h>

#include <cstdint>
#include <optional>
#include <string_view>

#include "ir/attr_enums.h"
#include "ir/module.h"
#include "support/target.h"

namespace vtc::passes {

enum class FusionShape : uint8_t { Epilogue, GatedPair, Prologue, Chain };

// A set of pattern kinds (ir::PatternKind bits).
using PatternMask = uint8_t;
constexpr PatternMask pattern_bit(ir::PatternKind k) { return static_cast<PatternMask>(1u << static_cast<unsigned>(k)); }
constexpr PatternMask kElementwiseOrBroadcast =
    pattern_bit(ir::PatternKind::Elementwise) | pattern_bit(ir::PatternKind::Broadcast);

// One step of an epilogue chain: an op of kind `op` (or, with op unset, of
// a pattern kind in `patterns`) that reads the chain's value as operand
// `operand` (-1: any one operand), repeated min..max times.
struct ChainStep {
  std::optional<ir::OpKind> op = {};
  PatternMask patterns = 0;
  int operand = -1;
  int min = 1, max = 1;
  // Extra condition on the op (e.g. a 1-D gain); null: none.
  bool (*accept)(const ir::Op&) = nullptr;
};

// A set of targets, one bit per Target.
using TargetMask = uint8_t;
constexpr TargetMask target_bit(Target t) { return TargetMask(1u << unsigned(t)); }
constexpr TargetMask kAnyTarget = target_bit(Target::Cpu) | target_bit(Target::Cuda);

struct FusionRule {
  ir::FusedKind kind;
  FusionShape shape;
  ir::OpKind anchor;                       // Epilogue/GatedPair: the anchor; Prologue: the prologue op
  llvm::ArrayRef<ChainStep> steps = {};         // Epilogue: the chain; GatedPair: the gate's activation (one step)
  std::optional<ir::OpKind> join = {};          // GatedPair: the op joining gate and up
  std::optional<ir::OpKind> prologue_of = {};   // Prologue: the anchor its users run
  llvm::ArrayRef<ir::FusedKind> absorbs = {};   // Prologue: region kinds that keep their kind under one prologue
  PatternMask patterns = 0;                // Chain: which pattern kinds link
  // The backends that run this kind as one kernel (docs/passes.md); the
  // partitioner forms it only for a target listed here, or for any target
  // (kAnyTarget: every one; a region is also a contract other passes read).
  TargetMask targets = kAnyTarget;
};

// Every row, in the order the partitioner applies them.
llvm::ArrayRef<FusionRule> fusion_rules();
const FusionRule* find_fusion_rule(ir::FusedKind kind);

}  // namespace vtc::passes
