// Per-family output grammars (chat/peg.h expressions) for one request.
//
// Each family's grammar mirrors the one the llama.cpp reference builds
// for the same template and request (its autoparser's analysis of the
// template, or its dedicated builder for gpt-oss, Kimi K2 and
// Qwen3-Coder), so that parses agree span for span. A grammar ends with
// `tail`: end-of-input for the strict parse, or trailing content for the
// lenient re-parse of an output that does not fit.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "serve/chat/output_parser.h"
#include "serve/chat/peg.h"

namespace vtc::chat {

struct ToolParam {
  std::string name;
  bool is_string = false;  // the schema resolves to a string: raw text, JSON-escaped
  bool required = false;
};

struct ToolSpec {
  std::string name;
  std::vector<ToolParam> params;  // in schema order
};

struct GrammarInputs {
  std::vector<ToolSpec> tools;  // empty: content (and reasoning) only
  bool parallel = true;
  bool extract_reasoning = true;
  // For parses of a prefix while streaming: spans that the end of a
  // complete output could still turn into something else are held back.
  bool streaming_prefix = false;
  // For the lenient re-parse: the markers that close a call or a section
  // of calls are optional, so that a complete call is kept whatever
  // follows it (as it was while streaming).
  bool lenient_sections = false;
};

// The request's OpenAI tools array; malformed entries are skipped.
std::vector<ToolSpec> tool_specs_from_json(std::string_view tools_json);

// The grammar for one family; `tail` closes it (see above).
peg::Parser family_grammar(ChatFormat, const GrammarInputs&, const peg::Parser& tail);

// Text the reference's grammar sees before the output: the part of the
// generation prompt from its think block on (given, or opened when forced
// open), or the fixed header the family's grammar starts with.
std::string family_input_prefix(ChatFormat, bool thinking_forced_open, const std::string& generation_prompt);

// The family's reasoning markers ("" when it has none).
struct ReasoningMarkers {
  std::string start, end;
};
ReasoningMarkers family_reasoning(ChatFormat);

// Shared builders (formats/*.cpp).
namespace grammar {
peg::Parser reasoning_block(const GrammarInputs&, const ReasoningMarkers&);
peg::Parser json_family(ChatFormat, const GrammarInputs&, const peg::Parser& tail);
peg::Parser tagged_family(ChatFormat, const GrammarInputs&, const peg::Parser& tail);
peg::Parser qwen3_coder(ChatFormat, const GrammarInputs&, const peg::Parser& tail);
peg::Parser gpt_oss(const GrammarInputs&, const peg::Parser& tail);
peg::Parser kimi_k2(const GrammarInputs&, const peg::Parser& tail);
peg::Parser magistral(const GrammarInputs&, const peg::Parser& tail);
peg::Parser functionary_v3_2(const GrammarInputs&, const peg::Parser& tail);
// Tag helpers as the mapper reads them.
inline peg::Parser atomic_tag(const char* name, peg::Parser p) { return peg::atomic(peg::tag(name, std::move(p))); }
}  // namespace grammar

}  // namespace vtc::chat
