// The Anthropic Messages API (anthropic_api.h): a Messages body as a chat
// body, and the `message` object and event stream made from chat deltas.
#include "serve/api/anthropic/messages.h"

#include <fmt/format.h>

#include <set>

#include "serve/api/common/fields.h"
#include "serve/api/common/json_text.h"
#include "serve/api/common/choice_output.h"

namespace vtc::serve {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

using fields::bad;
using fields::field;
using fields::string_of;

// A string, or text blocks joined (system prompts, tool results).
std::string text_of(const ordered_json& v, const std::string& at, const char* joiner) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) bad(at, fmt::format("'{}' must be a string or an array of text blocks", at));
  std::string text;
  for (size_t k = 0; k < v.size(); ++k) {
    const ordered_json& b = v[k];
    if (!b.is_object() || b.value("type", "") != "text" || !b.contains("text") || !b["text"].is_string())
      bad(fmt::format("{}[{}]", at, k), fmt::format("'{}[{}]' must be a text block (this server takes text only)", at, k));
    if (k > 0) text += joiner;
    text += b["text"].get<std::string>();
  }
  return text;
}

// One Anthropic message as chat messages: a user turn's tool_result blocks
// become tool messages (before its text), an assistant turn's tool_use
// blocks its tool_calls and its thinking blocks its reasoning_content.
void append_message(const ordered_json& m, size_t i, ordered_json& out) {
  const std::string at = fmt::format("messages[{}]", i);
  if (!m.is_object()) bad(at, fmt::format("'{}' must be an object", at));
  for (const auto& [key, value] : m.items())
    if (key != "role" && key != "content") bad(at + "." + key, fmt::format("Unrecognized request argument supplied: {}.{}", at, key));
  const std::string role = string_of(m, "role", at, true);
  if (role != "user" && role != "assistant") bad(at + ".role", fmt::format("'{}.role' must be user or assistant, got '{}'", at, role));
  const ordered_json* content = field(m, "content");
  if (!content) bad(at + ".content", fmt::format("'{}.content' is required", at));
  if (content->is_string()) {
    out.push_back({{"role", role}, {"content", *content}});
    return;
  }
  if (!content->is_array()) bad(at + ".content", fmt::format("'{}.content' must be a string or an array of content blocks", at));
  std::string text, thinking;
  ordered_json calls = ordered_json::array();
  for (size_t k = 0; k < content->size(); ++k) {
    const std::string bat = fmt::format("{}.content[{}]", at, k);
    const ordered_json& b = (*content)[k];
    if (!b.is_object()) bad(bat, fmt::format("'{}' must be an object", bat));
    const std::string type = string_of(b, "type", bat, true);
    if (type == "text") {
      text += string_of(b, "text", bat, true);
    } else if (type == "tool_use" && role == "assistant") {
      const ordered_json* input = field(b, "input");
      if (input && !input->is_object()) bad(bat + ".input", fmt::format("'{}.input' must be an object", bat));
      calls.push_back({{"id", string_of(b, "id", bat, true)}, {"type", "function"},
                       {"function", {{"name", string_of(b, "name", bat, true)},
                                     {"arguments", (input ? *input : ordered_json::object()).dump()}}}});
    } else if (type == "tool_result" && role == "user") {
      const ordered_json* result = field(b, "content");
      out.push_back({{"role", "tool"}, {"tool_call_id", string_of(b, "tool_use_id", bat, true)},
                     {"content", result ? text_of(*result, bat + ".content", "\n") : std::string()}});
    } else if (type == "thinking" && role == "assistant") {
      thinking += string_of(b, "thinking", bat, true);
    } else if (type == "redacted_thinking" && role == "assistant") {
      continue;  // encrypted: nothing a template can render
    } else {
      bad(bat + ".type", fmt::format("'{}.type' '{}' is not supported in a {} message: this server takes text, "
                                     "tool_use and thinking (assistant) and tool_result (user) blocks", bat, type, role));
    }
  }
  if (role == "user" && text.empty() && !out.empty() && out.back()["role"] == "tool") return;  // only tool results
  ordered_json msg = {{"role", role}, {"content", text}};
  if (!thinking.empty()) msg["reasoning_content"] = thinking;
  if (!calls.empty()) msg["tool_calls"] = std::move(calls);
  out.push_back(std::move(msg));
}

ordered_json tools_of(const ordered_json& tools) {
  if (!tools.is_array()) bad("tools", "'tools' must be an array");
  ordered_json out = ordered_json::array();
  for (size_t k = 0; k < tools.size(); ++k) {
    const std::string at = fmt::format("tools[{}]", k);
    const ordered_json& t = tools[k];
    if (!t.is_object()) bad(at, fmt::format("'{}' must be an object", at));
    const std::string type = string_of(t, "type", at, false);
    if (!type.empty() && type != "custom")
      bad(at + ".type", fmt::format("'{}.type' '{}' is not supported: this server runs client tools (input_schema) only", at, type));
    const ordered_json* schema = field(t, "input_schema");
    if (!schema || !schema->is_object()) bad(at + ".input_schema", fmt::format("'{}.input_schema' must be a JSON schema object", at));
    ordered_json fn = {{"name", string_of(t, "name", at, true)}};
    if (const ordered_json* d = field(t, "description")) fn["description"] = *d;
    fn["parameters"] = *schema;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

void tool_choice_of(const ordered_json& choice, ordered_json& chat) {
  if (!choice.is_object()) bad("tool_choice", "'tool_choice' must be an object {\"type\": auto | any | tool | none}");
  const std::string type = string_of(choice, "type", "tool_choice", true);
  if (type == "auto") chat["tool_choice"] = "auto";
  else if (type == "any") chat["tool_choice"] = "required";
  else if (type == "none") chat["tool_choice"] = "none";
  else if (type == "tool")
    chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", string_of(choice, "name", "tool_choice", true)}}}};
  else bad("tool_choice.type", fmt::format("'tool_choice.type' must be auto, any, tool or none, got '{}'", type));
  if (const ordered_json* d = field(choice, "disable_parallel_tool_use")) {
    if (!d->is_boolean()) bad("tool_choice.disable_parallel_tool_use", "'tool_choice.disable_parallel_tool_use' must be a boolean");
    chat["parallel_tool_calls"] = !d->get<bool>();
  }
}

void thinking_of(const ordered_json& thinking, ordered_json& chat) {
  if (!thinking.is_object()) bad("thinking", "'thinking' must be an object {\"type\": enabled | disabled}");
  const std::string type = string_of(thinking, "type", "thinking", true);
  if (type != "enabled" && type != "disabled" && type != "adaptive")
    bad("thinking.type", fmt::format("'thinking.type' must be enabled, adaptive or disabled, got '{}'", type));
  chat["chat_template_kwargs"] = {{"enable_thinking", type != "disabled"}};
}

}  // namespace

ordered_json chat_body_from_messages(const ordered_json& body, bool count_only) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  static const std::set<std::string> same = {"model", "temperature", "top_p", "top_k", "stream"};
  static const std::set<std::string> translated = {"messages", "system", "tools", "tool_choice", "stop_sequences",
                                                   "max_tokens", "thinking"};
  static const std::set<std::string> bookkeeping = {"metadata", "service_tier"};
  for (const auto& [key, value] : body.items())
    if (!same.count(key) && !translated.count(key) && !bookkeeping.count(key))
      throw ApiError(400, fmt::format("{}: Extra inputs are not permitted (this server does not take it)", key), key);
  ordered_json chat = ordered_json::object();
  for (const auto& [key, value] : body.items())
    if (same.count(key) && !count_only) chat[key] = value;
  if (const ordered_json* v = field(body, "model")) chat["model"] = *v;
  ordered_json messages = ordered_json::array();
  if (const ordered_json* v = field(body, "system")) messages.push_back({{"role", "system"}, {"content", text_of(*v, "system", "\n\n")}});
  const ordered_json* list = field(body, "messages");
  if (!list || !list->is_array()) bad("messages", "'messages' is required: an array of messages");
  for (size_t i = 0; i < list->size(); ++i) append_message((*list)[i], i, messages);
  chat["messages"] = std::move(messages);
  if (const ordered_json* v = field(body, "tools")) chat["tools"] = tools_of(*v);
  if (const ordered_json* v = field(body, "tool_choice")) tool_choice_of(*v, chat);
  if (const ordered_json* v = field(body, "thinking")) thinking_of(*v, chat);
  if (count_only) return chat;
  if (const ordered_json* v = field(body, "stop_sequences")) chat["stop"] = *v;
  if (!field(body, "max_tokens")) bad("max_tokens", "'max_tokens' is required");
  chat["max_tokens"] = body["max_tokens"];
  return chat;
}

CompletionRequest parse_messages_request(const ordered_json& body, const Engine& engine, const PromptTemplate& tmpl) {
  const ordered_json chat = chat_body_from_messages(body);
  try {
    return parse_completion(chat, true, engine, tmpl);
  } catch (const ApiError& e) {
    throw with_field_names(e, {{"stop", "stop_sequences"}});
  }
}

json count_tokens_response(const ordered_json& body, const PromptTemplate& tmpl) {
  return {{"input_tokens", chat_prompt_tokens(chat_body_from_messages(body, /*count_only=*/true), tmpl).size()}};
}

json anthropic_error_body(int status, const std::string& message) {
  const char* type = status == 400   ? "invalid_request_error"
                     : status == 401 ? "authentication_error"
                     : status == 403 ? "permission_error"
                     : status == 404 || status == 405 ? "not_found_error"
                     : status == 413 ? "request_too_large"
                     : status == 429 ? "rate_limit_error"
                     : status == 503 ? "overloaded_error"
                                     : "api_error";
  return {{"type", "error"}, {"error", {{"type", type}, {"message", valid_utf8(message)}}}};
}

bool is_anthropic_path(const std::string& path) { return path == "/v1/messages" || path == "/v1/messages/count_tokens"; }

// --- The message object and its events ------------------------------------------
namespace {

// Anthropic's stop_reason for how a message ended.
std::string stop_reason_of(const ChoiceFinish& f) {
  if (f.tool_calls) return "tool_use";
  switch (f.kind) {
    case Finish::Length: return "max_tokens";
    case Finish::Stop: return f.matched_stop.empty() ? "end_turn" : "stop_sequence";
    case Finish::None:
    case Finish::Cancelled:
    case Finish::Error: break;
  }
  return "end_turn";
}

json stop_sequence_of(const ChoiceFinish& f) {
  return f.kind == Finish::Stop && !f.matched_stop.empty() ? json(f.matched_stop) : json(nullptr);
}

json tool_input(const std::string& arguments) {
  json input = json::parse(arguments, nullptr, false);
  return input.is_object() ? input : json::object();
}

class MessagesFormat final : public ResponseFormat {
 public:
  MessagesFormat(const ResponseInfo& info, const CompletionRequest& req) : info_(info), req_(req) {}

  std::string stream_start() override {
    json message = message_object(json::array(), nullptr, nullptr);
    message["usage"] = {{"input_tokens", req_.gen.prompt.size()}, {"output_tokens", 0}};
    return event("message_start", {{"message", message}}) + event("ping", json::object());
  }
  std::string stream_token(int32_t, const TokenEvent&, std::vector<json> deltas) override { return apply(deltas); }
  std::string stream_finish(int32_t, std::vector<json> deltas, const ChoiceFinish& finish, const Request& r) override {
    std::string out = apply(deltas);  // then close: both number blocks, in this order
    out += close_block();
    out += event("message_delta",
                 {{"delta", {{"stop_reason", stop_reason_of(finish)}, {"stop_sequence", stop_sequence_of(finish)}}},
                  {"usage", usage_of_message(r)}});
    return out + event("message_stop", json::object());
  }
  std::string stream_end(const Choices&) override { return {}; }
  std::string stream_error(const std::string& message) override {
    return sse_event("error", anthropic_error_body(500, message));
  }
  std::string keep_alive() override { return event("ping", json::object()); }

  json body(const Choices& choices, const std::vector<std::vector<TokenEvent>>& events) override {
    const Request& r = *choices.requests()[0];
    const ChoiceOutput out = ChoiceOutput::whole(req_, events[0]);
    const json msg = out.message();
    json content = json::array();
    if (msg.contains("reasoning_content"))
      content.push_back({{"type", "thinking"}, {"thinking", msg["reasoning_content"]}, {"signature", ""}});
    if (msg["content"].is_string() && !msg["content"].get<std::string>().empty())
      content.push_back({{"type", "text"}, {"text", msg["content"]}});
    if (msg.contains("tool_calls"))
      for (const json& call : msg["tool_calls"])
        content.push_back({{"type", "tool_use"}, {"id", call["id"]}, {"name", call["function"]["name"]},
                           {"input", tool_input(call["function"]["arguments"])}});
    const ChoiceFinish finish = out.finish_reason(r.finish_reason());
    json message = message_object(std::move(content), stop_reason_of(finish), stop_sequence_of(finish));
    message["usage"] = usage_of_message(r);
    return message;
  }
  json error(const std::string& message) override { return anthropic_error_body(500, message); }

 private:
  enum class Block { None, Thinking, Text };

  json message_object(json content, json stop_reason, json stop_sequence) const {
    return {{"id", info_.id}, {"type", "message"}, {"role", "assistant"}, {"model", info_.model},
            {"content", std::move(content)}, {"stop_reason", std::move(stop_reason)},
            {"stop_sequence", std::move(stop_sequence)}};
  }
  static json usage_of_message(const Request& r) {
    return {{"input_tokens", r.prompt_tokens()}, {"output_tokens", r.completion_tokens()},
            {"cache_read_input_tokens", r.cached_tokens()}, {"cache_creation_input_tokens", 0}};
  }

  static std::string event(const std::string& type, json data) {
    data["type"] = type;
    return sse_event(type, data);
  }

  std::string apply(const std::vector<json>& deltas) {
    std::string out;
    for (const json& d : deltas) {
      if (d.contains("reasoning_content")) out += text_piece(Block::Thinking, d["reasoning_content"]);
      if (d.contains("content")) out += text_piece(Block::Text, d["content"]);
      if (d.contains("tool_calls")) {
        out += close_block();
        for (const json& call : d["tool_calls"]) {
          const json block = {{"type", "tool_use"}, {"id", call["id"]}, {"name", call["function"]["name"]}, {"input", json::object()}};
          out += event("content_block_start", {{"index", index_}, {"content_block", block}});
          out += event("content_block_delta", {{"index", index_},
                                               {"delta", {{"type", "input_json_delta"}, {"partial_json", call["function"]["arguments"]}}}});
          out += event("content_block_stop", {{"index", index_++}});
        }
      }
    }
    return out;
  }

  std::string text_piece(Block kind, const std::string& text) {
    std::string out;
    if (open_ != kind) {
      out += close_block();
      open_ = kind;
      const json block = kind == Block::Text ? json{{"type", "text"}, {"text", ""}}
                                             : json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
      out += event("content_block_start", {{"index", index_}, {"content_block", block}});
    }
    const json delta = kind == Block::Text ? json{{"type", "text_delta"}, {"text", text}}
                                           : json{{"type", "thinking_delta"}, {"thinking", text}};
    return out + event("content_block_delta", {{"index", index_}, {"delta", delta}});
  }

  std::string close_block() {
    if (open_ == Block::None) return {};
    open_ = Block::None;
    return event("content_block_stop", {{"index", index_++}});
  }

  ResponseInfo info_;
  const CompletionRequest& req_;
  Block open_ = Block::None;
  int32_t index_ = 0;   // the next content block's
};

}  // namespace

std::unique_ptr<ResponseFormat> messages_format(const ResponseInfo& info, const CompletionRequest& req) {
  return std::make_unique<MessagesFormat>(info, req);
}

GenerationAnswer messages_answer(const ordered_json& body, const Engine& engine, const PromptTemplate& tmpl,
                                 const ResponseInfo& info) {
  auto req = std::make_shared<CompletionRequest>(parse_messages_request(body, engine, tmpl));
  std::shared_ptr<ResponseFormat> format = messages_format(info, *req);
  return {std::move(req), std::move(format)};
}

}  // namespace vtc::serve
