// Speculative decoding's flags (serve/engine/speculative/spec_options.h),
// the same on `vtc run`, `vtc serve` and `vtc bench`: --spec, --draft-model,
// --draft-max, --draft-min, --draft-p-min, --draft-fixed. A draft model
// given without --spec means --spec draft. resolve() checks them together.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "serve/engine/speculative/spec_options.h"

namespace vtc::cli {

struct SpecFlags {
  std::string mode = "off";
  std::string draft_on = "auto";
  bool fixed = false;
  serve::SpecOptions options;

  serve::SpecOptions resolve() const {
    serve::SpecOptions o = options;
    o.mode = serve::parse_spec_mode(mode);
    if (o.mode == serve::SpecMode::Off && !o.draft_model.empty()) o.mode = serve::SpecMode::Draft;
    o.adaptive = !fixed;
    o.draft_on = serve::parse_draft_on(draft_on);
    o.check();
    return o;
  }
};

// --draft-on (serve::DraftOn), for run and serve here and for bench's own
// speculative flags (tools/vtc/cmd_bench.cpp).
inline void add_draft_on_option(CLI::App* cmd, std::string& draft_on) {
  cmd->add_option("--draft-on", draft_on,
                  "Where --spec ngram drafts and accepts: auto (on a CUDA device, for greedy requests and, with "
                  "--device-sampling, sampled ones, all without penalties or logprobs, recurrent models included, so a verify step copies back only its accepted tokens, not k+1 rows of logits; else "
                  "the host), host, or device (refused at start-up, saying why, where it cannot; vtc serve still "
                  "drafts a request with penalties or logprobs on the host)")
      ->check(CLI::IsMember({"auto", "host", "device"}))
      ->capture_default_str();
}

inline void add_spec_options(CLI::App* cmd, SpecFlags& f) {
  cmd->add_option("--spec", f.mode,
                  "Speculative decoding: ngram (drafts from the sequence's own tokens), draft (a draft model), off "
                  "(docs/speculative.md)")
      ->check(CLI::IsMember({"off", "ngram", "draft"}))
      ->capture_default_str();
  cmd->add_option("--draft-model", f.options.draft_model,
                  "Draft model for --spec draft: a smaller GGUF with the same vocabulary (implies --spec draft)");
  cmd->add_option("--draft-max", f.options.draft_max, "Most draft tokens per verify step")->capture_default_str();
  cmd->add_option("--draft-min", f.options.draft_min, "Fewer draft tokens than this: decode plainly")->capture_default_str();
  cmd->add_option("--draft-p-min", f.options.p_min,
                  "The draft model stops drafting below this probability of its top token")
      ->capture_default_str();
  cmd->add_flag("--draft-fixed", f.fixed,
                "Verify every draft the drafter has, up to --draft-max (no adaptive length: to measure verify steps)");
  add_draft_on_option(cmd, f.draft_on);
}

}  // namespace vtc::cli
