// Generated text with stop strings: decides which bytes a client may see.
//
// Tokens are turned into text by a StreamingDecoder (whole UTF-8 characters
// only). Text that could still grow into a stop string is held back: after
// each token, the longest suffix of the unreleased text that is a prefix of
// some stop string stays pending, everything before it is released. When a
// stop string appears, the text before it is released and generation ends
// (the stop string itself is never sent, as in the OpenAI API).
#pragma once

#include <string>
#include <vector>

#include "frontends/gguf/tokenizer/tokenizer.h"

namespace vtc::serve {

class TextStream {
 public:
  TextStream(const Tokenizer& tok, std::vector<std::string> stop, bool keep_special = false)
      : decoder_(tok, /*skip_special=*/!keep_special), stop_(std::move(stop)) {}

  // Adds a token; returns the text released by it. `stopped` becomes true
  // when a stop string completed. Unarmed (before min_tokens), stop
  // strings are not looked for and everything decoded is released.
  std::string push(int32_t id, bool stops_armed = true);
  // End of generation: releases what is held (not after a stop).
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  std::string release_safe();

  StreamingDecoder decoder_;
  std::vector<std::string> stop_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace vtc::serve
