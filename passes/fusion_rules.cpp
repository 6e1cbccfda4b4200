// The fusion table (fusion_rules.h). Each row is data; the shapes' growers
// are in fuse.cpp.
#include "passes/fusion_rules.h"

#include "ir/module.h"

namespace vtc::passes {
namespace {

using ir::FusedKind;
using ir::OpKind;

// The fused projection kernels take one [D] gain row.
bool one_row_gain(const ir::Op& norm) { return norm.operands[1].type().rank() == 1; }

// qk_rope: matmul -> [reshape to heads] -> [QK-norm] -> rope.
const ChainStep kQkRopeChain[] = {
    {.op = OpKind::Reshape, .operand = 0, .min = 0},
    {.op = OpKind::RmsNorm, .operand = 0, .min = 0, .accept = &one_row_gain},
    {.op = OpKind::Rope, .operand = 0},
};
// swiglu: the gate's activation.
const ChainStep kSiluGate[] = {{.op = OpKind::Silu, .operand = 0}};
// matmul_epilogue: bias and residual adds, scales, activations.
const ChainStep kElementwiseEpilogue[] = {{.patterns = kElementwiseOrBroadcast, .max = 16}};
// Projection regions that take an rms_norm prologue and keep their kind.
const FusedKind kTakesNormPrologue[] = {FusedKind::QkRope, FusedKind::Swiglu};

const FusionRule kRules[] = {
    {.kind = FusedKind::QkRope, .shape = FusionShape::Epilogue, .anchor = OpKind::Matmul, .steps = kQkRopeChain,
     .targets = kAnyTarget},
    {.kind = FusedKind::Swiglu, .shape = FusionShape::GatedPair, .anchor = OpKind::Matmul, .steps = kSiluGate,
     .join = OpKind::Mul, .targets = kAnyTarget},
    {.kind = FusedKind::NormMatmul, .shape = FusionShape::Prologue, .anchor = OpKind::RmsNorm,
     .prologue_of = OpKind::Matmul, .absorbs = kTakesNormPrologue, .targets = kAnyTarget},
    {.kind = FusedKind::MatmulEpilogue, .shape = FusionShape::Epilogue, .anchor = OpKind::Matmul,
     .steps = kElementwiseEpilogue, .targets = kAnyTarget},
    {.kind = FusedKind::Elementwise, .shape = FusionShape::Chain, .anchor = OpKind::Return,
     .patterns = kElementwiseOrBroadcast, .targets = kAnyTarget},
};

}  // namespace

llvm::ArrayRef<FusionRule> fusion_rules() { return kRules; }

const FusionRule* find_fusion_rule(ir::FusedKind kind) {
  for (const FusionRule& rule : kRules)
    if (rule.kind == kind) return &rule;
  return nullptr;
}

}  // namespace vtc::passes
