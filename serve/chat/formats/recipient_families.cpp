// Two dedicated formats of the reference whose calls name the tool and
// then give bare JSON arguments, with no closing marker:
//  - Magistral / Ministral 3 / Devstral: [THINK]..[/THINK] reasoning,
//    content, then [TOOL_CALLS]NAME[ARGS]{args} per call;
//  - Functionary v3.2: after the generation prompt's ">>>", either
//    "all\n" and content, or NAME\n{args} calls back to back.
// Like the reference's, neither grammar requires the end of input after
// the calls (Magistral) or adds anything but the tail (Functionary).
#include "serve/chat/grammar.h"

namespace vtc::chat::grammar {

using namespace vtc::chat::peg;

peg::Parser magistral(const GrammarInputs& in, const peg::Parser& tail) {
  (void)tail;  // the reference ends this grammar with nothing: text after the calls is dropped
  const Parser reasoning = in.extract_reasoning
                               ? optional(seq({lit("[THINK]"), tag("reasoning", until("[/THINK]")), lit("[/THINK]")}))
                               : eps();
  if (in.tools.empty()) return seq({reasoning, space(), tag("content", rest())});
  std::vector<Parser> tools;
  for (const auto& tool : in.tools) {
    tools.push_back(seq({atomic_tag("tool-open", seq({atomic_tag("tool-name", lit(tool.name)), lit("[ARGS]")})),
                         tag("tool-args", json())}));
  }
  const Parser calls = repeat(seq({lit("[TOOL_CALLS]"), choice(std::move(tools))}), 0, in.parallel ? -1 : 1);
  return seq({reasoning, space(), tag("content", until("[TOOL_CALLS]")), space(), calls});
}

peg::Parser functionary_v3_2(const GrammarInputs& in, const peg::Parser& tail) {
  const Parser content_only = seq({lit("all\n"), tag("content", rest())});
  if (in.tools.empty()) return seq({content_only, tail});
  std::vector<Parser> tools;
  for (const auto& tool : in.tools) {
    tools.push_back(tag("tool", seq({atomic_tag("tool-open", seq({atomic_tag("tool-name", lit(tool.name)), lit("\n")})),
                                     tag("tool-args", json())})));
  }
  const Parser one = choice(std::move(tools));
  const Parser calls = in.parallel ? one_or_more(one) : one;
  const Parser content_then_calls = seq({lit("all\n"), tag("content", until(">>>")), calls});
  return seq({choice({content_then_calls, content_only, calls}), tail});
}

}  // namespace vtc::chat::grammar
