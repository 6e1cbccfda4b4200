// What the llama.cpp reference's chat layer (common/chat.cpp,
// common_chat_templates_apply) does to a chat request before and after a
// Jinja chat template renders it, so that vtc hands a template the same
// variables llama-server does (serve/chat/chat_prompt.h uses it).
//
// A template's capabilities are found as the reference finds them: by
// rendering probe conversations through it once, at load (caps_of). The
// reference watches which input values the template reads; vtc watches
// which of them reach the output, which agrees on every template of the
// reference bundle (tests/serve/chat_layer checks it).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace vtc::jinja {
class Template;
}

namespace vtc::serve::chat_layer {

struct TemplateCaps {
  bool system_role = true;        // false: a system message is folded into the first user turn
  bool string_content = true;     // content as a string
  bool typed_content = false;     // content as [{"type": "text", "text": ...}]
  bool object_arguments = false;  // tool-call arguments as an object, not JSON text
};

TemplateCaps caps_of(const jinja::Template& tmpl);

// The model's main template with the reference's two load-time patches
// (common_chat_templates_init): gpt-oss's refusal of "<|channel|>" text in
// an assistant's content, and Mistral's refusal of an empty assistant
// message, are switched off ("{%- if false %}").
std::string patched_source(std::string source);

// Which of the reference's dedicated handlers (common_chat_try_specialized_
// template) a template gets; some of them reshape the messages.
enum class Dedicated { None, Ministral3, GptOss, Lfm2, DeepSeekV4, Gemma4Legacy, Gemma4 };
Dedicated dedicated_of(const std::string& source);

// The template's `messages`: the request's (validated, as
// chat_inputs_from_request leaves them) in the shape common_chat_msg::
// to_json_oaicompat gives them, with the reference's rewrites: content
// parts joined with "\n" or strings made parts as the template takes
// content, "developer" as "system" (not for harmony templates), a system
// message folded into the next turn where the template has no system role,
// tool-call arguments parsed where it reads them as an object, and the
// dedicated handlers' own reshaping. Throws ApiError 400 (bad arguments JSON).
nlohmann::ordered_json template_messages(const nlohmann::ordered_json& messages, const TemplateCaps& caps,
                                         const std::string& source);

// The request's tools as the reference rebuilds them:
// {"type": "function", "function": {"name", "description" ("" when
// absent), "parameters" ({} when absent)}}; other keys are dropped.
nlohmann::ordered_json template_tools(const nlohmann::ordered_json& tools);

// The variables every render gets beside messages and tools: date_string
// ("%d %b %Y") and datetime ("%b %d %Y") of `now_epoch_s` (< 0: the clock)
// in local time, as common_chat_extra_context formats them.
nlohmann::ordered_json date_variables(int64_t now_epoch_s);

// The rendered prompt after the dedicated handlers' own edits (gpt-oss
// without a generation prompt ends in <|end|>, not <|return|>; Gemma 4
// opens the model's turn after a closed one).
std::string finish_prompt(std::string prompt, Dedicated dedicated, bool add_generation_prompt);

}  // namespace vtc::serve::chat_layer
