// Speculative decoding's settings, as `vtc run`, `vtc serve` and `vtc bench`
// take them (docs/speculative.md):
//   --spec ngram|draft|off   the drafter: lookup in the sequence's own tokens,
//                            a smaller model, or none (the default)
//   --draft-model M.gguf     the draft model (--spec draft; implies it)
//   --draft-max N            most draft tokens per verify step (16)
//   --draft-min N            fewer drafted than this: decode plainly (0)
//   --draft-p-min P          the draft model stops drafting when its top
//                            token's probability falls below P (0.75)
//   --draft-on auto|host|device  where the n-gram drafter and the greedy
//                            acceptance run: `vtc run` and `vtc serve` on
//                            the CUDA target keep them on the device where
//                            they can (auto)
// and per request llama-server's `speculative.n_max / n_min / p_min`,
// `"speculative": false` to opt out (SpecRequest).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vtc::serve {

enum class SpecMode { Off, Ngram, Draft };
enum class DraftOn { Auto, Host, Device };

// "off", "ngram", "draft".
std::string_view spec_mode_name(SpecMode m);
// Throws vtc::Error naming the value and the accepted ones.
SpecMode parse_spec_mode(std::string_view name);
DraftOn parse_draft_on(std::string_view name);

struct SpecOptions {
  SpecMode mode = SpecMode::Off;
  std::string draft_model;
  int32_t draft_max = 16;  // llama-server's speculative.n_max default
  int32_t draft_min = 0;   // speculative.n_min
  float p_min = 0.75f;     // speculative.p_min
  // Adaptive length (speculative/draft_policy.h); false drafts draft_max
  // whenever the drafter has that many (for measuring the verify cost).
  bool adaptive = true;
  // Where the n-gram drafter runs (generate_spec_device.cpp): Auto takes
  // the device when the backend drafts there and the request allows it
  // (greedy, no penalties, no recurrent state), Device refuses otherwise
  // naming why.
  DraftOn draft_on = DraftOn::Auto;

  // Throws vtc::Error for inconsistent flags (a draft model without --spec
  // draft, negative lengths, min above max, p_min outside [0, 1]).
  void check() const;
};

// One request's overrides (llama-server's fields); unset: the server's.
struct SpecRequest {
  bool enabled = true;  // "speculative": false opts out
  std::optional<int32_t> n_max, n_min;
  std::optional<float> p_min;
};

}  // namespace vtc::serve
