// The OpenAI Responses API (responses_api.h): a Responses body as a chat
// body, and the `response` object and event stream made from chat deltas.
#include "serve/api/responses/responses.h"

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

// A message item's or a tool output's text: a string, or text parts.
std::string text_of(const ordered_json& content, const std::string& at) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad(at, fmt::format("'{}' must be a string or an array of input_text parts", at));
  std::string text;
  for (size_t k = 0; k < content.size(); ++k) {
    const ordered_json& part = content[k];
    const std::string type = part.is_object() ? part.value("type", "") : "";
    if (type == "refusal") continue;  // an assistant's refusal, sent back: nothing a template renders
    if ((type != "input_text" && type != "output_text") || !part.contains("text") || !part["text"].is_string())
      bad(fmt::format("{}[{}]", at, k),
          fmt::format("'{}[{}]' must be an input_text or output_text part (this server takes text only), got {}", at, k,
                      type.empty() ? std::string("no type") : "'" + type + "'"));
    text += part["text"].get<std::string>();
  }
  return text;
}

// The chat messages the input items stand for: function_call items join
// the assistant turn before them (or open one), a reasoning item becomes
// the next assistant turn's reasoning_content.
ordered_json messages_of_items(const ordered_json& items) {
  ordered_json messages = ordered_json::array();
  std::string reasoning;
  bool assistant_open = false;  // the last message is an assistant turn that takes more tool calls
  const auto assistant = [&](std::string content) {
    ordered_json m = {{"role", "assistant"}, {"content", std::move(content)}};
    if (!reasoning.empty()) m["reasoning_content"] = reasoning;
    reasoning.clear();
    messages.push_back(std::move(m));
    assistant_open = true;
  };
  for (size_t k = 0; k < items.size(); ++k) {
    const std::string at = fmt::format("input[{}]", k);
    const ordered_json& item = items[k];
    if (!item.is_object()) bad(at, fmt::format("'{}' must be an object", at));
    const std::string type = item.contains("type") ? string_of(item, "type", at, true) : "message";
    if (type == "message") {
      const std::string role = string_of(item, "role", at, true);
      if (role != "user" && role != "system" && role != "developer" && role != "assistant")
        bad(at + ".role", fmt::format("'{}.role' must be user, system, developer or assistant, got '{}'", at, role));
      const ordered_json* content = field(item, "content");
      if (!content) bad(at + ".content", fmt::format("'{}.content' is required", at));
      std::string text = text_of(*content, at + ".content");
      if (role == "assistant") {
        assistant(std::move(text));
        continue;
      }
      messages.push_back({{"role", role}, {"content", std::move(text)}});
      assistant_open = false;
    } else if (type == "function_call") {
      const std::string call_id = string_of(item, "call_id", at, true), name = string_of(item, "name", at, true);
      std::string arguments = string_of(item, "arguments", at, false);
      if (!assistant_open) assistant("");
      ordered_json& calls = messages.back()["tool_calls"];
      if (calls.is_null()) calls = ordered_json::array();
      calls.push_back({{"id", call_id}, {"type", "function"},
                       {"function", {{"name", name}, {"arguments", arguments.empty() ? "{}" : arguments}}}});
    } else if (type == "function_call_output") {
      const std::string call_id = string_of(item, "call_id", at, true);
      const ordered_json* output = field(item, "output");
      if (!output) bad(at + ".output", fmt::format("'{}.output' is required", at));
      messages.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", text_of(*output, at + ".output")}});
      assistant_open = false;
    } else if (type == "reasoning") {
      // The reasoning text when the item has it, else its summary.
      for (const char* key : {"content", "summary"}) {
        const ordered_json* parts = field(item, key);
        if (!parts) continue;
        if (!parts->is_array()) bad(at + "." + key, fmt::format("'{}.{}' must be an array", at, key));
        for (const ordered_json& p : *parts)
          if (p.is_object() && p.contains("text") && p["text"].is_string()) reasoning += p["text"].get<std::string>();
        if (!reasoning.empty()) break;
      }
    } else {
      bad(at + ".type", fmt::format("'{}.type' '{}' is not supported: this server takes message, function_call, "
                                    "function_call_output and reasoning items (it keeps no stored items)", at, type));
    }
  }
  return messages;
}

// Responses' flat function tools, as chat tools.
ordered_json tools_of(const ordered_json& tools) {
  if (!tools.is_array()) bad("tools", "'tools' must be an array");
  ordered_json out = ordered_json::array();
  for (size_t k = 0; k < tools.size(); ++k) {
    const std::string at = fmt::format("tools[{}]", k);
    const ordered_json& t = tools[k];
    if (!t.is_object()) bad(at, fmt::format("'{}' must be an object", at));
    const std::string type = string_of(t, "type", at, true);
    if (type != "function")
      bad(at + ".type", fmt::format("'{}.type' '{}' is not supported: this server runs function tools only", at, type));
    ordered_json fn = {{"name", string_of(t, "name", at, true)}};
    for (const char* key : {"description", "parameters", "strict"})
      if (const ordered_json* v = field(t, key)) fn[key] = *v;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

ordered_json tool_choice_of(const ordered_json& choice) {
  if (choice.is_string()) return choice;
  if (!choice.is_object()) bad("tool_choice", "'tool_choice' must be none, auto, required or {\"type\": \"function\", \"name\": ...}");
  const std::string type = string_of(choice, "type", "tool_choice", true);
  if (type != "function")
    bad("tool_choice.type", fmt::format("'tool_choice.type' '{}' is not supported: this server runs function tools only", type));
  return {{"type", "function"}, {"function", {{"name", string_of(choice, "name", "tool_choice", true)}}}};
}

// text.format as a chat response_format (null for plain text).
ordered_json response_format_of(const ordered_json& text) {
  if (!text.is_object()) bad("text", "'text' must be an object");
  for (const auto& [key, value] : text.items())
    if (key != "format" && key != "verbosity") bad("text." + key, fmt::format("Unrecognized request argument supplied: text.{}", key));
  const ordered_json* format = field(text, "format");
  if (!format) return nullptr;
  if (!format->is_object()) bad("text.format", "'text.format' must be an object");
  const std::string type = string_of(*format, "type", "text.format", true);
  if (type == "text") return nullptr;
  if (type == "json_object") return {{"type", "json_object"}};
  if (type != "json_schema")
    bad("text.format.type", fmt::format("'text.format.type' must be text, json_object or json_schema, got '{}'", type));
  const ordered_json* schema = field(*format, "schema");
  if (!schema || !schema->is_object()) bad("text.format.schema", "'text.format.schema' must be a JSON schema object");
  ordered_json js = {{"name", string_of(*format, "name", "text.format", false)}, {"schema", *schema}};
  for (const char* key : {"strict", "description"})
    if (const ordered_json* v = field(*format, key)) js[key] = *v;
  return {{"type", "json_schema"}, {"json_schema", std::move(js)}};
}

// reasoning.effort: the template's reasoning_effort; "none" also turns
// thinking off (enable_thinking false).
void reasoning_of(const ordered_json& reasoning, ordered_json& chat) {
  if (!reasoning.is_object()) bad("reasoning", "'reasoning' must be an object");
  for (const auto& [key, value] : reasoning.items())
    if (key != "effort" && key != "summary" && key != "generate_summary")
      bad("reasoning." + key, fmt::format("Unrecognized request argument supplied: reasoning.{}", key));
  const std::string effort = string_of(reasoning, "effort", "reasoning", false);
  if (effort.empty()) return;
  static const std::set<std::string> efforts = {"none", "minimal", "low", "medium", "high", "xhigh"};
  if (!efforts.count(effort))
    bad("reasoning.effort", fmt::format("'reasoning.effort' must be none, minimal, low, medium, high or xhigh, got '{}'", effort));
  chat["reasoning_effort"] = effort;
  chat["chat_template_kwargs"] = {{"enable_thinking", effort != "none"}};
}

}  // namespace

ordered_json chat_body_from_responses(const ordered_json& body) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  // Passed to the chat body as they are (seed, top_k, min_p: vtc's extras).
  static const std::set<std::string> same = {"model", "temperature", "top_p", "stream", "parallel_tool_calls",
                                             "seed", "top_k", "min_p"};
  static const std::set<std::string> translated = {"input", "instructions", "tools", "tool_choice", "text",
                                                   "max_output_tokens", "reasoning"};
  static const std::set<std::string> bookkeeping = {"metadata", "user", "service_tier", "include", "truncation",
                                                    "prompt_cache_key", "safety_identifier", "store",
                                                    "previous_response_id", "conversation", "background",
                                                    "stream_options"};
  for (const auto& [key, value] : body.items())
    if (!same.count(key) && !translated.count(key) && !bookkeeping.count(key))
      throw ApiError(400, fmt::format("Unrecognized request argument supplied: {}", key), key);
  if (const ordered_json* store = field(body, "store"); store && *store != false)
    bad("store", "'store': true is not supported: this server is stateless and keeps no responses; send "
                 "'store': false (or leave it out) with the whole conversation in 'input'");
  for (const char* key : {"previous_response_id", "conversation"})
    if (field(body, key))
      bad(key, fmt::format("'{}' is not supported: this server is stateless and keeps no responses; send the whole "
                           "conversation in 'input' (earlier output items, function_call and function_call_output)", key));
  if (const ordered_json* bg = field(body, "background"); bg && *bg != false)
    bad("background", "'background': true is not supported: this server is stateless");

  ordered_json chat = ordered_json::object();
  for (const auto& [key, value] : body.items())
    if (same.count(key)) chat[key] = value;
  ordered_json messages = ordered_json::array();
  if (const ordered_json* v = field(body, "instructions")) {
    if (!v->is_string()) bad("instructions", "'instructions' must be a string");
    messages.push_back({{"role", "system"}, {"content", *v}});
  }
  const ordered_json* input = field(body, "input");
  if (!input) bad("input", "'input' is required");
  if (input->is_string()) messages.push_back({{"role", "user"}, {"content", *input}});
  else if (input->is_array())
    for (ordered_json& m : messages_of_items(*input)) messages.push_back(std::move(m));
  else bad("input", "'input' must be a string or an array of input items");
  chat["messages"] = std::move(messages);
  if (const ordered_json* v = field(body, "tools")) chat["tools"] = tools_of(*v);
  if (const ordered_json* v = field(body, "tool_choice")) chat["tool_choice"] = tool_choice_of(*v);
  if (const ordered_json* v = field(body, "text"))
    if (ordered_json format = response_format_of(*v); !format.is_null()) chat["response_format"] = std::move(format);
  if (const ordered_json* v = field(body, "max_output_tokens")) chat["max_tokens"] = *v;
  if (const ordered_json* v = field(body, "reasoning")) reasoning_of(*v, chat);
  return chat;
}

CompletionRequest parse_responses_request(const ordered_json& body, const Engine& engine, const PromptTemplate& tmpl) {
  const ordered_json chat = chat_body_from_responses(body);
  try {
    return parse_completion(chat, true, engine, tmpl);
  } catch (const ApiError& e) {
    throw with_field_names(e, {{"max_tokens", "max_output_tokens"},
                               {"response_format", "text.format"},
                               {"reasoning_effort", "reasoning.effort"},
                               {"messages", "input"}});
  }
}

// --- The response object and its events ------------------------------------------
namespace {

json message_item(const std::string& id, const std::string& status, json content) {
  return {{"id", id}, {"type", "message"}, {"status", status}, {"role", "assistant"}, {"content", std::move(content)}};
}
json output_text_part(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}};
}
json reasoning_item(const std::string& id, json content) {
  return {{"id", id}, {"type", "reasoning"}, {"summary", json::array()}, {"content", std::move(content)}};
}
json reasoning_part(const std::string& text) { return {{"type", "reasoning_text"}, {"text", text}}; }
json function_call_item(const std::string& id, const std::string& status, const json& call, const std::string& arguments) {
  return {{"id", id}, {"type", "function_call"}, {"status", status}, {"call_id", call["id"]},
          {"name", call["function"]["name"]}, {"arguments", arguments}};
}

json usage_of_response(const Request& r) {
  return {{"input_tokens", r.prompt_tokens()},
          {"input_tokens_details", {{"cached_tokens", r.cached_tokens()}}},
          {"output_tokens", r.completion_tokens()},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", r.prompt_tokens() + r.completion_tokens()}};
}

class ResponsesFormat final : public ResponseFormat {
 public:
  ResponsesFormat(const ResponseInfo& info, const CompletionRequest& req, json settings)
      : info_(info), req_(req), settings_(std::move(settings)) {}

  std::string stream_start() override {
    std::string out = event("response.created", {{"response", response_object("in_progress", json::array(), nullptr, {})}});
    return out + event("response.in_progress", {{"response", response_object("in_progress", json::array(), nullptr, {})}});
  }
  std::string stream_token(int32_t, const TokenEvent&, std::vector<json> deltas) override { return apply(deltas); }
  std::string stream_finish(int32_t, std::vector<json> deltas, const ChoiceFinish& finish, const Request& r) override {
    std::string out = apply(deltas);  // then close: both count events, in this order
    out += close_open();
    const std::string status = status_of(finish);
    return out + event(status == "completed" ? "response.completed" : "response.incomplete",
                       {{"response", response_object(status, output_, usage_of_response(r), finish)}});
  }
  std::string stream_end(const Choices&) override { return {}; }
  std::string stream_error(const std::string& message) override {
    return event("error", {{"code", "server_error"}, {"message", message}, {"param", nullptr}});
  }

  json body(const Choices& choices, const std::vector<std::vector<TokenEvent>>& events) override {
    const Request& r = *choices.requests()[0];
    const ChoiceOutput out = ChoiceOutput::whole(req_, events[0]);
    const json msg = out.message();
    json output = json::array();
    if (msg.contains("reasoning_content"))
      output.push_back(reasoning_item(next_id("rs"), json::array({reasoning_part(msg["reasoning_content"])})));
    const bool has_calls = msg.contains("tool_calls");
    // A message when there is text, or when nothing else would be output.
    if ((msg["content"].is_string() && !msg["content"].get<std::string>().empty()) || (output.empty() && !has_calls))
      output.push_back(message_item(next_id("msg"), "completed", json::array({output_text_part(msg["content"])})));
    if (has_calls)
      for (const json& call : msg["tool_calls"])
        output.push_back(function_call_item(next_id("fc"), "completed", call, call["function"]["arguments"]));
    const ChoiceFinish finish = out.finish_reason(r.finish_reason());
    return response_object(status_of(finish), std::move(output), usage_of_response(r), finish);
  }
  json error(const std::string& message) override { return error_body(message, "server_error"); }

 private:
  enum class Open { None, Reasoning, Message };

  // A response cut short (max_output_tokens, or cancelled) is incomplete.
  static std::string status_of(const ChoiceFinish& f) {
    return f.kind == Finish::Length || f.kind == Finish::Cancelled ? "incomplete" : "completed";
  }

  json response_object(const std::string& status, json output, json usage, const ChoiceFinish& finish) const {
    json r = settings_;
    r["id"] = info_.id;
    r["object"] = "response";
    r["created_at"] = info_.created;
    r["model"] = info_.model;
    r["status"] = status;
    r["output"] = std::move(output);
    r["usage"] = std::move(usage);
    r["error"] = nullptr;
    r["incomplete_details"] = status == "incomplete"
                                  ? json{{"reason", finish.kind == Finish::Length ? std::string_view("max_output_tokens")
                                                                                  : openai_finish_reason(finish)}}
                                  : json(nullptr);
    return r;
  }

  std::string next_id(const char* prefix) { return fmt::format("{}_{}_{}", prefix, info_.id, items_++); }

  std::string event(const std::string& type, json data) {
    data["type"] = type;
    data["sequence_number"] = sequence_++;
    return sse_event(type, data);
  }

  std::string apply(const std::vector<json>& deltas) {
    std::string out;
    for (const json& d : deltas) {
      if (d.contains("reasoning_content")) out += text_piece(Open::Reasoning, d["reasoning_content"]);
      if (d.contains("content")) out += text_piece(Open::Message, d["content"]);
      if (d.contains("tool_calls")) {
        out += close_open();
        for (const json& call : d["tool_calls"]) out += function_call(call);
      }
    }
    return out;
  }

  json open_part(const std::string& text) const {
    return open_ == Open::Message ? output_text_part(text) : reasoning_part(text);
  }

  std::string text_piece(Open kind, const std::string& text) {
    std::string out;
    if (open_ != kind) {
      out += close_open();
      open_ = kind;
      open_id_ = next_id(kind == Open::Message ? "msg" : "rs");
      open_text_.clear();
      const json item = kind == Open::Message ? message_item(open_id_, "in_progress", json::array())
                                              : reasoning_item(open_id_, json::array());
      out += event("response.output_item.added", {{"output_index", output_.size()}, {"item", item}});
      out += event("response.content_part.added", {{"item_id", open_id_}, {"output_index", output_.size()},
                                                   {"content_index", 0}, {"part", open_part("")}});
    }
    open_text_ += text;
    json delta = {{"item_id", open_id_}, {"output_index", output_.size()}, {"content_index", 0}, {"delta", text}};
    if (kind == Open::Message) delta["logprobs"] = json::array();
    return out + event(kind == Open::Message ? "response.output_text.delta" : "response.reasoning_text.delta", delta);
  }

  std::string close_open() {
    if (open_ == Open::None) return {};
    const json part = open_part(open_text_);
    json done = {{"item_id", open_id_}, {"output_index", output_.size()}, {"content_index", 0}, {"text", open_text_}};
    if (open_ == Open::Message) done["logprobs"] = json::array();
    std::string out = event(open_ == Open::Message ? "response.output_text.done" : "response.reasoning_text.done", done);
    out += event("response.content_part.done",
                 {{"item_id", open_id_}, {"output_index", output_.size()}, {"content_index", 0}, {"part", part}});
    const json item = open_ == Open::Message ? message_item(open_id_, "completed", json::array({part}))
                                             : reasoning_item(open_id_, json::array({part}));
    out += event("response.output_item.done", {{"output_index", output_.size()}, {"item", item}});
    output_.push_back(item);
    open_ = Open::None;
    return out;
  }

  std::string function_call(const json& call) {
    const std::string id = next_id("fc");
    const std::string arguments = call["function"]["arguments"];
    const size_t index = output_.size();
    std::string out = event("response.output_item.added", {{"output_index", index}, {"item", function_call_item(id, "in_progress", call, "")}});
    out += event("response.function_call_arguments.delta", {{"item_id", id}, {"output_index", index}, {"delta", arguments}});
    out += event("response.function_call_arguments.done",
                 {{"item_id", id}, {"output_index", index}, {"name", call["function"]["name"]}, {"arguments", arguments}});
    const json item = function_call_item(id, "completed", call, arguments);
    out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
    output_.push_back(item);
    return out;
  }

  ResponseInfo info_;
  const CompletionRequest& req_;
  json settings_;
  json output_ = json::array();  // finished output items
  Open open_ = Open::None;       // the item text is going into
  std::string open_id_, open_text_;
  int64_t sequence_ = 0, items_ = 0;
};

}  // namespace

std::unique_ptr<ResponseFormat> responses_format(const ResponseInfo& info, const CompletionRequest& req,
                                                 const ordered_json& body) {
  // The request's settings, echoed in every response object.
  const json b = body;
  json settings = {{"instructions", b.value("instructions", json(nullptr))},
                   {"max_output_tokens", b.value("max_output_tokens", json(nullptr))},
                   {"parallel_tool_calls", b.value("parallel_tool_calls", json(true))},
                   {"temperature", b.value("temperature", json(1.0))},
                   {"top_p", b.value("top_p", json(1.0))},
                   {"tool_choice", b.value("tool_choice", json("auto"))},
                   {"tools", b.value("tools", json::array())},
                   {"text", b.value("text", json{{"format", {{"type", "text"}}}})},
                   {"reasoning", b.value("reasoning", json{{"effort", nullptr}, {"summary", nullptr}})},
                   {"metadata", b.value("metadata", json::object())},
                   {"truncation", b.value("truncation", json("disabled"))},
                   {"previous_response_id", nullptr},
                   {"store", false},
                   {"background", false}};
  return std::make_unique<ResponsesFormat>(info, req, std::move(settings));
}

GenerationAnswer responses_answer(const ordered_json& body, const Engine& engine, const PromptTemplate& tmpl,
                                  const ResponseInfo& info) {
  auto req = std::make_shared<CompletionRequest>(parse_responses_request(body, engine, tmpl));
  std::shared_ptr<ResponseFormat> format = responses_format(info, *req, body);
  return {std::move(req), std::move(format)};
}

}  // namespace vtc::serve
