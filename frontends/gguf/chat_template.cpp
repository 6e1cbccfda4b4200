// Built-in chat templates. Detection order and formatting follow the
// reference's llama-chat.cpp semantics for the families we support, so the
// same GGUF gives the same prompt text in vtc and llama.cpp (checked by
// tests/gguf/test_chat_template.cpp against the reference).
#include "frontends/gguf/chat_template.h"

#include <fmt/format.h>

#include <array>
#include <utility>

#include "support/error.h"

namespace vtc {
namespace {

constexpr std::array<std::pair<std::string_view, ChatTemplate>, 6> kNames = {{
    {"chatml", ChatTemplate::ChatML},
    {"llama3", ChatTemplate::Llama3},
    {"mistral-v1", ChatTemplate::MistralV1},
    {"mistral-v3", ChatTemplate::MistralV3},
    {"mistral-v3-tekken", ChatTemplate::MistralV3Tekken},
    {"mistral-v7", ChatTemplate::MistralV7},
}};

std::string trim(std::string_view s) {
  const char* ws = " \t\n\r\f\v";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return "";
  size_t e = s.find_last_not_of(ws);
  return std::string(s.substr(b, e - b + 1));
}

std::string format_chatml(const std::vector<ChatMessage>& msgs, bool add_assistant) {
  std::string out;
  for (const auto& m : msgs) out += fmt::format("<|im_start|>{}\n{}<|im_end|>\n", m.role, m.content);
  if (add_assistant) out += "<|im_start|>assistant\n";
  return out;
}

std::string format_llama3(const std::vector<ChatMessage>& msgs, bool add_assistant) {
  std::string out;
  for (const auto& m : msgs)
    out += fmt::format("<|start_header_id|>{}<|end_header_id|>\n\n{}<|eot_id|>", m.role, trim(m.content));
  if (add_assistant) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// v1, v3 and v3-tekken differ only in the spaces around [INST] and whether
// assistant replies are trimmed. The system prompt joins the next turn.
std::string format_mistral_inst(ChatTemplate kind, const std::vector<ChatMessage>& msgs) {
  const std::string lead = kind == ChatTemplate::MistralV1 ? " " : "";
  const std::string trail = kind == ChatTemplate::MistralV3Tekken ? "" : " ";
  const bool trim_assistant = kind == ChatTemplate::MistralV3;
  std::string out;
  bool in_turn = false;
  for (const auto& m : msgs) {
    if (!in_turn) {
      out += lead + "[INST]" + trail;
      in_turn = true;
    }
    if (m.role == "system") {
      out += m.content + "\n\n";
    } else if (m.role == "user") {
      out += m.content + lead + "[/INST]";
    } else {
      out += trail + (trim_assistant ? trim(m.content) : m.content) + "</s>";
      in_turn = false;
    }
  }
  return out;
}

std::string format_mistral_v7(const std::vector<ChatMessage>& msgs) {
  std::string out;
  for (const auto& m : msgs) {
    if (m.role == "system")
      out += "[SYSTEM_PROMPT] " + m.content + "[/SYSTEM_PROMPT]";
    else if (m.role == "user")
      out += "[INST] " + m.content + "[/INST]";
    else
      out += " " + m.content + "</s>";
  }
  return out;
}

}  // namespace

ChatTemplate detect_chat_template(std::string_view tmpl) {
  for (const auto& [name, kind] : kNames)
    if (tmpl == name) return kind;
  auto has = [&](std::string_view marker) { return tmpl.find(marker) != std::string_view::npos; };
  if (has("<|im_start|>") && !has("<|im_sep|>") && !has("<end_of_utterance>")) return ChatTemplate::ChatML;
  if (has("<|start_header_id|>") && has("<|end_header_id|>")) return ChatTemplate::Llama3;
  if (has("[INST]") || tmpl.rfind("mistral", 0) == 0) {
    if (has("[SYSTEM_PROMPT]")) return ChatTemplate::MistralV7;
    if (has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]")) {
      if (has(" [INST]")) return ChatTemplate::MistralV1;
      if (has("\"[INST]\"")) return ChatTemplate::MistralV3Tekken;
      return ChatTemplate::MistralV3;
    }
  }
  std::string shown(tmpl.substr(0, 80));
  throw Error(fmt::format("unsupported chat template \"{}{}\": vtc has built-in templates {} and "
                          "recognises their Jinja sources by their markers; pass one of those names",
                          shown, tmpl.size() > 80 ? "..." : "", fmt::join(chat_template_names(), ", ")));
}

std::string_view chat_template_name(ChatTemplate kind) {
  for (const auto& [name, k] : kNames)
    if (k == kind) return name;
  return "?";
}

std::vector<std::string_view> chat_template_names() {
  std::vector<std::string_view> names;
  for (const auto& entry : kNames) names.push_back(entry.first);
  return names;
}

std::string apply_chat_template(ChatTemplate kind, const std::vector<ChatMessage>& msgs,
                                bool add_assistant) {
  switch (kind) {
    case ChatTemplate::ChatML: return format_chatml(msgs, add_assistant);
    case ChatTemplate::Llama3: return format_llama3(msgs, add_assistant);
    case ChatTemplate::MistralV7: return format_mistral_v7(msgs);
    default: return format_mistral_inst(kind, msgs);
  }
}

}  // namespace vtc
