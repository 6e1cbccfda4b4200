#include "serve/chat/chat_layer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <map>

#include "serve/api/common/api_error.h"
#include "serve/jinja/template.h"

namespace vtc::serve::chat_layer {

using nlohmann::ordered_json;

namespace {

bool has(const std::string& s, const char* marker) { return s.find(marker) != std::string::npos; }

// One probe render; "" with ok=false when the template raises.
struct Probe {
  bool ok = false;
  std::string out;
};

Probe probe(const jinja::Template& tmpl, ordered_json messages, ordered_json tools) {
  // The reference's probe context (jinja::caps_get): empty bos/eos, a
  // generation prompt, tools an empty list unless given.
  ordered_json ctx = {{"messages", std::move(messages)},
                      {"tools", tools.is_null() ? ordered_json::array() : std::move(tools)},
                      {"bos_token", ""},
                      {"eos_token", ""},
                      {"add_generation_prompt", true}};
  jinja::RenderOptions opts;
  opts.now_epoch_s = 0;
  opts.max_steps = 5'000'000;
  try {
    return {true, tmpl.render(ctx, opts)};
  } catch (const std::exception&) {
    return {};
  }
}

ordered_json probe_tools() {
  return ordered_json::parse(R"([{"name": "tool", "type": "function", "function": {"name": "tool1",
    "description": "Tool description", "parameters": {"type": "object", "properties": {"arg": {"type": "string",
    "description": "Arg description"}}, "required": ["arg"]}}}])");
}

ordered_json probe_tool_conversation(const ordered_json& arguments) {
  ordered_json call = {{"id", "call00001"}, {"type", "function"}, {"function", {{"name", "tool1"}, {"arguments", arguments}}}};
  return ordered_json::array({{{"role", "user"}, {"content", "User message"}},
                              {{"role", "assistant"}, {"content", ""}, {"tool_calls", ordered_json::array({call})}},
                              {{"role", "tool"}, {"content", "Tool response"}, {"tool_call_id", "call00001"}},
                              {{"role", "assistant"}, {"content", "The tool response was 'tool response'"}},
                              {{"role", "user"}, {"content", "User message"}}});
}

std::string trimmed(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

// Text parts joined as the reference joins them for string-only templates.
std::string joined_parts(const ordered_json& parts) {
  std::string text;
  for (const auto& part : parts) {
    if (part.value("type", "") != "text") continue;
    if (!text.empty()) text += '\n';
    text += part.value("text", "");
  }
  return text;
}

// common_chat_msg::to_json_oaicompat of one validated request message.
ordered_json reference_shape(const ordered_json& m, bool trim) {
  auto text = [&](const std::string& s) { return trim ? trimmed(s) : s; };
  ordered_json out = {{"role", m["role"]}};
  const ordered_json& c = m["content"];
  if (c.is_string() && !c.get<std::string>().empty() && !text(c.get<std::string>()).empty()) {
    out["content"] = text(c.get<std::string>());
  } else if (c.is_array() && !c.empty()) {
    ordered_json parts = ordered_json::array();
    for (const auto& p : c) parts.push_back({{"type", p["type"]}, {"text", text(p["text"].get<std::string>())}});
    out["content"] = std::move(parts);
  } else {
    out["content"] = "";
  }
  if (m.contains("reasoning_content") && !text(m["reasoning_content"].get<std::string>()).empty())
    out["reasoning_content"] = text(m["reasoning_content"].get<std::string>());
  if (m.contains("name") && !m["name"].get<std::string>().empty()) out["name"] = m["name"];
  if (m.contains("tool_call_id") && !m["tool_call_id"].get<std::string>().empty()) out["tool_call_id"] = m["tool_call_id"];
  if (m.contains("tool_calls") && !m["tool_calls"].empty()) {
    ordered_json calls = ordered_json::array();
    for (const auto& call : m["tool_calls"]) {
      const ordered_json& args = call["function"]["arguments"];
      ordered_json tc = {{"type", "function"},
                         {"function", {{"name", call["function"]["name"]},
                                       {"arguments", args.is_string() ? args : ordered_json(args.dump())}}}};
      if (call.contains("id") && !call["id"].get<std::string>().empty()) tc["id"] = call["id"];
      calls.push_back(std::move(tc));
    }
    out["tool_calls"] = std::move(calls);
  }
  return out;
}

// The reference's messages_inp_normalizer: a template that takes only one
// content shape gets that shape.
void normalize_content(ordered_json& messages, const TemplateCaps& caps) {
  const bool only_string = caps.string_content && !caps.typed_content;
  const bool only_typed = !caps.string_content && caps.typed_content;
  for (auto& m : messages) {
    ordered_json& c = m["content"];
    if (only_string && c.is_array()) c = joined_parts(c);
    if (only_typed && c.is_string()) c = ordered_json::array({{{"type", "text"}, {"text", c}}});
  }
}

void fold_system_message(ordered_json& messages) {
  if (messages.empty() || messages[0]["role"] != "system") return;
  if (messages.size() > 1) {
    const ordered_json &first = messages[0]["content"], &second = messages[1]["content"];
    if (!first.is_string() || !second.is_string())
      throw ApiError(400, "chat template: this template has no system role, and the system message cannot be folded "
                          "into the next message (content parts)", "messages");
    messages[1]["content"] = first.get<std::string>() + "\n" + second.get<std::string>();
  }
  messages.erase(messages.begin());
}

void parse_arguments(ordered_json& messages) {
  for (auto& m : messages) {
    if (!m.contains("tool_calls")) continue;
    for (auto& call : m["tool_calls"]) {
      ordered_json& args = call["function"]["arguments"];
      if (!args.is_string()) continue;
      try {
        args = ordered_json::parse(args.get<std::string>());
      } catch (const std::exception& e) {
        throw ApiError(400, fmt::format("tool call '{}': 'arguments' is not valid JSON: {}",
                                        call["function"]["name"].get<std::string>(), e.what()),
                       "messages");
      }
    }
  }
}

// Ministral 3 / Magistral: system and assistant content as blocks, the
// reasoning as a "thinking" block before the text.
void ministral3_blocks(ordered_json& messages) {
  for (auto& m : messages) {
    if (m["role"] != "system" && m["role"] != "assistant") continue;
    ordered_json blocks = ordered_json::array();
    if (m.contains("reasoning_content") && m["reasoning_content"].is_string())
      blocks.push_back({{"type", "thinking"}, {"thinking", m["reasoning_content"]}});
    if (m["content"].is_string()) blocks.push_back({{"type", "text"}, {"text", m["content"]}});
    if (m["content"].is_array())
      for (const auto& b : m["content"]) blocks.push_back(b);
    m["content"] = std::move(blocks);
    m.erase("reasoning_content");
  }
}

// gpt-oss and LFM2 read the reasoning as "thinking"; gpt-oss also drops
// the content beside tool calls that come with reasoning.
void reasoning_as_thinking(ordered_json& messages, bool drop_content_beside_calls) {
  for (auto& m : messages) {
    if (!m.contains("reasoning_content") || !m["reasoning_content"].is_string()) continue;
    m["thinking"] = m["reasoning_content"];
    if (drop_content_beside_calls && m.contains("tool_calls") && !m["tool_calls"].empty()) m.erase("content");
  }
}

// DeepSeek V4 renders a run of tool results in the order of the calls.
void sort_tool_results(ordered_json& messages) {
  std::map<std::string, size_t> call_order;
  for (size_t i = 0; i < messages.size();) {
    const std::string role = messages[i].value("role", "");
    if (role == "assistant" && messages[i].contains("tool_calls") && !messages[i]["tool_calls"].empty()) {
      call_order.clear();
      const auto& calls = messages[i]["tool_calls"];
      for (size_t k = 0; k < calls.size(); ++k)
        if (auto id = calls[k].value("id", ""); !id.empty()) call_order[id] = k;
      ++i;
      continue;
    }
    if (role != "user" && role != "tool") {
      ++i;
      continue;
    }
    std::vector<size_t> at;
    size_t end = i;
    for (; end < messages.size(); ++end) {
      const std::string r = messages[end].value("role", "");
      if (r == "tool") at.push_back(end);
      else if (r != "user") break;
    }
    if (at.size() > 1 && !call_order.empty()) {
      std::vector<ordered_json> results;
      for (size_t pos : at) results.push_back(messages[pos]);
      auto order = [&](const ordered_json& m) {
        auto it = call_order.find(m.value("tool_call_id", ""));
        return it == call_order.end() ? size_t{0} : it->second;
      };
      std::stable_sort(results.begin(), results.end(),
                       [&](const ordered_json& a, const ordered_json& b) { return order(a) < order(b); });
      for (size_t k = 0; k < at.size(); ++k) messages[at[k]] = std::move(results[k]);
    }
    i = end;
  }
}

// Older Gemma 4 templates read tool results from the assistant turn
// (tool_responses) instead of tool messages: a call turn, its results and a
// final text reply become one assistant message.
void gemma4_tool_responses(ordered_json& messages) {
  auto has_calls = [](const ordered_json& m) { return m.contains("tool_calls") && m["tool_calls"].is_array() && !m["tool_calls"].empty(); };
  auto has_content = [](const ordered_json& m) {
    if (!m.contains("content")) return false;
    const auto& c = m["content"];
    return (c.is_string() && !c.get<std::string>().empty()) || (c.is_array() && !c.empty());
  };
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < messages.size();) {
    const ordered_json& m = messages[i];
    if (m.value("role", "") != "assistant" || !has_calls(m)) {
      out.push_back(m);
      ++i;
      continue;
    }
    ordered_json calls = m["tool_calls"], responses = ordered_json::array(), content, reasoning;
    if (m.contains("reasoning_content") && m["reasoning_content"].is_string()) reasoning = m["reasoning_content"];
    for (++i; i < messages.size() && messages[i].value("role", "") == "tool"; ++i) {
      const ordered_json& r = messages[i];
      ordered_json response;
      if (r.contains("content")) {
        response = r["content"];
        if (response.is_string()) {
          ordered_json parsed = ordered_json::parse(response.get<std::string>(), nullptr, false);
          if (!parsed.is_discarded()) response = parsed;
        }
      }
      std::string name;
      if (responses.size() < calls.size() && calls[responses.size()].contains("function"))
        name = calls[responses.size()]["function"].value("name", "");
      if (name.empty()) name = r.value("tool_call_id", "");
      responses.push_back({{"name", name}, {"response", response}});
    }
    if (i < messages.size() && messages[i].value("role", "") == "assistant" && !has_calls(messages[i]) &&
        has_content(messages[i]))
      content = messages[i++]["content"];
    ordered_json merged = {{"role", "assistant"}, {"tool_calls", calls}};
    if (!responses.empty()) merged["tool_responses"] = responses;
    if (!content.is_null()) merged["content"] = content;
    if (!reasoning.is_null()) merged["reasoning_content"] = reasoning;
    out.push_back(std::move(merged));
  }
  messages = std::move(out);
}

std::string local_time(int64_t now_epoch_s, const char* format) {
  std::time_t t = now_epoch_s >= 0 ? static_cast<std::time_t>(now_epoch_s) : std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[64];
  return std::string(buf, std::strftime(buf, sizeof buf, format, &tm));
}

}  // namespace

TemplateCaps caps_of(const jinja::Template& tmpl) {
  TemplateCaps caps;
  // Content: whether a string reaches the output, and whether text parts do.
  const std::string string_marker = "STRING_MARKER", typed_marker = "TYPED_MARKER";
  const Probe as_string = probe(tmpl, ordered_json::array({{{"role", "user"}, {"content", string_marker}}}), nullptr);
  const Probe as_parts = probe(
      tmpl, ordered_json::array({{{"role", "user"}, {"content", {{{"type", "text"}, {"text", typed_marker}}}}}}), nullptr);
  const bool string_shown = as_string.ok && has(as_string.out, string_marker.c_str());
  const bool parts_shown = as_parts.ok && has(as_parts.out, typed_marker.c_str());
  caps.string_content = as_string.ok && (string_shown || !parts_shown);
  caps.typed_content = !caps.string_content && parts_shown;
  // System role: whether the system message's text is used.
  const Probe system = probe(tmpl, ordered_json::array({{{"role", "system"}, {"content", "System message"}},
                                                        {{"role", "user"}, {"content", "User message"}}}),
                             nullptr);
  caps.system_role = system.ok && has(system.out, "System message");
  // Object arguments: whether a value inside an arguments object is used.
  // A value printed inside the dict's Python repr ('...') means the template
  // treated the whole object as text (string + dict), not as a mapping.
  const std::string arg = "vtc_probe_argument";
  const Probe object_args = probe(tmpl, probe_tool_conversation({{"arg", arg}}), probe_tools());
  caps.object_arguments = false;
  for (size_t at = object_args.ok ? object_args.out.find(arg) : std::string::npos; at != std::string::npos;
       at = object_args.out.find(arg, at + 1)) {
    const std::string repr = "{'arg': '" + arg + "'}";
    const bool in_repr = at >= 9 && object_args.out.compare(at - 9, repr.size(), repr) == 0;
    caps.object_arguments = caps.object_arguments || !in_repr;
  }
  return caps;
}

std::string patched_source(std::string source) {
  auto replace_all = [&](const std::string& from) {
    for (size_t at = source.find(from); at != std::string::npos; at = source.find(from, at))
      source.replace(at, from.size(), "{%- if false %}");
  };
  if (has(source, "<|channel|>") && has(source, "in message.content or"))
    replace_all("{%- if \"<|channel|>analysis<|message|>\" in message.content or "
                "\"<|channel|>final<|message|>\" in message.content %}");
  if (has(source, "[TOOL_CALLS]") && has(source, "if (message['content'] is none or"))
    replace_all("{%- if (message['content'] is none or message['content'] == '' or "
                "message['content']|length == 0) and (message['tool_calls'] is not defined or "
                "message['tool_calls'] is none or message['tool_calls']|length == 0) %}");
  return source;
}

Dedicated dedicated_of(const std::string& s) {
  // common_chat_try_specialized_template's tests, in its order (the first
  // match wins); only the handlers that reshape messages or the prompt are
  // named, the rest render plainly.
  if (has(s, "[SYSTEM_PROMPT]") && has(s, "[TOOL_CALLS]") && has(s, "[ARGS]") && !has(s, "[CALL_ID]"))
    return Dedicated::Ministral3;
  if (has(s, "<|channel|>")) return Dedicated::GptOss;
  if (has(s, "<atem:function_calls>") && has(s, "<|eom|>")) return Dedicated::None;
  if (has(s, ">>>all") && has(s, ">>>${recipient}")) return Dedicated::None;
  if (has(s, "<|tool_calls_section_begin|>") && has(s, "<|tool_call_begin|>")) return Dedicated::None;
  if (has(s, "<|open|>") && has(s, "<|close|>") && has(s, "<|end_of_msg|>")) return Dedicated::None;
  if (has(s, "<|START_TEXT|>") && has(s, "<|START_ACTION|>")) return Dedicated::None;
  if (has(s, "<|tool_list_start|>") && has(s, "<|tool_list_end|>")) return Dedicated::Lfm2;
  if (has(s, "List of tools: [") && !has(s, "<|tool_list_start|>")) return Dedicated::Lfm2;
  if (has(s, "<|role_sep|>") && has(s, "<|message_sep|>") && !has(s, "<|function_call|>")) return Dedicated::None;
  if (has(s, "]<]minimax[>[") && has(s, "<tool_call>") && has(s, "<invoke name=")) return Dedicated::None;
  if (has(s, "dsml_token") && has(s, "DSML") && (has(s, "function_calls") || has(s, "tool_calls")))
    return has(s, "function_calls") ? Dedicated::None : Dedicated::DeepSeekV4;
  if (has(s, "'<|tool_call>call:'"))
    return has(s, "{#- OpenAI Chat Completions:") ? Dedicated::Gemma4 : Dedicated::Gemma4Legacy;
  return Dedicated::None;
}

ordered_json template_messages(const ordered_json& messages, const TemplateCaps& caps, const std::string& source) {
  const Dedicated dedicated = dedicated_of(source);
  // StepFun's contents are trimmed before anything else (the reference:
  // leftover whitespace drives that model into reasoning loops).
  const bool trim = has(source, "You have access to the following functions in JSONSchema format");
  ordered_json out = ordered_json::array();
  for (const auto& m : messages) out.push_back(reference_shape(m, trim));
  normalize_content(out, caps);
  if (!has(source, "<|channel|>"))
    for (auto& m : out)
      if (m["role"] == "developer") m["role"] = "system";
  if (!caps.system_role) fold_system_message(out);
  if (caps.object_arguments) parse_arguments(out);
  switch (dedicated) {
    case Dedicated::Ministral3: ministral3_blocks(out); break;
    case Dedicated::GptOss: reasoning_as_thinking(out, true); break;
    case Dedicated::Lfm2: reasoning_as_thinking(out, false); break;
    case Dedicated::DeepSeekV4: sort_tool_results(out); break;
    case Dedicated::Gemma4Legacy: gemma4_tool_responses(out); break;
    default: break;
  }
  return out;
}

ordered_json template_tools(const ordered_json& tools) {
  ordered_json out = ordered_json::array();
  for (const auto& t : tools) {
    const ordered_json& fn = t["function"];
    const auto description = fn.find("description");
    const auto parameters = fn.find("parameters");
    out.push_back({{"type", "function"},
                   {"function",
                    {{"name", fn["name"]},
                     {"description", description == fn.end() || description->is_null() ? ordered_json("") : *description},
                     {"parameters",
                      parameters == fn.end() || parameters->is_null() ? ordered_json::object() : *parameters}}}});
  }
  return out;
}

ordered_json date_variables(int64_t now_epoch_s) {
  return {{"datetime", local_time(now_epoch_s, "%b %d %Y")}, {"date_string", local_time(now_epoch_s, "%d %b %Y")}};
}

std::string finish_prompt(std::string prompt, Dedicated dedicated, bool add_generation_prompt) {
  if (dedicated == Dedicated::GptOss && !add_generation_prompt) {
    static const std::string kReturn = "<|return|>";
    if (size_t at = prompt.rfind(kReturn); at != std::string::npos) prompt.replace(at, kReturn.size(), "<|end|>");
  }
  if ((dedicated == Dedicated::Gemma4 || dedicated == Dedicated::Gemma4Legacy) && add_generation_prompt &&
      prompt.size() >= 8 && prompt.compare(prompt.size() - 8, 8, "<turn|>\n") == 0)
    prompt += "<|turn>model\n";
  return prompt;
}

}  // namespace vtc::serve::chat_layer
