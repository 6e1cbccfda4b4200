// POST /v1/responses: the OpenAI Responses API, stateless.
//
// A Responses body is translated into an OpenAI chat body and parsed by
// parse_completion(chat = true), so validation, sampling, the template,
// tool grammars and structured output are the chat endpoint's:
//   input (string)                      one user message
//   input items: message (roles user, system, developer, assistant; content
//     a string or input_text / output_text parts), function_call (an
//     assistant tool call), function_call_output (a tool message),
//     reasoning (reasoning_text content: the next assistant turn's
//     reasoning_content)
//   instructions                        a system message first
//   tools [{type: function, name, description, parameters, strict}]
//   tool_choice none | auto | required | {type: function, name}
//   text.format text | json_object | json_schema {name, schema, strict}
//   max_output_tokens                   max_tokens
//   temperature, top_p, parallel_tool_calls, stream
//   reasoning.effort                    reasoning_effort, and enable_thinking
//                                       false for "none" (template kwargs)
// vtc keeps no responses: `store: true`, `previous_response_id`,
// `conversation` and `background: true` are a 400 saying so. Bookkeeping
// fields (metadata, user, service_tier, include, truncation, ...) are
// accepted; any other field is a 400 naming it.
//
// The answer is a `response` object (output items reasoning, message with
// output_text, function_call with call_id), or with stream: true the
// Responses event stream (responses_api.cpp).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>

#include "serve/api/common/generation_loop.h"
#include "serve/api/openai/completions.h"

namespace vtc::serve {

// The chat body a Responses body stands for. ApiError 400 naming the field.
nlohmann::ordered_json chat_body_from_responses(const nlohmann::ordered_json& body);

// chat_body_from_responses, then parse_completion; errors name the
// Responses field (max_output_tokens, not max_tokens).
CompletionRequest parse_responses_request(const nlohmann::ordered_json& body, const Engine& engine,
                                          const PromptTemplate& chat_template);

// The format of a response to `body` (its settings are echoed in the
// response object). `req` must outlive it.
std::unique_ptr<ResponseFormat> responses_format(const ResponseInfo& info, const CompletionRequest& req,
                                                 const nlohmann::ordered_json& body);

// The endpoint: parse_responses_request and responses_format.
GenerationAnswer responses_answer(const nlohmann::ordered_json& body, const Engine& engine,
                                  const PromptTemplate& chat_template, const ResponseInfo& info);

}  // namespace vtc::serve
