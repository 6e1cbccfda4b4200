#include "passes/fusion.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/op_attrs.h"
#include "passes/rewrite.h"
#include "support/error.h"

namespace vtc::passes {
namespace {

using ValueMap = std::unordered_map<const ir::ValueData*, ir::Value>;

class RegionBuilder {
 public:
  explicit RegionBuilder(const std::unordered_set<const ir::Op*>& members) : members_(members) {
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
    for (ir::Value v : outputs) returned.push_back(mapped_.at(v.data()));
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
        for (size_t k = 0; k < op->operands.size(); ++k) mapped_[region.results[k].data()] = inner.at(op->operands[k].data());
        continue;
      }
      std::vector<ir::Value> operands;
      for (ir::Value v : op->operands) operands.push_back(inner.at(v.data()));
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

  const std::unordered_set<const ir::Op*>& members_;
  std::unique_ptr<ir::Function> body_;
  ValueMap mapped_;
  std::vector<ir::Value> inputs_;
};

// Every result of the set used outside it must be an output, used only
// after the set's last op.
void check_escapes(const ir::Function& f, const std::unordered_set<const ir::Op*>& members, size_t last,
                   const std::vector<ir::Value>& outputs) {
  for (size_t i = 0; i < f.ops.size(); ++i) {
    const ir::Op& user = *f.ops[i];
    if (members.count(&user)) continue;
    for (ir::Value v : user.operands) {
      if (!v->def || !members.count(v->def)) continue;
      bool is_output = std::find(outputs.begin(), outputs.end(), v) != outputs.end();
      if (!is_output || i < last)
        throw Error(fmt::format("fusion: {} escapes the region to op #{} '{}'", describe(f, v), i, user.mnemonic()));
    }
  }
}

// Ops between the set's first and last op that read a result of the set
// (directly or through another such op) move, in order, to just after the
// last op, so the fused op can take the last op's place. Throws if a member
// itself reads one of them (the set is then not fusable as one region).
void sink_readers(ir::Function& f, const std::unordered_set<const ir::Op*>& members) {
  size_t first = f.ops.size(), last = 0;
  for (size_t i = 0; i < f.ops.size(); ++i)
    if (members.count(f.ops[i].get())) first = std::min(first, i), last = i;
  // Decide first, move after: a refusal leaves the function untouched.
  std::unordered_set<const ir::ValueData*> produced, sunk_results;
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
  std::unordered_set<const ir::Op*> members(ops.begin(), ops.end());
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
  for (size_t k = 0; k < outputs.size(); ++k) replace_all_uses(f, outputs[k], fused.results[k]);
  std::erase_if(f.ops, [&](const std::unique_ptr<ir::Op>& op) { return members.count(op.get()) != 0; });
  return fused;
}

ir::Op* single_use_def(const ir::Function& f, ir::Value v, ir::OpKind kind) {
  if (!v->def || v->def->kind != kind || use_count(f, v) != 1) return nullptr;
  return v->def;
}

std::vector<ir::Op*> ops_of_kind(const ir::Function& f, ir::OpKind kind) {
  std::vector<ir::Op*> out;
  for (const auto& op : f.ops)
    if (op->kind == kind) out.push_back(op.get());
  return out;
}

bool is_region(const ir::Op* op, std::string_view kind) {
  if (!op || op->kind != ir::OpKind::Fused) return false;
  return ir::enum_name(ir::FusedAttrs::of(*op).kind) == kind;
}

}  // namespace vtc::passes
