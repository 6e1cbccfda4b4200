#include "passes/fuse.h"

#include <fmt/format.h>

#include <algorithm>

#include "ir/op_attrs.h"
#include "passes/fusion.h"
#include "passes/pattern_driver.h"
#include "passes/rewrite.h"
#include "support/error.h"

namespace vtc::passes {
namespace {

using ir::OpKind;

bool in_mask(PatternMask mask, const ir::Op& op) { return (mask & pattern_bit(op.info().pattern)) != 0; }

// The op defining `v` if it has `kind` and `v` has exactly one use.
ir::Op* single_use_def(ir::Value v, OpKind kind) {
  if (!v->def || v->def->kind != kind || !v.has_one_use()) return nullptr;
  return v->def;
}

// fuse_ops through the driver; false (nothing fused) when the set cannot
// form one region.
bool try_fuse(PatternRewriter& rw, std::vector<ir::Op*> ops, const std::vector<ir::Value>& outputs, ir::FusedKind kind) {
  try {
    rw.fuse(std::move(ops), outputs, kind);
  } catch (const Error&) {
    return false;
  }
  return true;
}

// --- Epilogue -------------------------------------------------------------

bool step_matches(const ChainStep& step, const ir::Op& user, const ir::Use& use) {
  if (step.op ? user.kind != *step.op : (user.kind == OpKind::Fused || !in_mask(step.patterns, user))) return false;
  if (step.operand >= 0 && use.operand != static_cast<unsigned>(step.operand)) return false;
  return step.accept == nullptr || step.accept(user);
}

bool grow_epilogue(const FusionRule& rule, ir::Op& anchor, PatternRewriter& rw) {
  if (anchor.results.size() != 1) return false;
  std::vector<ir::Op*> members{&anchor};
  ir::Value value = anchor.results[0];
  for (const ChainStep& step : rule.steps) {
    int matched = 0;
    while (matched < step.max && value.has_one_use()) {
      const ir::Use use = value.uses()[0];
      ir::Op& user = *use.user;
      if (user.results.size() != 1 || !step_matches(step, user, use)) break;
      members.push_back(&user);
      value = user.results[0];
      ++matched;
    }
    if (matched < step.min) return false;
  }
  if (members.size() == 1) return false;
  return try_fuse(rw, members, {value}, rule.kind);
}

// --- GatedPair --------------------------------------------------------------

// join(act(anchor(x, Wg)), anchor(x, Wu)) with the gate on `gate_side`.
std::vector<ir::Op*> gated_pair(const FusionRule& rule, ir::Op& join, size_t gate_side) {
  if (join.operands.size() != 2 || join.operands[0] == join.operands[1]) return {};
  ir::Op* act = single_use_def(join.operands[gate_side], *rule.steps[0].op);
  ir::Op* up = single_use_def(join.operands[1 - gate_side], rule.anchor);
  if (!act || !up) return {};
  ir::Op* gate = single_use_def(act->operands[0], rule.anchor);
  if (!gate || gate == up || !(gate->operands[0] == up->operands[0])) return {};
  return {gate, act, up, &join};
}

bool grow_gated_pair(const FusionRule& rule, ir::Op& join, PatternRewriter& rw) {
  std::vector<ir::Op*> ops = gated_pair(rule, join, 0);
  if (ops.empty()) ops = gated_pair(rule, join, 1);
  return !ops.empty() && try_fuse(rw, ops, {join.results[0]}, rule.kind);
}

// --- Prologue ---------------------------------------------------------------

// True if a body argument is read only as operand 0 of `anchor` ops.
bool only_anchor_input(ir::Value arg, OpKind anchor) {
  for (const ir::Use& u : arg.uses())
    if (u.user->kind != anchor || u.operand != 0) return false;
  return !arg.use_empty();
}

bool reads_as_anchor_input(const FusionRule& rule, const ir::Op& user, ir::Value v) {
  if (user.kind == *rule.prologue_of) return user.operands[0] == v && !(user.operands[1] == v);
  if (user.kind != OpKind::Fused) return false;
  const ir::FusedKind kind = ir::FusedAttrs::of(user).kind;
  if (std::find(rule.absorbs.begin(), rule.absorbs.end(), kind) == rule.absorbs.end()) return false;
  for (size_t i = 0; i < user.operands.size(); ++i)
    if (user.operands[i] == v && !only_anchor_input(user.body->args[i], *rule.prologue_of)) return false;
  return true;
}

bool grow_prologue(const FusionRule& rule, ir::Op& norm, PatternRewriter& rw) {
  if (norm.results.size() != 1 || norm.operands.size() < 2 || norm.operands[1].type().rank() != 1) return false;
  ir::Value n = norm.results[0];
  std::vector<ir::Op*> users;
  for (const ir::Use& u : n.uses())
    if (std::find(users.begin(), users.end(), u.user) == users.end()) users.push_back(u.user);
  if (users.empty()) return false;
  for (const ir::Op* u : users)
    if (!reads_as_anchor_input(rule, *u, n)) return false;
  // Function order: the region's results follow its users'.
  const ir::Function& f = rw.function();
  std::sort(users.begin(), users.end(), [&](const ir::Op* a, const ir::Op* b) { return op_index(f, a) < op_index(f, b); });
  std::vector<ir::Op*> members{&norm};
  std::vector<ir::Value> outputs;
  for (ir::Op* user : users) {
    members.push_back(user);
    outputs.insert(outputs.end(), user->results.begin(), user->results.end());
  }
  const bool single_region = users.size() == 1 && users[0]->kind == OpKind::Fused;
  const ir::FusedKind kind = single_region ? ir::FusedAttrs::of(*users[0]).kind : rule.kind;
  return try_fuse(rw, members, outputs, kind);
}

// --- Chain ------------------------------------------------------------------

bool chain_member(const FusionRule& rule, const ir::Op* op) {
  if (op == nullptr) return false;
  if (op->kind == OpKind::Fused) return ir::FusedAttrs::of(*op).kind == rule.kind;
  return in_mask(rule.patterns, *op);
}

bool grow_chain(const FusionRule& rule, ir::Op& root, PatternRewriter& rw) {
  if (!chain_member(rule, &root)) return false;
  ir::Op* consumer = &root;
  bool any = false;
  for (bool grew = true; grew;) {
    grew = false;
    for (ir::Value v : consumer->operands) {
      ir::Op* producer = v->def;
      if (!chain_member(rule, producer) || producer == consumer || producer->results.size() != 1 || !v.has_one_use())
        continue;
      std::vector<ir::Value> outputs(consumer->results.begin(), consumer->results.end());
      consumer = &rw.fuse({producer, consumer}, outputs, rule.kind);
      grew = any = true;
      break;
    }
  }
  return any;
}

RewritePattern pattern_of(const FusionRule& rule) {
  const std::string_view name = ir::enum_name(rule.kind);
  switch (rule.shape) {
    case FusionShape::Epilogue:
      return {name, rule.anchor, [&rule](ir::Op& op, PatternRewriter& rw) { return grow_epilogue(rule, op, rw); }};
    case FusionShape::GatedPair:
      return {name, *rule.join, [&rule](ir::Op& op, PatternRewriter& rw) { return grow_gated_pair(rule, op, rw); }};
    case FusionShape::Prologue:
      return {name, rule.anchor, [&rule](ir::Op& op, PatternRewriter& rw) { return grow_prologue(rule, op, rw); }};
    case FusionShape::Chain:
      return {name, std::nullopt, [&rule](ir::Op& op, PatternRewriter& rw) { return grow_chain(rule, op, rw); }};
  }
  throw Error("fuse: unknown fusion shape");
}

// No target (a bare `fuse`): every row.
bool targets_include(TargetMask targets, std::optional<Target> target) {
  return !target || (targets & target_bit(*target)) != 0;
}

}  // namespace

bool FusePass::run(ir::Module& module, PassContext& context) {
  bool changed = false;
  for (const FusionRule* rule : rules_) {
    const RewritePattern pattern = pattern_of(*rule);
    for (auto& fn : module.functions)
      changed = apply_patterns_greedily(*fn, pattern, "fuse", context.debug_log, /*erase_dead=*/false).changed() || changed;
  }
  return changed;
}

std::unique_ptr<Pass> create_fuse(const PassOptions& options) {
  for (const auto& [key, value] : options.values)
    if (key != "kinds" && key != "target")
      throw Error(fmt::format("fuse: unknown option '{}' (options: kinds=K1+K2, target=cpu|cuda)", key));
  const std::optional<Target> target =
      options.has("target") ? std::optional(options.get_target("fuse", Target::Cpu)) : std::nullopt;
  std::vector<const FusionRule*> rules;
  const std::string kinds = options.get("kinds");
  if (kinds.empty()) {
    for (const FusionRule& rule : fusion_rules())
      if (targets_include(rule.targets, target)) rules.push_back(&rule);
    return std::make_unique<FusePass>(std::move(rules));
  }
  std::vector<ir::FusedKind> wanted;
  for (size_t at = 0; at <= kinds.size();) {
    size_t end = std::min(kinds.find('+', at), kinds.size());
    const std::string name = kinds.substr(at, end - at);
    std::optional<ir::FusedKind> kind = ir::parse_enum<ir::FusedKind>(name);
    if (!kind) {
      std::string known;
      for (const FusionRule& rule : fusion_rules()) known += (known.empty() ? "" : ", ") + std::string(ir::enum_name(rule.kind));
      throw Error(fmt::format("fuse: unknown region kind '{}' in kinds= (known: {})", name, known));
    }
    wanted.push_back(*kind);
    at = end + 1;
  }
  for (const FusionRule& rule : fusion_rules())  // table order, whatever order kinds= lists
    if (std::find(wanted.begin(), wanted.end(), rule.kind) != wanted.end() && targets_include(rule.targets, target))
      rules.push_back(&rule);
  return std::make_unique<FusePass>(std::move(rules));
}

}  // namespace vtc::passes
