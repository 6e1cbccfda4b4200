#include "passes/fuse_elementwise.h"

#include <fmt/format.h>

#include "passes/fusion.h"
#include "passes/rewrite.h"
#include "support/error.h"

namespace vtc::passes {
namespace {

bool is_elementwise(const ir::Op* op) {
  return op && ((op->kind != ir::OpKind::Fused && op->info().is_elementwise()) ||
                is_region(op, "elementwise"));
}

// Merges one producer into one consumer; false when no pair is left.
bool fuse_one_link(ir::Function& f) {
  for (auto& op : f.ops) {
    ir::Op* consumer = op.get();
    if (!is_elementwise(consumer)) continue;
    for (ir::Value v : consumer->operands) {
      ir::Op* producer = v->def;
      if (!is_elementwise(producer) || producer == consumer || producer->results.size() != 1) continue;
      if (use_count(f, v) != 1) continue;
      std::vector<ir::Value> outputs(consumer->results.begin(), consumer->results.end());
      fuse_ops(f, {producer, consumer}, outputs, "elementwise");
      return true;
    }
  }
  return false;
}

}  // namespace

bool FuseElementwisePass::run(ir::Module& module, PassContext&) {
  bool changed = false;
  for (auto& fn : module.functions)
    while (fuse_one_link(*fn)) changed = true;
  return changed;
}

std::unique_ptr<Pass> create_fuse_elementwise(const PassOptions& options) {
  require_no_options("fuse-elementwise", options);
  return std::make_unique<FuseElementwisePass>();
}

}  // namespace vtc::passes
