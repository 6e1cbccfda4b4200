// `vtc bench --spec` and `--verify-cost` (tools/vtc/bench_spec.h).
#include "tools/vtc/bench_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "frontends/gguf/gguf.h"
#include "frontends/gguf/tokenizer/tokenizer.h"
#include "runtime/bench.h"
#include "serve/engine/generate.h"
#include "serve/engine/speculative/model_drafter.h"
#include "support/error.h"

namespace vtc::cli {
namespace {

void log(const std::string& line) { fmt::print(stderr, "bench: {}\n", line); }

std::vector<std::string> split_modes(const std::string& text) {
  std::vector<std::string> modes;
  std::stringstream in(text);
  for (std::string m; std::getline(in, m, ',');) {
    if (serve::parse_spec_mode(m) == serve::SpecMode::Off) throw Error("bench: --spec takes ngram, draft or ngram,draft");
    modes.push_back(m);
  }
  if (modes.empty()) throw Error("bench: --spec takes ngram, draft or ngram,draft");
  return modes;
}

// The prompt: a text file tokenized as `vtc run -p` does, or -p ids of the
// workload. Fixed seeds, so every run (and llama.cpp's, given the same
// ids as text) sees the same prompt.
std::vector<int32_t> make_prompt(const SpecBenchOptions& o, const Tokenizer& tok, int64_t n_vocab) {
  if (!o.prompt_file.empty()) {
    std::ifstream in(o.prompt_file);
    if (!in) throw Error("bench: cannot read --prompt-file " + o.prompt_file);
    std::stringstream text;
    text << in.rdbuf();
    return tok.encode(text.str(), /*add_special=*/true, /*parse_special=*/true);
  }
  if (o.prompt_tokens < 1) throw Error("bench: --spec needs a prompt: -p N or --prompt-file");
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> id(0, int32_t(n_vocab - 1));
  const int32_t period = o.prompt_kind == "repeat" ? std::max(o.passage, 1) : o.prompt_tokens;
  std::vector<int32_t> prompt(size_t(o.prompt_tokens));
  for (int32_t i = 0; i < o.prompt_tokens; ++i) prompt[size_t(i)] = i < period ? id(rng) : prompt[size_t(i - period)];
  return prompt;
}

// One mode's repetitions.
struct ModeRun {
  std::string name;
  serve::SpecMode mode = serve::SpecMode::Off;
  std::vector<double> tok_s;
  std::vector<int32_t> generated;  // the first repetition's tokens
  serve::SpecCounts counts;        // summed over the repetitions
};

serve::GenerateResult generate_once(Session& session, const Tokenizer& tok, const std::vector<int32_t>& prompt,
                                    const SpecBenchOptions& o, int32_t n, serve::SpecMode mode,
                                    serve::ModelDrafter* drafter) {
  serve::GenerateOptions g;
  g.n_predict = n;
  if (o.temperature > 0) {
    // Seeded: the draws come in plain decoding's order, so the tokens
    // still equal off's (docs/speculative.md, "Sampling").
    g.sampling.temperature = o.temperature;
    g.sampling.seed = o.seed;
    g.sampling.seed_exact = true;
  } else {
    g.sampling = SamplingParams::greedy();
  }
  g.spec.mode = mode;
  g.spec.draft_max = o.draft_max;
  if (mode == serve::SpecMode::Draft) g.spec.draft_model = o.draft_model;
  g.spec.p_min = o.draft_p_min;
  g.spec.adaptive = !o.draft_fixed;
  if (mode == serve::SpecMode::Ngram) g.spec.draft_on = serve::parse_draft_on(o.draft_on);
  g.spec.check();
  if (mode == serve::SpecMode::Draft) {
    drafter->forget(0);  // each repetition drafts from scratch, prompt included
    g.drafter = drafter;
  }
  return serve::generate(session, tok, prompt, g);
}

std::string first_difference(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  if (a == b) return "yes";
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return fmt::format("NO (first difference at token {}: {} tokens against {})", i, a.size(), b.size());
}

double ratio(int64_t a, int64_t b) { return b > 0 ? double(a) / double(b) : 0.0; }

void print_generation(const SpecBenchOptions& o, const std::vector<ModeRun>& runs, size_t prompt_len) {
  const double off = median(runs[0].tok_s);
  fmt::print("| mode | tok/s | min-max | vs off | acceptance | accepted per verify step | tokens per step | "
             "drafted | verify steps / steps | same tokens as off |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|---|\n");
  for (const ModeRun& r : runs) {
    const serve::SpecCounts& c = r.counts;
    const bool spec = r.mode != serve::SpecMode::Off;
    const auto [lo, hi] = std::minmax_element(r.tok_s.begin(), r.tok_s.end());
    // Tokens per target step: the first token comes from the prompt's logits.
    const double per_step = spec ? ratio(int64_t(r.generated.size() - 1) * o.repetitions, c.steps) : 1.0;
    fmt::print("| {} | {:.2f} | {:.2f}-{:.2f} | {:.2f}x | {} | {} | {:.2f} | {} | {} | {} |\n", r.name,
               median(r.tok_s), *lo, *hi, off > 0 ? median(r.tok_s) / off : 0.0,
               spec ? fmt::format("{:.1f}%", 100 * ratio(c.draft_n_accepted, c.draft_n)) : "-",
               spec ? fmt::format("{:.2f}", ratio(c.draft_n_accepted, c.verify_steps)) : "-", per_step,
               spec ? std::to_string(c.draft_n) : "-",
               spec ? fmt::format("{} / {}", c.verify_steps, c.steps) : "-",
               spec ? first_difference(runs[0].generated, r.generated) : "-");
  }
  fmt::print("({}, prompt {} tokens ({}), {} generated; tok/s of the decode after the prompt: medians of {} "
             "repetitions, modes interleaved; {} threads; draft-max {}{}{}; counts summed over the repetitions)\n",
             o.temperature > 0 ? fmt::format("temperature {}, seed {}", o.temperature, o.seed) : "greedy", prompt_len,
             o.prompt_file.empty() ? fmt::format("--spec-prompt {}{}", o.prompt_kind,
                                                 o.prompt_kind == "repeat" ? fmt::format(", passage {}", o.passage) : "")
                                   : o.prompt_file,
             runs[0].generated.size(), o.repetitions, o.session.threads, o.draft_max,
             o.draft_fixed ? ", fixed length" : ", adaptive length",
             runs.size() > 1 && runs[1].counts.drafted_on_device ? "; ngram drafted on the device" : "");
}

nlohmann::json generation_json(const std::vector<ModeRun>& runs, size_t prompt_len) {
  nlohmann::json j = {{"prompt_tokens", prompt_len}};
  for (const ModeRun& r : runs)
    j["modes"][r.name] = {{"tok_s", r.tok_s},
                          {"generated", r.generated.size()},
                          {"tokens", r.generated},  // the first repetition's
                          {"draft_n", r.counts.draft_n},
                          {"draft_n_accepted", r.counts.draft_n_accepted},
                          {"verify_steps", r.counts.verify_steps},
                          {"steps", r.counts.steps},
                          {"same_tokens_as_off", r.generated == runs[0].generated}};
  return j;
}

nlohmann::json run_generation(const SpecBenchOptions& o) {
  std::vector<ModeRun> runs{{"off", serve::SpecMode::Off, {}, {}, {}}};
  for (const std::string& m : split_modes(o.modes)) runs.push_back({m, serve::parse_spec_mode(m), {}, {}, {}});
  SessionOptions so = o.session;
  so.n_slots = 1;
  // A text prompt is tokenized first, to size the context: the prompt, the
  // output and a draft past the last token.
  const Tokenizer file_tok = Tokenizer::from_gguf(gguf::GgufFile::open(o.model));
  const size_t prompt_len = o.prompt_file.empty() ? size_t(o.prompt_tokens) : make_prompt(o, file_tok, 0).size();
  so.n_ctx = int64_t(prompt_len) + o.gen_tokens + o.draft_max + 16;
  Session session(o.model, so);
  session.require_text_generation("vtc bench --spec");
  const Tokenizer tok = Tokenizer::from_gguf(session.file());
  const std::vector<int32_t> prompt = make_prompt(o, tok, session.n_vocab());
  std::unique_ptr<serve::ModelDrafter> drafter;
  for (const ModeRun& r : runs)
    if (r.mode == serve::SpecMode::Draft && !drafter) {
      if (o.draft_model.empty()) throw Error("bench: --spec draft needs --draft-model M.gguf");
      drafter = std::make_unique<serve::ModelDrafter>(o.draft_model, so, session, tok);
    }
  log(fmt::format("speculative decoding: {} tokens after a prompt of {}, modes off,{}, {} repetitions", o.gen_tokens,
                  prompt.size(), o.modes, o.repetitions));
  for (int rep = -1; rep < o.repetitions; ++rep) {  // rep -1 warms up (the prompt and a few tokens)
    for (ModeRun& r : runs) {
      const int32_t n = rep < 0 ? std::min(o.gen_tokens, 16) : o.gen_tokens;
      const serve::GenerateResult g = generate_once(session, tok, prompt, o, n, r.mode, drafter.get());
      const double tok_s = double(g.generated.size()) / std::max(g.generate_seconds, 1e-9);
      log(fmt::format("rep {} {}: {} tokens, {:.2f} tok/s{}", rep < 0 ? "warm-up" : std::to_string(rep + 1), r.name,
                      g.generated.size(), tok_s,
                      g.spec.draft_n ? fmt::format(", {} of {} drafts accepted", g.spec.draft_n_accepted, g.spec.draft_n)
                                     : ""));
      if (rep < 0) continue;
      if (rep == 0) r.generated = g.generated;
      r.tok_s.push_back(tok_s);
      r.counts.draft_n += g.spec.draft_n;
      r.counts.draft_n_accepted += g.spec.draft_n_accepted;
      r.counts.drafted_on_device = r.counts.drafted_on_device || g.spec.drafted_on_device;
      r.counts.verify_steps += g.spec.verify_steps;
      r.counts.steps += g.spec.steps;
    }
  }
  print_generation(o, runs, prompt.size());
  nlohmann::json j = generation_json(runs, prompt.size());
  j["temperature"] = o.temperature;
  return j;
}

// ms per call of f, the mean of `steps` calls.
template <class F>
double mean_ms(int32_t steps, F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int32_t i = 0; i < steps; ++i) f();
  return 1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / steps;
}

// llama.cpp's verify steps: ms[k][rep] for k = 0..verify_max (k = 0: one
// row, its plain decode step).
std::vector<std::vector<double>> reference_verify_cost(const SpecBenchOptions& o) {
  const std::string cmd = fmt::format("{} verify-cost {} --max-k {} --context {} --steps {} --reps {} --threads {}",
                                      o.ref_tool, o.model, o.verify_max, o.context, o.steps, o.repetitions,
                                      o.session.threads);
  std::FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw Error("bench: cannot run " + cmd);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  if (pclose(pipe) != 0) throw Error("bench: the reference run failed: " + cmd);
  return nlohmann::json::parse(out).at("ms").get<std::vector<std::vector<double>>>();
}

nlohmann::json run_verify_cost(const SpecBenchOptions& o) {
  SessionOptions so = o.session;
  so.n_slots = 1;
  so.n_ctx = o.context + o.verify_max + 16;
  Session session(o.model, so);
  session.require_text_generation("vtc bench --verify-cost");
  const int64_t V = session.n_vocab();
  log(fmt::format("verify cost: steps of 1 + k rows (k = 0..{}) after {} tokens, {} steps per repetition",
                  o.verify_max, o.context, o.steps));
  session.prefill(0, bench_tokens(o.context, 0, V), 0);
  const std::vector<int32_t> tokens = bench_tokens(o.verify_max + 1, o.context, V);
  const std::vector<int32_t> slot0{0}, first{tokens[0]}, pos{o.context};
  std::vector<double> decode;
  std::vector<std::vector<double>> verify(size_t(o.verify_max + 1));  // [k][rep]
  for (int rep = -1; rep < o.repetitions; ++rep) {  // rep -1 warms up
    const double d = mean_ms(o.steps, [&] { session.decode(slot0, first, pos); });
    if (rep >= 0) decode.push_back(d);
    for (int32_t k = 0; k <= o.verify_max; ++k) {
      const SeqChunk chunk{0, std::span<const int32_t>(tokens.data(), size_t(k + 1)), o.context, k + 1};
      const double ms = mean_ms(o.steps, [&] { session.step({&chunk, 1}); });
      if (rep >= 0) verify[size_t(k)].push_back(ms);
    }
  }
  std::vector<std::vector<double>> ref;
  if (!o.ref_tool.empty()) {
    log("llama.cpp reference (vtc-ref verify-cost), same model, context and threads");
    ref = reference_verify_cost(o);
  }
  const bool vs = !ref.empty();
  fmt::print("| step | vtc ms | vtc / decode | {}\n", vs ? "llama.cpp ms | llama.cpp / decode |" : "");
  fmt::print("|---|---|---|{}\n", vs ? "---|---|" : "");
  const double dm = median(decode), rm = vs ? median(ref[0]) : 0;
  fmt::print("| decode, 1 row | {:.2f} | 1.00 | {}\n", dm, vs ? fmt::format("{:.2f} | 1.00 |", rm) : "");
  for (int32_t k = 0; k <= o.verify_max; ++k) {
    const double v = median(verify[size_t(k)]);
    std::string theirs;
    if (vs) {
      const double r = median(ref.at(size_t(k)));
      theirs = fmt::format("{:.2f} | {:.2f} |", r, r / rm);
    }
    fmt::print("| verify k = {} ({} rows) | {:.2f} | {:.2f} | {}\n", k, k + 1, v, v / dm, theirs);
  }
  fmt::print("(ms per step, mean of {} steps, median of {} repetitions, after {} tokens; {} threads. vtc: decode = "
             "@decode of 1 token, verify = @prefill chunk of 1 + k tokens with logits for every row{})\n",
             o.steps, o.repetitions, o.context, o.session.threads,
             vs ? "; llama.cpp: one llama_decode of 1 + k tokens, logits for every row (k = 0 is its decode)" : "");
  nlohmann::json j = {{"context", o.context}, {"decode_ms", decode}, {"verify_ms", verify}};
  if (vs) j["llama.cpp_ms"] = ref;
  return j;
}

}  // namespace

int run_spec_bench(const SpecBenchOptions& o) {
  if (o.repetitions < 1) throw Error("bench: --repetitions must be at least 1");
  if (o.prompt_kind != "repeat" && o.prompt_kind != "random")
    throw Error("bench: --spec-prompt takes repeat or random");
  nlohmann::json j = {{"model", o.model}, {"threads", o.session.threads}, {"repetitions", o.repetitions}};
  if (!o.modes.empty()) j["spec"] = run_generation(o);
  if (!o.modes.empty() && o.verify_cost) fmt::print("\n");
  if (o.verify_cost) j["verify_cost"] = run_verify_cost(o);
  if (!o.json_out.empty()) {
    std::ofstream out(o.json_out);
    if (!(out << j.dump(1))) throw Error("bench: cannot write " + o.json_out);
  }
  return 0;
}

}  // namespace vtc::cli
