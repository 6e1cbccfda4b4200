// Built-in chat formats, for `--chat-template NAME`.
//
// Chat requests normally render the model's own Jinja template on vtc's
// Jinja engine (serve/chat/chat_prompt.h). These built-ins are what a name picks,
// and what a model without a template gets (chatml). Like llama.cpp's
// llama_chat_apply_template, a template (or a name) is recognised by
// markers it must contain and formatted with a built-in implementation. Supported: chatml (Qwen), llama3,
// mistral-v1, mistral-v3, mistral-v3-tekken, mistral-v7. Anything else is a
// clear error naming what was found and what is supported.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace vtc {

enum class ChatTemplate { ChatML, Llama3, MistralV1, MistralV3, MistralV3Tekken, MistralV7 };

struct ChatMessage {
  std::string role;  // system | user | assistant
  std::string content;
};

// Recognises a Jinja template string or a built-in name ("chatml", ...).
// Throws vtc::Error when it is neither.
ChatTemplate detect_chat_template(std::string_view template_or_name);
std::string_view chat_template_name(ChatTemplate kind);
std::vector<std::string_view> chat_template_names();

// Formats `messages`; with `add_assistant`, ends with the opening of an
// assistant turn so generation continues as the assistant.
std::string apply_chat_template(ChatTemplate kind, const std::vector<ChatMessage>& messages,
                                bool add_assistant);

}  // namespace vtc
