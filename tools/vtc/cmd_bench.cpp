// `vtc bench MODEL.gguf`: pp/tg throughput medians; with --vs-reference the
// llama.cpp reference runs the same benchmark in the same invocation (via
// the vtc-ref harness) and the ratio is printed.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "runtime/bench.h"
#include "runtime/cpu/session.h"
#include "runtime/cuda/session.h"
#include "support/error.h"
#include "tools/vtc/commands.h"

namespace vtc::cli {
namespace {

struct BenchOptions {
  std::string model, ref_tool, json_out, target = "cpu";
  int threads = 2;
  bool vs_reference = false, profile = false, no_fuse = false;
  BenchSpec spec;
};

std::string find_ref_tool(const BenchOptions& o) {
  if (!o.ref_tool.empty()) return o.ref_tool;
  if (const char* env = std::getenv("VTC_REF_TOOL"); env && *env) return env;
  auto self = std::filesystem::read_symlink("/proc/self/exe");
  auto guess = self.parent_path().parent_path().parent_path() / "bin" / "vtc-ref";
  if (std::filesystem::exists(guess)) return guess.string();
  throw Error("bench: --vs-reference needs the vtc-ref harness (build it with the reference fetched, "
              "or pass --ref-tool PATH / set VTC_REF_TOOL)");
}

BenchFigures run_reference(const BenchOptions& o) {
  std::string cmd = fmt::format("{} bench {} --pp {} --tg {} --reps {} --threads {}", find_ref_tool(o), o.model,
                                o.spec.prompt_tokens, o.spec.gen_tokens, o.spec.repetitions, o.threads);
  std::FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw Error("bench: cannot run " + cmd);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  if (pclose(pipe) != 0) throw Error("bench: the reference run failed: " + cmd);
  auto j = nlohmann::json::parse(out);
  return {j.at("pp").get<std::vector<double>>(), j.at("tg").get<std::vector<double>>()};
}

int run(const BenchOptions& o) {
  auto log = [](const std::string& line) { fmt::print(stderr, "bench: {}\n", line); };
  int64_t ctx = std::max(o.spec.prompt_tokens, o.spec.gen_tokens) + 16;
  BenchFigures vtc;
  if (o.target == "cuda") {
    cuda::Session session(o.model, {.n_ctx = ctx, .n_slots = 1, .graphs = true});
    log("vtc, cuda target");
    vtc = cuda::bench_cuda(session, o.spec, log);
  } else if (o.target == "cpu") {
    cpu::Session session(o.model, {.threads = o.threads, .n_ctx = ctx, .n_slots = 1, .optimize = !o.no_fuse});
    log(fmt::format("vtc, {} threads{}", o.threads, o.no_fuse ? ", no fusion" : ""));
    session.interpreter().set_profiling(o.profile);
    vtc = bench_session(session, o.spec, log);
    if (o.profile) fmt::print(stderr, "time per op (all repetitions):\n{}", session.interpreter().profile().table());
  } else {
    throw Error("bench: --target must be cpu or cuda, got " + o.target);
  }
  BenchFigures ref;
  if (o.vs_reference) {
    log("llama.cpp reference, same model and threads");
    ref = run_reference(o);
  }
  const std::string model = std::filesystem::path(o.model).filename().string();
  fmt::print("| model | test | vtc tok/s | {}\n", o.vs_reference ? "llama.cpp tok/s | vtc / llama.cpp |" : "");
  fmt::print("|---|---|---|{}\n", o.vs_reference ? "---|---|" : "");
  auto row = [&](const char* test, int32_t n, double ours, double theirs) {
    if (n <= 0) return;
    if (o.vs_reference)
      fmt::print("| {} | {}{} | {:.2f} | {:.2f} | {:.2f} |\n", model, test, n, ours, theirs, theirs > 0 ? ours / theirs : 0);
    else
      fmt::print("| {} | {}{} | {:.2f} |\n", model, test, n, ours);
  };
  row("pp", o.spec.prompt_tokens, vtc.pp_median(), ref.pp_median());
  row("tg", o.spec.gen_tokens, vtc.tg_median(), ref.tg_median());
  fmt::print("(medians of {} repetitions, {} threads)\n", o.spec.repetitions, o.threads);
  if (!o.json_out.empty()) {
    nlohmann::json j = {{"model", o.model}, {"threads", o.threads}, {"repetitions", o.spec.repetitions},
                        {"vtc", {{"pp", vtc.pp_tokens_per_s}, {"tg", vtc.tg_tokens_per_s}}}};
    if (o.vs_reference) j["llama.cpp"] = {{"pp", ref.pp_tokens_per_s}, {"tg", ref.tg_tokens_per_s}};
    std::FILE* f = std::fopen(o.json_out.c_str(), "w");
    if (!f) throw Error("bench: cannot write " + o.json_out);
    std::fputs(j.dump(1).c_str(), f);
    std::fclose(f);
  }
  return 0;
}

}  // namespace

Runner add_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Prompt (pp) and generation (tg) throughput, optionally against llama.cpp");
  auto o = std::make_shared<BenchOptions>();
  cmd->add_option("model", o->model, "GGUF model or .vtc artifact")->required()->check(CLI::ExistingFile);
  cmd->add_option("-p,--n-prompt", o->spec.prompt_tokens, "Prompt tokens for pp (0: skip)")->capture_default_str();
  cmd->add_option("-n,--n-gen", o->spec.gen_tokens, "Generated tokens for tg (0: skip)")->capture_default_str();
  cmd->add_option("-r,--repetitions", o->spec.repetitions, "Repetitions (the median is reported)")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Threads, for vtc and the reference")->capture_default_str();
  cmd->add_flag("--vs-reference", o->vs_reference, "Also run llama.cpp (via vtc-ref) in the same run and print the ratio");
  cmd->add_option("--ref-tool", o->ref_tool, "Path of the vtc-ref harness (default: $VTC_REF_TOOL, then build/bin/vtc-ref)");
  cmd->add_option("--target", o->target, "Where vtc runs: cpu or cuda")->capture_default_str();
  cmd->add_flag("--profile", o->profile, "Print vtc's time per op kind");
  cmd->add_flag("--no-fuse", o->no_fuse, "CPU: compile a GGUF without the fusion passes (before/after comparisons)");
  cmd->add_option("--json", o->json_out, "Also write every repetition's figures to FILE as JSON");
  return [o] { return run(*o); };
}

}  // namespace vtc::cli
