// The generic JSON tool-call format, for chat templates with no tool syntax
// of their own (vtc's built-in formats, e.g. the chatml fallback when a
// model has no template). It is the format llama.cpp's chat layer used for
// such templates ("Generic" in its docs/function-calling.md; the pinned
// reference no longer has that handler and renders such a request with
// the tools dropped):
//   - the prompt: the tools, as JSON, and the instruction to answer in JSON
//     go into the system message (one is added when there is none);
//     earlier assistant tool calls are written as their content
//     {"tool_calls": [{"name", "arguments", "id"}], "content"?}, and tool
//     results as user turns {"tool_response": {"tool", "content",
//     "tool_call_id"}};
//   - the output: one JSON object, {"tool_call": {"name", "arguments"}},
//     {"tool_calls": [{"name", "arguments", "id"}, ...]} (with parallel
//     tool calls) or {"response": TEXT}; the sampler is held to that shape
//     (generic_output_schema), and parse_generic turns it back into a
//     message.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "serve/chat/output_parser.h"
#include "serve/chat/tool_choice.h"

namespace vtc::chat {

// What PromptTemplate::source_for returns for a built-in format with
// tools; detect_chat_format maps it to ChatFormat::Generic.
inline constexpr std::string_view kGenericToolsSource = "{#- vtc: generic JSON tool calls -#}";

// The request's messages (role, content, tool_calls, tool_call_id, name)
// rewritten for a template without tool syntax; `tools` is the OpenAI
// tools array.
nlohmann::ordered_json generic_prompt_messages(const nlohmann::ordered_json& messages,
                                               const nlohmann::ordered_json& tools);

// The JSON schema the output is held to. tool_choice: Auto (a call or a
// response), Required (a call), Function (a call of `function` only).
nlohmann::ordered_json generic_output_schema(const nlohmann::ordered_json& tools, serve::ToolChoice tool_choice,
                                             const std::string& function, bool parallel_tool_calls);

// The model's output read back: the calls, or the response as content.
// Output that is not such an object (cut short, or not JSON) is content as
// it stands; it never throws.
ParsedMessage parse_generic(std::string_view text);

}  // namespace vtc::chat
