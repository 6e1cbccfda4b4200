// `vtc run`'s generation on a loaded model: prefill the prompt, then draw
// and decode one token at a time. Each token goes through the same
// Generation as a `vtc serve` request (serve/engine/output.h: the prompt in
// the penalty window, stops, finish reasons), so the same request gives
// the same text from both; only the stepping differs (one sequence, the
// @decode step, and optionally every logits row kept).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "runtime/sampler.h"
#include "serve/engine/request.h"
#include "serve/engine/speculative/spec_options.h"

namespace vtc {
class Session;
class Tokenizer;
}  // namespace vtc

namespace vtc::serve {

class ModelDrafter;
class Generation;

struct GenerateOptions {
  int32_t n_predict = 128;          // < 0: until end of generation or context
  SamplingParams sampling;
  std::vector<std::string> stop;    // stop strings (llama-server's `stop`)
  int32_t slot = 0;
  bool keep_logits = false;          // record every prompt and generated row
  // Decode with the step's own `sample` op on the backend, the ids fed back
  // there (Session::decode_sampled): only the ids leave the backend. Used
  // when the sampling has no penalties and no logits are kept; the first
  // token, from the prompt's logits, is sampled on the host.
  bool device_sampling = false;
  // Speculative decoding (docs/speculative.md): spec.mode Draft needs
  // `drafter` (the caller loads the draft model). Not with keep_logits
  // (a verify step's logits are not plain decode rows); it samples on the
  // host, with device_sampling by the backend's `sample` rule
  // (DeviceSampling::draw_on_host), so the tokens equal plain decoding's.
  SpecOptions spec;
  ModelDrafter* drafter = nullptr;
};

// What speculation did in one generation (llama-server's timings names).
struct SpecCounts {
  int64_t draft_n = 0;           // draft tokens verified
  int64_t draft_n_accepted = 0;  // of which the target accepted
  int64_t verify_steps = 0;      // steps that verified a draft
  int64_t steps = 0;             // target steps after the prompt
  int64_t longest_verify = 0;    // rows of the largest verify step (its k drafts and the pending token)
  bool drafted_on_device = false;  // the n-gram drafter and the acceptance ran on the backend (--draft-on)
};

struct GenerateResult {
  std::vector<int32_t> prompt;
  std::vector<int32_t> generated;
  std::string text;                  // what was printed: the released text (not the stop string)
  FinishReason finish;
  double prompt_seconds = 0, generate_seconds = 0;
  // keep_logits: rows of n_vocab; one per prompt position, then one per
  // generated token, computed with that token as input (so row P+i
  // predicts the token after generated[i]).
  std::vector<float> logits;
  SpecCounts spec;
};

// "stop (end of generation)", "stop (stop string "X")", "length",
// "length (context full)": how `vtc run` reports the finish.
std::string describe_finish(const FinishReason& f);

// on_piece receives each generated token's released text (whole UTF-8
// characters; text that may still become a stop string is held back).
using PieceCallback = std::function<void(int32_t id, const std::string& piece)>;
GenerateResult generate(Session& session, const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                        const GenerateOptions& options, const PieceCallback& on_piece = nullptr);

// generate()'s decode loop with speculation (options.spec.mode != Off),
// after the prompt: `first` was drawn from its logits and emitted, at
// position prompt.size(). serve/engine/speculative/generate_spec.cpp.
void generate_speculative(Session& session, Generation& gen, std::span<const int32_t> prompt, int32_t first,
                          const GenerateOptions& options, const PieceCallback& on_piece, GenerateResult& result);

// The same loop with the n-gram drafter and the acceptance on the backend
// (speculative/generate_spec_device.cpp); why_not_drafting_on_device says
// why a generation cannot take it ("" when it can).
void generate_speculative_on_device(Session& session, Generation& gen, std::span<const int32_t> prompt, int32_t first,
                                    const GenerateOptions& options, const PieceCallback& on_piece,
                                    GenerateResult& result);
std::string why_not_drafting_on_device(Session& session, const GenerateOptions& options);
// The reasons that hold for every request of `session` (the drafter, the
// backend, recurrent state); `vtc serve` drafts a greedy request on the
// device when there are none (serve/engine/engine.h).
std::string why_model_drafts_on_host(Session& session, SpecMode mode);

}  // namespace vtc::serve
