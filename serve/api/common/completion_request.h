// A generation request as every chat-like API parses it: the OpenAI
// completions and chat endpoints fill it (serve/api/openai/completions.h),
// and the Responses and Messages APIs translate their bodies into a chat
// body first. The engine sees only its GenerationParams (`gen`).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "frontends/gguf/tokenizer/tokenizer.h"
#include "serve/chat/tool_choice.h"
#include "serve/engine/request.h"

namespace vtc::serve {

// The most choices one request may ask for (n).
inline constexpr int64_t kMaxChoices = 16;

struct CompletionRequest {
  bool chat = false;
  bool stream = false, include_usage = false;
  bool logprobs = false;  // report logprobs (completions: "logprobs": N; chat: "logprobs": true)
  int32_t n = 1;          // choices, each its own generation over the same prompt
  std::string echo_text;  // completions with echo: the prompt's text, before each choice's
  // Chat: the rendered prompt and the template it came from (the output
  // parser's format is read from it), and the request's tool settings.
  std::string prompt_text, template_source, generation_prompt;
  bool has_tools = false, parallel_tool_calls = true;
  std::string tools_json;  // the request's tools array, as JSON text
  ToolChoice tool_choice = ToolChoice::None;
  std::string tool_function;  // ToolChoice::Function: the tool's name
  std::string grammar;  // GBNF the output is held to (serve/api/common/structured_output.h), "" for none
  std::string grammar_trigger;  // the grammar applies from this text on ("" : from the start)
  GenerationParams gen;
};

// What a response says about itself: its id, model, creation time, and
// whether it answers a chat.
struct ResponseInfo {
  std::string id, model;
  int64_t created = 0;
  bool chat = false;
};

// Tokenizes text from a request, special tokens parsed as llama-server
// parses them (`parse_special`). A model without a vocabulary cannot, and
// that is the request's fault: ApiError 400 on `param`, with the
// tokenizer's message (send token ids instead).
std::vector<int32_t> tokenize_request_text(const Tokenizer& tok, std::string_view text, bool add_special,
                                           bool parse_special, const std::string& param);

}  // namespace vtc::serve
