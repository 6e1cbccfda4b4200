// `vtc run MODEL.gguf|MODEL.vtc`: tokenize a prompt (optionally through the
// chat template), generate on the session's backend (--target cpu or cuda),
// stream the text, print timings. A GGUF is compiled in memory with the
// target's standard pipeline; a .vtc artifact (`vtc compile`) comes lowered. A model without a vocabulary
// ("no_vocab") takes --tokens only and prints the generated ids, which have
// no text.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "serve/api/common/api_error.h"
#include "serve/chat/chat_prompt.h"
#include "serve/engine/generate.h"
#include "serve/engine/speculative/model_drafter.h"
#include "frontends/gguf/tokenizer/tokenizer.h"
#include "ir/printer.h"
#include "runtime/compile/artifact.h"
#include "runtime/session.h"
#include "runtime/diff/state_snapshot.h"
#include "support/error.h"
#include "tools/vtc/commands.h"
#include "tools/vtc/cache_type_option.h"
#include "tools/vtc/spec_option.h"
#include "tools/vtc/target_option.h"

namespace vtc::cli {
namespace {

struct RunOptions {
  std::string model, prompt, system, tokens, dump_ir, dump_logits, chat_template, chat_template_file;
  bool chat = false, quiet = false, fingerprint = false, no_fuse = false, no_weight_layout = false;
  bool no_fused_kernels = false;
  std::string weight_layout_types = "reference", target = "cpu", device_sampling = "auto";
  std::vector<std::string> disabled_passes;
  int threads = 0;
  int64_t ctx = 0;
  CacheTypeFlags cache;
  SpecFlags spec;
  serve::GenerateOptions gen;
};

std::vector<int32_t> parse_token_list(const std::string& text) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    std::string item = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(int32_t(v));
    } catch (const std::exception&) {
      throw Error(fmt::format("--tokens: '{}' is not a token id", item));
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return ids;
}

std::vector<int32_t> prompt_ids(const RunOptions& o, const gguf::GgufFile& file, const Tokenizer& tok) {
  if (!o.tokens.empty()) return parse_token_list(o.tokens);
  // Without a vocabulary encode() throws the error that says to pass ids;
  // let it, before --chat looks for a template such a model cannot use.
  // Special tokens written in the prompt (<|im_start|>) are parsed, as
  // llama.cpp's llama-completion and llama-server tokenize a prompt.
  if (!o.chat || !tok.has_vocab()) return tok.encode(o.prompt, /*add_special=*/true, /*parse_special=*/true);
  // The server's path: the same template choice and rendering (serve/chat/chat_prompt.h).
  auto tmpl = serve::PromptTemplate::load(file, tok, o.chat_template, o.chat_template_file);
  serve::ChatInputs in;
  if (!o.system.empty()) in.messages.push_back({{"role", "system"}, {"content", o.system}});
  in.messages.push_back({{"role", "user"}, {"content", o.prompt}});
  try {
    return tmpl->tokenize(tmpl->render(in));
  } catch (const serve::ApiError& e) {
    throw Error(fmt::format("--chat: {}", e.what()));
  }
}

// A compiled artifact has no pass history: its lowered module is the dump.
void dump_lowered_ir(const ir::Module& m, const std::string& dir) {
  for (const auto& fn : m.functions) {
    std::filesystem::create_directories(std::filesystem::path(dir) / fn->name);
    std::ofstream(std::filesystem::path(dir) / fn->name / "lowered.vtcir") << ir::print(m);
  }
  fmt::print(stderr, "run: lowered IR written to {}/<step>/lowered.vtcir\n", dir);
}

SessionOptions session_options(const RunOptions& o) {
  SessionOptions s;
  s.target = parse_target(o.target);
  s.threads = o.threads;
  s.n_ctx = o.ctx;
  s.n_slots = 1;
  s.optimize = !o.no_fuse;
  s.fused_kernels = !o.no_fused_kernels;
  s.weight_layout_types = o.weight_layout_types;
  s.cache_type_k = o.cache.k_type();
  s.cache_type_v = o.cache.v_type();
  passes::PassManagerOptions pm;
  pm.dump_dir = o.dump_ir;  // ignored for an artifact: nothing is compiled
  pm.disabled_passes = o.disabled_passes;
  if (o.no_weight_layout) pm.disabled_passes.push_back("weight-layout");
  s.passes = pm;
  return s;
}

void dump_logits(const std::string& path, const serve::GenerateResult& r, int64_t n_vocab) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(r.logits.data()), std::streamsize(r.logits.size() * sizeof(float)));
  if (!out) throw Error(fmt::format("{}: cannot write logits", path));
  nlohmann::json j = {{"n_vocab", n_vocab}, {"rows", r.logits.size() / size_t(n_vocab)},
                      {"prompt", r.prompt}, {"generated", r.generated}, {"dtype", "f32"}, {"byte_order", "little"},
                      {"text", r.text}, {"finish_reason", serve::finish_name(r.finish.kind)},
                      {"matched_stop", r.finish.matched_stop}};
  std::ofstream(path + ".json") << j.dump(1) << "\n";
}

// --fingerprint: generate() calls back after sampling each token and before
// decoding it, so the states are those left by the step that produced it.
void print_fingerprints(Session& session, int32_t slot, int step) {
  diff::print_state_fingerprints(stderr, step, step == 0 ? "prefill" : "decode", session.snapshot(slot));
}

// --spec: checks the flags against the run's others and loads the draft
// model (its own Session, on the same target).
std::unique_ptr<serve::ModelDrafter> load_drafter(const RunOptions& o, serve::GenerateOptions& gen, Session& session,
                                                  const Tokenizer& tok) {
  gen.spec = o.spec.resolve();  // checked once already, before the model loaded
  if (gen.spec.mode == serve::SpecMode::Off) return nullptr;
  if (gen.keep_logits) throw Error("--spec: --dump-logits keeps plain decode rows; run it with --spec off");
  if (o.fingerprint) throw Error("--spec: --fingerprint prints the states of plain decode steps; run it with --spec off");
  if (gen.spec.mode != serve::SpecMode::Draft) return nullptr;
  SessionOptions so = session_options(o);
  so.passes = std::nullopt;  // --dump-ir and --disable-pass are the target's
  auto drafter = std::make_unique<serve::ModelDrafter>(gen.spec.draft_model, so, session, tok);
  gen.drafter = drafter.get();
  return drafter;
}

void print_spec_counts(const serve::SpecOptions& spec, const serve::GenerateResult& r) {
  const serve::SpecCounts& c = r.spec;
  fmt::print(stderr, "run: speculative {}{}: {} draft tokens, {} accepted ({:.1f}%), {} verify steps of {} steps (the longest {} "
             "rows), {:.2f} tokens per step\n", serve::spec_mode_name(spec.mode),
             c.drafted_on_device ? " (drafted on the device)" : "", c.draft_n, c.draft_n_accepted,
             c.draft_n ? 100.0 * double(c.draft_n_accepted) / double(c.draft_n) : 0.0, c.verify_steps, c.steps,
             c.longest_verify, c.steps ? double(r.generated.size() - 1) / double(c.steps) : 0.0);
}

int run(const RunOptions& o) {
  o.spec.resolve();  // inconsistent --spec flags fail before the model loads
  if (o.prompt.empty() && o.tokens.empty()) throw Error("run: give a prompt with -p TEXT or --tokens 1,2,3");
  Session session(o.model, session_options(o));
  session.require_text_generation("vtc run");
  if (!o.quiet) fmt::print(stderr, "run: {} for a context of {}\n", describe_kv_memory(session.kv_memory()), session.n_ctx());
  const bool compiled = is_artifact(o.model);
  if (!o.dump_ir.empty() && compiled) dump_lowered_ir(session.module(), o.dump_ir);
  if (!o.dump_ir.empty() && !compiled)
    fmt::print(stderr, "run: IR after every pass written to {}/<step>/NN-<pass>.vtcir\n", o.dump_ir);
  Tokenizer tok = Tokenizer::from_gguf(session.file());
  std::vector<int32_t> prompt = prompt_ids(o, session.file(), tok);
  serve::GenerateOptions gen = o.gen;
  gen.keep_logits = !o.dump_logits.empty();
  gen.device_sampling = o.device_sampling == "auto" ? parse_target(o.target) == Target::Cuda : o.device_sampling == "on";
  std::unique_ptr<serve::ModelDrafter> drafter = load_drafter(o, gen, session, tok);
  if (!o.quiet && o.tokens.empty()) fmt::print("{}", o.chat ? "" : o.prompt);
  std::fflush(stdout);
  int step = 0;
  bool first_id = true;
  serve::GenerateResult r = serve::generate(session, tok, prompt, gen, [&](int32_t id, const std::string& piece) {
    if (o.fingerprint && id >= 0) print_fingerprints(session, gen.slot, step++);
    if (o.quiet) return;
    // No vocabulary, no text: stream the ids, space-separated, instead.
    if (!tok.has_vocab()) {
      fmt::print("{}{}", first_id ? "" : " ", id);
      first_id = false;
    } else {
      fmt::print("{}", piece);
    }
    std::fflush(stdout);
  });
  if (!o.quiet) fmt::print("\n");
  if (!o.dump_logits.empty()) dump_logits(o.dump_logits, r, session.n_vocab());
  fmt::print(stderr, "run: prompt {} tokens in {:.3f}s ({:.1f} tok/s), generated {} tokens in {:.3f}s ({:.1f} tok/s), finish: {}\n",
             r.prompt.size(), r.prompt_seconds, double(r.prompt.size()) / std::max(r.prompt_seconds, 1e-9),
             r.generated.size(), r.generate_seconds, double(r.generated.size()) / std::max(r.generate_seconds, 1e-9),
             serve::describe_finish(r.finish));
  if (gen.spec.mode != serve::SpecMode::Off) print_spec_counts(gen.spec, r);
  if (o.quiet) fmt::print("{}\n", fmt::join(r.generated, ","));
  return 0;
}

}  // namespace

Runner add_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Generate text from a GGUF model or a compiled .vtc, on the CPU or CUDA");
  auto o = std::make_shared<RunOptions>();
  o->gen.sampling.seed = 42;
  cmd->add_option("model", o->model, "GGUF model (compiled in memory) or .vtc artifact from `vtc compile`")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("-p,--prompt", o->prompt, "Prompt text");
  cmd->add_flag("--chat", o->chat, "Wrap the prompt as a user message in the model's chat template");
  cmd->add_option("--system", o->system, "System message (with --chat)");
  cmd->add_option("--chat-template", o->chat_template,
                  "With --chat: a built-in template name or Jinja text (default: the model's tokenizer.chat_template)");
  cmd->add_option("--chat-template-file", o->chat_template_file, "With --chat: a Jinja chat template file")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tokens", o->tokens, "Prompt as token ids: 1,2,3 (no tokenization, no BOS added)");
  cmd->add_option("-n,--n-predict", o->gen.n_predict, "Tokens to generate (-1: until end of generation)")->capture_default_str();
  cmd->add_option("--target", o->target,
                  "Backend: cpu (the interpreter) or cuda (generated kernels; needs an NVIDIA driver and NVRTC). A .vtc "
                  "artifact must be compiled for the same target")
      ->check(target_check())
      ->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "CPU threads (0: all cores)")->capture_default_str();
  cmd->add_option("--device-sampling", o->device_sampling,
                  "Decode with the step's own sample op on the backend, ids fed back there: auto (on for cuda, off for "
                  "cpu), on or off. Penalties or --dump-logits keep sampling on the host; --spec draws its verify rows on the "
                  "host, by the sample op's rule when on")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  cmd->add_option("-c,--ctx-size", o->ctx, "Context size (0: the model's, at most 4096)")->capture_default_str();
  add_cache_type_options(cmd, o->cache);
  cmd->add_option("--temp", o->gen.sampling.temperature, "Temperature (0: greedy)")->capture_default_str();
  cmd->add_option("--top-k", o->gen.sampling.top_k, "Top-k (0: off)")->capture_default_str();
  cmd->add_option("--top-p", o->gen.sampling.top_p, "Top-p (1: off)")->capture_default_str();
  cmd->add_option("--min-p", o->gen.sampling.min_p, "Min-p (0: off)")->capture_default_str();
  cmd->add_option("--repeat-penalty", o->gen.sampling.repeat_penalty, "Repetition penalty (1: off)")->capture_default_str();
  cmd->add_option("--repeat-last-n", o->gen.sampling.penalty_last_n, "Tokens the penalties look back over")->capture_default_str();
  cmd->add_option("--presence-penalty", o->gen.sampling.presence_penalty, "Presence penalty")->capture_default_str();
  cmd->add_option("--frequency-penalty", o->gen.sampling.frequency_penalty, "Frequency penalty")->capture_default_str();
  cmd->add_option("--seed", o->gen.sampling.seed, "Sampling seed (4294967295: random)")->capture_default_str();
  cmd->add_option("--stop", o->gen.stop,
                  "Stop string (repeatable): generation ends at the first one in the text, which is not printed "
                  "(llama-server's `stop`)")
      ->allow_extra_args(false);
  add_spec_options(cmd, o->spec);
  cmd->add_option("--dump-ir", o->dump_ir,
                  "GGUF: write the IR after every pass to DIR/<step>/NN-<pass>.vtcir; .vtc: the lowered IR to "
                  "DIR/<step>/lowered.vtcir");
  cmd->add_flag("--no-fuse", o->no_fuse, "GGUF: compile without the fusion passes (to compare or bisect)");
  cmd->add_flag("--no-fused-kernels", o->no_fused_kernels,
                "CPU: run each fused region's body op by op instead of as one kernel (same bits)");
  cmd->add_flag("--no-weight-layout", o->no_weight_layout,
                "GGUF: compile without the weight-layout pass (every weight in ggml's rows layout, no repacking)");
  cmd->add_option("--weight-layout-types", o->weight_layout_types,
                 "CPU: which weights the weight-layout pass repacks: reference (q4_0, q4_k: the arithmetic of llama.cpp's own repacked kernels) or all (also q8_0 and q6_k: faster prefill, float order differs from llama.cpp)")
      ->check(CLI::IsMember({"reference", "all"}));
  cmd->add_option("--disable-pass", o->disabled_passes, "GGUF: skip this pass of the pipeline (repeatable)");
  cmd->add_option("--dump-logits", o->dump_logits,
                  "Write raw f32 logits (one row per prompt position, then per generated token) and FILE.json");
  cmd->add_flag("--fingerprint", o->fingerprint,
                "After each step, print a fingerprint of every declared state to stderr (docs/cli.md)");
  cmd->add_flag("-q,--quiet", o->quiet, "Print only the generated ids");
  return [o] { return run(*o); };
}

}  // namespace vtc::cli
