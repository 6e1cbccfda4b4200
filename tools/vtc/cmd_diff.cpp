// `vtc diff MODEL`: run the same steps on two execution arms in lockstep and
// report the first tensor where they part (runtime/diff/runner.h; reading
// the report: docs/cuda.md). Exit status 0: no divergence; 2: divergence
// beyond tolerance; 1: an error (bad options, an unavailable arm).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "frontends/gguf/gguf.h"
#include "frontends/gguf/tokenizer/tokenizer.h"
#include "runtime/diff/arm.h"
#include "runtime/diff/inject.h"
#include "runtime/diff/runner.h"
#include "support/error.h"
#include "tools/vtc/cache_type_option.h"
#include "tools/vtc/commands.h"

namespace vtc::cli {
namespace {

constexpr int kDivergedStatus = 2;

struct DiffCommand {
  diff::DiffOptions diff;
  std::string prompt;
  std::vector<int32_t> tokens;
  std::string arms = "cpu,cuda";
  std::vector<std::string> tolerances;
  CacheTypeFlags cache;
};

std::vector<std::string> split_arms(const std::string& text) {
  std::vector<std::string> arms;
  size_t start = 0;
  for (size_t comma; (comma = text.find(',', start)) != std::string::npos; start = comma + 1)
    arms.push_back(text.substr(start, comma - start));
  arms.push_back(text.substr(start));
  return arms;
}

int run(DiffCommand& c) {
  if (c.prompt.empty() == c.tokens.empty()) throw Error("diff: give the prompt as -p TEXT or as --tokens 1,2,3 (one of them)");
  c.diff.arms = split_arms(c.arms);
  c.diff.cache_k = c.cache.k_type();
  c.diff.cache_v = c.cache.v_type();
  for (const std::string& spec : c.tolerances) c.diff.tolerances.set(spec);
  if (!c.tokens.empty()) {
    c.diff.prompt = c.tokens;
  } else {
    gguf::GgufFile file = gguf::GgufFile::open(c.diff.model);
    c.diff.prompt = Tokenizer::from_gguf(file).encode(c.prompt, /*add_special=*/true, /*parse_special=*/false);
  }
  const diff::DiffResult r = diff::run_diff(c.diff, stdout);
  return r.diverged ? kDivergedStatus : 0;
}

std::string arm_help() {
  std::string text = "The two arms to compare, A,B (A is the reference and picks the greedy tokens):";
  for (const diff::ArmKind& k : diff::known_arms()) text += fmt::format("\n  {}: {}", k.name, k.summary);
  return text;
}

}  // namespace

Runner add_diff(CLI::App& app) {
  auto* cmd = app.add_subcommand("diff",
                                 "Run the same steps on two execution arms (default cpu,cuda) and report the first "
                                 "divergent tensor; exit 2 on divergence");
  auto c = std::make_shared<DiffCommand>();
  cmd->add_option("model", c->diff.model, "GGUF model")->required()->check(CLI::ExistingFile);
  cmd->add_option("-p,--prompt", c->prompt, "Prompt text (tokenized with BOS)");
  cmd->add_option("--tokens", c->tokens, "Prompt as token ids: 1,2,3 (no tokenization)")->delimiter(',');
  cmd->add_option("--steps", c->diff.steps, "Decode steps after the prefill (step 0)")->capture_default_str();
  cmd->add_option("--arms", c->arms, arm_help())->capture_default_str();
  cmd->add_option("--tap", c->diff.tap,
                  "ECMAScript regex searched in '%NAME OP' of every op result; matches are compared "
                  "(states always are)")
      ->capture_default_str();
  cmd->add_option("--tol", c->tolerances,
                  "Relative-L2 tolerance per dtype, DTYPE=VALUE (f32=1e-3, f16=2e-3, bf16=1e-2, int=0 by default); "
                  "repeatable");
  cmd->add_option("-t,--threads", c->diff.threads, "Threads per arm (0: all cores)")->capture_default_str();
  cmd->add_option("-c,--ctx-size", c->diff.n_ctx, "KV positions (0: prompt + steps, rounded up to 16)")->capture_default_str();
  add_cache_type_options(cmd, c->cache);
  cmd->add_flag("--keep-going", c->diff.keep_going, "Run every step even after a divergence");
  cmd->add_flag("--only-divergent", c->diff.report.only_divergent, "Print only the DIVERGED rows of each step's table");
  const auto injections = diff::known_injections();
  cmd->add_option("--inject-bug", c->diff.inject,
                  injections.empty() ? std::string("Test builds only (VTC_TEST_HOOKS): inject a known bug into arm B")
                                     : fmt::format("Test switch: inject a known bug into arm B ({})",
                                                   fmt::join(injections, ", ")));
  return [c] { return run(*c); };
}

}  // namespace vtc::cli
