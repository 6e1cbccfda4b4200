#include "passes/fuse_norm_matmul.h"

#include <fmt/format.h>

#include <algorithm>

#include "ir/op_attrs.h"
#include "passes/fusion.h"
#include "passes/rewrite.h"
#include "support/error.h"

namespace vtc::passes {
namespace {

using ir::OpKind;

// True if `arg` of a body is used only as the input (operand 0) of matmuls.
bool only_matmul_input(const ir::Function& body, ir::Value arg) {
  size_t uses = 0;
  for (const auto& op : body.ops)
    for (size_t i = 0; i < op->operands.size(); ++i) {
      if (!(op->operands[i] == arg)) continue;
      if (op->kind != OpKind::Matmul || i != 0) return false;
      ++uses;
    }
  return uses > 0;
}

bool reads_as_matmul_input(const ir::Op& user, ir::Value n) {
  if (user.kind == OpKind::Matmul) return user.operands[0] == n && !(user.operands[1] == n);
  if (!is_region(&user, "qk_rope") && !is_region(&user, "swiglu")) return false;
  for (size_t i = 0; i < user.operands.size(); ++i)
    if (user.operands[i] == n && !only_matmul_input(*user.body, user.body->args[i])) return false;
  return true;
}

std::vector<ir::Op*> users_of(const ir::Function& f, ir::Value v) {
  std::vector<ir::Op*> users;
  for (const auto& op : f.ops)
    if (std::find(op->operands.begin(), op->operands.end(), v) != op->operands.end()) users.push_back(op.get());
  return users;
}

// Merges `norm` and all its users into one region; false if a user does
// not qualify or the set cannot form one region.
bool fuse_with_users(ir::Function& f, ir::Op& norm) {
  ir::Value n = norm.results[0];
  if (norm.operands[1].type().rank() != 1) return false;  // grouped gains: the fused kernels take one row
  std::vector<ir::Op*> users = users_of(f, n);
  if (users.empty()) return false;
  for (const ir::Op* u : users)
    if (!reads_as_matmul_input(*u, n)) return false;
  std::vector<ir::Op*> members{&norm};
  std::vector<ir::Value> outputs;
  for (ir::Op* user : users) {
    members.push_back(user);
    outputs.insert(outputs.end(), user->results.begin(), user->results.end());
  }
  // One user keeps its kind (a swiglu region gains a norm prologue); the
  // norm feeding several projections names the merged region.
  const bool single_region = users.size() == 1 && users[0]->kind == OpKind::Fused;
  const std::string kind =
      std::string(ir::enum_name(single_region ? ir::FusedAttrs::of(*users[0]).kind : ir::FusedKind::NormMatmul));
  try {
    fuse_ops(f, members, outputs, kind);
  } catch (const Error&) {
    return false;  // an op between the users depends on them in a way one region cannot hold
  }
  return true;
}

}  // namespace

bool FuseNormMatmulPass::run(ir::Module& module, PassContext&) {
  bool changed = false;
  for (auto& fn : module.functions) {
    for (ir::Op* norm : ops_of_kind(*fn, OpKind::RmsNorm)) changed = fuse_with_users(*fn, *norm) || changed;
  }
  return changed;
}

std::unique_ptr<Pass> create_fuse_norm_matmul(const PassOptions& options) {
  require_no_options("fuse-norm-matmul", options);
  return std::make_unique<FuseNormMatmulPass>();
}

}  // namespace vtc::passes
