// `vtc compile MODEL.gguf -o MODEL.vtc`: build the IR, run the standard
// pipeline (runtime/compile/compile.h) and write the artifact
// (runtime/compile/artifact.h), with a progress line per phase and a
// summary of what the passes did.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>

#include "runtime/compile/artifact.h"
#include "runtime/compile/compile.h"
#include "support/error.h"
#include "tools/vtc/cache_type_option.h"
#include "tools/vtc/commands.h"
#include "tools/vtc/target_option.h"

namespace vtc::cli {
namespace {

struct CompileCliOptions {
  std::string model, output;
  bool pack = false, no_fuse = false, no_weight_layout = false, timing = false, stats = false, debug_passes = false;
  std::string weight_layout_types = "reference";
  bool checksum_weights = false, no_checksum_weights = false;  // neither: on with --pack
  std::string dump_ir, dump_pass;
  std::string target = "cpu";  // --target, checked by target_check()
  std::vector<std::string> disabled;
  CacheTypeFlags cache;
  CompileOptions compile;
};

void print_summary(const CompiledModel& m) {
  for (const auto& [step, before] : m.before) {
    const StepCounts& after = m.after.at(step);
    fmt::print(stderr, "compile: @{}: {} ops -> {} ops, {} kernel launches per step ({} before), {} fused regions "
               "holding {} ops\n", step, before.ops, after.ops, after.kernels, before.kernels, after.regions, after.body_ops);
  }
  for (const auto& p : m.plans)
    fmt::print(stderr, "compile: @{} memory plan {}: arena {:.2f} MiB, naive sum {:.2f} MiB ({:.1f}x less)\n", p.function,
               [&] {
                 std::string b;
                 for (const auto& [k, v] : p.bindings) b += (b.empty() ? "" : ",") + k + "=" + std::to_string(v);
                 return b;
               }(),
               double(p.arena_bytes()) / 1048576.0, double(p.naive_bytes) / 1048576.0,
               double(p.naive_bytes) / double(std::max<uint64_t>(p.arena_bytes(), 1)));
  for (const auto& line : m.report)
    if (line.rfind("placement:", 0) == 0 || line.rfind("weight-layout:", 0) == 0 || line.rfind("fusion:", 0) == 0)
      fmt::print(stderr, "compile: {}\n", line);
}

int run(CompileCliOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.output.empty()) {
    std::string base = o.model;
    if (base.size() > 5 && base.ends_with(".gguf")) base.resize(base.size() - 5);
    o.output = base + ".vtc";
  }
  o.compile.target = parse_target(o.target);
  o.compile.cache_type_k = o.cache.k_type();
  o.compile.cache_type_v = o.cache.v_type();
  o.compile.optimize = !o.no_fuse;
  o.compile.weight_layout_types = o.weight_layout_types;
  o.compile.manager.dump_dir = o.dump_ir;
  o.compile.manager.dump_pass = o.dump_pass;
  o.compile.manager.disabled_passes = o.disabled;
  if (o.no_weight_layout) o.compile.manager.disabled_passes.push_back("weight-layout");
  o.compile.manager.print_timing = o.timing;
  o.compile.manager.debug_passes = o.debug_passes;
  // The log lines, the timing table and the remarks as they come.
  if (o.debug_passes || o.timing) o.compile.manager.log = &std::cerr;
  o.compile.progress = [](const std::string& s) { fmt::print(stderr, "compile: {}\n", s); };
  fmt::print(stderr, "compile: reading {}\n", o.model);
  CompiledModel m = compile_model(gguf::GgufFile::open(o.model), o.compile);
  print_summary(m);
  if (o.stats)
    for (const auto& line : compile_stats(m)) fmt::print("{}\n", line);
  if (o.pack) {
    const auto layouts = packed_layouts(m);
    uint64_t bytes = 0;
    std::string names;
    for (const auto& [tensor, layout] : layouts) {
      bytes += m.file.find_tensor(tensor)->n_bytes;
      if (names.find(weight_layout_name(layout)) == std::string::npos)
        names += (names.empty() ? "" : "/") + std::string(weight_layout_name(layout));
    }
    if (!layouts.empty())
      fmt::print(stderr, "compile: packing {} weights into the {} layout ({:.1f} MiB)\n", layouts.size(), names,
                 double(bytes) / 1048576.0);
  }
  fmt::print(stderr, "compile: writing {}{}\n", o.output, o.pack ? " (weights packed)" : "");
  std::optional<bool> checksum;
  if (o.checksum_weights || o.no_checksum_weights) checksum = o.checksum_weights;
  SaveInfo saved = save_artifact(m, o.output, {o.pack, checksum});
  if (saved.packed_weights > 0)
    fmt::print(stderr, "compile: wrote the packed GGUF ({} weights rearranged) in {:.3f} s\n", saved.packed_weights,
               saved.pack_seconds);
  if (saved.weights_checksum)
    fmt::print(stderr, "compile: weights checksum xxh64:{:016x} over {:.1f} MiB in {:.3f} s (verified at every load)\n",
               *saved.weights_checksum, double(m.file.file_size()) / 1048576.0, saved.checksum_seconds);
  if (!o.dump_ir.empty()) fmt::print(stderr, "compile: IR after every pass in {}/<step>/NN-<pass>.vtcir\n", o.dump_ir);
  fmt::print(stderr, "compile: done in {:.2f} s (passes {:.2f} s)\n",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), m.seconds);
  return 0;
}

}  // namespace

Runner add_compile(CLI::App& app) {
  auto* cmd = app.add_subcommand("compile", "Lower a GGUF model through the pass pipeline into a .vtc artifact");
  auto o = std::make_shared<CompileCliOptions>();
  cmd->add_option("model", o->model, "GGUF model")->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", o->output, "Artifact path (default: MODEL with .vtc instead of .gguf)");
  cmd->add_option("--target", o->target, "cpu | cuda (placement and, for cuda, kernels)")
      ->check(target_check())
      ->capture_default_str();
  cmd->add_option("--max-step-tokens", o->compile.max_step_tokens,
                  "Largest step in tokens (T, R bounds of the memory plan; longer prompts run in chunks)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--max-sequences", o->compile.max_sequences, "Most sequences in one step (S bound; serve --parallel)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_flag("--pack", o->pack,
                "Embed the GGUF in the artifact, its x8 weights stored rearranged so loading only maps them (default: "
                "refer to it by path, size and checksum; the interpreter repacks at load)");
  auto* checksum = cmd->add_flag("--checksum-weights", o->checksum_weights,
                                 "Record a checksum (XXH64) of all the GGUF's bytes and verify it at every load, so a "
                                 "different GGUF with the same header is refused (default: on with --pack, off otherwise)");
  cmd->add_flag("--no-checksum-weights", o->no_checksum_weights, "Record no weights checksum, even with --pack")
      ->excludes(checksum);
  cmd->add_flag("--no-fuse", o->no_fuse, "Skip the fusion passes");
  cmd->add_flag("--no-weight-layout", o->no_weight_layout,
                "Skip the weight-layout pass (cpu: every weight stays in ggml's rows layout)");
  cmd->add_option("--weight-layout-types", o->weight_layout_types,
                 "CPU: which weights the weight-layout pass repacks: reference (q4_0, q4_k: the arithmetic of llama.cpp's own repacked kernels) or all (also q8_0 and q6_k: faster prefill, float order differs from llama.cpp)")
      ->check(CLI::IsMember({"reference", "all"}));
  add_cache_type_options(cmd, o->cache);
  cmd->add_option("--dump-ir", o->dump_ir, "Write the IR after every pass to DIR/<step>/NN-<pass>.vtcir");
  cmd->add_option("--dump-pass", o->dump_pass, "Dump only after passes whose name matches this regex");
  cmd->add_option("--disable-pass", o->disabled, "Skip this pass (repeatable; for bisecting)");
  cmd->add_flag("--print-pass-timing", o->timing, "Print the time of every pass");
  cmd->add_flag("--debug-passes", o->debug_passes,
                "Log every rewrite-pattern application (canonicalize folds, fusions) to stderr");
  cmd->add_flag("--stats", o->stats,
                "Print to stdout, per step function, a line 'stats: @STEP: L layers, N ops (M before passes), fused "
                "regions per layer: KIND n, ...; op by op on TARGET: k of r regions' (L: the GGUF's block count; per "
                "layer: the step's regions of each kind / L; op by op: the step's regions the target does not run as "
                "one kernel)");
  return [o] { return run(*o); };
}

}  // namespace vtc::cli
