// Parsing model output in chat serving: tool calls and reasoning, per
// template family, whole or while it streams.
//
// A family is picked from the chat template's text by its markers
// (detect_chat_format). For a request, build a grammar for the family
// and the request's tools (tool names, and for the XML-argument families
// each parameter's schema), then parse the output with the PEG engine of
// chat/peg.h and map the tagged spans to a message (chat/peg_mapper.h).
// The grammars are those of the llama.cpp reference's chat parser for
// the same templates, so the parsed messages equal its own
// (tests/serve/chat/test_chat_parse.cpp checks it against the reference).
//
// Untrusted output never throws. A complete output that does not fit the
// family's grammar is parsed again with the trailing text allowed as
// content, and failing that as reasoning plus plain content: an
// unparseable tool call ends up as content.
//
// Streaming re-parses the growing text as a prefix (an incomplete marker
// or call is held back) and emits what grew: content and reasoning as
// they come, each tool call once it is complete (name, id and arguments
// in one delta), so that the deltas never need taking back and their
// concatenation equals parse_output(full text).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace vtc::chat {

enum class ChatFormat {
  ContentOnly,    // no tool calls, no reasoning
  Hermes,         // <tool_call>\n{"name":..,"arguments":..}</tool_call>: Qwen2.5, Hermes 2 Pro / 3, Granite 4.0
  Qwen3,          // Hermes calls + <think>\n..\n</think>\n\n
  QwQ,            // Hermes calls + <think>..</think>
  Qwen3Coder,     // <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n</function>
  Qwen35,         // Qwen3-Coder calls + <think> reasoning (Qwen3.5)
  Llama3,         // {"name":..,"parameters":..}: Llama 3.1 / 3.2 / 3.3
  MistralNemo,    // [TOOL_CALLS][{"name":..,"arguments":..,"id":..}]
  MistralSmall,   // [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...}: Mistral Small 3.2
  DeepSeekR1,     // <think>; <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{..}```
  DeepSeekV3_1,   // <think>; <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{..}<｜tool▁call▁end｜>
  ReasoningOnly,  // <think>..</think> then content, no tool calls (R1 distills of Llama, Granite 3.3)
  CommandR7B,     // <|START_THINKING|>, <|START_RESPONSE|>, <|START_ACTION|>[{"tool_call_id"..}]
  GptOss,         // harmony channels
  KimiK2,         // <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{..}
  Glm45,          // <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n</tool_call>: GLM 4.5 / 4.6
  Glm47,          // the same without the newlines: GLM 4.7
  FunctionaryV3_1Llama3_1,  // <function=NAME>{..}</function>
  Firefunction,   // functools[{..}]
  Magistral,      // [THINK]..[/THINK], [TOOL_CALLS]NAME[ARGS]{..}: Ministral 3 / Magistral, Devstral
  FunctionaryV3_2,  // >>>all\n content, or >>>NAME\n{..}
  Generic,        // one JSON object: {"tool_call"|"tool_calls"|"response": ..} (chat/generic_tools.h)
};

ChatFormat detect_chat_format(std::string_view template_text);
std::string_view chat_format_name(ChatFormat);

struct ToolCall {
  std::string id, name, arguments;  // arguments: a JSON text
};

struct ParsedMessage {
  std::string content, reasoning_content;
  std::vector<ToolCall> tool_calls;
};

struct ParseOptions {
  ChatFormat format = ChatFormat::ContentOnly;
  bool extract_reasoning = true;
  bool thinking_forced_open = false;  // the generation prompt opened the think block
  // The template's generation prompt (what add_generation_prompt appends;
  // see generation_prompt_suffix). When set, it decides how the output
  // starts, as in the reference, which parses it in front of the output:
  // an opened think block (thinking_forced_open is then implied), or one
  // already closed (thinking disabled), whose tags in the output are content.
  std::string generation_prompt;
  bool parse_tool_calls = true;
  // The request's OpenAI "tools" array as JSON text ("" or "[]": none).
  // Calls are only recognized for these tools, as the reference does.
  std::string tools_json;
  bool parallel_tool_calls = true;
  // Tool call ids for formats that have none: "call_" + 24 alphanumerics
  // drawn from this seed (0: from the clock).
  unsigned long long id_seed = 0;
};

// partial: the text is a prefix of the output still being generated; an
// incomplete tool call or marker is held back (not emitted as content).
ParsedMessage parse_output(std::string_view text, const ParseOptions&, bool partial);

struct MessageDelta {
  std::string content, reasoning_content;
  int tool_index = -1;
  std::string tool_id, tool_name, tool_arguments;
};

class StreamingParser {
 public:
  explicit StreamingParser(ParseOptions);
  ~StreamingParser();
  StreamingParser(StreamingParser&&) noexcept;
  StreamingParser& operator=(StreamingParser&&) noexcept;

  std::vector<MessageDelta> feed(std::string_view new_text);
  std::vector<MessageDelta> finish();
  // Everything emitted so far, as one message (after finish(): the final parse).
  const ParsedMessage& message() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The generation prompt: what a rendering with add_generation_prompt adds
// to the same rendering without it (the suffix after their common prefix).
std::string generation_prompt_suffix(std::string_view with_generation_prompt, std::string_view without);

// Whether a rendered prompt's generation prompt leaves a think block open
// (e.g. ends in "<think>\n"), so that the output starts inside reasoning.
bool generation_prompt_opens_thinking(std::string_view rendered_prompt, ChatFormat);

}  // namespace vtc::chat
