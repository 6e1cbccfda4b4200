// POST /v1/messages and /v1/messages/count_tokens: the Anthropic Messages
// API.
//
// A Messages body is translated into an OpenAI chat body and parsed by
// parse_completion(chat = true), as /v1/chat/completions and /v1/responses
// are:
//   system (a string or text blocks)    a system message first
//   messages: user / assistant turns, content a string or blocks: text,
//     tool_use {id, name, input} (an assistant tool call), tool_result
//     {tool_use_id, content (a string or text blocks)} (a tool message),
//     thinking {thinking} (the turn's reasoning_content)
//   tools [{name, description, input_schema}]
//   tool_choice {type: auto | any | tool (name) | none,
//                disable_parallel_tool_use}    auto | required | function | none
//   stop_sequences                      stop
//   max_tokens (required), temperature, top_p, top_k, stream
//   thinking {type: enabled | adaptive | disabled}
//                                       chat_template_kwargs.enable_thinking
// Images, documents and server tools are a 400 naming the block; any
// unknown field is a 400 naming it. Errors on these paths are Anthropic's
// shape: {"type": "error", "error": {"type": "invalid_request_error", ...}}.
//
// The answer is a `message` (content blocks thinking, text, tool_use;
// stop_reason end_turn | max_tokens | stop_sequence | tool_use), or with
// stream: true Anthropic's event stream (anthropic_api.cpp).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "serve/api/common/generation_loop.h"
#include "serve/api/openai/completions.h"

namespace vtc::serve {

// The chat body a Messages body stands for. ApiError 400 naming the field.
// count_only: a count_tokens body (no max_tokens; nothing is generated).
nlohmann::ordered_json chat_body_from_messages(const nlohmann::ordered_json& body, bool count_only = false);

// chat_body_from_messages, then parse_completion; errors name the Messages
// field (stop_sequences, not stop).
CompletionRequest parse_messages_request(const nlohmann::ordered_json& body, const Engine& engine,
                                         const PromptTemplate& chat_template);

// POST /v1/messages/count_tokens: {"input_tokens": N}, the tokens of the
// prompt the body renders to.
nlohmann::json count_tokens_response(const nlohmann::ordered_json& body, const PromptTemplate& chat_template);

// The format of a message answering a request. `req` must outlive it.
std::unique_ptr<ResponseFormat> messages_format(const ResponseInfo& info, const CompletionRequest& req);

// The endpoint: parse_messages_request and messages_format.
GenerationAnswer messages_answer(const nlohmann::ordered_json& body, const Engine& engine,
                                 const PromptTemplate& chat_template, const ResponseInfo& info);

// {"type": "error", "error": {"type", "message"}}, the type named after the
// HTTP status as Anthropic names it (400 invalid_request_error, 401
// authentication_error, 403 permission_error, 404 not_found_error, 413
// request_too_large, 429 rate_limit_error, 503 overloaded_error, else
// api_error).
nlohmann::json anthropic_error_body(int status, const std::string& message);
// Whether a path is one of the Messages API's (its errors take that shape).
bool is_anthropic_path(const std::string& path);

}  // namespace vtc::serve
