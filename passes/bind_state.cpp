#include "passes/bind_state.h"

#include <fmt/format.h>

#include <map>

#include "ir/op_attrs.h"
#include "support/error.h"
#include "support/kv_cache_type.h"

namespace vtc::passes {

bool BindStatePass::run(ir::Module& module, PassContext& context) {
  slots_.clear();
  std::map<std::string, size_t> slot_of;
  for (const auto& s : module.states) {
    std::string dims = ir::shape_str(s.type.shape);
    std::string layout = fmt::format("{}<{}{}{}, {}>", ir::state_kind_name(s.kind), dims, dims.empty() ? "" : " x ",
                                     s.type.elem.name(), ir::placement_name(s.type.placement));
    slot_of[s.name] = slots_.size();
    slots_.push_back({static_cast<int>(slots_.size()), s.name, layout, {}});
  }
  std::vector<std::string> problems;
  for (const auto& fn : module.functions) {
    const ir::Function& f = *fn;
    for (size_t i = 0; i < f.ops.size(); ++i) {
      const ir::Op& op = *f.ops[i];
      if (op.kind != ir::OpKind::StateRead && op.kind != ir::OpKind::StateWrite && op.kind != ir::OpKind::Attention)
        continue;
      std::string where = fmt::format("@{} op #{} '{}'", f.name, i, op.mnemonic());
      const std::string* state = ir::state_symbol(op);
      if (!state) {
        problems.push_back(where + ": no state attribute");
        continue;
      }
      const ir::StateDecl* decl = module.find_state(*state);
      if (!decl) {
        problems.push_back(fmt::format("{}: state @{} is not declared", where, *state));
        continue;
      }
      if (op.kind == ir::OpKind::StateRead && (op.results.size() != 1 || !(op.results[0].type() == decl->type)))
        problems.push_back(fmt::format("{}: reads @{} as {} but it is declared {}", where, *state,
                                       op.results.empty() ? "nothing" : op.results[0].type().str(), decl->type.str()));
      if (op.kind == ir::OpKind::StateWrite && (op.operands.size() != 1 || !(op.operands[0].type() == decl->type)))
        problems.push_back(fmt::format("{}: writes {} to @{} declared {}", where,
                                       op.operands.empty() ? "nothing" : op.operands[0].type().str(), *state,
                                       decl->type.str()));
      std::vector<const std::string*> touched = {state};
      const std::string v_state = op.kind == ir::OpKind::Attention ? ir::AttentionAttrs::of(op).v_state : std::string();
      if (op.kind == ir::OpKind::Attention) {
        // K and V in one state [2, ...], or K in `state` and V in `v_state`,
        // each [1, ...] (halves of different types).
        const bool split = !v_state.empty();
        if (split) touched.push_back(&v_state);
        for (const std::string* name : touched) {
          const ir::StateDecl* d = module.find_state(*name);
          if (!d) {
            problems.push_back(fmt::format("{}: state @{} is not declared", where, *name));
            continue;
          }
          const bool kv_shape = d->type.rank() >= 2 && d->type.shape[0] == ir::Dim(split ? 1 : 2);
          const bool kv_elem = d->type.elem.is_float() || (d->type.elem.is_quant() && is_kv_cache_type(d->type.elem.quant_type()));
          if (d->kind == ir::StateKind::Plain || !kv_elem || !kv_shape)
            problems.push_back(fmt::format("{}: @{} ({}) is not a paged or ring KV state of a cache type shaped [{}, ...]",
                                           where, *name, slots_[slot_of[*name]].layout, split ? 1 : 2));
        }
      }
      for (const std::string* name : touched)
        if (slot_of.count(*name)) slots_[slot_of[*name]].accesses.push_back({f.name, i, std::string(op.mnemonic())});
    }
  }
  if (!problems.empty()) {
    std::string joined;
    for (const auto& p : problems) joined += "\n  " + p;
    throw Error("bind-state: state accesses do not match their declarations:" + joined);
  }
  Artifact artifact{"bind-state", {fmt::format("bind-state: {} slot(s)", slots_.size())}};
  for (const auto& s : slots_) {
    std::string users;
    for (const auto& u : s.accesses) users += fmt::format("{}@{} op #{} {}", users.empty() ? "" : ", ", u.function, u.op, u.mnemonic);
    artifact.lines.push_back(fmt::format("  slot {} @{} {}: {}", s.slot, s.state, s.layout, users.empty() ? "unused" : users));
  }
  context.artifacts["bind-state"] = std::move(artifact);
  return false;
}

std::unique_ptr<Pass> create_bind_state(const PassOptions& options) {
  require_no_options("bind-state", options);
  return std::make_unique<BindStatePass>();
}

}  // namespace vtc::passes
