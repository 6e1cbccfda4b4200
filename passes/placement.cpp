#include "passes/placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "ir/op_attrs.h"
#include "ir/printer.h"
#include "passes/rewrite.h"
#include "support/error.h"

namespace vtc::passes {
namespace {

using ir::OpKind;
using ir::Placement;

bool is_transfer(OpKind k) { return k == OpKind::ToHost || k == OpKind::ToDevice; }

std::string consumer_of(const ir::Op& op) {
  std::string s(op.mnemonic());
  if (const std::string* state = ir::state_symbol(op)) s += " @" + *state;
  if (const std::string* name = ir::weight_symbol(op)) s += " @" + *name;
  return s;
}

// A fused body runs where its op does: every value in it lives there.
void place_body(ir::Function& body, Placement place) {
  for (ir::Value a : body.args) a->type.placement = place;
  for (auto& op : body.ops)
    for (ir::Value r : op->results) r->type.placement = place;
}

}  // namespace

std::string TransferRecord::str() const {
  return fmt::format("@{}: {}({}) for {}", function, kind, value, consumer);
}

PlacementPass::PlacementPass(Target target, std::vector<std::string> host_ops, int64_t max_transfers)
    : target_(target), host_ops_(std::move(host_ops)), max_transfers_(max_transfers) {}

bool PlacementPass::run(ir::Module& module, PassContext& context) {
  uint64_t before_hash = std::hash<std::string>{}(ir::print(module));
  transfers_.clear();
  const Placement compute = target_ == Target::Cpu ? Placement::Host : Placement::Device;
  if (target_ == Target::Cpu) {
    for (auto& w : module.weights) w.type.placement = Placement::Host;
    for (auto& s : module.states) s.type.placement = Placement::Host;
  }
  for (auto& fn : module.functions) {
    ir::Function& f = *fn;
    if (target_ == Target::Cpu)
      for (ir::Value a : f.args) a->type.placement = Placement::Host;
    // 1. Drop existing transfers.
    for (auto& op : f.ops)
      if (is_transfer(op->kind)) op->results[0].replace_all_uses_with(op->operands[0]);
    std::erase_if(f.ops, [](const std::unique_ptr<ir::Op>& op) { return is_transfer(op->kind); });
    // 3-4. Place each op and insert transfers before it.
    std::map<std::pair<const ir::ValueData*, Placement>, ir::Value> moved;
    for (size_t i = 0; i < f.ops.size(); ++i) {
      ir::Op* op = f.ops[i].get();
      if (op->kind == OpKind::Return) continue;
      Placement place = compute;
      if (std::find(host_ops_.begin(), host_ops_.end(), op->mnemonic()) != host_ops_.end()) place = Placement::Host;
      if (op->kind == OpKind::Weight) {
        if (const std::string* name = ir::weight_symbol(*op))
          if (const ir::WeightDecl* w = module.find_weight(*name)) place = w->type.placement;
      } else if (op->kind == OpKind::StateRead || op->kind == OpKind::StateWrite) {
        if (const std::string* state = ir::state_symbol(*op))
          if (const ir::StateDecl* s = module.find_state(*state)) place = s->type.placement;
      }
      for (size_t k = 0; k < op->operands.size(); ++k) {
        ir::Value operand = op->operands[k];
        if (operand.type().placement == place) continue;
        auto key = std::make_pair(static_cast<const ir::ValueData*>(operand.data()), place);
        auto it = moved.find(key);
        if (it == moved.end()) {
          ir::TensorType t = operand.type();
          t.placement = place;
          OpKind kind = place == Placement::Host ? OpKind::ToHost : OpKind::ToDevice;
          std::string hint = operand->name.empty() ? std::string() : operand->name + (place == Placement::Host ? ".host" : ".dev");
          f.append(kind, {operand}, {t}, {}, {hint});
          ir::Op& transfer = move_last_op_to(f, i);
          ++i;  // `op` moved one slot down
          TransferRecord rec{f.name, std::string(transfer.mnemonic()), describe(f, operand), consumer_of(*op)};
          transfers_.push_back(rec);
          context.remarks.push_back("placement: inserted " + rec.str());
          it = moved.emplace(key, transfer.results[0]).first;
        }
        op->set_operand(k, it->second);
      }
      for (ir::Value r : op->results) r->type.placement = place;
      if (op->body) place_body(*op->body, place);
    }
  }
  if (max_transfers_ >= 0 && static_cast<int64_t>(transfers_.size()) > max_transfers_) {
    std::string list;
    for (const auto& t : transfers_) list += "\n  " + t.str();
    throw Error(fmt::format("placement inserted {} transfers, more than max_transfers={}:{}", transfers_.size(),
                            max_transfers_, list));
  }
  Artifact artifact{"placement", {}};
  artifact.lines.push_back(fmt::format("placement: target {}, {} transfer(s) inserted",
                                       target_name(target_), transfers_.size()));
  for (const auto& t : transfers_) artifact.lines.push_back("  " + t.str());
  context.artifacts["placement"] = std::move(artifact);
  return std::hash<std::string>{}(ir::print(module)) != before_hash;
}

std::unique_ptr<Pass> create_placement(const PassOptions& options) {
  for (const auto& [k, v] : options.values)
    if (k != "target" && k != "host_ops" && k != "max_transfers")
      throw Error(fmt::format("placement: unknown option '{}' (known: target, host_ops, max_transfers)", k));
  const Target target = options.get_target("placement", Target::Cpu);
  std::vector<std::string> host_ops;
  std::string list = options.get("host_ops");
  for (size_t i = 0; i < list.size();) {
    size_t bar = list.find('|', i);
    if (bar == std::string::npos) bar = list.size();
    if (bar > i) host_ops.push_back(list.substr(i, bar - i));
    i = bar + 1;
  }
  return std::make_unique<PlacementPass>(target,
                                         std::move(host_ops), options.get_int("max_transfers", -1));
}

}  // namespace vtc::passes
