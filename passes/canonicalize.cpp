#include "passes/canonicalize.h"

#include <fmt/format.h>

#include <llvm/ADT/StringMap.h>

#include "ir/op_attrs.h"
#include "ir/printer.h"
#include "passes/pattern_driver.h"
#include "support/error.h"

namespace vtc::passes {
namespace {

using ir::OpKind;

std::vector<int64_t> perm_of(const ir::Op& op) {
  return ir::TransposeAttrs::of(op).perm;
}

bool is_identity(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// --- fold patterns (docs/passes.md, canonicalize) ------------------------------

bool same_type_single(const ir::Op& op) {
  return op.results.size() == 1 && op.operands.size() == 1 && op.operands[0].type() == op.results[0].type();
}

// reshape(x) to x's own type -> x.
bool fold_reshape_noop(ir::Op& op, PatternRewriter& rw) {
  if (!same_type_single(op) || op.results[0].use_empty()) return false;
  return rw.replace_all_uses(op.results[0], op.operands[0]) > 0;
}

// reshape(reshape(y)) -> reshape(y) (or y itself when the types match).
bool fold_reshape_of_reshape(ir::Op& op, PatternRewriter& rw) {
  ir::Value x = op.operands[0];
  if (!x->def || x->def->kind != OpKind::Reshape) return false;
  rw.set_operand(op, 0, x->def->operands[0]);
  if (same_type_single(op)) rw.replace_all_uses(op.results[0], op.operands[0]);
  return true;
}

// transpose with the identity perm -> x; transpose(transpose(y, p), q) ->
// transpose(y, p∘q), or y when the composition is the identity.
bool fold_transpose(ir::Op& op, PatternRewriter& rw) {
  ir::Value x = op.operands[0], r = op.results[0];
  auto q = perm_of(op);
  if (is_identity(q) && x.type() == r.type()) return !r.use_empty() && rw.replace_all_uses(r, x) > 0;
  if (!x->def || x->def->kind != OpKind::Transpose) return false;
  auto p = perm_of(*x->def);
  if (p.size() != q.size()) return false;
  // result dim i = mid dim q[i] = input dim p[q[i]].
  std::vector<int64_t> composed(q.size());
  for (size_t i = 0; i < q.size(); ++i) {
    if (q[i] < 0 || static_cast<size_t>(q[i]) >= p.size()) return false;
    composed[i] = p[static_cast<size_t>(q[i])];
  }
  ir::Value y = x->def->operands[0];
  if (is_identity(composed) && y.type() == r.type()) return !r.use_empty() && rw.replace_all_uses(r, y) > 0;
  rw.set_operand(op, 0, y);
  op.set_attr("perm", ir::Attr::of_ints(composed));
  rw.changed_in_place(op);
  return true;
}

// cast to x's own type -> x.
bool fold_cast_noop(ir::Op& op, PatternRewriter& rw) {
  if (!same_type_single(op) || op.results[0].use_empty()) return false;
  return rw.replace_all_uses(op.results[0], op.operands[0]) > 0;
}

// scale by 1.0 -> x.
bool fold_scale_one(ir::Op& op, PatternRewriter& rw) {
  if (!same_type_single(op) || ir::ScaleAttrs::of(op).factor != 1.0 || op.results[0].use_empty()) return false;
  return rw.replace_all_uses(op.results[0], op.operands[0]) > 0;
}

const RewritePattern kFolds[] = {
    {"fold-reshape-noop", OpKind::Reshape, &fold_reshape_noop},
    {"fold-reshape-of-reshape", OpKind::Reshape, &fold_reshape_of_reshape},
    {"fold-transpose", OpKind::Transpose, &fold_transpose},
    {"fold-cast-noop", OpKind::Cast, &fold_cast_noop},
    {"fold-scale-one", OpKind::Scale, &fold_scale_one},
};

std::string cse_key(const ir::Op& op) {
  std::string key = std::to_string(static_cast<int>(op.kind)) + "(";
  for (ir::Value v : op.operands) key += fmt::format("{},", static_cast<const void*>(v.data()));
  key += "){";
  for (const auto& a : op.attrs) key += a.name + "=" + a.value.str() + ",";
  key += "}:";
  for (ir::Value v : op.results) key += v.type().str() + ",";
  if (op.body) key += ir::print(*op.body);  // fused regions merge only with equal bodies
  return key;
}

bool cse(ir::Function& f) {
  bool changed = false;
  llvm::StringMap<ir::Op*> seen;  // by cse_key
  for (auto& op : f.ops) {
    if (op->info().effect != ir::Effect::Pure || op->results.empty()) continue;
    auto [it, inserted] = seen.try_emplace(cse_key(*op), op.get());
    if (inserted) continue;
    for (size_t r = 0; r < op->results.size(); ++r)
      changed = op->results[r].replace_all_uses_with(it->second->results[r]) > 0 || changed;
  }
  return changed;
}

}  // namespace

bool CanonicalizePass::run(ir::Module& module, PassContext& context) {
  bool any = false;
  for (auto& fn : module.functions) {
    // Folds and DCE, then CSE; a CSE merge leaves duplicates dead and may
    // enable folds, so the driver runs again, until CSE finds nothing.
    for (int round = 0; round < 64; ++round) {
      any = apply_patterns_greedily(*fn, kFolds, name(), context.debug_log).changed() || any;
      if (!cse(*fn)) break;
      any = true;
    }
  }
  return any;
}

std::unique_ptr<Pass> create_canonicalize(const PassOptions& options) {
  require_no_options("canonicalize", options);
  return std::make_unique<CanonicalizePass>();
}

}  // namespace vtc::passes
