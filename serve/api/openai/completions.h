// The OpenAI request and response shapes: validating a JSON body into
// GenerationParams, and building completion / chat.completion bodies and
// their streaming chunks (the response half is openai_response.cpp).
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

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "serve/api_error.h"
#include "serve/chat_prompt.h"
#include "serve/engine.h"

namespace vtc::serve {

// --- Text from token bytes ----------------------------------------------------
// A token's piece need not be valid UTF-8 on its own (byte-fallback tokens,
// a CJK character or an emoji split across tokens), and nlohmann::json
// throws when it dumps such a string. Every string built from token bytes
// goes through valid_utf8() before it enters a JSON value.

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code
// points past U+10FFFF).
bool is_valid_utf8(std::string_view s);
// `s` with each byte that does not begin a well-formed sequence replaced
// by U+FFFD (the tokenizer's StreamingDecoder does the same).
std::string valid_utf8(std::string_view s);
// [b0, b1, ...]: the raw bytes, as OpenAI's logprobs `bytes`.
nlohmann::json bytes_json(std::string_view s);
// json::dump that cannot throw on text (invalid UTF-8 would be replaced).
std::string dump_json(const nlohmann::json& j);

// {"error": {"message", "type", "param", "code"}}
nlohmann::json error_body(const std::string& message, const std::string& type, const std::string& param = {},
                          const std::string& code = {});

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
  std::string tool_choice = "none";  // none | auto | required | function (tool_function)
  std::string tool_function;
  std::string grammar;  // GBNF the output is held to (serve/structured_output.h), "" for none
  std::string grammar_trigger;  // the grammar applies from this text on ("" : from the start)
  GenerationParams gen;
};

// Tokenizes text from a request. A model without a vocabulary cannot, and
// that is the request's fault: ApiError 400 on `param`, with the
// tokenizer's message (send token ids instead).
std::vector<int32_t> tokenize_request_text(const Tokenizer& tok, std::string_view text, bool add_special,
                                           bool parse_special, const std::string& param);

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

struct ResponseInfo {
  std::string id, model;
  int64_t created = 0;
  bool chat = false;
};

// The generations behind one response: choice 0 is submitted at once, the
// other n - 1 once choice 0 has its first token (its prompt's full KV
// pages are then in the prefix cache, and the others share them), each
// seeded with the request's seed + its index.
class Choices {
 public:
  Choices(Engine& engine, const CompletionRequest& req);
  explicit Choices(std::shared_ptr<Request> submitted);  // n = 1, already submitted
  // Submits choices 1..n-1 when choice 0 is past its prompt; call while waiting.
  void submit_rest(Engine& engine);
  void cancel(Engine& engine);
  const std::vector<std::shared_ptr<Request>>& requests() const { return requests_; }
  int32_t n() const { return n_; }  // choices in all, submitted or not

 private:
  GenerationParams params_;
  std::string grammar_, grammar_trigger_;  // each choice gets its own constraint over it
  int32_t n_;
  std::vector<std::shared_ptr<Request>> requests_;
};

// The whole non-streaming response (events: each choice's tokens).
nlohmann::json completion_body(const ResponseInfo& info, const CompletionRequest& req, const Choices& choices,
                               const std::vector<std::vector<TokenEvent>>& events, const Tokenizer& tok);
// The last chunk of stream_options.include_usage: no choices, usage set.
nlohmann::json usage_chunk(const ResponseInfo& info, const Choices& choices);
nlohmann::json usage_of(const Request& r);
nlohmann::json usage_of(const Choices& choices);  // the prompt once, every choice's completion

// --- Whole endpoints, independent of the HTTP library -------------------------
// POST /tokenize and /detokenize: validate the parsed body (ApiError 400)
// and build the 200 body. with_pieces gives [{"id", "piece", "bytes"}]:
// `piece` is the token's text with invalid UTF-8 replaced, `bytes` the raw
// bytes; /detokenize replaces invalid UTF-8 in `content` the same way.
nlohmann::json tokenize_response(const nlohmann::json& body, const Engine& engine);
nlohmann::json detokenize_response(const nlohmann::json& body, const Engine& engine);

// Where a chunked content provider writes. `write` returns false when the
// client is gone; `alive` is checked while waiting (httplib: is_writable).
struct ResponseSink {
  std::function<bool(const std::string&)> write;
  std::function<bool()> alive;
};

// The bodies of the two chunked content providers of /v1/completions and
// /v1/chat/completions. Both wait for `r`, write the response, and return
// false when the client went away (the request is then cancelled). Neither
// throws: an exception (a JSON dump, a failed write, ...) cancels `r` and
// ends that one response, a stream with an `error` event and [DONE], a
// non-streaming reply with an error body, so no request can take the
// process down. finish_reason is the Request's, passed through unchanged
// in both (docs/serving.md: a generation cut by shutdown or cancellation
// ends with "cancelled").
bool write_stream(Engine& engine, Choices& choices, const CompletionRequest& req, const ResponseInfo& info,
                  const ResponseSink& sink);
bool write_completion(Engine& engine, Choices& choices, const CompletionRequest& req, const ResponseInfo& info,
                      const ResponseSink& sink);
// One request already submitted (n = 1).
bool write_stream(Engine& engine, const std::shared_ptr<Request>& r, const CompletionRequest& req,
                  const ResponseInfo& info, const ResponseSink& sink);
bool write_completion(Engine& engine, const std::shared_ptr<Request>& r, const CompletionRequest& req,
                      const ResponseInfo& info, const ResponseSink& sink);

}  // namespace vtc::serve
