// The response half of the OpenAI API: completion and chat.completion
// bodies, their streaming chunks, and the two content providers that wait
// on a request's choices and write them (openai_api.h).
//
// A request with n choices runs n generations. Choice 0 is submitted
// first; the others once choice 0's prompt has been prefilled (it has its
// first token), so they find the prompt's full KV pages in the prefix cache
// and share them instead of prefilling the prompt again. Each choice seeds
// its sampler with the request's seed + its index.
//
// Chat output goes through a ChoiceOutput (serve/chat_output.h), which
// splits what the model wrote into content, reasoning and tool calls for
// the template's family, and turns streamed text into OpenAI deltas.
#include <fmt/format.h>

#include "serve/chat_output.h"
#include "serve/openai_api.h"
#include "serve/structured_output.h"

namespace vtc::serve {

using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// How completions logprobs name a token (the legacy format has no `bytes`):
// its text when that is valid UTF-8; otherwise, as OpenAI does, "bytes:"
// and each byte as \xNN, so distinct tokens keep distinct names (they key
// top_logprobs); for a model without a vocabulary, its id in decimal.
std::string token_label(const Tokenizer& tok, int32_t id) {
  if (!tok.has_vocab()) return std::to_string(id);
  const std::string piece = tok.token_piece(id);
  if (is_valid_utf8(piece)) return piece;
  std::string label = "bytes:";
  for (unsigned char c : piece) label += fmt::format("\\x{:02x}", c);
  return label;
}

// Chat logprobs: `token` is the text with invalid UTF-8 replaced, `bytes`
// the raw bytes (a character split across tokens is whole again in the
// concatenated bytes).
json logprob_entry_chat(const TokenEvent& e, const Tokenizer& tok) {
  const std::string piece = tok.token_piece(e.id);
  json top = json::array();
  for (const auto& [id, lp] : e.top) {
    const std::string p = tok.token_piece(id);
    top.push_back({{"token", valid_utf8(p)}, {"logprob", lp}, {"bytes", bytes_json(p)}});
  }
  return {{"token", valid_utf8(piece)}, {"logprob", e.logprob}, {"bytes", bytes_json(piece)}, {"top_logprobs", top}};
}

json logprobs_of(const CompletionRequest& req, const std::vector<TokenEvent>& events, const Tokenizer& tok,
                 size_t text_offset) {
  if (!req.logprobs) return nullptr;
  if (req.chat) {
    json content = json::array();
    for (const auto& e : events) content.push_back(logprob_entry_chat(e, tok));
    return {{"content", content}};
  }
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const auto& e : events) {
    tokens.push_back(token_label(tok, e.id));
    lps.push_back(e.logprob);
    json top = json::object();
    for (const auto& [id, lp] : e.top) top[token_label(tok, id)] = lp;
    tops.push_back(top);
    offsets.push_back(text_offset);
    text_offset += e.text.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json base(const ResponseInfo& info, bool chunk) {
  return {{"id", info.id},
          {"object", info.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", info.created},
          {"model", info.model}};
}

std::string joined_text(const std::vector<TokenEvent>& events) {
  std::string text;
  for (const auto& e : events) text += e.text;
  return text;
}

bool write_event(const ResponseSink& sink, const json& j) { return sink.write("data: " + dump_json(j) + "\n\n"); }

// Ends one response after an exception; never throws itself.
void end_after_exception(Engine& engine, Choices& choices, const ResponseSink& sink, bool stream,
                         const char* what) noexcept {
  try {
    choices.cancel(engine);
    const json body = error_body(fmt::format("internal error while writing the response: {}", what), "server_error");
    if (stream) {
      if (write_event(sink, body)) sink.write("data: [DONE]\n\n");
    } else {
      sink.write(dump_json(body));
    }
  } catch (...) {
  }
}

// Runs a content provider's body: an exception (a JSON dump, a failed
// write, ...) cancels the choices and ends only this response.
template <class Body>
bool guarded(Engine& engine, Choices& choices, const ResponseSink& sink, bool stream, Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    end_after_exception(engine, choices, sink, stream, e.what());
  } catch (...) {
    end_after_exception(engine, choices, sink, stream, "unknown error");
  }
  return true;
}

CompletionRequest single_choice(const CompletionRequest& req) {
  CompletionRequest one = req;
  one.n = 1;
  return one;
}

// The first choice that failed, if any: the whole response is its error.
const Request* failed_choice(const Choices& choices) {
  for (const auto& r : choices.requests())
    if (r->finish_reason() == "error") return r.get();
  return nullptr;
}

}  // namespace

// --- Choices ----------------------------------------------------------------------
Choices::Choices(Engine& engine, const CompletionRequest& req)
    : params_(req.gen), grammar_(req.grammar), grammar_trigger_(req.grammar_trigger), n_(req.n) {
  requests_.push_back(engine.submit(params_));
}

Choices::Choices(std::shared_ptr<Request> submitted) : n_(1) { requests_.push_back(std::move(submitted)); }

void Choices::submit_rest(Engine& engine) {
  if (int32_t(requests_.size()) == n_) return;
  const Request& first = *requests_[0];
  if (first.completion_tokens() == 0 && first.finish_reason().empty()) return;  // still prefilling
  for (int32_t i = 1; i < n_; ++i) {
    GenerationParams p = params_;
    p.sampling.seed += uint64_t(i);
    if (!grammar_.empty()) p.constraint = grammar_constraint({grammar_, grammar_trigger_}, engine);
    requests_.push_back(engine.submit(std::move(p)));
  }
}

void Choices::cancel(Engine& engine) {
  for (const auto& r : requests_) engine.cancel(r);
}

json usage_of(const Request& r) {
  return {{"prompt_tokens", r.prompt_tokens()},
          {"completion_tokens", r.completion_tokens()},
          {"total_tokens", r.prompt_tokens() + r.completion_tokens()},
          {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens()}}}};
}

// One usage for all choices: the prompt once, every choice's completion.
json usage_of(const Choices& choices) {
  const Request& first = *choices.requests()[0];
  int32_t completion = 0;
  for (const auto& r : choices.requests()) completion += r->completion_tokens();
  return {{"prompt_tokens", first.prompt_tokens()},
          {"completion_tokens", completion},
          {"total_tokens", first.prompt_tokens() + completion},
          {"prompt_tokens_details", {{"cached_tokens", first.cached_tokens()}}}};
}

json usage_chunk(const ResponseInfo& info, const Choices& choices) {
  json body = base(info, true);
  body["choices"] = json::array();
  body["usage"] = usage_of(choices);
  return body;
}

// --- Streaming -------------------------------------------------------------------
namespace {

// One choice of a stream: what it has sent, and how its text is split.
struct StreamedChoice {
  ChoiceOutput output;
  bool first = true, ended = false;
};

json chunk_of(const ResponseInfo& info, const CompletionRequest& req, int32_t index, json delta_or_text,
              const std::vector<TokenEvent>& events, const std::string& finish, const Tokenizer& tok) {
  json choice = {{"index", index}, {"logprobs", logprobs_of(req, events, tok, 0)},
                 {"finish_reason", finish.empty() ? json(nullptr) : json(finish)}};
  choice[info.chat ? "delta" : "text"] = std::move(delta_or_text);
  json body = base(info, true);
  body["choices"] = json::array({choice});
  return body;
}

// Writes what choice `i` released in `events`; false when the client is gone.
bool stream_events(const ResponseInfo& info, const CompletionRequest& req, int32_t i, StreamedChoice& c,
                   const std::vector<TokenEvent>& events, const ResponseSink& sink, const Tokenizer& tok) {
  for (const auto& e : events) {
    std::vector<json> deltas = c.output.feed(e.text);
    if (deltas.empty() && (req.logprobs || c.first)) deltas.push_back(info.chat ? json::object() : json(""));
    for (size_t k = 0; k < deltas.size(); ++k) {
      json& d = deltas[k];
      if (c.first && info.chat) d["role"] = "assistant";
      if (c.first && !info.chat) d = req.echo_text + d.get<std::string>();
      if (c.first && info.chat && !d.contains("content") && !d.contains("reasoning_content") && !d.contains("tool_calls"))
        d["content"] = "";
      const std::vector<TokenEvent> lp = k == 0 ? std::vector<TokenEvent>{e} : std::vector<TokenEvent>{};
      if (!write_event(sink, chunk_of(info, req, i, std::move(d), lp, "", tok))) return false;
      c.first = false;
    }
  }
  return true;
}

// The last chunks of choice `i`: what the parser held back, then the finish.
bool end_choice(const ResponseInfo& info, const CompletionRequest& req, int32_t i, StreamedChoice& c,
                const Request& r, const ResponseSink& sink, const Tokenizer& tok) {
  std::vector<json> deltas = c.output.finish();
  for (json& d : deltas) {
    if (c.first && info.chat) d["role"] = "assistant";
    if (c.first && !info.chat) d = req.echo_text + d.get<std::string>();
    if (!write_event(sink, chunk_of(info, req, i, std::move(d), {}, "", tok))) return false;
    c.first = false;
  }
  json last = info.chat ? json::object() : json(c.first ? req.echo_text : "");
  if (c.first && info.chat) last = {{"role", "assistant"}};
  c.ended = true;
  return write_event(sink, chunk_of(info, req, i, std::move(last), {}, c.output.finish_reason(r.finish_reason()), tok));
}

}  // namespace

bool write_stream(Engine& engine, Choices& choices, const CompletionRequest& req, const ResponseInfo& info,
                  const ResponseSink& sink) {
  return guarded(engine, choices, sink, true, [&] {
    const Tokenizer& tok = engine.tokenizer();
    std::vector<StreamedChoice> state;
    for (int32_t i = 0; i < req.n; ++i) state.push_back({ChoiceOutput(req), true, false});
    std::vector<TokenEvent> events;
    const auto wait = std::chrono::milliseconds(std::max<int64_t>(10, 200 / req.n));
    for (;;) {
      choices.submit_rest(engine);
      bool all_done = true, any_events = false;
      for (size_t i = 0; i < choices.requests().size(); ++i) {
        StreamedChoice& c = state[i];
        if (c.ended) continue;
        const Request& r = *choices.requests()[i];
        events.clear();
        const bool done = choices.requests()[i]->poll(events, wait);
        if (!sink.alive()) return choices.cancel(engine), false;
        any_events = any_events || !events.empty();
        if (!stream_events(info, req, int32_t(i), c, events, sink, tok)) return choices.cancel(engine), false;
        if (!done) {
          all_done = false;
          continue;
        }
        if (r.finish_reason() == "error") {
          choices.cancel(engine);
          write_event(sink, error_body(r.error(), "server_error"));
          sink.write("data: [DONE]\n\n");
          return true;
        }
        if (!end_choice(info, req, int32_t(i), c, r, sink, tok)) return choices.cancel(engine), false;
      }
      if (int32_t(choices.requests().size()) < req.n) all_done = false;
      if (!all_done) {
        if (!any_events && !sink.write(": keep-alive\n\n")) return choices.cancel(engine), false;
        continue;
      }
      if (req.include_usage) write_event(sink, usage_chunk(info, choices));
      sink.write("data: [DONE]\n\n");
      return true;
    }
  });
}

// --- Whole responses ---------------------------------------------------------------
json completion_body(const ResponseInfo& info, const CompletionRequest& req, const Choices& choices,
                     const std::vector<std::vector<TokenEvent>>& events, const Tokenizer& tok) {
  json body = base(info, false);
  json list = json::array();
  double prompt_ms = 0, predicted_ms = 0;
  for (size_t i = 0; i < choices.requests().size(); ++i) {
    const Request& r = *choices.requests()[i];
    ChoiceOutput out(req);
    out.feed(joined_text(events[i]));
    out.finish();
    json choice = {{"index", i}, {"logprobs", logprobs_of(req, events[i], tok, req.echo_text.size())},
                   {"finish_reason", out.finish_reason(r.finish_reason())}};
    if (info.chat) choice["message"] = out.message();
    else choice["text"] = req.echo_text + out.message()["content"].get<std::string>();
    list.push_back(std::move(choice));
    prompt_ms = std::max(prompt_ms, r.prompt_ms());
    predicted_ms = std::max(predicted_ms, r.generate_ms());
  }
  body["choices"] = std::move(list);
  body["usage"] = usage_of(choices);
  const json usage = body["usage"];
  body["timings"] = {{"prompt_n", usage["prompt_tokens"]}, {"cached_n", usage["prompt_tokens_details"]["cached_tokens"]},
                     {"prompt_ms", prompt_ms}, {"predicted_n", usage["completion_tokens"]}, {"predicted_ms", predicted_ms}};
  return body;
}

bool write_completion(Engine& engine, Choices& choices, const CompletionRequest& req, const ResponseInfo& info,
                      const ResponseSink& sink) {
  return guarded(engine, choices, sink, false, [&] {
    std::vector<std::vector<TokenEvent>> events(size_t(req.n));
    for (;;) {
      choices.submit_rest(engine);
      bool all_done = int32_t(choices.requests().size()) == req.n;
      for (size_t i = 0; i < choices.requests().size(); ++i)
        all_done = choices.requests()[i]->poll(events[i], std::chrono::milliseconds(100 / req.n + 1)) && all_done;
      if (all_done) break;
      if (!sink.alive()) return choices.cancel(engine), false;
    }
    const Request* failed = failed_choice(choices);
    const json body = failed ? error_body(failed->error(), "server_error")
                             : completion_body(info, req, choices, events, engine.tokenizer());
    sink.write(dump_json(body));
    return true;
  });
}

bool write_stream(Engine& engine, const std::shared_ptr<Request>& r, const CompletionRequest& req,
                  const ResponseInfo& info, const ResponseSink& sink) {
  Choices one(r);
  return write_stream(engine, one, single_choice(req), info, sink);
}

bool write_completion(Engine& engine, const std::shared_ptr<Request>& r, const CompletionRequest& req,
                      const ResponseInfo& info, const ResponseSink& sink) {
  Choices one(r);
  return write_completion(engine, one, single_choice(req), info, sink);
}

}  // namespace vtc::serve
