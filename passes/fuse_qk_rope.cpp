#include "passes/fuse_qk_rope.h"

#include <fmt/format.h>

#include "passes/fusion.h"
#include "support/error.h"

namespace vtc::passes {
namespace {

using ir::OpKind;

// The ops of the projection chain ending at `rope`, or empty if there is none.
std::vector<ir::Op*> projection_chain(const ir::Function& f, ir::Op& rope) {
  std::vector<ir::Op*> chain{&rope};
  ir::Value v = rope.operands[0];
  if (ir::Op* norm = single_use_def(f, v, OpKind::RmsNorm)) {
    if (norm->operands[1].type().rank() != 1) return {};  // the fused epilogue takes a [D] gain
    chain.push_back(norm);
    v = norm->operands[0];
  }
  if (ir::Op* reshape = single_use_def(f, v, OpKind::Reshape)) {
    chain.push_back(reshape);
    v = reshape->operands[0];
  }
  ir::Op* matmul = single_use_def(f, v, OpKind::Matmul);
  if (!matmul) return {};
  chain.push_back(matmul);
  return chain;
}

}  // namespace

bool FuseQkRopePass::run(ir::Module& module, PassContext&) {
  bool changed = false;
  for (auto& fn : module.functions) {
    for (ir::Op* rope : ops_of_kind(*fn, OpKind::Rope)) {
      std::vector<ir::Op*> chain = projection_chain(*fn, *rope);
      if (chain.empty()) continue;
      fuse_ops(*fn, chain, {rope->results[0]}, "qk_rope");
      changed = true;
    }
  }
  return changed;
}

std::unique_ptr<Pass> create_fuse_qk_rope(const PassOptions& options) {
  require_no_options("fuse-qk-rope", options);
  return std::make_unique<FuseQkRopePass>();
}

}  // namespace vtc::passes
