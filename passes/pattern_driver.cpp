#include "passes/pattern_driver.h"

#include <fmt/format.h>

#include <ostream>

#include "passes/fusion.h"
#include "support/error.h"

namespace vtc::passes {
namespace {

bool trivially_dead(const ir::Op& op) {
  const ir::Effect effect = op.info().effect;
  if (ir::has_side_effect(effect) || effect == ir::Effect::Terminator) return false;
  for (ir::Value r : op.results)
    if (!r.use_empty()) return false;
  return true;
}

// "'reshape' %x" (the first result's name hint, if any).
std::string describe_op(const ir::Op& op) {
  std::string s = "'" + std::string(op.mnemonic()) + "'";
  if (!op.results.empty() && !op.results[0]->name.empty()) s += " %" + op.results[0]->name;
  return s;
}

}  // namespace

void PatternRewriter::push(ir::Op* op) {
  if (op == nullptr) return;
  erased_.erase(op);  // a new op may reuse an erased one's address
  if (queued_.insert(op).second) list_.push_back(op);
}

void PatternRewriter::push_users(ir::Value v) {
  for (const ir::Use& u : v.uses()) push(u.user);
}

size_t PatternRewriter::replace_all_uses(ir::Value from, ir::Value to) {
  push_users(from);
  if (from->def) push(from->def);  // may be dead now
  return from.replace_all_uses_with(to);
}

void PatternRewriter::set_operand(ir::Op& op, size_t i, ir::Value v) {
  if (ir::Op* old_def = op.operands[i]->def) push(old_def);
  op.set_operand(i, v);
  push(&op);
}

void PatternRewriter::changed_in_place(ir::Op& op) {
  push(&op);
  for (ir::Value r : op.results) push_users(r);
}

ir::Op& PatternRewriter::fuse(std::vector<ir::Op*> ops, const std::vector<ir::Value>& outputs, ir::FusedKind kind) {
  const size_t members = ops.size();
  std::vector<ir::Op*> gone = ops;
  ir::Op& region = fuse_ops(f_, std::move(ops), outputs, std::string(ir::enum_name(kind)));
  for (ir::Op* op : gone) erased_.insert(op);  // destroyed by fuse_ops; only their addresses remain
  push(&region);
  for (ir::Value r : region.results) push_users(r);
  note_ = fmt::format("formed a {} region of {} ops", ir::enum_name(kind), members);
  return region;
}

DriverStats apply_patterns_greedily(ir::Function& f, llvm::ArrayRef<RewritePattern> patterns, std::string_view pass,
                                    std::ostream* log, bool erase_dead) {
  PatternRewriter rw(f);
  for (auto& op : f.ops) rw.push(op.get());
  DriverStats stats;
  const size_t bound = 64 * (f.ops.size() + 16);
  llvm::DenseSet<ir::Op*> dead;  // erased here, still in f.ops until the end
  while (rw.head_ < rw.list_.size()) {
    ir::Op* op = rw.list_[rw.head_++];
    rw.queued_.erase(op);
    if (rw.erased_.count(op) || dead.count(op)) continue;
    if (erase_dead && trivially_dead(*op)) {
      for (ir::Value v : op->operands) rw.push(v->def);
      if (log) *log << fmt::format("debug: {}: @{}: erased dead {}\n", pass, f.name, describe_op(*op));
      op->drop_operands();
      dead.insert(op);
      ++stats.erased;
      continue;
    }
    for (const RewritePattern& pattern : patterns) {
      if (pattern.root && *pattern.root != op->kind) continue;
      const std::string what = log ? describe_op(*op) : std::string();
      rw.note_ = "applied";
      if (!pattern.apply(*op, rw)) continue;
      if (log) *log << fmt::format("debug: {}: @{}: {} on {}: {}\n", pass, f.name, pattern.name, what, rw.note_);
      if (++stats.applications > bound)
        throw Error(fmt::format("{}: pattern '{}' still applies after {} rewrites of @{}: the patterns do not converge",
                                pass, pattern.name, bound, f.name));
      break;
    }
  }
  if (!dead.empty()) std::erase_if(f.ops, [&](const std::unique_ptr<ir::Op>& op) { return dead.count(op.get()) != 0; });
  return stats;
}

}  // namespace vtc::passes
