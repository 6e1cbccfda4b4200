#include "serve/chat/generic_tools.h"

namespace vtc::chat {

using nlohmann::ordered_json;

namespace {

const char* const kInstruction =
    "Respond in JSON format, either with `tool_call` (a request to call tools) or with `response` reply to the user's "
    "request";

std::string text_of(const ordered_json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string text;
  if (content.is_array())
    for (const auto& part : content) text += (text.empty() ? "" : "\n") + part.value("text", std::string());
  return text;
}

// The arguments as an object when they are JSON text of one.
ordered_json arguments_value(const ordered_json& args) {
  if (!args.is_string()) return args;
  ordered_json parsed = ordered_json::parse(args.get<std::string>(), nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? args : parsed;
}

}  // namespace

ordered_json generic_prompt_messages(const ordered_json& messages, const ordered_json& tools) {
  const std::string system_text = "You can call any of the following tools to satisfy the user's requests: " +
                                  tools.dump(2) + "\n\n" + kInstruction;
  ordered_json out = ordered_json::array();
  for (const auto& m : messages) {
    ordered_json msg = {{"role", m["role"]}, {"content", text_of(m["content"])}};
    if (m.contains("tool_calls") && !m["tool_calls"].empty()) {
      ordered_json calls = ordered_json::array();
      for (const auto& call : m["tool_calls"]) {
        ordered_json c = {{"name", call["function"]["name"]}, {"arguments", arguments_value(call["function"]["arguments"])}};
        if (call.contains("id")) c["id"] = call["id"];
        calls.push_back(std::move(c));
      }
      ordered_json body = {{"tool_calls", std::move(calls)}};
      if (!msg["content"].get<std::string>().empty()) body["content"] = msg["content"];
      msg["content"] = body.dump(2);
    } else if (m["role"] == "tool") {
      ordered_json response = ordered_json::object();
      if (m.contains("name")) response["tool"] = m["name"];
      response["content"] = msg["content"];
      if (m.contains("tool_call_id")) response["tool_call_id"] = m["tool_call_id"];
      msg = {{"role", "user"}, {"content", ordered_json{{"tool_response", std::move(response)}}.dump(2)}};
    }
    out.push_back(std::move(msg));
  }
  const bool has_system = !out.empty() && (out[0]["role"] == "system" || out[0]["role"] == "developer");
  if (has_system) {
    out[0]["content"] = out[0]["content"].get<std::string>() + "\n\n" + system_text;
  } else {
    out.insert(out.begin(), ordered_json{{"role", "system"}, {"content", system_text}});
  }
  return out;
}

ordered_json generic_output_schema(const ordered_json& tools, serve::ToolChoice tool_choice,
                                   const std::string& function, bool parallel_tool_calls) {
  ordered_json calls = ordered_json::array();
  for (const auto& tool : tools) {
    const ordered_json& fn = tool["function"];
    if (tool_choice == serve::ToolChoice::Function && fn["name"] != function) continue;
    ordered_json call = {{"type", "object"},
                         {"properties",
                          {{"name", {{"type", "string"}, {"const", fn["name"]}}},
                           {"arguments", fn.contains("parameters") && fn["parameters"].is_object()
                                             ? fn["parameters"]
                                             : ordered_json{{"type", "object"}}}}},
                         {"required", {"name", "arguments"}}};
    if (parallel_tool_calls) {
      call["properties"]["id"] = {{"type", "string"}, {"minLength", 4}};
      call["required"].push_back("id");
    }
    calls.push_back(std::move(call));
  }
  const ordered_json one = calls.size() == 1 ? calls[0] : ordered_json{{"anyOf", calls}};
  const ordered_json tool_call =
      parallel_tool_calls
          ? ordered_json{{"type", "object"},
                         {"properties", {{"tool_calls", {{"type", "array"}, {"items", one}, {"minItems", 1}}}}},
                         {"required", {"tool_calls"}}}
          : ordered_json{{"type", "object"}, {"properties", {{"tool_call", one}}}, {"required", {"tool_call"}}};
  if (tool_choice != serve::ToolChoice::Auto) return tool_call;
  const ordered_json response = {
      {"type", "object"}, {"properties", {{"response", {{"type", "string"}}}}}, {"required", {"response"}}};
  return {{"anyOf", {tool_call, response}}};
}

ParsedMessage parse_generic(std::string_view text) {
  ParsedMessage msg;
  const ordered_json data = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto call_of = [](const ordered_json& c) -> std::optional<ToolCall> {
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string() || !c.contains("arguments")) return std::nullopt;
    ToolCall call;
    call.name = c["name"].get<std::string>();
    const ordered_json& args = c["arguments"];
    call.arguments = args.is_string() ? args.get<std::string>() : args.dump();
    if (c.contains("id") && c["id"].is_string()) call.id = c["id"].get<std::string>();
    return call;
  };
  if (data.is_object()) {
    if (data.contains("tool_calls") && data["tool_calls"].is_array()) {
      for (const auto& c : data["tool_calls"])
        if (auto call = call_of(c)) msg.tool_calls.push_back(std::move(*call));
      if (data.contains("content") && data["content"].is_string()) msg.content = data["content"].get<std::string>();
      if (!msg.tool_calls.empty()) return msg;
    } else if (data.contains("tool_call")) {
      if (auto call = call_of(data["tool_call"])) {
        msg.tool_calls.push_back(std::move(*call));
        return msg;
      }
    } else if (data.contains("response")) {
      const ordered_json& r = data["response"];
      msg.content = r.is_string() ? r.get<std::string>() : r.dump(2);
      return msg;
    }
  }
  msg = ParsedMessage{};
  msg.content = std::string(text);
  return msg;
}

}  // namespace vtc::chat
