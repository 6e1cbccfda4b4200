// `vtc bench MODEL.gguf`: pp/tg throughput medians; with --vs-reference the
// llama.cpp reference runs the same benchmark in the same invocation (via
// the vtc-ref harness) and the ratio is printed.
//
// --reference-first swaps the order (vtc runs second), so a script can
// alternate it between invocations. --batch-rows B adds the batched decode step (runtime/bench.h): ms per
// decode step of 1 row and of B rows, after a short prompt per sequence,
// measured on a second session with B slots (so pp/tg run on the same
// one-slot session as without the flag). --memory-bandwidth measures the
// DRAM read bandwidth with the same threads (the model is then optional)
// and, with a model, prints tg's share of the roofline. --spec and
// --verify-cost measure speculative decoding instead (bench_spec.h); on the
// simulated device --verify-cost prices the verify steps instead
// (runtime/bench_predict.h).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "codegen/cuda/kernel.h"
#include "codegen/cuda/sim_device.h"
#include "runtime/bench.h"
#include "runtime/bench_predict.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/cpu/kernels/kernels.h"
#include "runtime/session.h"
#include "support/error.h"
#include "tools/vtc/bench_spec.h"
#include "tools/vtc/spec_option.h"
#include "tools/vtc/cache_type_option.h"
#include "tools/vtc/commands.h"
#include "tools/vtc/target_option.h"

namespace vtc::cli {
namespace {

struct BenchOptions {
  std::string model, ref_tool, json_out, target_text = "cpu";  // --target, checked by target_check()
  Target target = Target::Cpu;  // parse_target(target_text), when the command runs
  int threads = 2;
  bool vs_reference = false, reference_first = false, profile = false, no_fuse = false, memory_bandwidth = false;
  bool list_isas = false;
  bool no_weight_layout = false, no_fused_kernels = false;
  std::string weight_layout_types = "reference";
  std::string gpu = "h200";
  int32_t scale_layers = 0, sample_blocks = 1;
  bool kernel_times = false;
  std::string predicted;
  uint64_t bandwidth_mib = 1024;
  CacheTypeFlags cache;
  BenchSpec spec;
  SpecBenchOptions speculative;  // --spec, --verify-cost and their flags
};

struct Bandwidth {
  uint64_t bytes = 0;
  std::vector<double> gb_per_s;
};

void log(const std::string& line) { fmt::print(stderr, "bench: {}\n", line); }

std::string find_ref_tool(const BenchOptions& o) {
  if (!o.ref_tool.empty()) return o.ref_tool;
  if (const char* env = std::getenv("VTC_REF_TOOL"); env && *env) return env;
  auto self = std::filesystem::read_symlink("/proc/self/exe");
  auto guess = self.parent_path().parent_path().parent_path() / "bin" / "vtc-ref";
  if (std::filesystem::exists(guess)) return guess.string();
  throw Error("bench: --vs-reference needs the vtc-ref harness (build it with the reference fetched, "
              "or pass --ref-tool PATH / set VTC_REF_TOOL)");
}

std::vector<double> doubles(const nlohmann::json& j, const char* key) {
  return j.contains(key) ? j.at(key).get<std::vector<double>>() : std::vector<double>{};
}

BenchFigures run_reference(const BenchOptions& o) {
  std::string cmd = fmt::format("{} bench {} --pp {} --tg {} --reps {} --threads {}", find_ref_tool(o), o.model,
                                o.spec.prompt_tokens, o.spec.gen_tokens, o.spec.repetitions, o.threads);
  if (o.spec.batch_rows > 0)
    cmd += fmt::format(" --batch-rows {} --batch-context {} --batch-steps {}", o.spec.batch_rows, o.spec.batch_context,
                       o.spec.batch_steps);
  cmd += fmt::format(" --cache-type-k {} --cache-type-v {}", ggml_type_name(o.cache.k_type()), ggml_type_name(o.cache.v_type()));
  std::FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw Error("bench: cannot run " + cmd);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  if (pclose(pipe) != 0) throw Error("bench: the reference run failed: " + cmd);
  auto j = nlohmann::json::parse(out);
  return {doubles(j, "pp"), doubles(j, "tg"), doubles(j, "step1_ms"), doubles(j, "stepn_ms"),
          j.value("context_prefill_ms", 0.0), j.value("cpu_features", std::string())};
}

Bandwidth run_bandwidth(const BenchOptions& o) {
  BandwidthSpec spec{o.bandwidth_mib << 20, o.threads, std::max(o.spec.repetitions, 5)};
  log(fmt::format("DRAM read bandwidth, {} threads, {} MiB buffer, {} repetitions", o.threads, o.bandwidth_mib,
                  spec.repetitions));
  Bandwidth bw{spec.bytes, measure_read_bandwidth(spec)};
  log(fmt::format("read bandwidth {:.1f} GB/s (median; spread {:.3f})", median(bw.gb_per_s), spread(bw.gb_per_s)));
  return bw;
}

// The session's options; --no-fuse and --no-weight-layout shape the
// pipeline a GGUF is compiled with, --no-fused-kernels how fused ops run
// on the CPU.
SessionOptions session_options(const BenchOptions& o, int64_t ctx, int32_t slots) {
  SessionOptions s{.target = o.target, .threads = o.threads, .n_ctx = ctx, .n_slots = slots, .optimize = !o.no_fuse};
  s.weight_layout_types = o.weight_layout_types;
  s.fused_kernels = !o.no_fused_kernels;
  s.cache_type_k = o.cache.k_type();
  s.cache_type_v = o.cache.v_type();
  if (o.no_weight_layout) {
    passes::PassManagerOptions pm;
    pm.disabled_passes = {"weight-layout"};
    s.passes = pm;
  }
  return s;
}

// The CPU interpreter's op profile (--profile), null on other targets.
cpu::Interpreter* profiled(Session& session, bool on) {
  auto* cpu = dynamic_cast<cpu::CpuBackend*>(&session.backend());
  if (!cpu) return nullptr;
  cpu->interpreter().set_profiling(on);
  return on ? &cpu->interpreter() : nullptr;
}

// What one decode step must read: the weights one token reads, and the
// KV cache's bytes per position of context (every layer's K and V).
struct StepBytes {
  uint64_t weights = 0;
  uint64_t kv_per_token = 0;
};

// Logs the backend of vtc's first session and reads what one decode step
// reads from it.
void describe_session(const BenchOptions& o, Session& session, StepBytes& bytes) {
  session.require_text_generation("vtc bench");
  log(fmt::format("vtc, {}{}{}{}", session.backend().describe(), o.no_fuse ? ", no fusion" : "",
                  o.no_weight_layout ? ", weights in the rows layout" : "",
                  o.no_fused_kernels ? ", fused regions op by op" : ""));
  bytes.weights = weight_bytes_per_token(session.file());
  bytes.kv_per_token = session.kv_memory().bytes_per_token;
}

// vtc's figures; `bytes` gets what one decode step reads. The pp/tg
// session is opened only when it has work (or is the only one): with -p 0
// -n 0 --batch-rows R the batched steps' session alone loads the model.
BenchFigures run_vtc(const BenchOptions& o, StepBytes& bytes) {
  if (o.target != Target::Cpu && o.profile) throw Error("bench: --profile times the CPU interpreter's ops; it needs --target cpu");
  const int64_t ctx = std::max(o.spec.prompt_tokens, o.spec.gen_tokens) + 16;
  const bool pp_tg = o.spec.prompt_tokens > 0 || o.spec.gen_tokens > 0;
  BenchFigures f;
  if (pp_tg || o.spec.batch_rows == 0) {
    Session session(o.model, session_options(o, ctx, 1));
    describe_session(o, session, bytes);
    cpu::Interpreter* profile = profiled(session, o.profile);
    if (pp_tg) f = bench_session(session, o.spec, log);
    if (profile && pp_tg) fmt::print(stderr, "time per op (pp and tg, all repetitions):\n{}", profile->profile().table());
  }
  if (o.spec.batch_rows > 0) {
    Session session(o.model, session_options(o, batch_step_context(o.spec), o.spec.batch_rows));
    if (pp_tg) session.require_text_generation("vtc bench");
    else describe_session(o, session, bytes);
    log(fmt::format("vtc, decode step of 1 and of {} rows after {} tokens each", o.spec.batch_rows,
                    o.spec.batch_context));
    cpu::Interpreter* profile = nullptr;
    bench_batch_step(session, o.spec, f, log, [&] { profile = profiled(session, o.profile); });
    if (profile) fmt::print(stderr, "time per op (the decode steps, all repetitions):\n{}", profile->profile().table());
  }
  if (o.target == Target::Cpu)
    f.kernels = fmt::format("{}{}", cpu::isa_name(cpu::active_isa()), cpu::isa_forced() ? " (VTC_CPU_ISA)" : "");
  return f;
}

void print_table(const BenchOptions& o, const BenchFigures& vtc, const BenchFigures& ref) {
  const std::string model = std::filesystem::path(o.model).filename().string();
  const bool vs = o.vs_reference;
  fmt::print("| model | test | vtc | {}\n", vs ? "llama.cpp | vtc / llama.cpp |" : "");
  fmt::print("|---|---|---|{}\n", vs ? "---|---|" : "");
  auto row = [&](const std::string& test, double ours, double theirs) {
    if (vs)
      fmt::print("| {} | {} | {:.2f} | {:.2f} | {:.2f} |\n", model, test, ours, theirs, theirs > 0 ? ours / theirs : 0);
    else
      fmt::print("| {} | {} | {:.2f} |\n", model, test, ours);
  };
  if (o.spec.prompt_tokens > 0) row(fmt::format("pp{} tok/s", o.spec.prompt_tokens), vtc.pp_median(), ref.pp_median());
  if (o.spec.gen_tokens > 0) row(fmt::format("tg{} tok/s", o.spec.gen_tokens), vtc.tg_median(), ref.tg_median());
  if (o.spec.batch_rows > 0) {
    const int32_t b = o.spec.batch_rows;
    auto ratio = [](const BenchFigures& f) { return f.step1_median() > 0 ? f.stepn_median() / f.step1_median() : 0; };
    row("step1 ms", vtc.step1_median(), ref.step1_median());
    if (b > 1) {  // a "step of 1 row" twice says nothing new
      row(fmt::format("step{} ms", b), vtc.stepn_median(), ref.stepn_median());
      row(fmt::format("step{} / step1", b), ratio(vtc), ratio(ref));
    }
    auto prefill_tok_s = [&](const BenchFigures& f) {
      return f.context_prefill_ms > 0 ? 1e3 * double(b) * o.spec.batch_context / f.context_prefill_ms : 0;
    };
    row(fmt::format("context {} x {} tok/s (once)", b, o.spec.batch_context), prefill_tok_s(vtc), prefill_tok_s(ref));
  }
  fmt::print("(medians of {} repetitions, {} threads)\n", o.spec.repetitions, o.threads);
  if (!vtc.kernels.empty()) fmt::print("kernels: vtc {}", vtc.kernels);
  if (vs && !ref.kernels.empty()) fmt::print("; llama.cpp CPU backend built for {}", ref.kernels);
  if (!vtc.kernels.empty() || (vs && !ref.kernels.empty())) fmt::print("\n");
}

void print_roofline(const BenchOptions& o, const Bandwidth& bw, uint64_t weight_bytes, const BenchFigures& vtc,
                    const BenchFigures& ref) {
  const double roof = median(bw.gb_per_s) * 1e9 / double(weight_bytes);
  std::string line = fmt::format("tg roofline {:.1f} tok/s ({:.1f} GB/s / {:.1f} MB of weights per token): vtc {:.0f}%",
                                 roof, median(bw.gb_per_s), weight_bytes / 1e6, 100 * vtc.tg_median() / roof);
  if (o.vs_reference) line += fmt::format(", llama.cpp {:.0f}%", 100 * ref.tg_median() / roof);
  fmt::print("{}\n", line);
}

// The bandwidth floor of the 1-row step at --batch-context D: the weights
// plus D positions of K and V, over the measured bandwidth.
double step_floor_ms(const BenchOptions& o, const Bandwidth& bw, const StepBytes& bytes) {
  const double read = double(bytes.weights) + double(bytes.kv_per_token) * double(o.spec.batch_context);
  return 1e3 * read / (median(bw.gb_per_s) * 1e9);
}

void print_step_floor(const BenchOptions& o, const Bandwidth& bw, const StepBytes& bytes, const BenchFigures& vtc,
                      const BenchFigures& ref) {
  const double floor = step_floor_ms(o, bw, bytes);
  std::string line = fmt::format(
      "step1 floor at depth {} {:.2f} ms ({:.1f} MB of weights + {} x {} bytes of KV, at {:.1f} GB/s): vtc {:.2f}x",
      o.spec.batch_context, floor, bytes.weights / 1e6, o.spec.batch_context, bytes.kv_per_token,
      median(bw.gb_per_s), vtc.step1_median() / floor);
  if (o.vs_reference) line += fmt::format(", llama.cpp {:.2f}x", ref.step1_median() / floor);
  fmt::print("{} the floor\n", line);
}

nlohmann::json figures_json(const BenchFigures& f) {
  nlohmann::json j = {{"pp", f.pp_tokens_per_s}, {"tg", f.tg_tokens_per_s}};
  if (!f.step1_ms.empty()) j["step1_ms"] = f.step1_ms;
  if (!f.stepn_ms.empty()) j["stepn_ms"] = f.stepn_ms;
  if (f.context_prefill_ms > 0) j["context_prefill_ms"] = f.context_prefill_ms;
  if (!f.kernels.empty()) j["kernels"] = f.kernels;
  return j;
}

void write_json_file(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path);
  if (!(out << j.dump(1))) throw Error("bench: cannot write " + path);
}

void write_json(const BenchOptions& o, const std::optional<Bandwidth>& bw, const StepBytes& bytes,
                const std::optional<BenchFigures>& vtc, const BenchFigures& ref) {
  nlohmann::json j = {{"threads", o.threads}, {"repetitions", o.spec.repetitions}};
  if (bw)
    j["memory_bandwidth"] = {
        {"bytes", bw->bytes}, {"gb_per_s", bw->gb_per_s}, {"median_gb_per_s", median(bw->gb_per_s)}};
  if (vtc) {
    j["model"] = o.model;
    j["pp_tokens"] = o.spec.prompt_tokens;
    j["tg_tokens"] = o.spec.gen_tokens;
    if (bytes.weights > 0) j["weight_bytes_per_token"] = bytes.weights;
    if (bytes.kv_per_token > 0) j["kv_bytes_per_token"] = bytes.kv_per_token;
    j["cache_type_k"] = std::string(ggml_type_name(o.cache.k_type()));
    j["cache_type_v"] = std::string(ggml_type_name(o.cache.v_type()));
    if (o.spec.batch_rows > 0)
      j["batch"] = {{"rows", o.spec.batch_rows}, {"context", o.spec.batch_context}, {"steps", o.spec.batch_steps}};
    if (bw && o.spec.batch_rows > 0 && bytes.weights > 0) j["step1_floor_ms"] = step_floor_ms(o, *bw, bytes);
    j["vtc"] = figures_json(*vtc);
    if (o.vs_reference) j["llama.cpp"] = figures_json(ref);
  }
  write_json_file(o.json_out, j);
}

// --list-isas: the CPU kernel levels this machine and build run, lowest
// first, one per line; the one vtc uses is marked (scripts read column 1).
int list_isas() {
  const cpu::Isa used = cpu::best_isa();
  for (cpu::Isa isa : cpu::supported_isas())
    fmt::print("{}{}\n", cpu::isa_name(isa),
               isa == used ? (cpu::isa_forced() ? " (used: VTC_CPU_ISA)" : " (used: the best)") : "");
  return 0;
}

// The CUDA steps both reports run: the prefill of -p tokens, and (unless
// -n 0) decode steps of 1 and --batch-rows (default 8) rows.
PredictSpec cuda_steps(const BenchOptions& o) {
  PredictSpec spec;
  spec.prompt_tokens = o.spec.prompt_tokens;
  spec.batch_rows.clear();
  if (o.spec.gen_tokens > 0) spec.batch_rows = {1, o.spec.batch_rows > 1 ? o.spec.batch_rows : 8};
  spec.batch_context = o.spec.batch_context;
  return spec;
}

bool on_simulated_device(const BenchOptions& o) {
  std::string why;
  return o.target == Target::Cuda && cuda::device_choice(&why) == cuda::DeviceChoice::Simulated;
}

// --verify-cost on the simulated device: each verify step's predicted time
// over the 1-row decode step's (steps: that decode step, then the verify
// steps of spec.verify_rows, in order).
// With spec.device_drafted the same steps drafted on the device follow
// (none for a model with recurrent state), in a second pair of columns.
void print_predicted_verify_cost(const std::vector<PredictedStep>& steps, const PredictSpec& spec, const std::string& gpu) {
  const size_t n = spec.verify_rows.size();
  const bool device = spec.device_drafted && steps.size() == 1 + 2 * n;
  if (steps.size() != 1 + n && !device) throw Error("bench: the predicted verify steps are missing");
  const double decode_us = steps[0].cost.seconds * 1e6;
  fmt::print("\nverify step of 1 + k rows against a 1-row decode step, after {} tokens, on {} "
             "(PREDICTED by the cost model, not measured){}\n| k | rows | predicted us | / decode |{}\n|---|---|---|---|{}\n",
             spec.batch_context, gpu,
             device ? "; drafted on the host (its k + 1 logits rows copied out) and on the device (only the accepted ids)"
                    : "",
             device ? " drafted on the device, us | / decode |" : "", device ? "---|---|" : "");
  fmt::print("| - | decode, 1 | {:.1f} | 1.00 |{}\n", decode_us, device ? " | |" : "");
  for (size_t i = 0; i < n; ++i) {
    const double us = steps[i + 1].cost.seconds * 1e6;
    fmt::print("| {} | {} | {:.1f} | {:.2f} |", spec.verify_rows[i] - 1, spec.verify_rows[i], us, us / decode_us);
    if (device) {
      const double on_device = steps[1 + n + i].cost.seconds * 1e6;
      fmt::print(" {:.1f} | {:.2f} |", on_device, on_device / decode_us);
    }
    fmt::print("\n");
  }
}

// The simulated device: one profiled run of each step, priced on --gpu.
// Nothing here is timed: the simulator's speed says nothing of a GPU's.
int run_predicted(const BenchOptions& o) {
  if (o.vs_reference) throw Error("bench: --vs-reference compares measured speeds; the simulated device only predicts");
  if (o.memory_bandwidth) throw Error("bench: --memory-bandwidth measures this CPU; not with the simulated device");
  if (o.model.empty()) throw Error("bench: give a MODEL");
  enable_simulated_profile();
  PredictSpec spec = cuda_steps(o);
  if (o.speculative.verify_cost) {  // decode of 1 row, then verify steps of 1 + k rows
    // The engine caps a CUDA verify step at the rows that run decode's
    // kernels (Backend::rows_with_decode_bits), so no larger one is priced.
    if (o.speculative.verify_max < 0 || o.speculative.verify_max > int32_t(cuda::kDecodeFormRows) - 1)
      throw Error(fmt::format("bench: --verify-max must be in [0, {}] on the cuda target (a verify step of at most {} rows)",
                              cuda::kDecodeFormRows - 1, cuda::kDecodeFormRows));
    spec.prompt_tokens = 0;
    spec.batch_rows = {1};
    for (int32_t k = 0; k <= o.speculative.verify_max; ++k) spec.verify_rows.push_back(1 + k);
    spec.device_drafted = true;
  }
  spec.gpu = o.gpu;
  cuda::find_gpu(o.gpu);  // an unknown name fails before the model loads
  spec.scale_layers = o.scale_layers;
  spec.sample_blocks = o.sample_blocks;
  log(fmt::format("simulated device: each step runs once in profile mode and is priced on {} "
                  "(predicted figures, not measurements)",
                  o.gpu));
  const std::vector<PredictedStep> steps = predict_cuda_steps(o.model, session_options(o, 0, 1), spec, log);
  nlohmann::json j = {{"model", o.model}, {"gpu", o.gpu}, {"predicted", true}};
  for (const PredictedStep& step : steps) {
    fmt::print("\n{}", step.table);
    j["steps"].push_back(nlohmann::json::parse(step.json));
  }
  if (o.speculative.verify_cost) print_predicted_verify_cost(steps, spec, o.gpu);
  if (!o.json_out.empty()) write_json_file(o.json_out, j);
  return 0;
}

// A GPU: the same steps as the simulated device's report, each kernel
// timed, against that report's --json when given (scripts/gpu-check).
int run_kernel_times(const BenchOptions& o) {
  if (o.target != Target::Cuda) throw Error("bench: --kernel-times times CUDA kernels; it needs --target cuda");
  if (o.model.empty()) throw Error("bench: give a MODEL");
  std::optional<nlohmann::json> predicted;
  if (!o.predicted.empty()) {
    std::ifstream in(o.predicted);
    if (!in) throw Error("bench: cannot read --predicted " + o.predicted);
    try {
      predicted = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("bench: --predicted {} is not JSON: {}", o.predicted, e.what()));
    }
    if (!predicted->value("predicted", false))
      throw Error("bench: --predicted " + o.predicted + " is not a simulated `vtc bench --json` report");
  }
  const PredictSpec spec = cuda_steps(o);
  const auto steps = measure_cuda_steps(o.model, session_options(o, 0, 1), spec, predicted ? &*predicted : nullptr, log);
  nlohmann::json j = {{"model", o.model}, {"measured", true}};
  for (const MeasuredStep& step : steps) {
    fmt::print("\n{}", step.table);
    j["steps"].push_back(nlohmann::json::parse(step.json));
  }
  if (!o.json_out.empty()) write_json_file(o.json_out, j);
  return 0;
}

// --spec / --verify-cost: the shared flags copied into bench_spec's options.
int run_speculative(const BenchOptions& o) {
  if (o.model.empty()) throw Error("bench: --spec and --verify-cost need a MODEL");
  if (on_simulated_device(o)) {
    if (!o.speculative.modes.empty())
      throw Error("bench: --spec times generations; the simulated device only predicts step costs (use --target cpu, "
                  "or --verify-cost for the predicted cost of verify steps)");
    return run_predicted(o);
  }
  SpecBenchOptions s = o.speculative;
  s.model = o.model;
  s.session = session_options(o, 0, 1);
  s.prompt_tokens = o.spec.prompt_tokens;
  s.gen_tokens = o.spec.gen_tokens;
  s.repetitions = o.spec.repetitions;
  s.context = o.spec.batch_context;
  s.steps = o.spec.batch_steps;
  s.json_out = o.json_out;
  if (o.vs_reference) {
    if (!s.verify_cost) throw Error("bench: with --spec, llama.cpp's side is bench/spec-vs-llamacpp.sh; --vs-reference "
                                    "goes with --verify-cost");
    s.ref_tool = find_ref_tool(o);
  }
  return run_spec_bench(s);
}

int run(const BenchOptions& o) {
  if (o.list_isas) return list_isas();
  if (!o.speculative.modes.empty() || o.speculative.verify_cost) return run_speculative(o);
  if (o.kernel_times) return run_kernel_times(o);
  if (on_simulated_device(o)) return run_predicted(o);
  if (o.model.empty() && !o.memory_bandwidth) throw Error("bench: give a MODEL (or --memory-bandwidth alone)");
  if (o.spec.repetitions < 1) throw Error("bench: --repetitions must be at least 1");
  std::optional<Bandwidth> bw;
  if (o.memory_bandwidth) bw = run_bandwidth(o);
  std::optional<BenchFigures> vtc;
  BenchFigures ref;
  StepBytes bytes;
  if (!o.model.empty()) {
    auto reference = [&] {
      log("llama.cpp reference, same model and threads");
      ref = run_reference(o);
    };
    if (o.vs_reference && o.reference_first) reference();
    vtc = run_vtc(o, bytes);
    if (o.vs_reference && !o.reference_first) reference();
    print_table(o, *vtc, ref);
    if (bw && bytes.weights > 0 && o.spec.gen_tokens > 0) print_roofline(o, *bw, bytes.weights, *vtc, ref);
    if (bw && bytes.weights > 0 && o.spec.batch_rows > 0) print_step_floor(o, *bw, bytes, *vtc, ref);
  } else {
    fmt::print("DRAM read bandwidth, {} threads: {:.1f} GB/s (median of {}, spread {:.3f})\n", o.threads,
               median(bw->gb_per_s), bw->gb_per_s.size(), spread(bw->gb_per_s));
  }
  if (!o.json_out.empty()) write_json(o, bw, bytes, vtc, ref);
  return 0;
}

}  // namespace

Runner add_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench", "Prompt (pp) and generation (tg) throughput, batched decode steps and DRAM bandwidth, optionally against llama.cpp");
  auto o = std::make_shared<BenchOptions>();
  cmd->add_option("model", o->model, "GGUF model or .vtc artifact (optional with --memory-bandwidth)")
      ->check(CLI::ExistingFile);
  cmd->add_option("-p,--n-prompt", o->spec.prompt_tokens, "Prompt tokens for pp (0: skip)")->capture_default_str();
  cmd->add_option("-n,--n-gen", o->spec.gen_tokens, "Generated tokens for tg (0: skip)")->capture_default_str();
  cmd->add_option("-r,--repetitions", o->spec.repetitions, "Repetitions (the median is reported)")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Threads, for vtc, the reference and the bandwidth loop")->capture_default_str();
  add_cache_type_options(cmd, o->cache);
  cmd->add_flag("--vs-reference", o->vs_reference, "Also run llama.cpp (via vtc-ref) in the same run and print the ratio");
  cmd->add_flag("--reference-first", o->reference_first,
                "With --vs-reference: run llama.cpp before vtc (scripts alternate the order between runs)");
  cmd->add_option("--ref-tool", o->ref_tool, "Path of the vtc-ref harness (default: $VTC_REF_TOOL, then build/bin/vtc-ref)");
  cmd->add_option("--target", o->target_text,
                  "Where vtc runs: cpu or cuda (with VTC_CUDA_DEVICE=sim: the cost model's predicted step table "
                  "instead of timings)")
      ->check(target_check())
      ->capture_default_str();
  cmd->add_option("--gpu", o->gpu,
                  "Simulated device: the GPU the counted step is priced for (h200, h100, a100, l40s, rtx4090)")
      ->capture_default_str();
  cmd->add_option("--scale-layers", o->scale_layers,
                  "Simulated device: report per-layer kernels as if the model had N layers (0: as it has)")
      ->capture_default_str();
  cmd->add_option("--sample-blocks", o->sample_blocks,
                  "Simulated device: run and count one block in N of each profiled step and scale the counts (a "
                  "cost-only run for steps too big to simulate whole; 1: every block)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--kernel-times", o->kernel_times,
               "GPU: time every kernel of the same steps as the simulated device's report (prefill -p, decode of 1 "
               "and --batch-rows rows) with CUDA events, per kernel family");
  cmd->add_option("--predicted", o->predicted,
                  "With --kernel-times: a simulated run's --json report, printed against the measured times")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--profile", o->profile, "Print vtc's time per op kind (pp and tg runs; with --batch-rows, the decode steps alone)");
  cmd->add_flag("--no-fuse", o->no_fuse, "CPU: compile a GGUF without the fusion passes (before/after comparisons)");
  cmd->add_flag("--no-fused-kernels", o->no_fused_kernels,
                "CPU: run each fused region's body op by op instead of as one kernel (same bits; measures what the "
                "fused kernels gain)");
  cmd->add_flag("--no-weight-layout", o->no_weight_layout,
                "CPU: compile a GGUF without the weight-layout pass (every weight in ggml's rows layout, no repacking)");
  cmd->add_option("--weight-layout-types", o->weight_layout_types,
                 "CPU: which weights the weight-layout pass repacks: reference (q4_0, q4_k: the arithmetic of llama.cpp's own repacked kernels) or all (also q8_0 and q6_k: faster prefill, float order differs from llama.cpp)")
      ->check(CLI::IsMember({"reference", "all"}));
  cmd->add_option("--batch-rows", o->spec.batch_rows,
                  "CPU: also time a decode step of this many rows (one token for each of as many sequences) "
                  "against a step of 1 row (0: skip)")->capture_default_str();
  cmd->add_option("--batch-context", o->spec.batch_context, "Prompt tokens each sequence holds before the batched steps")
      ->capture_default_str();
  cmd->add_option("--batch-steps", o->spec.batch_steps, "Decode steps timed per repetition (the mean per step is one figure)")
      ->capture_default_str();
  cmd->add_flag("--memory-bandwidth", o->memory_bandwidth,
                "Measure the DRAM read bandwidth with --threads threads (median of max(repetitions, 5) passes); "
                "with a model, also print tg's share of the roofline, and with --batch-rows the 1-row step's floor "
                "at depth --batch-context (weights + K and V over the bandwidth)");
  cmd->add_option("--bandwidth-mib", o->bandwidth_mib, "Buffer size of the bandwidth loop in MiB")->capture_default_str();
  cmd->add_option("--json", o->json_out, "Also write every repetition's figures to FILE as JSON");
  SpecBenchOptions& sp = o->speculative;
  cmd->add_option("--spec", sp.modes,
                  "Speculative decoding: greedy generation of -n tokens with speculation off and with these modes "
                  "(ngram, draft or ngram,draft), interleaved; tok/s, acceptance and the ratio to off");
  cmd->add_option("--draft-model", sp.draft_model, "With --spec draft: the draft model (same vocabulary)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--draft-max", sp.draft_max, "With --spec: most draft tokens per verify step")->capture_default_str();
  cmd->add_option("--draft-p-min", sp.draft_p_min,
                  "With --spec draft: the draft stops below this probability of its top token")->capture_default_str();
  cmd->add_flag("--draft-fixed", sp.draft_fixed, "With --spec: verify every draft up to --draft-max (no adaptive length)");
  add_draft_on_option(cmd, sp.draft_on);
  cmd->add_option("--spec-prompt", sp.prompt_kind,
                  "With --spec: the -p prompt ids: repeat (a passage of random ids, repeated) or random")
      ->check(CLI::IsMember({"repeat", "random"}))
      ->capture_default_str();
  cmd->add_option("--spec-temp", sp.temperature,
                  "With --spec: sample at this temperature (llama.cpp's default top-k 40, top-p 0.95, min-p 0.05), "
                  "seeded by --spec-seed, instead of greedy: a workload whose output does not repeat")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--spec-seed", sp.seed, "With --spec-temp: the sampler's seed")->capture_default_str();
  cmd->add_option("--spec-passage", sp.passage, "With --spec-prompt repeat: ids per passage")->capture_default_str();
  cmd->add_option("--prompt-file", sp.prompt_file, "With --spec: the prompt as text (tokenized as vtc run -p does)")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--verify-cost", sp.verify_cost,
                "Time a verify step of 1 + k rows (k = 0..--verify-max) against a 1-row decode step, after "
                "--batch-context tokens, --batch-steps steps per repetition (with --vs-reference: llama.cpp's too); "
                "--target cuda on the simulated device: each step's cost PREDICTED on --gpu instead");
  cmd->add_option("--verify-max", sp.verify_max, "With --verify-cost: the largest k")->capture_default_str();
  cmd->add_flag("--list-isas", o->list_isas,
                "Print the CPU kernel levels (scalar, avx2, avxvnni, avx512vnni, avx512bf16) this machine runs and "
                "which one is used; VTC_CPU_ISA=LEVEL forces one");
  return [o] {
    o->target = parse_target(o->target_text);
    return run(*o);
  };
}

}  // namespace vtc::cli
