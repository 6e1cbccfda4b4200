// The OpenAI request and response shapes: validating a JSON body into
// GenerationParams, and building completion / chat.completion bodies and
// their streaming chunks.
//
// Validation is strict and names the offending field: a body that is not
// an object, a field of the wrong type or out of range, a field the API
// does not know ("Unrecognized request argument supplied: X", as OpenAI
// answers), n != 1, max_tokens < 1, a prompt that does not leave room in
// the context, and text (a string prompt, a chat) for a model without a
// vocabulary are all ApiError 400 with an OpenAI error body.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "serve/engine.h"

namespace vtc::serve {

struct ApiError : std::runtime_error {
  int status;
  std::string type, param, code;
  ApiError(int status_, std::string message, std::string param_ = {}, std::string code_ = {},
           std::string type_ = "invalid_request_error")
      : std::runtime_error(std::move(message)), status(status_), type(std::move(type_)), param(std::move(param_)),
        code(std::move(code_)) {}
};

// {"error": {"message", "type", "param", "code"}}
nlohmann::json error_body(const std::string& message, const std::string& type, const std::string& param = {},
                          const std::string& code = {});

struct CompletionRequest {
  bool chat = false;
  bool stream = false, include_usage = false;
  bool logprobs = false;  // report logprobs (completions: "logprobs": N; chat: "logprobs": true)
  GenerationParams gen;
};

// Tokenizes text from a request. A model without a vocabulary cannot, and
// that is the request's fault: ApiError 400 on `param`, with the
// tokenizer's message (send token ids instead).
std::vector<int32_t> tokenize_request_text(const Tokenizer& tok, std::string_view text, bool add_special,
                                           bool parse_special, const std::string& param);

// Parses and validates; tokenizes the prompt or applies the chat template.
CompletionRequest parse_completion(const nlohmann::json& body, bool chat, const Engine& engine,
                                   const std::string& chat_template);

struct ResponseInfo {
  std::string id, model;
  int64_t created = 0;
  bool chat = false;
};

// The whole non-streaming response.
nlohmann::json completion_body(const ResponseInfo& info, const CompletionRequest& req, const Request& r,
                               const std::string& text, const std::vector<TokenEvent>& events, const Tokenizer& tok);
// One streaming chunk carrying `events` (text and logprobs); finish_reason
// null unless `finish` is set. The chat stream's first chunk has the role.
nlohmann::json stream_chunk(const ResponseInfo& info, const CompletionRequest& req, const std::vector<TokenEvent>& events,
                            const std::string& finish, bool first, const Tokenizer& tok);
// The last chunk of stream_options.include_usage: no choices, usage set.
nlohmann::json usage_chunk(const ResponseInfo& info, const Request& r);
nlohmann::json usage_of(const Request& r);

}  // namespace vtc::serve
