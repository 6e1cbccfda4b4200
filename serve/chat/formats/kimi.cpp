// Kimi K2: optional <think>..</think> (which the model may leave open when
// it calls a tool), content, then
// [<|tool_calls_section_begin|>] (<|tool_call_begin|>functions.NAME:IDX
// <|tool_call_argument_begin|>{args}[<|tool_call_end|>])* [<|tool_calls_section_end|>].
// The call id is the format's own "functions.NAME:IDX".
#include "serve/chat/grammar.h"

namespace vtc::chat::grammar {

using namespace vtc::chat::peg;

peg::Parser kimi_k2(const GrammarInputs& in, const peg::Parser& tail) {
  const std::string section_begin = "<|tool_calls_section_begin|>", call_begin = "<|tool_call_begin|>";
  const Parser reasoning =
      in.extract_reasoning
          ? optional(seq({lit("<think>"), tag("reasoning", until(std::vector<std::string>{"</think>", section_begin, call_begin})),
                          optional(lit("</think>"))}))
          : eps();
  if (in.tools.empty()) return seq({reasoning, tag("content", rest()), tail});
  std::vector<Parser> tools;
  for (const auto& tool : in.tools) {
    const Parser id = atomic_tag(
        "tool-id", seq({lit("functions."), atomic_tag("tool-name", lit(tool.name)), lit(":"), chars("0123456789", 1, -1)}));
    tools.push_back(tag("tool", seq({atomic_tag("tool-open", seq({id, lit("<|tool_call_argument_begin|>")})),
                                     tag("tool-args", json()),
                                     atomic_tag("tool-close", optional(lit("<|tool_call_end|>")))})));
  }
  const Parser calls = seq({optional(lit(section_begin)),
                            seq({repeat(seq({lit(call_begin), choice(std::move(tools))}), 0, in.parallel ? -1 : 1),
                                 optional(lit("<|tool_calls_section_end|>"))})});
  return seq({reasoning, tag("content", until(std::vector<std::string>{section_begin, call_begin})), calls, tail});
}

}  // namespace vtc::chat::grammar
