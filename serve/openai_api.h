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

#include <functional>
#include <memory>
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
bool write_stream(Engine& engine, const std::shared_ptr<Request>& r, const CompletionRequest& req,
                  const ResponseInfo& info, const ResponseSink& sink);
bool write_completion(Engine& engine, const std::shared_ptr<Request>& r, const CompletionRequest& req,
                      const ResponseInfo& info, const ResponseSink& sink);

}  // namespace vtc::serve
