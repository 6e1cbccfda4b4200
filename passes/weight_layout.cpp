#include "passes/weight_layout.h"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <llvm/ADT/DenseMap.h>

#include "ir/op_attrs.h"
#include "support/error.h"
#include "support/weight_layout.h"

namespace vtc::passes {
namespace {

using ir::OpKind;

constexpr WeightLayout kCpuLayout = WeightLayout::Interleaved8;

// How one weight declaration's values are used (step 1).
struct WeightUses {
  size_t matmul = 0;                     // uses as a matmul's weight
  std::string pinned;                    // the first other use, described; empty if none
  std::vector<ir::ValueData*> values;    // weight op results and body arguments bound to them
};

// Traces the values of `f` back to the declarations they load, recording
// each use; a fused op's body arguments inherit their operand's origin.
void trace_uses(ir::Function& f, bool in_body, llvm::DenseMap<const ir::ValueData*, std::string>& origin,
                std::map<std::string, WeightUses>& uses) {
  for (auto& op : f.ops) {
    if (op->kind == OpKind::Weight)
      if (const std::string* name = ir::weight_symbol(*op))
        for (ir::Value r : op->results) {
          origin[r.data()] = *name;
          uses[*name].values.push_back(r.data());
        }
    for (size_t i = 0; i < op->operands.size(); ++i) {
      auto it = origin.find(op->operands[i].data());
      if (it == origin.end()) continue;
      WeightUses& u = uses[it->second];
      if (op->kind == OpKind::Matmul && i == 1) {
        ++u.matmul;
      } else if (op->kind == OpKind::Fused && op->body && i < op->body->args.size()) {
        ir::ValueData* arg = op->body->args[i].data();
        origin[arg] = it->second;
        u.values.push_back(arg);
      } else if (u.pinned.empty()) {
        u.pinned = fmt::format("read by {}{}{}", op->mnemonic(), op->kind == OpKind::Matmul ? " as its input" : "",
                               in_body ? " in a fused body" : "");
      }
    }
    if (op->body) trace_uses(*op->body, true, origin, uses);
  }
}

// Why `w` cannot take kCpuLayout (step 2, without the shared-tensor rule);
// nullopt if it can.
std::optional<std::string> blocker(const ir::WeightDecl& w, const WeightUses& u) {
  const ir::TensorType& t = w.type;
  if (t.rank() != 2) return fmt::format("{}-D, not a matrix", t.rank());
  auto rows = t.shape[0].constant();
  const int64_t group = weight_layout_rows(kCpuLayout);
  if (!rows || *rows % group != 0) return fmt::format("{} rows, not a multiple of {}", t.shape[0].str(), group);
  if (!u.pinned.empty()) return u.pinned;
  if (u.matmul == 0) return std::string("read by no matmul");
  return std::nullopt;
}

// The types whose x8 kernels sum in the float order of llama.cpp's own
// repacked x86 kernels (runtime/cpu/kernels/internal.h, PackedFn).
bool reference_arithmetic(GgmlType t) { return t == GgmlType::Q4_0 || t == GgmlType::Q4_K; }

bool has_x8_kernel(const ir::WeightDecl& w) {
  return w.type.elem.is_quant() && weight_layout_supports(kCpuLayout, w.type.elem.quant_type());
}

}  // namespace

bool WeightLayoutPass::is_candidate(const ir::WeightDecl& w) const {
  return has_x8_kernel(w) && (all_types_ || reference_arithmetic(w.type.elem.quant_type()));
}

namespace {

}  // namespace

bool WeightLayoutPass::run(ir::Module& module, PassContext& context) {
  changed_.clear();
  Artifact artifact{"weight-layout", {}};
  if (target_ == Target::Cuda) {
    artifact.lines.push_back("weight-layout: target cuda: every weight stays in the rows layout");
    context.artifacts["weight-layout"] = std::move(artifact);
    return false;
  }
  // 1. Uses.
  std::map<std::string, WeightUses> uses;
  for (auto& fn : module.functions) {
    llvm::DenseMap<const ir::ValueData*, std::string> origin;
    trace_uses(*fn, false, origin, uses);
  }
  // 2. Eligibility, then the shared-tensor rule.
  std::map<std::string, std::string> why_rows;  // candidate weights that stay rows
  std::map<std::string, std::vector<const ir::WeightDecl*>> by_source;
  for (const auto& w : module.weights) {
    if (!is_candidate(w)) continue;
    by_source[w.source].push_back(&w);
    if (w.type.elem.layout() != WeightLayout::Rows) continue;  // already chosen
    if (auto why = blocker(w, uses[w.name])) why_rows[w.name] = *why;
  }
  for (const auto& w : module.weights) {
    if (!is_candidate(w) || w.type.elem.layout() != WeightLayout::Rows || why_rows.count(w.name)) continue;
    for (const ir::WeightDecl* other : by_source.at(w.source))
      if (other != &w && why_rows.count(other->name)) {
        why_rows[w.name] = fmt::format("shares tensor '{}' with @{}, which stays rows", w.source, other->name);
        break;
      }
    // A weight of the same tensor that is not a candidate (another type)
    // cannot happen: one tensor has one type.
  }
  // 3. Rewrite.
  std::map<std::string, int> per_type;
  for (auto& w : module.weights) {
    if (!is_candidate(w) || w.type.elem.layout() != WeightLayout::Rows || why_rows.count(w.name)) continue;
    w.type.elem = w.type.elem.with_layout(kCpuLayout);
    for (ir::ValueData* v : uses[w.name].values) v->type.elem = v->type.elem.with_layout(kCpuLayout);
    changed_.push_back(w.name);
    per_type[ir::ElemType::quant(w.type.elem.quant_type()).name()] += 1;
  }
  // 4. Report.
  std::map<std::string, int> left_out;  // types=reference: x8 kernels not chosen
  for (const auto& w : module.weights)
    if (has_x8_kernel(w) && !is_candidate(w)) left_out[ir::ElemType::quant(w.type.elem.quant_type()).name()] += 1;
  std::string types;
  for (const auto& [name, n] : per_type) types += fmt::format("{}{} {}", types.empty() ? "" : ", ", name, n);
  std::string summary = fmt::format("weight-layout: {} of {} weights -> {}{}", changed_.size(), module.weights.size(),
                                    weight_layout_name(kCpuLayout), types.empty() ? "" : " (" + types + ")");
  context.remarks.push_back(summary);
  artifact.lines.push_back(summary);
  for (const auto& [name, n] : left_out)
    artifact.lines.push_back(fmt::format("  {} {} weights stay rows: their x8 kernel sums in another float order than "
                                         "llama.cpp (types=all chooses it)", n, name));
  for (const auto& w : module.weights)
    if (auto it = why_rows.find(w.name); it != why_rows.end())
      artifact.lines.push_back(fmt::format("  @{} ({}) stays rows: {}", w.name, w.type.elem.name(), it->second));
  context.artifacts["weight-layout"] = std::move(artifact);
  return !changed_.empty();
}

std::unique_ptr<Pass> create_weight_layout(const PassOptions& options) {
  for (const auto& [k, v] : options.values)
    if (k != "target" && k != "types")
      throw Error(fmt::format("weight-layout: unknown option '{}' (known: target, types)", k));
  const Target target = options.get_target("weight-layout", Target::Cpu);
  const std::string types = options.get("types", "reference");
  if (types != "reference" && types != "all")
    throw Error(fmt::format("weight-layout: types must be reference or all, got '{}'", types));
  return std::make_unique<WeightLayoutPass>(
target, types == "all");
}

}  // namespace vtc::passes
