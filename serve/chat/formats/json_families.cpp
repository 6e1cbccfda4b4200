// Grammars of the families whose tool calls carry JSON arguments, as the
// reference's autoparser builds them from its analysis of each template:
//
//  - JSON-object calls, {"name": N, "arguments": {...}} with the field
//    names and order of the family (Hermes and Qwen, Llama 3's
//    "parameters", Mistral Nemo's trailing "id", Command R7B's leading
//    "tool_call_id"), wrapped per call (Hermes' <tool_call>) or in one
//    section, possibly as a JSON array (Mistral Nemo, Firefunction,
//    Command R7B);
//  - marker calls, PREFIX NAME SUFFIX {args} [CLOSE] (DeepSeek R1 / V3.1,
//    Functionary v3.1, Mistral Small 3.2).
// Both forms are: [reasoning] [content up to the first call marker]
// [calls] tail. Names are literals of the request's tools: a call to an
// unknown tool does not parse.
#include <cctype>
#include <utility>

#include "serve/chat/grammar.h"

namespace vtc::chat::grammar {
namespace {

using namespace vtc::chat::peg;

// A marker that closes calls: optional in the lenient re-parse.
Parser closing(const GrammarInputs& in, const std::string& marker) {
  return in.lenient_sections ? optional(lit(marker)) : lit(marker);
}

Parser sep_comma() { return seq({space(), lit(","), space()}); }

Parser quoted_key(const std::string& key) { return seq({lit("\"" + key + "\""), space(), lit(":"), space()}); }

Parser name_field(const std::string& key, const std::string& name) {
  return seq({quoted_key(key), atomic(seq({lit("\""), atomic_tag("tool-name", lit(name)), lit("\"")}))});
}

Parser args_field(const std::string& key) { return seq({quoted_key(key), tag("tool-args", json())}); }

Parser id_field(const std::string& key) {
  return optional(atomic(seq({quoted_key(key), choice({seq({lit("\""), atomic_tag("tool-id", string_body('"')), lit("\"")}),
                                                       atomic_tag("tool-id", json_number())})})));
}

enum class JsonLayout { Hermes, Llama3, MistralNemo, CommandR7B };

// One {...} call object for one tool, fields in the family's order.
Parser json_call(JsonLayout layout, const std::string& name) {
  std::vector<Parser> fields;
  Parser type_field = eps();
  switch (layout) {
    case JsonLayout::Hermes:
      fields = {name_field("name", name), args_field("arguments")};
      break;
    case JsonLayout::Llama3:
      type_field = optional(seq({lit("\"type\""), space(), lit(":"), space(), lit("\"function\""), space(), lit(","), space()}));
      fields = {name_field("name", name), args_field("parameters")};
      break;
    case JsonLayout::MistralNemo:
      fields = {name_field("name", name), args_field("arguments"), id_field("id")};
      break;
    case JsonLayout::CommandR7B:
      fields = {id_field("tool_call_id"), name_field("tool_name", name), args_field("parameters")};
      break;
  }
  std::vector<Parser> body = {atomic_tag("tool-open", lit("{")), space(), type_field};
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) body.push_back(sep_comma());
    body.push_back(fields[i]);
  }
  body.push_back(space());
  body.push_back(atomic_tag("tool-close", lit("}")));
  return tag("tool", seq(std::move(body)));
}

Parser any_json_call(JsonLayout layout, const GrammarInputs& in) {
  std::vector<Parser> options;
  for (const auto& tool : in.tools) options.push_back(json_call(layout, tool.name));
  return choice(std::move(options));
}

// The reference's standard JSON tool section: START calls END, calls
// comma-separated when parallel, optionally inside a JSON array.
Parser json_section(JsonLayout layout, const GrammarInputs& in, const std::string& start, const std::string& end_marker,
                    bool array) {
  const Parser one = any_json_call(layout, in);
  Parser calls = in.parallel ? seq({one, zero_or_more(seq({sep_comma(), one}))}) : one;
  if (array) calls = seq({lit("["), space(), calls, space(), closing(in, "]")});
  return optional(seq({lit(start), space(), calls, space(), closing(in, end_marker)}));
}

struct MarkerLayout {
  std::string section_start, section_end, call_start, call_end;
  std::string name_prefix, name_suffix, close;
};

MarkerLayout marker_layout(ChatFormat format) {
  switch (format) {
    case ChatFormat::DeepSeekR1:
      return {"<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>",
              "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>",
              "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>",
              "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>",
              "function<\xef\xbd\x9ctool\xe2\x96\x81sep\xef\xbd\x9c>", "\n```json\n", "```"};
    case ChatFormat::DeepSeekV3_1:
      return {"<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>",
              "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>",
              "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>",
              "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>",
              "", "<\xef\xbd\x9ctool\xe2\x96\x81sep\xef\xbd\x9c>", ""};
    case ChatFormat::FunctionaryV3_1Llama3_1:
      return {"", "", "<function=", "</function>", "", ">", ""};
    default:
      return {};
  }
}

// One PREFIX NAME SUFFIX {args} [CLOSE] call for one tool.
Parser marker_call(const MarkerLayout& m, const std::string& name) {
  const Parser open = atomic_tag("tool-open", seq({lit(m.name_prefix), atomic_tag("tool-name", lit(name)), lit(m.name_suffix)}));
  const Parser args = tag("tool-args", json());
  Parser call = seq({open, space(), args});
  if (!m.close.empty()) {
    call = seq({call, space(), atomic_tag("tool-close", lit(m.close))});
  } else if (!m.call_end.empty()) {
    call = seq({call, atomic_tag("tool-close", peek(lit(m.call_end)))});
  } else {
    call = seq({call, atomic_tag("tool-close", space())});
  }
  return m.name_suffix.empty() ? atomic(call) : call;
}

Parser marker_calls(const MarkerLayout& m, const GrammarInputs& in) {
  std::vector<Parser> options;
  for (const auto& tool : in.tools) options.push_back(marker_call(m, tool.name));
  const Parser wrapped = seq({lit(m.call_start), choice(std::move(options)), closing(in, m.call_end)});
  Parser calls = in.parallel ? seq({wrapped, zero_or_more(seq({space(), wrapped}))}) : wrapped;
  if (!m.section_start.empty()) {
    calls = seq({lit(m.section_start), space(), calls, space(), m.section_end.empty() ? end() : closing(in, m.section_end)});
  }
  return optional(calls);
}

// Mistral Small 3.2: [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{args}, the id optional.
// (This is the reference's reading of the template rendered without bos
// and eos tokens, as its own tests do; given "<s>" its analysis goes astray.)
Parser mistral_small_calls(const GrammarInputs& in) {
  std::vector<Parser> options;
  for (const auto& tool : in.tools) {
    const Parser open = atomic_tag("tool-open", seq({lit(""), atomic_tag("tool-name", lit(tool.name)), lit("")}));
    const Parser call_id = optional(seq({lit("[CALL_ID]"), atomic_tag("tool-id", until("[ARGS]"))}));
    options.push_back(seq({atomic(seq({open, call_id, lit("[ARGS]")})), space(), tag("tool-args", json()),
                           atomic_tag("tool-close", space())}));
  }
  const Parser wrapped = seq({lit("[TOOL_CALLS]"), choice(std::move(options)), lit("")});
  const Parser calls = in.parallel ? seq({wrapped, zero_or_more(seq({space(), wrapped}))}) : wrapped;
  return optional(calls);
}

Parser content_until(const std::string& marker) { return optional(tag("content", until(marker))); }

}  // namespace

peg::Parser reasoning_block(const GrammarInputs& in, const ReasoningMarkers& m) {
  if (!in.extract_reasoning || m.end.empty()) return eps();
  std::string end_trimmed = m.end;
  while (!end_trimmed.empty() && std::isspace(static_cast<unsigned char>(end_trimmed.front()))) end_trimmed.erase(0, 1);
  while (!end_trimmed.empty() && std::isspace(static_cast<unsigned char>(end_trimmed.back()))) end_trimmed.pop_back();
  const Parser body = seq({tag("reasoning", until(end_trimmed)), optspace(m.end)});
  return optional(m.start.empty() ? body : seq({optspace(m.start), body}));
}

peg::Parser json_family(ChatFormat format, const GrammarInputs& in, const peg::Parser& tail) {
  const Parser reasoning = reasoning_block(in, family_reasoning(format));
  switch (format) {
    case ChatFormat::Hermes:
    case ChatFormat::Qwen3:
    case ChatFormat::QwQ: {
      const Parser per_call = json_section(JsonLayout::Hermes, in, "<tool_call>\n", "</tool_call>", false);
      return seq({space(), reasoning, content_until("<tool_call>\n"), one_or_more(seq({per_call, space()})), tail});
    }
    case ChatFormat::Llama3:
      return seq({space(), reasoning, content_until("{"), json_section(JsonLayout::Llama3, in, "", "", false), tail});
    case ChatFormat::MistralNemo:
      return seq({space(), reasoning, content_until("[TOOL_CALLS]"),
                  json_section(JsonLayout::MistralNemo, in, "[TOOL_CALLS]", "", true), tail});
    case ChatFormat::Firefunction:
      return seq({space(), reasoning, content_until("functools"),
                  json_section(JsonLayout::Hermes, in, "functools", "", true), tail});
    case ChatFormat::CommandR7B: {
      const Parser response =
          optional(seq({lit("<|START_RESPONSE|>"), tag("content", until("<|END_RESPONSE|>")), lit("<|END_RESPONSE|>")}));
      return seq({space(), reasoning, response,
                  json_section(JsonLayout::CommandR7B, in, "<|START_ACTION|>", "<|END_ACTION|>", true), tail});
    }
    case ChatFormat::DeepSeekR1:
    case ChatFormat::DeepSeekV3_1:
    case ChatFormat::FunctionaryV3_1Llama3_1: {
      const MarkerLayout m = marker_layout(format);
      const std::string trigger = m.section_start.empty() ? m.call_start : m.section_start;
      return seq({space(), reasoning, content_until(trigger), marker_calls(m, in), tail});
    }
    case ChatFormat::MistralSmall:
      return seq({space(), reasoning, content_until("[TOOL_CALLS]"), mistral_small_calls(in), tail});
    default:
      return seq({tag("content", rest()), tail});
  }
}

}  // namespace vtc::chat::grammar
