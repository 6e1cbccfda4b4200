#include "serve/openai_api.h"

#include <fmt/format.h>

#include <mutex>
#include <optional>
#include <random>
#include <set>

#include "frontends/gguf/chat_template.h"
#include "support/error.h"

namespace vtc::serve {

using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// Length of the well-formed UTF-8 sequence at s[i] (Unicode 15, table 3-7),
// 0 when there is none.
size_t utf8_at(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;  // at most U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  return n;
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_at(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string valid_utf8(std::string_view s) {
  if (is_valid_utf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_at(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

json bytes_json(std::string_view s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json error_body(const std::string& message, const std::string& type, const std::string& param, const std::string& code) {
  return {{"error",
           {{"message", valid_utf8(message)},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(valid_utf8(param))},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

std::vector<int32_t> tokenize_request_text(const Tokenizer& tok, std::string_view text, bool add_special,
                                           bool parse_special, const std::string& param) {
  try {
    return tok.encode(text, add_special, parse_special);
  } catch (const Error& e) {
    throw ApiError(400, e.what(), param);
  }
}

namespace {

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float: return "a number";
    default: return "an integer";
  }
}

[[noreturn]] void bad(const std::string& field, const std::string& message) { throw ApiError(400, message, field); }

void expect(const json& v, bool ok, const std::string& field, const char* what) {
  if (!ok) bad(field, fmt::format("'{}' must be {}, got {}", field, what, type_name(v)));
}

// A field that is absent or null reads as nullopt.
const json* field(const json& body, const std::string& name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::optional<int64_t> get_int(const json& body, const std::string& name, int64_t lo, int64_t hi) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  expect(*v, v->is_number_integer() || v->is_number_unsigned(), name, "an integer");
  const int64_t x = v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX : v->get<int64_t>();
  if (x < lo || x > hi) bad(name, fmt::format("'{}' must be in [{}, {}], got {}", name, lo, hi, x));
  return x;
}

std::optional<double> get_number(const json& body, const std::string& name, double lo, double hi) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  expect(*v, v->is_number(), name, "a number");
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) bad(name, fmt::format("'{}' must be in [{}, {}], got {}", name, lo, hi, x));
  return x;
}

std::optional<bool> get_bool(const json& body, const std::string& name) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  expect(*v, v->is_boolean(), name, "a boolean");
  return v->get<bool>();
}

std::vector<std::string> get_stop(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  if (v->is_string()) return {v->get<std::string>()};
  expect(*v, v->is_array(), "stop", "a string or an array of strings");
  if (v->size() > 4) bad("stop", fmt::format("'stop' holds at most 4 strings, got {}", v->size()));
  std::vector<std::string> out;
  for (const json& s : *v) {
    expect(s, s.is_string(), "stop", "a string or an array of strings");
    if (!s.get<std::string>().empty()) out.push_back(s.get<std::string>());
  }
  return out;
}

void check_known_fields(const json& body, bool chat) {
  static const std::set<std::string> common = {
      "model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "presence_penalty",
      "frequency_penalty", "repeat_penalty", "n", "stream", "stream_options", "user", "logprobs", "logit_bias"};
  static const std::set<std::string> completions = {"prompt", "echo", "suffix", "best_of"};
  static const std::set<std::string> chats = {"messages", "top_logprobs", "max_completion_tokens", "response_format"};
  for (const auto& [key, value] : body.items())
    if (!common.count(key) && !(chat ? chats : completions).count(key))
      throw ApiError(400, fmt::format("Unrecognized request argument supplied: {}", key), key);
}

// Fields OpenAI defines that vtc accepts only in their default form.
void check_defaults_only(const json& body, bool chat) {
  if (const json* v = field(body, "logit_bias")) {
    expect(*v, v->is_object(), "logit_bias", "an object");
    if (!v->empty()) bad("logit_bias", "'logit_bias' is not supported (only {})");
  }
  if (!chat) {
    if (get_bool(body, "echo").value_or(false)) bad("echo", "'echo': true is not supported");
    get_int(body, "best_of", 1, 1);
    if (const json* v = field(body, "suffix")) {
      expect(*v, v->is_string(), "suffix", "a string");
      if (!v->get<std::string>().empty()) bad("suffix", "'suffix' is not supported");
    }
  } else if (const json* v = field(body, "response_format")) {
    expect(*v, v->is_object(), "response_format", "an object");
    if (v->value("type", json("text")) != "text") bad("response_format", "only 'response_format': {\"type\": \"text\"} is supported");
  }
  if (const json* v = field(body, "user")) expect(*v, v->is_string(), "user", "a string");
  if (const json* v = field(body, "model")) expect(*v, v->is_string(), "model", "a string");
}

std::vector<int32_t> completion_prompt(const json& body, const Engine& engine) {
  const json* v = field(body, "prompt");
  if (!v) bad("prompt", "'prompt' is required");
  if (v->is_array() && v->size() == 1 && (*v)[0].is_string()) v = &(*v)[0];
  if (v->is_string()) return tokenize_request_text(engine.tokenizer(), v->get<std::string>(), true, false, "prompt");
  expect(*v, v->is_array() && !v->empty(), "prompt", "a string, an array of one string, or an array of token ids");
  std::vector<int32_t> ids;
  for (const json& t : *v) {
    expect(t, t.is_number_integer(), "prompt", "a string, an array of one string, or an array of token ids");
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= engine.n_vocab())
      bad("prompt", fmt::format("token id {} is outside the vocabulary [0, {})", id, engine.n_vocab()));
    ids.push_back(int32_t(id));
  }
  return ids;
}

std::string message_content(const json& m, size_t i) {
  const std::string name = fmt::format("messages[{}].content", i);
  auto it = m.find("content");
  // OpenAI allows a null content only beside tool calls, which vtc has not.
  if (it == m.end() || it->is_null()) bad(name, fmt::format("'{}' is required", name));
  if (it->is_string()) return it->get<std::string>();
  expect(*it, it->is_array(), name, "a string or an array of text parts");
  std::string text;
  for (const json& part : *it) {
    expect(part, part.is_object() && part.value("type", "") == "text" && part.contains("text") && part["text"].is_string(),
           name, "a string or an array of {\"type\": \"text\", \"text\": ...} parts");
    text += part["text"].get<std::string>();
  }
  return text;
}

std::vector<int32_t> chat_prompt(const json& body, const Engine& engine, const std::string& tmpl) {
  const json* v = field(body, "messages");
  if (!v) bad("messages", "'messages' is required");
  expect(*v, v->is_array() && !v->empty(), "messages", "a non-empty array");
  std::vector<ChatMessage> msgs;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string name = fmt::format("messages[{}]", i);
    expect(m, m.is_object(), name, "an object");
    for (const auto& [key, value] : m.items())
      if (key != "role" && key != "content" && key != "name")
        bad(name + "." + key, fmt::format("Unrecognized request argument supplied: {}.{}", name, key));
    if (const json* n = field(m, "name")) expect(*n, n->is_string(), name + ".name", "a string");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) bad(name + ".role", fmt::format("'{}.role' must be a string", name));
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";
    if (r != "system" && r != "user" && r != "assistant")
      bad(name + ".role", fmt::format("'{}.role' must be system, developer, user or assistant, got '{}'", name, r));
    msgs.push_back({r, message_content(m, i)});
  }
  const std::string text = apply_chat_template(detect_chat_template(tmpl), msgs, true);
  return tokenize_request_text(engine.tokenizer(), text, true, true, "messages");
}

SamplingParams sampling_of(const json& body, int64_t n_ctx) {
  SamplingParams s;
  s.temperature = float(get_number(body, "temperature", 0, 2).value_or(1.0));
  s.top_p = float(get_number(body, "top_p", 0, 1).value_or(1.0));
  s.top_k = int32_t(get_int(body, "top_k", 0, INT32_MAX).value_or(0));
  s.min_p = float(get_number(body, "min_p", 0, 1).value_or(0.0));
  s.presence_penalty = float(get_number(body, "presence_penalty", -2, 2).value_or(0.0));
  s.frequency_penalty = float(get_number(body, "frequency_penalty", -2, 2).value_or(0.0));
  s.repeat_penalty = float(get_number(body, "repeat_penalty", 0, 10).value_or(1.0));
  s.penalty_last_n = int32_t(n_ctx);  // every generated token, as OpenAI's penalties
  // Every 64-bit seed is used as given (seed_exact: 4294967295 is not
  // vtc run's "random"); -2^63 .. 2^64-1, a negative one modulo 2^64.
  s.seed_exact = true;
  if (const json* v = field(body, "seed")) {
    expect(*v, v->is_number_integer() || v->is_number_unsigned(), "seed", "an integer");
    s.seed = v->is_number_unsigned() ? v->get<uint64_t>() : uint64_t(v->get<int64_t>());
  } else {
    static std::mutex mu;
    static std::random_device rd;
    std::lock_guard<std::mutex> lock(mu);
    s.seed = uint64_t(rd()) << 32 | rd();
  }
  return s;
}

}  // namespace

CompletionRequest parse_completion(const json& body, bool chat, const Engine& engine, const std::string& chat_template) {
  if (!body.is_object()) throw ApiError(400, fmt::format("the request body must be a JSON object, got {}", type_name(body)));
  check_known_fields(body, chat);
  check_defaults_only(body, chat);
  CompletionRequest r;
  r.chat = chat;
  r.stream = get_bool(body, "stream").value_or(false);
  if (const json* so = field(body, "stream_options")) {
    expect(*so, so->is_object(), "stream_options", "an object");
    for (const auto& [k, v] : so->items())
      if (k != "include_usage") throw ApiError(400, fmt::format("Unrecognized request argument supplied: stream_options.{}", k), "stream_options");
    r.include_usage = get_bool(*so, "include_usage").value_or(false);
    if (!r.stream) bad("stream_options", "'stream_options' is only allowed with 'stream': true");
  }
  get_int(body, "n", 1, 1);
  if (chat) {
    r.logprobs = get_bool(body, "logprobs").value_or(false);
    auto top = get_int(body, "top_logprobs", 0, 20);
    if (top && !r.logprobs) bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    r.gen.top_logprobs = r.logprobs ? int32_t(top.value_or(0)) : -1;
  } else if (auto lp = get_int(body, "logprobs", 0, 20)) {
    r.logprobs = true;
    r.gen.top_logprobs = int32_t(*lp);
  }
  r.gen.sampling = sampling_of(body, engine.n_ctx());
  r.gen.stop = get_stop(body);
  r.gen.prompt = chat ? chat_prompt(body, engine, chat_template) : completion_prompt(body, engine);
  const int64_t n_prompt = int64_t(r.gen.prompt.size());
  if (n_prompt >= engine.n_ctx())
    throw ApiError(400,
                   fmt::format("This model's maximum context length is {} tokens. However, your prompt is {} tokens, "
                               "which leaves no room to generate.", engine.n_ctx(), n_prompt),
                   chat ? "messages" : "prompt", "context_length_exceeded");
  std::optional<int64_t> max_tokens = get_int(body, "max_tokens", 1, INT32_MAX);
  if (chat && !max_tokens) max_tokens = get_int(body, "max_completion_tokens", 1, INT32_MAX);
  const int64_t room = engine.n_ctx() - n_prompt;
  const int64_t n = max_tokens.value_or(chat ? room : 16);
  if (n > room)
    throw ApiError(400,
                   fmt::format("This model's maximum context length is {} tokens. However, you requested {} tokens "
                               "({} in the prompt, {} for the completion).", engine.n_ctx(), n_prompt + n, n_prompt, n),
                   "max_tokens", "context_length_exceeded");
  if (!engine.fits_pool(n_prompt + n))
    throw ApiError(400, fmt::format("the request needs {} KV positions, more than the KV pool holds", n_prompt + n),
                   "max_tokens");
  r.gen.max_tokens = int32_t(n);
  return r;
}

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

}  // namespace

json usage_of(const Request& r) {
  return {{"prompt_tokens", r.prompt_tokens()},
          {"completion_tokens", r.completion_tokens()},
          {"total_tokens", r.prompt_tokens() + r.completion_tokens()},
          {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens()}}}};
}

json completion_body(const ResponseInfo& info, const CompletionRequest& req, const Request& r, const std::string& text,
                     const std::vector<TokenEvent>& events, const Tokenizer& tok) {
  json body = base(info, false);
  json choice = {{"index", 0}, {"logprobs", logprobs_of(req, events, tok, 0)}, {"finish_reason", r.finish_reason()}};
  if (info.chat) choice["message"] = {{"role", "assistant"}, {"content", valid_utf8(text)}};
  else choice["text"] = valid_utf8(text);
  body["choices"] = json::array({choice});
  body["usage"] = usage_of(r);
  body["timings"] = {{"prompt_n", r.prompt_tokens()}, {"cached_n", r.cached_tokens()}, {"prompt_ms", r.prompt_ms()},
                     {"predicted_n", r.completion_tokens()}, {"predicted_ms", r.generate_ms()}};
  return body;
}

json stream_chunk(const ResponseInfo& info, const CompletionRequest& req, const std::vector<TokenEvent>& events,
                  const std::string& finish, bool first, const Tokenizer& tok) {
  std::string text;
  for (const auto& e : events) text += e.text;
  text = valid_utf8(text);  // the decoder's output already is; cheap to make sure
  json choice = {{"index", 0}, {"logprobs", logprobs_of(req, events, tok, 0)},
                 {"finish_reason", finish.empty() ? json(nullptr) : json(finish)}};
  if (info.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || (first && finish.empty())) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  json body = base(info, true);
  body["choices"] = json::array({choice});
  return body;
}

json usage_chunk(const ResponseInfo& info, const Request& r) {
  json body = base(info, true);
  body["choices"] = json::array();
  body["usage"] = usage_of(r);
  return body;
}

// --- Whole endpoints ------------------------------------------------------------

json tokenize_response(const json& body, const Engine& engine) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  for (const auto& [k, v] : body.items())
    if (k != "content" && k != "add_special" && k != "parse_special" && k != "with_pieces")
      throw ApiError(400, fmt::format("Unrecognized request argument supplied: {}", k), k);
  if (!body.contains("content") || !body["content"].is_string()) throw ApiError(400, "'content' must be a string", "content");
  for (const char* flag : {"add_special", "parse_special", "with_pieces"})
    if (body.contains(flag) && !body[flag].is_boolean()) throw ApiError(400, fmt::format("'{}' must be a boolean", flag), flag);
  const Tokenizer& tok = engine.tokenizer();
  const auto ids = tokenize_request_text(tok, body["content"].get<std::string>(), body.value("add_special", false),
                                         body.value("parse_special", false), "content");
  const bool pieces = body.value("with_pieces", false);
  json tokens = json::array();
  for (int32_t id : ids) {
    if (!pieces) {
      tokens.push_back(id);
      continue;
    }
    const std::string piece = tok.token_piece(id);
    tokens.push_back({{"id", id}, {"piece", valid_utf8(piece)}, {"bytes", bytes_json(piece)}});
  }
  return {{"tokens", tokens}};
}

json detokenize_response(const json& body, const Engine& engine) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  for (const auto& [k, v] : body.items())
    if (k != "tokens") throw ApiError(400, fmt::format("Unrecognized request argument supplied: {}", k), k);
  if (!body.contains("tokens") || !body["tokens"].is_array()) throw ApiError(400, "'tokens' must be an array of token ids", "tokens");
  std::vector<int32_t> ids;
  for (const json& t : body["tokens"]) {
    if (!t.is_number_integer()) throw ApiError(400, "'tokens' must be an array of token ids", "tokens");
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= engine.n_vocab())
      throw ApiError(400, fmt::format("token id {} is outside the vocabulary [0, {})", id, engine.n_vocab()), "tokens");
    ids.push_back(int32_t(id));
  }
  return {{"content", valid_utf8(engine.tokenizer().decode(ids))}};
}

namespace {

bool write_event(const ResponseSink& sink, const json& j) { return sink.write("data: " + dump_json(j) + "\n\n"); }

// Ends one response after an exception; never throws itself.
void end_after_exception(Engine& engine, const std::shared_ptr<Request>& r, const ResponseSink& sink, bool stream,
                         const char* what) noexcept {
  try {
    engine.cancel(r);
    const json body = error_body(fmt::format("internal error while writing the response: {}", what), "server_error");
    if (stream) {
      if (write_event(sink, body)) sink.write("data: [DONE]\n\n");
    } else {
      sink.write(dump_json(body));
    }
  } catch (...) {
  }
}

}  // namespace

bool write_stream(Engine& engine, const std::shared_ptr<Request>& r, const CompletionRequest& req,
                  const ResponseInfo& info, const ResponseSink& sink) {
  try {
    const Tokenizer& tok = engine.tokenizer();
    bool first = true;
    std::vector<TokenEvent> events;
    for (;;) {
      events.clear();
      const bool done = r->poll(events, 200ms);
      if (!sink.alive()) return engine.cancel(r), false;
      for (const auto& e : events) {
        if (e.text.empty() && !req.logprobs && !first) continue;
        if (!write_event(sink, stream_chunk(info, req, {e}, "", first, tok))) return engine.cancel(r), false;
        first = false;
      }
      if (!done) {
        if (events.empty() && !sink.write(": keep-alive\n\n")) return engine.cancel(r), false;
        continue;
      }
      const std::string reason = r->finish_reason();
      if (reason == "error") {
        write_event(sink, error_body(r->error(), "server_error"));
      } else {
        write_event(sink, stream_chunk(info, req, {}, reason, first, tok));
        if (req.include_usage) write_event(sink, usage_chunk(info, *r));
      }
      sink.write("data: [DONE]\n\n");
      return true;
    }
  } catch (const std::exception& e) {
    end_after_exception(engine, r, sink, true, e.what());
  } catch (...) {
    end_after_exception(engine, r, sink, true, "unknown error");
  }
  return true;
}

bool write_completion(Engine& engine, const std::shared_ptr<Request>& r, const CompletionRequest& req,
                      const ResponseInfo& info, const ResponseSink& sink) {
  try {
    std::vector<TokenEvent> events;
    while (!r->poll(events, 100ms))
      if (!sink.alive()) return engine.cancel(r), false;
    std::string text;
    for (const auto& e : events) text += e.text;
    const json body = r->finish_reason() == "error" ? error_body(r->error(), "server_error")
                                                    : completion_body(info, req, *r, text, events, engine.tokenizer());
    sink.write(dump_json(body));
    return true;
  } catch (const std::exception& e) {
    end_after_exception(engine, r, sink, false, e.what());
  } catch (...) {
    end_after_exception(engine, r, sink, false, "unknown error");
  }
  return true;
}

}  // namespace vtc::serve
