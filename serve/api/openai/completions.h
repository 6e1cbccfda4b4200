// POST /v1/completions and /v1/chat/completions: validating an OpenAI body
// into a CompletionRequest, and the completion / chat.completion bodies and
// their streaming chunks (completion_format.cpp).
//
// Validation is strict and names the offending field: a body that is not
// an object, a field of the wrong type or out of range, a field that would
// change the result and that vtc does not support ("Unrecognized request
// argument supplied: X", as OpenAI answers), n outside [1, 16], max_tokens
// < 1, a prompt that does not leave room in the context, and text (a string
// prompt, a chat) for a model without a vocabulary are all ApiError 400
// with an OpenAI error body. Fields that cannot change the result (user,
// store, metadata, service_tier, ...) are accepted and logged once.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "serve/api/common/api_error.h"
#include "serve/api/common/completion_request.h"
#include "serve/api/common/generation_loop.h"
#include "serve/chat/chat_prompt.h"
#include "serve/engine/engine.h"
#include "serve/engine/parallel.h"

namespace vtc::serve {

// Parses and validates; tokenizes the prompt or applies the chat template.
// The body is an ordered_json so that tool and response schemas keep the
// client's key order (it matters to tojson and to schema grammars).
CompletionRequest parse_completion(const nlohmann::ordered_json& body, bool chat, const Engine& engine,
                                   const PromptTemplate& chat_template);

// The prompt tokens a chat body renders to (its messages, tools,
// chat_template_kwargs and reasoning_effort), as parse_completion renders
// them; nothing else in the body is read. ApiError 400 naming the field.
std::vector<int32_t> chat_prompt_tokens(const nlohmann::ordered_json& chat_body, const PromptTemplate& chat_template);

// `e` with the request fields it names renamed (the chat field a
// translated body has, to the field its own API calls it): in `param` and
// where the message quotes it ('max_tokens' -> 'max_output_tokens').
ApiError with_field_names(const ApiError& e, const std::vector<std::pair<std::string, std::string>>& chat_to_api);

// The endpoint: the parsed request and its chat.completion (info.chat) or
// text_completion format.
GenerationAnswer completions_answer(const nlohmann::ordered_json& body, bool chat, const Engine& engine,
                                    const PromptTemplate& chat_template, const ResponseInfo& info);

// The whole non-streaming response (events: each choice's tokens).
nlohmann::json completion_body(const ResponseInfo& info, const CompletionRequest& req, const Choices& choices,
                               const std::vector<std::vector<TokenEvent>>& events, const Tokenizer& tok);
// The last chunk of stream_options.include_usage: no choices, usage set.
nlohmann::json usage_chunk(const ResponseInfo& info, const Choices& choices);
nlohmann::json usage_of(const Request& r);
nlohmann::json usage_of(const Choices& choices);  // the prompt once, every choice's completion

// chat.completion (info.chat) or text_completion bodies and chunks, as
// /v1/chat/completions and /v1/completions send them. `req` must outlive it.
std::unique_ptr<ResponseFormat> chat_completion_format(const ResponseInfo& info, const CompletionRequest& req,
                                                       const Tokenizer& tok);

}  // namespace vtc::serve
