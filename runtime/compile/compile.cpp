#include "runtime/compile/compile.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <sstream>

#include "codegen/cuda/kernel.h"
#include "ir/fused_kinds.h"
#include "ir/op_attrs.h"
#include "runtime/cpu/fused_kernels.h"
#include "passes/pipelines.h"
#include "frontends/gguf/arch/arch.h"
#include "ir/step_interface.h"
#include "ir/verifier.h"
#include "passes/bind_state.h"
#include "passes/placement.h"
#include "runtime/compile/artifact.h"
#include "support/error.h"

namespace vtc {

std::string standard_pipeline(const CompileOptions& o) {
  return passes::standard_pipeline({o.target, o.max_step_tokens, o.max_sequences, o.optimize, o.weight_layout_types});
}

StepCounts count_ops(const ir::Function& f) {
  StepCounts c;
  for (const auto& op : f.ops) {
    c.ops += 1;
    if (op->body) {
      c.regions += 1;
      c.body_ops += op->body->ops.size() - 1;  // not its return
    }
    bool launches = op->kind != ir::OpKind::Weight && op->kind != ir::OpKind::Return && !op->info().is_alias();
    c.kernels += launches ? 1 : 0;
  }
  return c;
}

namespace {

std::string why_op_by_op_on(Target target, const ir::Op& fused) {
  return target == Target::Cuda ? cuda::why_op_by_op(fused) : cpu::FusedKernel::why_op_by_op(fused);
}

// One remark per step, kind and reason for the fused regions the target
// runs op by op rather than as one kernel: a pass can form a region that
// a backend gains nothing from, and the report says so instead of hiding it.
std::vector<std::string> op_by_op_remarks(const ir::Module& m, Target target) {
  std::vector<std::string> out;
  for (const auto& f : m.functions) {
    std::map<std::pair<std::string, std::string>, int> count;  // (kind, reason) -> regions
    for (const auto& op : f->ops) {
      if (op->kind != ir::OpKind::Fused) continue;
      const std::string why = why_op_by_op_on(target, *op);
      if (!why.empty()) ++count[{std::string(ir::enum_name(ir::FusedAttrs::of(*op).kind)), why}];
    }
    for (const auto& [key, n] : count)
      out.push_back(fmt::format("fusion: @{}: {} {} region{} run op by op on {}: {}", f->name, n, key.first,
                                n == 1 ? "" : "s", target_name(target), key.second));
  }
  return out;
}

std::map<std::string, StepCounts> counts_of(const ir::Module& m) {
  std::map<std::string, StepCounts> out;
  for (const auto& f : m.functions) out[f->name] = count_ops(*f);
  return out;
}
}  // namespace

std::vector<std::string> compile_stats(const CompiledModel& m) {
  const int64_t layers = std::max<int64_t>(m.file.get_int(m.file.architecture() + ".block_count").value_or(1), 1);
  std::vector<std::string> out;
  for (const auto& f : m.module.functions) {
    constexpr size_t kKinds = std::size(ir::EnumNames<ir::FusedKind>::names);
    size_t per_kind[kKinds] = {}, regions = 0, op_by_op = 0;
    for (const auto& op : f->ops) {
      if (op->kind != ir::OpKind::Fused) continue;
      ++per_kind[static_cast<size_t>(ir::fused_kind(*op))], ++regions;
      if (!why_op_by_op_on(m.target, *op).empty()) ++op_by_op;
    }
    std::string kinds;
    for (size_t k = 0; k < kKinds; ++k)
      kinds += fmt::format("{}{} {:.3g}", k == 0 ? "" : ", ", ir::EnumNames<ir::FusedKind>::names[k],
                           double(per_kind[k]) / double(layers));
    auto ops = [&](const std::map<std::string, StepCounts>& counts) {
      auto it = counts.find(f->name);
      return it == counts.end() ? size_t(0) : it->second.ops;
    };
    out.push_back(fmt::format("stats: @{}: {} layer{}, {} ops ({} before passes), fused regions per layer: {}; op by op "
                              "on {}: {} of {} regions",
                              f->name, layers, layers == 1 ? "" : "s", ops(m.after), ops(m.before), kinds, target_name(m.target),
                              op_by_op, regions));
  }
  return out;
}

CompiledModel compile_model(gguf::GgufFile file, const CompileOptions& options) {
  auto say = [&](const std::string& s) {
    if (options.progress) options.progress(s);
  };
  const auto t0 = std::chrono::steady_clock::now();
  CompiledModel out{std::move(file), {}, {}, options.target, standard_pipeline(options), {}, {}, {}, 0};
  say(fmt::format("building IR for {} ({} tensors)", out.file.architecture(), out.file.tensors().size()));
  out.module = arch::build_module(out.file, {.cache_type_k = options.cache_type_k,
                                             .cache_type_v = options.cache_type_v,
                                             .embeddings = options.embeddings});
  ir::verify(out.module);
  ir::check_step_interface(out.module, out.file.path());
  out.before = counts_of(out.module);
  say("running passes: " + out.pipeline);
  std::ostringstream quiet;  // remarks go to the caller's log only if it gave one
  passes::PassManagerOptions manager = options.manager;
  if (!manager.log) manager.log = &quiet;
  passes::PassManager pm(manager);
  pm.add_pipeline(out.pipeline);
  pm.run(out.module);
  for (size_t i = 0; i < pm.size(); ++i)
    if (auto* plan = dynamic_cast<passes::MemoryPlanPass*>(&pm.pass(i))) out.plans = plan->plans();
  // The weight-layout summary is a remark: its artifact is dropped when
  // placement changes the module.
  for (const auto& remark : pm.context().remarks)
    if (remark.rfind("weight-layout:", 0) == 0) out.report.push_back(remark);
  for (const char* name : {"placement", "bind-state"}) {
    auto it = pm.context().artifacts.find(name);
    if (it != pm.context().artifacts.end()) out.report.insert(out.report.end(), it->second.lines.begin(), it->second.lines.end());
  }
  out.after = counts_of(out.module);
  for (auto& remark : op_by_op_remarks(out.module, out.target)) out.report.push_back(std::move(remark));
  if (out.target == Target::Cuda) {
    say("generating CUDA kernels");
    for (const auto& f : out.module.functions) {
      cuda::StepKernels step = cuda::generate_step(out.module, *f);
      for (const cuda::Kernel* k : step.unique()) out.kernels[f->name].push_back({k->entry, k->what, k->source});
      out.cuda_steps.push_back(std::move(step));
    }
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

CompiledModel load_model(const std::string& path, const CompileOptions& options) {
  if (is_artifact(path)) return load_artifact(path);
  return compile_model(gguf::GgufFile::open(path), options);
}

}  // namespace vtc
