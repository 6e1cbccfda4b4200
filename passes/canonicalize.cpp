#include "passes/canonicalize.h"

#include <fmt/format.h>

#include <unordered_map>
#include <unordered_set>

#include "ir/op_attrs.h"
#include "ir/printer.h"
#include "passes/rewrite.h"
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

// Folds one op; returns true if its result now has a replacement (or the op
// was rewritten in place).
bool fold(ir::Function& f, ir::Op& op) {
  if (op.results.size() != 1 || op.operands.size() != 1) return false;
  ir::Value x = op.operands[0], r = op.results[0];
  switch (op.kind) {
    case OpKind::Reshape: {
      if (x.type().shape == r.type().shape && x.type() == r.type()) return replace_all_uses(f, r, x) > 0;
      if (x->def && x->def->kind == OpKind::Reshape) {
        op.operands[0] = x->def->operands[0];  // reshape(reshape(y)) -> reshape(y)
        if (op.operands[0].type() == r.type()) replace_all_uses(f, r, op.operands[0]);
        return true;
      }
      return false;
    }
    case OpKind::Transpose: {
      auto q = perm_of(op);
      if (is_identity(q) && x.type() == r.type()) return replace_all_uses(f, r, x) > 0;
      if (x->def && x->def->kind == OpKind::Transpose) {
        auto p = perm_of(*x->def);
        if (p.size() != q.size()) return false;
        // result dim i = mid dim q[i] = input dim p[q[i]].
        std::vector<int64_t> composed(q.size());
        for (size_t i = 0; i < q.size(); ++i) {
          if (q[i] < 0 || static_cast<size_t>(q[i]) >= p.size()) return false;
          composed[i] = p[static_cast<size_t>(q[i])];
        }
        ir::Value y = x->def->operands[0];
        if (is_identity(composed) && y.type() == r.type()) return replace_all_uses(f, r, y) > 0;
        op.operands[0] = y;
        op.set_attr("perm", ir::Attr::of_ints(composed));
        return true;
      }
      return false;
    }
    case OpKind::Cast:
      if (x.type() == r.type()) return replace_all_uses(f, r, x) > 0;
      return false;
    case OpKind::Scale: {
      if (ir::ScaleAttrs::of(op).factor == 1.0 && x.type() == r.type())
        return replace_all_uses(f, r, x) > 0;
      return false;
    }
    default:
      return false;
  }
}

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
  std::unordered_map<std::string, ir::Op*> seen;
  for (auto& op : f.ops) {
    if (op->info().effect != ir::Effect::Pure || op->results.empty()) continue;
    auto [it, inserted] = seen.emplace(cse_key(*op), op.get());
    if (inserted) continue;
    for (size_t r = 0; r < op->results.size(); ++r)
      changed = replace_all_uses(f, op->results[r], it->second->results[r]) > 0 || changed;
  }
  return changed;
}

bool dce(ir::Function& f) {
  std::unordered_set<const ir::ValueData*> used;
  std::vector<bool> live(f.ops.size(), false);
  for (size_t i = f.ops.size(); i-- > 0;) {
    const ir::Op& op = *f.ops[i];
    bool root = ir::has_side_effect(op.info().effect) || op.info().effect == ir::Effect::Terminator;
    bool needed = root;
    for (ir::Value r : op.results) needed = needed || used.count(r.data());
    if (!needed) continue;
    live[i] = true;
    for (ir::Value v : op.operands) used.insert(v.data());
  }
  size_t before = f.ops.size(), k = 0;
  std::vector<std::unique_ptr<ir::Op>> kept;
  kept.reserve(before);
  for (auto& op : f.ops)
    if (live[k++]) kept.push_back(std::move(op));
  f.ops = std::move(kept);
  return f.ops.size() != before;
}

}  // namespace

bool CanonicalizePass::run(ir::Module& module, PassContext&) {
  bool any = false;
  for (auto& fn : module.functions) {
    ir::Function& f = *fn;
    for (int round = 0; round < 64; ++round) {
      bool changed = false;
      for (auto& op : f.ops) changed = fold(f, *op) || changed;
      changed = cse(f) || changed;
      changed = dce(f) || changed;
      if (!changed) break;
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
