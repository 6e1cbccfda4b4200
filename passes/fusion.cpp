#include "passes/fusion.h"

#include <fmt/format.h>

#include <algorithm>
#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/SmallPtrSet.h>

#include "ir/op_attrs.h"
#include "passes/rewrite.h"
#include "support/error.h"

namespace vtc::passes {
namespace {

using ValueMap = llvm::DenseMap<const ir::ValueData*, ir::Value>;
using MemberSet = llvm::SmallPtrSet<const ir::Op*, 8>;

ir::Value mapped_in(const ValueMap& map, ir::Value v) {
  auto it = map.find(v.data());
  if (it == map.end()) throw Error(fmt::format("fusion: value %{} has no counterpart in the region body", v->name));
  return it->second;
}

class RegionBuilder {
 public:
  explicit RegionBuilder(const MemberSet& members) : members_(members) {
    body_ = std::make_unique<ir::Function>();
    body_->name = "body";
  }

  void add(const ir::Op& op) {
    if (op.body) {
      inline_region(op);
      return;
    }
    std::vector<ir::Value> operands;
    for (ir::Value v : op.operands) operands.push_back(map(v));
    clone(op, operands, [&](size_t r, ir::Value clone_result) { mapped_[op.results[r].data()] = clone_result; });
  }

  std::unique_ptr<ir::Function> finish(const std::vector<ir::Value>& outputs) {
    std::vector<ir::Value> returned;
    for (ir::Value v : outputs) returned.push_back(mapped_in(mapped_, v));
    body_->append(ir::OpKind::Return, returned, {});
    return std::move(body_);
  }

  const std::vector<ir::Value>& inputs() const { return inputs_; }

 private:
  // A value from outside the set becomes a body argument (once).
  ir::Value map(ir::Value v) {
    if (auto it = mapped_.find(v.data()); it != mapped_.end()) return it->second;
    if (v->def && members_.count(v->def))
      throw Error(fmt::format("fusion: value %{} is used before its op was added", v->name));
    ir::Value arg = body_->add_arg(v->name, v.type());
    inputs_.push_back(v);
    mapped_[v.data()] = arg;
    return arg;
  }

  void inline_region(const ir::Op& region) {
    ValueMap inner;
    for (size_t a = 0; a < region.body->args.size(); ++a) inner[region.body->args[a].data()] = map(region.operands[a]);
    for (const auto& op : region.body->ops) {
      if (op->kind == ir::OpKind::Return) {
        for (size_t k = 0; k < op->operands.size(); ++k) mapped_[region.results[k].data()] = mapped_in(inner, op->operands[k]);
        continue;
      }
      std::vector<ir::Value> operands;
      for (ir::Value v : op->operands) operands.push_back(mapped_in(inner, v));
      clone(*op, operands, [&](size_t r, ir::Value clone_result) { inner[op->results[r].data()] = clone_result; });
    }
  }

  template <typename OnResult>
  void clone(const ir::Op& op, const std::vector<ir::Value>& operands, OnResult on_result) {
    std::vector<ir::TensorType> types;
    std::vector<std::string> names;
    for (ir::Value r : op.results) {
      types.push_back(r.type());
      names.push_back(r->name);
    }
    ir::Op& copy = body_->append(op.kind, operands, types, op.attrs, names);
    copy.loc = op.loc;
    for (size_t r = 0; r < copy.results.size(); ++r) on_result(r, copy.results[r]);
  }

  const MemberSet& members_;
  std::unique_ptr<ir::Function> body_;
  ValueMap mapped_;
  std::vector<ir::Value> inputs_;
};

// Every result of the set used outside it must be an output, used only
// after the set's last op.
// (Through the members' use lists; `last` = 0 checks only the first rule.)
void check_escapes(const ir::Function& f, const MemberSet& members, size_t last,
                   const std::vector<ir::Value>& outputs) {
  for (const ir::Op* member : members)
    for (ir::Value v : member->results)
      for (const ir::Use& use : v.uses()) {
        if (members.count(use.user)) continue;
        const bool is_output = std::find(outputs.begin(), outputs.end(), v) != outputs.end();
        const size_t at = is_output && last == 0 ? 0 : op_index(f, use.user);
        if (!is_output || at < last)
          throw Error(fmt::format("fusion: {} escapes the region to op #{} '{}'", describe(f, v), at, use.user->mnemonic()));
      }
}

// Ops between the set's first and last op that read a result of the set
// (directly or through another such op) move, in order, to just after the
// last op, so the fused op can take the last op's place. Throws if a member
// itself reads one of them (the set is then not fusable as one region).
void sink_readers(ir::Function& f, const MemberSet& members) {
  size_t first = f.ops.size(), last = 0;
  for (size_t i = 0; i < f.ops.size(); ++i)
    if (members.count(f.ops[i].get())) first = std::min(first, i), last = i;
  // Decide first, move after: a refusal leaves the function untouched.
  llvm::DenseSet<const ir::ValueData*> produced, sunk_results;
  std::vector<bool> sink(f.ops.size(), false);
  for (size_t i = first; i <= last; ++i) {
    const ir::Op& op = *f.ops[i];
    const bool member = members.count(&op) != 0;
    bool reads_set = false;
    for (ir::Value v : op.operands) {
      if (member && sunk_results.count(v.data()))
        throw Error(fmt::format("fusion: op #{} '{}' of the region reads a value computed from the region", i, op.mnemonic()));
      reads_set = reads_set || produced.count(v.data());
    }
    if (member || reads_set)
      for (ir::Value r : op.results) produced.insert(r.data());
    if (!member && reads_set) {
      sink[i] = true;
      for (ir::Value r : op.results) sunk_results.insert(r.data());
    }
  }
  std::vector<std::unique_ptr<ir::Op>> kept, sunk;
  for (size_t i = first; i <= last; ++i) (sink[i] ? sunk : kept).push_back(std::move(f.ops[i]));
  for (auto& op : sunk) kept.push_back(std::move(op));
  std::move(kept.begin(), kept.end(), f.ops.begin() + static_cast<std::ptrdiff_t>(first));
}

}  // namespace

ir::Op& fuse_ops(ir::Function& f, std::vector<ir::Op*> ops, const std::vector<ir::Value>& outputs,
                 const std::string& kind) {
  std::sort(ops.begin(), ops.end(), [&](const ir::Op* a, const ir::Op* b) { return op_index(f, a) < op_index(f, b); });
  MemberSet members(ops.begin(), ops.end());
  check_escapes(f, members, 0, outputs);  // only outputs escape (before anything moves)
  sink_readers(f, members);
  const size_t last = op_index(f, ops.back());
  check_escapes(f, members, last, outputs);  // and now only to ops after the region

  RegionBuilder builder(members);
  for (const ir::Op* op : ops) builder.add(*op);
  std::unique_ptr<ir::Function> body = builder.finish(outputs);

  std::vector<ir::TensorType> types;
  std::vector<std::string> names;
  for (ir::Value v : outputs) {
    types.push_back(v.type());
    names.push_back(v->name);
  }
  ir::Op& fused = f.append(ir::OpKind::Fused, builder.inputs(), types, {{"kind", ir::Attr::of_enum(kind)}}, names);
  fused.body = std::move(body);
  fused.loc = ops.back()->loc;
  move_last_op_to(f, last + 1);
  for (size_t k = 0; k < outputs.size(); ++k) outputs[k].replace_all_uses_with(fused.results[k]);
  std::erase_if(f.ops, [&](const std::unique_ptr<ir::Op>& op) { return members.count(op.get()) != 0; });
  return fused;
}

}  // namespace vtc::passes
