// One generation's output, token by token: the part of the generation loop
// that `vtc serve`'s Engine and `vtc run` (serve/engine/generate.h) share,
// so the same request gives the same text from both.
//
// Generation, per drawn token, in llama-server's order and semantics:
//   1. the penalty window starts with the prompt (llama-server's
//      init_sampler accepts every prompt token into its sampler), then
//      holds each generated token;
//   2. draw(): logit bias, bans before min_tokens (end-of-generation and
//      stop ids), the grammar's mask, then the sampler chain
//      (runtime/sampler.h) on a copy of the row;
//   3. accept(): the token enters the penalty window and the grammar;
//   4. emit(): its logprobs from the model's row (log-softmax before any
//      transform, then the top alternatives), its text through the
//      TextStream, and whether it ends the generation (FinishReason):
//      end-of-generation token, stop id, stop string (the earliest match in
//      the text; the string itself is never sent), grammar finished, then
//      max_tokens or a full context.
//
// TextStream: tokens become text through a StreamingDecoder (whole UTF-8
// characters only; the first piece keeps its leading space, as llama-server
// sends it: the text continues the prompt). Text that could still grow into a stop string is held
// back: after each token, the longest suffix of the unreleased text that is
// a prefix of some stop string stays pending, everything before it is
// released. When stop strings appear, the text before the earliest one is
// released, that string is remembered (matched_stop) and nothing follows.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "frontends/gguf/tokenizer/tokenizer.h"
#include "runtime/sampler.h"
#include "serve/engine/request.h"

namespace vtc::serve {

class TextStream {
 public:
  TextStream(const Tokenizer& tok, std::vector<std::string> stop, bool keep_special = false)
      : decoder_(tok, /*skip_special=*/!keep_special, /*continuation=*/true), stop_(std::move(stop)) {}

  // Adds a token; returns the text released by it. stopped() becomes true
  // when a stop string completed. Unarmed (before min_tokens), stop
  // strings are not looked for and everything decoded is released.
  std::string push(int32_t id, bool stops_armed = true);
  // End of generation: releases what is held (not after a stop).
  std::string finish();
  bool stopped() const { return stopped_; }
  // The stop string that ended the text ("" when none did).
  const std::string& matched_stop() const { return matched_; }

 private:
  std::string release_safe();

  StreamingDecoder decoder_;
  std::vector<std::string> stop_;
  std::string pending_, matched_;
  bool stopped_ = false;
};

class Generation {
 public:
  // `params` and `tok` must outlive it. The prompt enters the penalty window.
  Generation(const GenerationParams& params, const Tokenizer& tok);

  // The next token from the model's row (step 2 above). Throws vtc::Error
  // when the grammar fails.
  int32_t draw(std::span<const float> row);
  // Step 3, for a token drawn here or on the backend; false when the
  // grammar does not allow it (the request then fails).
  bool accept(int32_t id);
  // Step 4 for the accepted token `id`. `row`: the model's logits it was
  // drawn from (empty when the backend drew it: no logprobs). `next_position`:
  // where the token would be fed; the generation ends with a full context
  // once next_position + 1 reaches n_ctx. Sets `finish` when it ends here.
  TokenEvent emit(int32_t id, std::span<const float> row, int64_t next_position, int64_t n_ctx, FinishReason& finish);

  int32_t generated() const { return generated_; }
  uint64_t seed() const { return sampler_.seed(); }

 private:
  const GenerationParams& params_;
  const Tokenizer& tok_;
  Sampler sampler_;
  TextStream text_;
  std::vector<float> work_;  // the row after bias, bans and the grammar's mask
  int32_t generated_ = 0;
};

}  // namespace vtc::serve
