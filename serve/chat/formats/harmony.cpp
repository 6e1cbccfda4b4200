// gpt-oss's harmony format: messages `<|start|>assistant<|channel|>C<|message|>TEXT<|end|>`.
// The analysis channel is reasoning, commentary without a recipient is a
// preamble (content), final is the answer; a tool call names its recipient
// ` to=functions.NAME` in the role or the channel header, may add a
// constraint (`<|constrain|>json`), and its message is the JSON arguments.
// The input starts with the generation prompt's `<|start|>assistant`.
#include "serve/chat/grammar.h"

namespace vtc::chat::grammar {

using namespace vtc::chat::peg;

peg::Parser gpt_oss(const GrammarInputs& in, const peg::Parser& tail) {
  const Parser start = lit("<|start|>assistant");
  const Parser end_msg = lit("<|end|>");
  const Parser text = until("<|end|>");
  const Parser channel = seq({lit("<|channel|>"), choice({lit("commentary"), lit("analysis")})});
  const Parser constrain_type = chars("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-", 1, -1);
  const Parser stray_commentary = optional(seq({lit("<|channel|>commentary"), optional(lit(" to=assistant"))}));
  const Parser start_analysis = seq({stray_commentary, lit("<|channel|>analysis<|message|>")});
  // Reasoning left inline is one content span with its markers; while
  // streaming it waits until whole, as its start may yet be a tool call's.
  Parser inline_analysis = tag("content", seq({start_analysis, text, end_msg}));
  if (in.streaming_prefix) inline_analysis = atomic(inline_analysis);
  const Parser analysis = in.extract_reasoning ? seq({start_analysis, tag("reasoning", text), end_msg}) : inline_analysis;
  const Parser preamble = seq({lit("<|channel|>commentary<|message|>"), tag("content", text), end_msg});
  const Parser final_msg = seq({stray_commentary, lit("<|channel|>final<|message|>"), tag("content", text)});
  const Parser any = choice({preamble, analysis});
  const Parser history = zero_or_more(seq({start, any}));

  if (in.tools.empty()) {
    const Parser unsolicited = atomic(seq({optional(channel), lit(" to="), text, end_msg}));
    return seq({history, start, choice({final_msg, unsolicited}), tail});
  }
  std::vector<Parser> tools;
  for (const auto& tool : in.tools) {
    const Parser name = seq({lit(" to=functions."), atomic_tag("tool-name", lit(tool.name))});
    const Parser constraint = optional(seq({space(), optional(lit("<|constrain|>")), constrain_type}));
    const Parser args = tag("tool-args", json());
    const Parser in_role = tag("tool", seq({atomic_tag("tool-open", seq({name, channel, constraint, lit("<|message|>")})), args}));
    const Parser in_channel =
        tag("tool", seq({atomic_tag("tool-open", seq({channel, name, constraint, lit("<|message|>")})), args}));
    tools.push_back(choice({in_role, in_channel}));
  }
  return seq({history, start, choice({choice(std::move(tools)), final_msg}), tail});
}

}  // namespace vtc::chat::grammar
