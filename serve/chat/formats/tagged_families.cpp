// Grammars of the families whose tool arguments are tagged one by one
// rather than written as JSON: GLM 4.5/4.6/4.7 (<arg_key>K</arg_key>
// <arg_value>V</arg_value>) and Qwen3-Coder / Qwen3.5
// (<parameter=K>\nV\n</parameter>). A parameter whose schema resolves to a
// string is raw text up to the value's closing tag; any other is a JSON
// value. Required parameters come first in schema order (GLM; any order
// for Qwen3-Coder, as the reference permutes up to six), then optional
// ones in any order and number.
#include <functional>
#include <map>
#include <utility>

#include "serve/chat/grammar.h"

namespace vtc::chat::grammar {
namespace {

using namespace vtc::chat::peg;

struct ArgMarkers {
  std::string name_prefix, name_suffix, value_prefix, value_suffix;
};

Parser tagged_arg(const ToolParam& param, const ArgMarkers& m) {
  const Parser open = atomic_tag(
      "tool-arg-open", seq({lit(m.name_prefix), atomic_tag("tool-arg-name", lit(param.name)), lit(m.name_suffix)}));
  const Parser close = atomic_tag("tool-arg-close", lit(m.value_suffix));
  const Parser value = param.is_string ? seq({tag("tool-arg-string-value", until(m.value_suffix)), close})
                                       : seq({tag("tool-arg-value", json()), close});
  return tag("tool-arg", seq({open, lit(m.value_prefix), value}));
}

// GLM: the reference's tagged-argument builder with GLM's markers.
Parser glm_call(const ToolSpec& tool, bool newlines) {
  const ArgMarkers m{"<arg_key>", newlines ? "</arg_key>\n" : "</arg_key>", "<arg_value>",
                     newlines ? "</arg_value>\n" : "</arg_value>"};
  std::vector<Parser> required, optional_args;
  for (const auto& param : tool.params) (param.required ? required : optional_args).push_back(tagged_arg(param, m));
  std::vector<Parser> args;
  for (size_t i = 0; i < required.size(); ++i) {
    if (i > 0) args.push_back(space());
    args.push_back(required[i]);
  }
  if (!optional_args.empty()) args.push_back(zero_or_more(seq({space(), choice(optional_args)})));
  const Parser args_seq = seq(std::move(args));
  const Parser open =
      atomic_tag("tool-open", seq({lit(""), atomic_tag("tool-name", lit(tool.name)), lit(newlines ? "\n" : "")}));
  const Parser close = atomic_tag("tool-close", peek(lit("</tool_call>")));
  if (newlines) return seq({open, space(), args_seq, close});
  if (!required.empty()) return seq({atomic(seq({open, space(), peek(lit("<arg_key>"))})), args_seq, close});
  return atomic(seq({open, space(), args_seq, close}));
}

Parser glm(ChatFormat format, const GrammarInputs& in, const Parser& tail) {
  const bool newlines = format == ChatFormat::Glm45;
  std::vector<Parser> options;
  for (const auto& tool : in.tools) options.push_back(glm_call(tool, newlines));
  const Parser end_call = in.lenient_sections ? optional(lit("</tool_call>")) : lit("</tool_call>");
  const Parser wrapped = seq({lit("<tool_call>"), space(), choice(std::move(options)), space(), end_call});
  const Parser calls =
      in.parallel ? seq({wrapped, zero_or_more(seq({space(), wrapped})), space()}) : seq({wrapped, space()});
  return seq({space(), reasoning_block(in, family_reasoning(format)), optional(tag("content", until("<tool_call>"))),
              optional(calls), tail});
}

// Every order of the required arguments (up to six; more stay in order).
Parser permute(const std::vector<Parser>& parts) {
  if (parts.empty()) return eps();
  if (parts.size() == 1 || parts.size() > 6) return seq(parts);
  std::map<unsigned, Parser> memo;
  std::function<Parser(unsigned)> remaining = [&](unsigned left) -> Parser {
    if (left == 0) return eps();
    if (auto it = memo.find(left); it != memo.end()) return it->second;
    std::vector<Parser> options;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (left & (1u << i)) options.push_back(seq({parts[i], remaining(left & ~(1u << i))}));
    }
    return memo.emplace(left, choice(std::move(options))).first->second;
  };
  return remaining((1u << parts.size()) - 1);
}

}  // namespace

peg::Parser tagged_family(ChatFormat format, const GrammarInputs& in, const peg::Parser& tail) {
  if (in.tools.empty()) {
    return seq({space(), reasoning_block(in, family_reasoning(format)), tag("content", rest()), tail});
  }
  return glm(format, in, tail);
}

peg::Parser qwen3_coder(ChatFormat format, const GrammarInputs& in, const peg::Parser& tail) {
  const bool thinking = format == ChatFormat::Qwen35;
  Parser reasoning = eps();
  if (thinking && in.extract_reasoning) {
    reasoning = optional(seq({lit("<think>"), space(), tag("reasoning", until(std::vector<std::string>{"</think>", "<tool_call>"})),
                              choice({lit("</think>"), peek(lit("<tool_call>"))})}));
  }
  // As in the reference, nothing ends this grammar: text after the calls is dropped.
  (void)tail;
  if (in.tools.empty()) return seq({reasoning, space(), tag("content", rest())});

  const std::string close_marker = "\n</parameter>\n";
  const Parser arg_close = atomic_tag("tool-arg-close", lit(close_marker));
  const Parser arg_string = seq({tag("tool-arg-string-value", until(close_marker)), arg_close});
  std::vector<Parser> tool_options;
  std::vector<std::string> starts = {"<tool_call>"};
  for (const auto& tool : in.tools) {
    std::vector<Parser> required, optional_args;
    for (const auto& param : tool.params) {
      const Parser open =
          atomic_tag("tool-arg-open", seq({lit("<parameter="), atomic_tag("tool-arg-name", lit(param.name)), lit(">\n")}));
      const Parser value = param.is_string ? arg_string : seq({tag("tool-arg-value", json()), arg_close});
      (param.required ? required : optional_args).push_back(tag("tool-arg", seq({open, value})));
    }
    Parser args = permute(required);
    if (!optional_args.empty()) args = seq({args, zero_or_more(choice(optional_args))});
    tool_options.push_back(tag("tool", seq({atomic_tag("tool-open", seq({lit("<function="), atomic_tag("tool-name", lit(tool.name)), lit(">\n")})),
                                            tag("tool-args", args), atomic_tag("tool-close", lit("</function>\n"))})));
    if (!thinking) starts.push_back("<function=" + tool.name + ">");
  }
  const Parser body = seq({choice(std::move(tool_options)), lit("</tool_call>"), space()});
  const Parser call = seq({lit("<tool_call>\n"), body});
  // Qwen3-Coder sometimes leaves out the first <tool_call>.
  const Parser first = thinking ? call : seq({optional(lit("<tool_call>\n")), body});
  const Parser calls = in.parallel ? seq({first, zero_or_more(call)}) : first;
  return seq({reasoning, space(), tag("content", until(starts)), space(), repeat(calls, 0, 1)});
}

}  // namespace vtc::chat::grammar
