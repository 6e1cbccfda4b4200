// tool_choice, parsed once at the API edge (serve/api/openai/completions.cpp;
// the Responses and Messages APIs translate theirs into the chat body's).
#pragma once

#include <string_view>

namespace vtc::serve {

enum class ToolChoice {
  None,      // no tool calls (the default without tools)
  Auto,      // text or calls (the default with tools)
  Required,  // at least one call, of any tool
  Function,  // one call of the named tool
};

// "none" | "auto" | "required" | "function": how error messages name it.
constexpr std::string_view tool_choice_name(ToolChoice c) {
  switch (c) {
    case ToolChoice::None: return "none";
    case ToolChoice::Auto: return "auto";
    case ToolChoice::Required: return "required";
    case ToolChoice::Function: return "function";
  }
  return "none";
}

}  // namespace vtc::serve
