// How one API spells a generated response: OpenAI chat.completion (and
// text_completion), the OpenAI Responses API, the Anthropic Messages API.
//
// The generation loop is written once (generation_loop.cpp: stream_response
// and whole_response): it waits on a request's choices, submits the rest,
// cancels them when the client goes away, sends keep-alives, turns errors
// and exceptions into one error answer, and splits each choice's text with
// a ChoiceOutput (serve/api/common/choice_output.h) into chat deltas: {"content"},
// {"reasoning_content"}, {"tool_calls": [{index, id, type, function}]}.
// A ResponseFormat only turns those deltas, the finish and the usage into
// the bytes its API sends, so sampling, templates, tool grammars, structured
// output and the streaming loop are shared by every chat-like API.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serve/api/common/choice_output.h"
#include "serve/api/common/completion_request.h"
#include "serve/engine/engine.h"
#include "serve/engine/parallel.h"

namespace vtc::serve {

// Where a chunked content provider writes. `write` returns false when the
// client is gone; `alive` is checked while waiting (the HTTP layer's
// is_writable).
struct ResponseSink {
  std::function<bool(const std::string&)> write;
  std::function<bool()> alive;
};

class ResponseFormat {
 public:
  virtual ~ResponseFormat() = default;

  // --- Streamed (server-sent events); each returns the bytes to send ----------
  // Before any token (Responses: response.created; Messages: message_start).
  virtual std::string stream_start() { return {}; }
  // One generated token of choice `index` and the deltas its text released
  // (none while the output parser holds text back).
  virtual std::string stream_token(int32_t index, const TokenEvent& token, std::vector<nlohmann::json> deltas) = 0;
  // Choice `index` ended: what the parser held back until then, and how
  // it ended.
  virtual std::string stream_finish(int32_t index, std::vector<nlohmann::json> deltas, const ChoiceFinish& finish,
                                    const Request& request) = 0;
  // Every choice ended.
  virtual std::string stream_end(const Choices& choices) = 0;
  // A failed generation or an exception ends the stream with this.
  virtual std::string stream_error(const std::string& message) = 0;
  // Sent while nothing else is due.
  virtual std::string keep_alive() { return ": keep-alive\n\n"; }

  // --- Whole (one JSON body) ----------------------------------------------------
  // events: each choice's tokens.
  virtual nlohmann::json body(const Choices& choices, const std::vector<std::vector<TokenEvent>>& events) = 0;
  virtual nlohmann::json error(const std::string& message) = 0;
};

// What a generating endpoint hands the HTTP layer: the parsed request and
// the format its answer takes (the format reads the request: both live as
// long as the answer).
struct GenerationAnswer {
  std::shared_ptr<const CompletionRequest> request;
  std::shared_ptr<ResponseFormat> format;
};

// Submits the request's n choices (choice i > 0 gets its own grammar
// constraint).
std::shared_ptr<Choices> submit_choices(Engine& engine, const CompletionRequest& req);

// The generation loop, as the body of a chunked content provider: waits for
// the choices, writes the response through `format`, and returns false when
// the client went away (the choices are then cancelled). Never throws: an
// exception cancels the choices and ends this one response with the
// format's error.
// `req` gives each choice's output parser (ChoiceOutput).
bool stream_response(Engine& engine, Choices& choices, const CompletionRequest& req, ResponseFormat& format,
                     const ResponseSink& sink);
bool whole_response(Engine& engine, Choices& choices, ResponseFormat& format, const ResponseSink& sink);


// An SSE event with a name (Responses and Messages name theirs; chat
// completions send bare `data:` lines).
std::string sse_event(const std::string& name, const nlohmann::json& data);

}  // namespace vtc::serve
