#include "serve/engine/speculative/spec_options.h"

#include <fmt/format.h>

#include "support/error.h"

namespace vtc::serve {

std::string_view spec_mode_name(SpecMode m) {
  switch (m) {
    case SpecMode::Off: return "off";
    case SpecMode::Ngram: return "ngram";
    case SpecMode::Draft: return "draft";
  }
  return "off";
}

SpecMode parse_spec_mode(std::string_view name) {
  if (name == "off") return SpecMode::Off;
  if (name == "ngram") return SpecMode::Ngram;
  if (name == "draft") return SpecMode::Draft;
  throw Error(fmt::format("--spec {:?}: not a drafter; use ngram, draft or off", name));
}

DraftOn parse_draft_on(std::string_view name) {
  if (name == "auto") return DraftOn::Auto;
  if (name == "host") return DraftOn::Host;
  if (name == "device") return DraftOn::Device;
  throw Error(fmt::format("--draft-on {:?}: use auto, host or device", name));
}

void SpecOptions::check() const {
  if (draft_on == DraftOn::Device && mode != SpecMode::Ngram)
    throw Error(fmt::format("--draft-on device drafts with the n-gram drafter; --spec is {}", spec_mode_name(mode)));
  if (mode == SpecMode::Draft && draft_model.empty())
    throw Error("--spec draft needs a draft model: --draft-model M.gguf (a smaller model with the same vocabulary)");
  if (mode != SpecMode::Draft && !draft_model.empty())
    throw Error(fmt::format("--draft-model {} is given but --spec is {}; use --spec draft", draft_model,
                            spec_mode_name(mode)));
  if (draft_max < 0 || draft_min < 0)
    throw Error(fmt::format("--draft-max {} / --draft-min {}: draft lengths cannot be negative", draft_max, draft_min));
  if (draft_min > draft_max)
    throw Error(fmt::format("--draft-min {} is above --draft-max {}", draft_min, draft_max));
  if (!(p_min >= 0.0f && p_min <= 1.0f)) throw Error(fmt::format("--draft-p-min {}: not a probability in [0, 1]", p_min));
}

}  // namespace vtc::serve
