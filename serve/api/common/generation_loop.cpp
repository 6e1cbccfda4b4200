// The generation loop every chat-like API shares (generation_loop.h): it
// waits on a request's choices (serve/engine/parallel.h), splits each
// choice's text with a ChoiceOutput, and writes through the API's
// ResponseFormat (serve/api/openai/completion_format.cpp,
// serve/api/responses, serve/api/anthropic).
#include <fmt/format.h>

#include "serve/api/common/generation_loop.h"

#include "serve/api/common/choice_output.h"
#include "serve/api/common/json_text.h"
#include "serve/api/common/structured_output.h"

namespace vtc::serve {

using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// Ends one response after an exception; never throws itself.
void end_after_exception(Engine& engine, Choices& choices, ResponseFormat& format, const ResponseSink& sink,
                         bool stream, const char* what) noexcept {
  try {
    choices.cancel(engine);
    const std::string message = fmt::format("internal error while writing the response: {}", what);
    sink.write(stream ? format.stream_error(message) : dump_json(format.error(message)));
  } catch (...) {
  }
}

// Runs a content provider's body: an exception (a JSON dump, a failed
// write, ...) cancels the choices and ends only this response.
template <class Body>
bool guarded(Engine& engine, Choices& choices, ResponseFormat& format, const ResponseSink& sink, bool stream,
             Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    end_after_exception(engine, choices, format, sink, stream, e.what());
  } catch (...) {
    end_after_exception(engine, choices, format, sink, stream, "unknown error");
  }
  return true;
}

// The first choice that failed, if any: the whole response is its error.
const Request* failed_choice(const Choices& choices) {
  for (const auto& r : choices.requests())
    if (r->finish_reason().kind == Finish::Error) return r.get();
  return nullptr;
}

}  // namespace

// --- The generation loop ----------------------------------------------------------
std::shared_ptr<Choices> submit_choices(Engine& engine, const CompletionRequest& req) {
  Choices::ConstraintFactory constraint;
  if (!req.grammar.empty())
    constraint = [&engine, grammar = GrammarRequest{req.grammar, req.grammar_trigger}] {
      return grammar_constraint(grammar, engine);
    };
  return std::make_shared<Choices>(engine, req.gen, req.n, std::move(constraint));
}

std::string sse_event(const std::string& name, const json& data) {
  return "event: " + name + "\ndata: " + dump_json(data) + "\n\n";
}

bool stream_response(Engine& engine, Choices& choices, const CompletionRequest& req, ResponseFormat& format,
                     const ResponseSink& sink) {
  return guarded(engine, choices, format, sink, true, [&] {
    const auto send = [&](const std::string& bytes) { return bytes.empty() || sink.write(bytes); };
    const int32_t n = choices.n();
    std::vector<ChoiceOutput> outputs;
    for (int32_t i = 0; i < n; ++i) outputs.emplace_back(req);
    std::vector<bool> ended(size_t(n), false);
    if (!send(format.stream_start())) return choices.cancel(engine), false;
    std::vector<TokenEvent> events;
    const auto wait = std::chrono::milliseconds(std::max<int64_t>(10, 200 / n));
    for (;;) {
      choices.submit_rest(engine);
      bool all_done = true, any_events = false;
      for (size_t i = 0; i < choices.requests().size(); ++i) {
        if (ended[i]) continue;
        const Request& r = *choices.requests()[i];
        events.clear();
        const bool done = choices.requests()[i]->poll(events, wait);
        if (!sink.alive()) return choices.cancel(engine), false;
        any_events = any_events || !events.empty();
        for (const TokenEvent& e : events)
          if (!send(format.stream_token(int32_t(i), e, outputs[i].feed(e.text)))) return choices.cancel(engine), false;
        if (!done) {
          all_done = false;
          continue;
        }
        if (r.finish_reason().kind == Finish::Error) {
          choices.cancel(engine);
          sink.write(format.stream_error(r.error()));
          return true;
        }
        ended[i] = true;
        std::vector<json> held_back = outputs[i].finish();  // before finish_reason: it reads the final parse
        if (!send(format.stream_finish(int32_t(i), std::move(held_back), outputs[i].finish_reason(r.finish_reason()), r)))
          return choices.cancel(engine), false;
      }
      if (int32_t(choices.requests().size()) < n) all_done = false;
      if (!all_done) {
        if (!any_events && !sink.write(format.keep_alive())) return choices.cancel(engine), false;
        continue;
      }
      send(format.stream_end(choices));
      return true;
    }
  });
}

bool whole_response(Engine& engine, Choices& choices, ResponseFormat& format, const ResponseSink& sink) {
  return guarded(engine, choices, format, sink, false, [&] {
    const int32_t n = choices.n();
    std::vector<std::vector<TokenEvent>> events(static_cast<size_t>(n));
    for (;;) {
      choices.submit_rest(engine);
      bool all_done = int32_t(choices.requests().size()) == n;
      for (size_t i = 0; i < choices.requests().size(); ++i)
        all_done = choices.requests()[i]->poll(events[i], std::chrono::milliseconds(100 / n + 1)) && all_done;
      if (all_done) break;
      if (!sink.alive()) return choices.cancel(engine), false;
    }
    const Request* failed = failed_choice(choices);
    sink.write(dump_json(failed ? format.error(failed->error()) : format.body(choices, events)));
    return true;
  });
}

}  // namespace vtc::serve
