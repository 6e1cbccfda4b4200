#include "passes/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <llvm/ADT/DenseMap.h>

#include <unordered_map>

#include "passes/rewrite.h"
#include "passes/buffer_plan.h"
#include "support/error.h"
#include "support/ggml_type.h"

namespace vtc::passes {
namespace {

std::optional<int64_t> lookup(std::string_view symbol, const void* env) {
  const auto& m = *static_cast<const std::map<std::string, int64_t>*>(env);
  auto it = m.find(std::string(symbol));
  if (it == m.end()) return std::nullopt;
  return it->second;
}

std::string bindings_str(const std::map<std::string, int64_t>& b) {
  std::string s;
  for (const auto& [k, v] : b) s += (s.empty() ? "" : ", ") + k + "=" + std::to_string(v);
  return "{" + s + "}";
}

std::string result_key(size_t op, unsigned result) { return fmt::format("op#{}.r#{}", op, result); }
std::string body_key(size_t op, size_t inner, unsigned result) {
  return fmt::format("op#{}.body.op#{}.r#{}", op, inner, result);
}

// Walks a function in execution order, deciding storage per value (see the
// header comment for the rules).
class Planner {
 public:
  Planner(const ir::Function& f, const std::map<std::string, int64_t>& bindings) : f_(f), bindings_(bindings) {}

  FunctionPlan run(uint64_t alignment) {
    plan_.function = f_.name;
    plan_.bindings = bindings_;
    plan_.alignment = alignment;
    for (size_t a = 0; a < f_.args.size(); ++a)
      own(f_.args[a], fmt::format("arg#{}", a), fmt::format("arg #{}", a), -1);
    for (size_t i = 0; i < f_.ops.size(); ++i) visit(*f_.ops[i], i);
    assign_offsets(ir::Placement::Host, plan_.host_arena_bytes);
    assign_offsets(ir::Placement::Device, plan_.device_arena_bytes);
    for (const auto& b : plan_.buffers) plan_.naive_bytes += b.bytes;
    return std::move(plan_);
  }

 private:
  void visit(const ir::Op& op, size_t i) {
    const auto at = static_cast<int64_t>(i);
    for (ir::Value v : op.operands) extend(v, at);
    if (op.kind == ir::OpKind::Weight) return;
    if (op.info().is_alias()) {
      alias(op.results[0], op.operands[0]);
      return;
    }
    std::string where = fmt::format("op #{} '{}'", i, op.mnemonic());
    for (unsigned r = 0; r < op.results.size(); ++r) own(op.results[r], result_key(i, r), where, at);
    if (op.body) visit_body(op, i);
  }

  // Body intermediates live only while their fused op runs.
  void visit_body(const ir::Op& op, size_t i) {
    const ir::Function& body = *op.body;
    for (size_t a = 0; a < body.args.size(); ++a) alias(body.args[a], op.operands[a]);
    auto homes = body_result_homes(op);
    for (size_t j = 0; j < body.ops.size(); ++j) {
      const ir::Op& inner = *body.ops[j];
      if (inner.kind == ir::OpKind::Return) continue;
      if (inner.info().is_alias()) {
        alias(inner.results[0], inner.operands[0]);
        continue;
      }
      std::string where = fmt::format("op #{} 'fused' body op #{} '{}'", i, j, inner.mnemonic());
      for (unsigned r = 0; r < inner.results.size(); ++r) {
        ir::Value v = inner.results[r];
        if (auto h = homes.find(v.data()); h != homes.end()) alias(v, h->second);
        else own(v, body_key(i, j, r), where, static_cast<int64_t>(i));
      }
    }
  }

  void alias(ir::Value v, ir::Value of) {
    auto it = root_.find(of.data());
    if (it != root_.end()) {
      const size_t buffer = it->second;  // read before the insert may grow the map
      root_[v.data()] = buffer;
    }  // else an alias of a weight stays unplanned
  }

  void extend(ir::Value v, int64_t at) {
    auto it = root_.find(v.data());
    if (it == root_.end()) return;
    PlannedBuffer& b = plan_.buffers[it->second];
    b.last = std::max(b.last, at);
  }

  void own(ir::Value v, std::string key, const std::string& where, int64_t first) {
    const ir::TensorType& t = v.type();
    auto elems = ir::product(t.shape).evaluate(lookup, &bindings_);
    if (!elems)
      throw Error(fmt::format("memory-plan: @{} {}: cannot size {} with bindings {}; bind every symbol "
                              "as a pass option, e.g. memory-plan{{T=512,S=1}}",
                              f_.name, where, t.str(), bindings_str(bindings_)));
    // A quantized value (an argument in the per-op tests, never a computed
    // activation) takes whole blocks.
    const std::optional<uint64_t> bytes = t.elem.is_quant() ? ggml_bytes_for(t.elem.quant_type(), uint64_t(*elems))
                                                            : std::optional<uint64_t>(uint64_t(*elems) * t.elem.scalar_bytes());
    if (!bytes)
      throw Error(fmt::format("memory-plan: @{} {}: {} is not a whole number of quant blocks", f_.name, where, t.str()));
    PlannedBuffer b;
    b.key = std::move(key);
    b.value = describe(*v->owner, v);
    b.op = where;
    b.placement = t.placement;
    b.bytes = *bytes;
    b.first = b.last = first;
    root_[v.data()] = plan_.buffers.size();
    plan_.buffers.push_back(std::move(b));
  }

  void assign_offsets(ir::Placement place, uint64_t& arena) {
    std::vector<size_t> members;
    std::vector<BufferRequest> requests;
    for (size_t k = 0; k < plan_.buffers.size(); ++k) {
      const PlannedBuffer& b = plan_.buffers[k];
      if (b.placement != place) continue;
      members.push_back(k);
      requests.push_back({b.bytes, b.first, b.last});
    }
    BufferPlan bp = plan_buffers(requests, plan_.alignment);
    if (!plan_is_valid(requests, bp)) throw Error("memory-plan: planner produced overlapping live buffers in @" + f_.name);
    for (size_t m = 0; m < members.size(); ++m) plan_.buffers[members[m]].offset = bp.offsets[m];
    arena = bp.arena_bytes;
  }

  const ir::Function& f_;
  const std::map<std::string, int64_t>& bindings_;
  FunctionPlan plan_;
  llvm::DenseMap<const ir::ValueData*, size_t> root_;  // value -> its buffer
};

}  // namespace

std::unordered_map<const ir::ValueData*, ir::Value> body_result_homes(const ir::Op& fused) {
  std::unordered_map<const ir::ValueData*, ir::Value> homes;
  if (!fused.body || fused.body->ops.empty()) return homes;
  const ir::Op& ret = *fused.body->ops.back();
  for (size_t k = 0; k < ret.operands.size() && k < fused.results.size(); ++k) {
    ir::Value v = ret.operands[k];
    bool defined_by_op = v->def != nullptr && !v->def->info().is_alias();
    if (defined_by_op && std::count(ret.operands.begin(), ret.operands.end(), v) == 1) homes[v.data()] = fused.results[k];
  }
  return homes;
}

FunctionPlan plan_function(const ir::Function& f, const std::map<std::string, int64_t>& bindings, uint64_t alignment) {
  return Planner(f, bindings).run(alignment);
}

std::map<std::string, const ir::ValueData*> plan_keys(const ir::Function& f) {
  std::map<std::string, const ir::ValueData*> keys;
  for (size_t a = 0; a < f.args.size(); ++a) keys[fmt::format("arg#{}", a)] = f.args[a].data();
  for (size_t i = 0; i < f.ops.size(); ++i) {
    const ir::Op& op = *f.ops[i];
    for (unsigned r = 0; r < op.results.size(); ++r) keys[result_key(i, r)] = op.results[r].data();
    if (!op.body) continue;
    for (size_t j = 0; j < op.body->ops.size(); ++j)
      for (unsigned r = 0; r < op.body->ops[j]->results.size(); ++r)
        keys[body_key(i, j, r)] = op.body->ops[j]->results[r].data();
  }
  return keys;
}

std::vector<std::string> FunctionPlan::lines() const {
  std::vector<std::string> out;
  out.push_back(fmt::format("memory-plan @{} {}: {} buffers, arena {} bytes (host {}, device {}), naive {} bytes, alignment {}",
                            function, bindings_str(bindings), buffers.size(), arena_bytes(), host_arena_bytes,
                            device_arena_bytes, naive_bytes, alignment));
  for (const auto& b : buffers)
    out.push_back(fmt::format("  {} {}: {} bytes at {} {}, live [{}, {}]", b.op, b.value, b.bytes,
                              ir::placement_name(b.placement), b.offset, b.first, b.last));
  return out;
}

MemoryPlanPass::MemoryPlanPass(std::map<std::string, int64_t> bindings, uint64_t alignment)
    : bindings_(std::move(bindings)), alignment_(alignment) {}

bool MemoryPlanPass::run(ir::Module& module, PassContext& context) {
  plans_.clear();
  Artifact artifact{"memory-plan", {}};
  for (const auto& fn : module.functions) {
    FunctionPlan plan = plan_function(*fn, bindings_, alignment_);
    std::vector<std::string> lines = plan.lines();
    context.remarks.push_back(lines.front());
    artifact.lines.insert(artifact.lines.end(), lines.begin(), lines.end());
    plans_.push_back(std::move(plan));
  }
  context.artifacts["memory-plan"] = std::move(artifact);
  return false;
}

std::unique_ptr<Pass> create_memory_plan(const PassOptions& options) {
  std::map<std::string, int64_t> bindings;
  uint64_t alignment = 64;
  for (const auto& [k, v] : options.values) {
    if (ir::is_symbol_name(k)) {
      bindings[k] = options.get_int(k, 0);
      if (bindings[k] < 0) throw Error(fmt::format("memory-plan: {}={} is negative", k, v));
    } else if (k == "align") {
      int64_t a = options.get_int(k, 64);
      if (a <= 0 || (a & (a - 1)) != 0) throw Error(fmt::format("memory-plan: align={} is not a power of two", v));
      alignment = static_cast<uint64_t>(a);
    } else {
      throw Error(fmt::format("memory-plan: unknown option '{}' (known: align, and SYMBOL=N bindings)", k));
    }
  }
  return std::make_unique<MemoryPlanPass>(std::move(bindings), alignment);
}

}  // namespace vtc::passes
