// What one choice of a response says: the generated text, split for chat
// requests into content, reasoning and tool calls.
//
// A chat request whose template belongs to a family with an output format
// (serve/chat/output_parser.h: Hermes/Qwen tool calls, Llama 3 JSON calls,
// Mistral [TOOL_CALLS], DeepSeek R1 think blocks, ...) has its text parsed
// as it streams: feed() returns OpenAI deltas ({"content"},
// {"reasoning_content"}, {"tool_calls": [{index, id, type, function}]}),
// holding back text that may still turn into a marker. finish_reason is
// "tool_calls" when the model called a tool and stopped. Everything else
// (completions, plain chat) passes text through unchanged.
#pragma once

#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serve/chat/output_parser.h"
#include "serve/api/common/completion_request.h"

namespace vtc::serve {

// How a choice ended, as the APIs report it: each names it in its own words
// (OpenAI's finish_reason below; the Responses status and the Messages
// stop_reason in their folders), by a switch on `kind`, never a string
// compare.
struct ChoiceFinish {
  Finish kind = Finish::None;
  bool tool_calls = false;   // Finish::Stop after the model called a tool
  std::string matched_stop;  // Finish::Stop by this stop string
};

// OpenAI's finish_reason: "tool_calls", else the engine's name (finish_name).
std::string_view openai_finish_reason(const ChoiceFinish& f);

// The output parser's settings for a request; nullopt when its text passes
// through (completions, plain chat). Also decides keep_special_text.
std::optional<chat::ParseOptions> output_format(const CompletionRequest& req);

class ChoiceOutput {
 public:
  explicit ChoiceOutput(const CompletionRequest& req);
  // A whole choice: its events' text fed and finished (message() and
  // finish_reason() are then final).
  static ChoiceOutput whole(const CompletionRequest& req, const std::vector<TokenEvent>& events);
  ~ChoiceOutput();
  ChoiceOutput(ChoiceOutput&&) noexcept;
  ChoiceOutput& operator=(ChoiceOutput&&) noexcept;

  // Adds generated text. Chat: the delta objects it releases (none for
  // held-back or empty text); completions: the text itself, as one string.
  std::vector<nlohmann::json> feed(const std::string& text);
  // End of generation: what was held back.
  std::vector<nlohmann::json> finish();
  // The whole message: {"role": "assistant", "content", ...} for chat,
  // {"content"} for completions.
  nlohmann::json message() const;
  // How the choice ended: the engine's reason, and whether the model
  // called a tool (Finish::Stop with calls in the parsed message).
  ChoiceFinish finish_reason(const FinishReason& engine) const;

 private:
  struct Parser;
  bool chat_;
  std::string text_;
  std::unique_ptr<Parser> parser_;
};

}  // namespace vtc::serve
