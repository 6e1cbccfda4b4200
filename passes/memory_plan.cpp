#include "passes/memory_plan.h"

#include <fmt/format.h>

#include <unordered_map>

#include "passes/rewrite.h"
#include "runtime/buffer_plan.h"
#include "support/error.h"

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

}  // namespace

MemoryPlanPass::MemoryPlanPass(std::map<std::string, int64_t> bindings, uint64_t alignment)
    : bindings_(std::move(bindings)), alignment_(alignment) {}

bool MemoryPlanPass::run(ir::Module& module, PassContext& context) {
  plans_.clear();
  Artifact artifact{"memory-plan", {}};
  for (const auto& fn : module.functions) {
    const ir::Function& f = *fn;
    FunctionPlan plan{f.name, 0, 0, {}};
    std::unordered_map<const ir::ValueData*, size_t> index_of;  // value -> buffer
    for (size_t i = 0; i < f.ops.size(); ++i) {
      const ir::Op& op = *f.ops[i];
      for (ir::Value v : op.operands) {
        auto it = index_of.find(v.data());
        if (it != index_of.end()) plan.buffers[it->second].last = static_cast<int64_t>(i);
      }
      if (op.kind == ir::OpKind::Weight || op.kind == ir::OpKind::StateRead) continue;
      for (unsigned r = 0; r < op.results.size(); ++r) {
        const ir::TensorType& t = op.results[r].type();
        auto elems = ir::product(t.shape).evaluate(lookup, &bindings_);
        if (!elems) {
          throw Error(fmt::format("memory-plan: @{} op #{} '{}': cannot size {} with bindings {}; bind every symbol "
                                  "as a pass option, e.g. memory-plan{{T=512,S=1}}",
                                  f.name, i, op.mnemonic(), t.str(), bindings_str(bindings_)));
        }
        if (t.elem.scalar_bytes() == 0)
          throw Error(fmt::format("memory-plan: @{} op #{} '{}': quantized activation {}", f.name, i, op.mnemonic(),
                                  t.str()));
        PlannedBuffer b;
        b.op = i;
        b.result = r;
        b.value = describe(f, op.results[r]);
        b.bytes = static_cast<uint64_t>(*elems) * static_cast<uint64_t>(t.elem.scalar_bytes());
        b.first = b.last = static_cast<int64_t>(i);
        index_of[op.results[r].data()] = plan.buffers.size();
        plan.buffers.push_back(std::move(b));
      }
    }
    std::vector<BufferRequest> requests;
    for (const auto& b : plan.buffers) requests.push_back({b.bytes, b.first, b.last});
    BufferPlan bp = plan_buffers(requests, alignment_);
    if (!plan_is_valid(requests, bp)) throw Error("memory-plan: planner produced overlapping live buffers in @" + f.name);
    for (size_t k = 0; k < plan.buffers.size(); ++k) plan.buffers[k].offset = bp.offsets[k];
    plan.arena_bytes = bp.arena_bytes;
    plan.naive_bytes = bp.naive_bytes;
    std::string header = fmt::format("memory-plan @{} {}: {} buffers, arena {} bytes, naive {} bytes, alignment {}",
                                     f.name, bindings_str(bindings_), plan.buffers.size(), plan.arena_bytes,
                                     plan.naive_bytes, alignment_);
    context.remarks.push_back(header);
    artifact.lines.push_back(header);
    for (const auto& b : plan.buffers)
      artifact.lines.push_back(fmt::format("  op #{} '{}' {}: {} bytes at {}, live [{}, {}]", b.op,
                                           f.ops[b.op]->mnemonic(), b.value, b.bytes, b.offset, b.first, b.last));
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
