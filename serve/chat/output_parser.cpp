// Family detection, the parse with its fallbacks, tool call ids, and the
// streaming parser (see output_parser.h for the contract).
#include "serve/chat/output_parser.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <random>
#include <utility>

#include <nlohmann/json.hpp>

#include "serve/chat/generic_tools.h"
#include "serve/chat/grammar.h"
#include "serve/chat/peg_mapper.h"

namespace vtc::chat {
namespace {

bool has(std::string_view text, std::string_view marker) { return text.find(marker) != std::string_view::npos; }

const std::string kDeepSeekCallsBegin = "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>";
const std::string kDeepSeekSep = "'<\xef\xbd\x9ctool\xe2\x96\x81sep\xef\xbd\x9c>'";

bool is_reasoning_family(ChatFormat f) { return !family_reasoning(f).end.empty(); }

// Whether a parameter's values are strings (raw text in tagged formats):
// the reference's test, without $ref resolution (a $ref is not a string).
bool schema_resolves_to_string(const nlohmann::ordered_json& s) {
  if (!s.is_object() || s.contains("$ref")) return false;
  if (s.contains("type")) {
    const auto& type = s.at("type");
    if (type.is_string() && type == "string") return true;
    if (type.is_array()) {
      for (const auto& t : type) {
        if (t == "string") return true;
      }
    }
  }
  for (const char* key : {"oneOf", "anyOf"}) {
    if (s.contains(key) && s.at(key).is_array()) {
      for (const auto& alt : s.at(key)) {
        if (schema_resolves_to_string(alt)) return true;
      }
    }
  }
  if (s.contains("allOf") && s.at("allOf").is_array() && !s.at("allOf").empty()) {
    bool all = true;
    for (const auto& part : s.at("allOf")) all = all && schema_resolves_to_string(part);
    if (all) return true;
  }
  if (s.contains("const") && s.at("const").is_string()) return true;
  if (s.contains("enum") && s.at("enum").is_array()) {
    for (const auto& v : s.at("enum")) {
      if (v.is_string()) return true;
    }
  }
  if (s.contains("pattern") || s.contains("minLength") || s.contains("maxLength")) return true;
  if (s.contains("format") && s.at("format").is_string()) {
    static const char* const kStringFormats[] = {"date", "time", "date-time", "uri", "email", "hostname", "ipv4", "ipv6", "uuid"};
    for (const char* f : kStringFormats) {
      if (s.at("format") == f) return true;
    }
  }
  return false;
}

}  // namespace

// Templates the reference gives a dedicated parser that vtc does not have
// (Muse Glimmer, Kimi K3, Cohere2 MoE, LFM2, GigaChat 3, MiniMax-M3,
// DeepSeek V3.2/V4, Gemma 4, MiniCPM5): their output passes through as
// content rather than being misread by a look-alike family.
bool unsupported_dedicated(std::string_view t) {
  return (has(t, "<atem:function_calls>") && has(t, "<|eom|>")) ||
         (has(t, "<|open|>") && has(t, "<|close|>") && has(t, "<|end_of_msg|>")) ||
         (has(t, "<|START_TEXT|>") && has(t, "<|START_ACTION|>")) || has(t, "<|tool_list_start|>") ||
         (has(t, "List of tools: [") && !has(t, "<|tool_list_start|>")) ||
         (has(t, "<|role_sep|>") && has(t, "<|message_sep|>") && !has(t, "<|function_call|>")) ||
         (has(t, "]<]minimax[>[") && has(t, "<tool_call>") && has(t, "<invoke name=")) ||
         (has(t, "dsml_token") && has(t, "DSML") && (has(t, "function_calls") || has(t, "tool_calls"))) ||
         has(t, "'<|tool_call>call:'") ||
         (has(t, "Tool usage guidelines:") && has(t, "<function name=\"") && has(t, "<param name=\""));
}

ChatFormat detect_chat_format(std::string_view t) {
  if (t == kGenericToolsSource) return ChatFormat::Generic;
  // Dedicated formats first, in the order the reference checks them.
  if (has(t, "[SYSTEM_PROMPT]") && has(t, "[TOOL_CALLS]") && has(t, "[ARGS]") && !has(t, "[CALL_ID]")) {
    return ChatFormat::Magistral;
  }
  if (has(t, "<|channel|>")) return ChatFormat::GptOss;
  if (has(t, "<atem:function_calls>") && has(t, "<|eom|>")) return ChatFormat::ContentOnly;
  if (has(t, ">>>all") && has(t, ">>>${recipient}")) return ChatFormat::FunctionaryV3_2;
  if (has(t, "<|tool_calls_section_begin|>") && has(t, "<|tool_call_begin|>")) return ChatFormat::KimiK2;
  if (unsupported_dedicated(t)) return ChatFormat::ContentOnly;
  if (has(t, "<tool_call>") && has(t, "<function=") && has(t, "<parameter=")) {
    return has(t, "<think>") ? ChatFormat::Qwen35 : ChatFormat::Qwen3Coder;
  }
  if (has(t, "[TOOL_CALLS]")) {
    if (has(t, "[CALL_ID]")) return ChatFormat::MistralSmall;
    if (!has(t, "[ARGS]")) return ChatFormat::MistralNemo;
    return ChatFormat::ContentOnly;
  }
  if (has(t, kDeepSeekCallsBegin)) {
    if (has(t, "tool['function']['name'] + " + kDeepSeekSep)) return ChatFormat::DeepSeekV3_1;
    // The R1 distill of Llama writes raw (not tojson) arguments; the
    // reference finds no tool calls in it.
    if (has(t, "| tojson")) return ChatFormat::DeepSeekR1;
    return ChatFormat::ReasoningOnly;
  }
  if (has(t, "<|START_ACTION|>") && has(t, "<|START_THINKING|>")) return ChatFormat::CommandR7B;
  if (has(t, "<arg_key>") && has(t, "<|assistant|>")) {
    return has(t, "</arg_key><arg_value>") ? ChatFormat::Glm47 : ChatFormat::Glm45;
  }
  if (has(t, "functools")) return ChatFormat::Firefunction;
  if (has(t, "<function=") && has(t, "<|start_header_id|>") && !has(t, ">>>all")) return ChatFormat::FunctionaryV3_1Llama3_1;
  if (has(t, "<tool_call>")) {
    if (has(t, "'\\n</think>\\n\\n'")) return ChatFormat::Qwen3;
    if (has(t, "<think>")) return ChatFormat::QwQ;
    return ChatFormat::Hermes;
  }
  if (has(t, "<|start_header_id|>") && has(t, "<|python_tag|>") && !has(t, ">>>all")) return ChatFormat::Llama3;
  if (has(t, "<|start_header_id|>") && has(t, "\"parameters\"") && !has(t, ">>>all")) return ChatFormat::Llama3;
  if (has(t, "<think>") && (has(t, "</think>"))) return ChatFormat::ReasoningOnly;
  return ChatFormat::ContentOnly;
}

std::string_view chat_format_name(ChatFormat f) {
  switch (f) {
    case ChatFormat::ContentOnly: return "content-only";
    case ChatFormat::Hermes: return "hermes";
    case ChatFormat::Qwen3: return "qwen3";
    case ChatFormat::QwQ: return "qwq";
    case ChatFormat::Qwen3Coder: return "qwen3-coder";
    case ChatFormat::Qwen35: return "qwen3.5";
    case ChatFormat::Llama3: return "llama3";
    case ChatFormat::MistralNemo: return "mistral-nemo";
    case ChatFormat::MistralSmall: return "mistral-small-3.2";
    case ChatFormat::DeepSeekR1: return "deepseek-r1";
    case ChatFormat::DeepSeekV3_1: return "deepseek-v3.1";
    case ChatFormat::ReasoningOnly: return "reasoning-only";
    case ChatFormat::CommandR7B: return "command-r7b";
    case ChatFormat::GptOss: return "gpt-oss";
    case ChatFormat::KimiK2: return "kimi-k2";
    case ChatFormat::Glm45: return "glm-4.5";
    case ChatFormat::Glm47: return "glm-4.7";
    case ChatFormat::FunctionaryV3_1Llama3_1: return "functionary-v3.1-llama-3.1";
    case ChatFormat::Firefunction: return "firefunction-v2";
    case ChatFormat::Magistral: return "magistral";
    case ChatFormat::FunctionaryV3_2: return "functionary-v3.2";
    case ChatFormat::Generic: return "generic";
  }
  return "unknown";
}

ReasoningMarkers family_reasoning(ChatFormat f) {
  switch (f) {
    case ChatFormat::Qwen3: return {"<think>\n", "\n</think>\n\n"};
    case ChatFormat::Glm45: return {"<think>", "</think>\n"};
    case ChatFormat::QwQ:
    case ChatFormat::Qwen35:
    case ChatFormat::DeepSeekR1:
    case ChatFormat::DeepSeekV3_1:
    case ChatFormat::ReasoningOnly:
    case ChatFormat::Glm47:
    case ChatFormat::KimiK2: return {"<think>", "</think>"};
    case ChatFormat::CommandR7B: return {"<|START_THINKING|>", "<|END_THINKING|>"};
    case ChatFormat::Magistral: return {"[THINK]", "[/THINK]"};
    default: return {};
  }
}

std::string family_input_prefix(ChatFormat f, bool thinking_forced_open, const std::string& generation_prompt) {
  if (f == ChatFormat::GptOss) return generation_prompt.empty() ? "<|start|>assistant" : generation_prompt;
  if (!generation_prompt.empty()) {
    // The reference's grammar consumes the generation prompt up to the
    // family's reasoning start tag and parses the rest with the output.
    std::string start = family_reasoning(f).start;
    while (!start.empty() && std::isspace(static_cast<unsigned char>(start.back()))) start.pop_back();
    if (start.empty()) return "";
    const size_t at = generation_prompt.find(start);
    return at == std::string::npos ? "" : generation_prompt.substr(at);
  }
  if (!thinking_forced_open) return "";
  switch (f) {
    // What the templates' generation prompts end with.
    case ChatFormat::Qwen3:
    case ChatFormat::QwQ:
    case ChatFormat::Qwen35:
    case ChatFormat::DeepSeekR1:
    case ChatFormat::ReasoningOnly: return "<think>\n";
    default: return family_reasoning(f).start;
  }
}

std::vector<ToolSpec> tool_specs_from_json(std::string_view tools_json) {
  std::vector<ToolSpec> specs;
  const auto tools = nlohmann::ordered_json::parse(tools_json, nullptr, /*allow_exceptions=*/false);
  if (!tools.is_array()) return specs;
  for (const auto& tool : tools) {
    if (!tool.is_object() || !tool.contains("type") || tool.at("type") != "function" || !tool.contains("function")) continue;
    const auto& fn = tool.at("function");
    if (!fn.is_object() || !fn.contains("name") || !fn.at("name").is_string()) continue;
    ToolSpec spec;
    spec.name = fn.at("name").get<std::string>();
    const auto params = fn.contains("parameters") ? fn.at("parameters") : nlohmann::ordered_json::object();
    if (params.is_object() && params.contains("properties") && params.at("properties").is_object()) {
      std::vector<std::string> required;
      if (params.contains("required") && params.at("required").is_array()) {
        for (const auto& r : params.at("required")) {
          if (r.is_string()) required.push_back(r.get<std::string>());
        }
      }
      for (const auto& [name, schema] : params.at("properties").items()) {
        ToolParam p;
        p.name = name;
        p.required = std::find(required.begin(), required.end(), name) != required.end();
        p.is_string = schema_resolves_to_string(schema);
        spec.params.push_back(std::move(p));
      }
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

peg::Parser family_grammar(ChatFormat f, const GrammarInputs& in, const peg::Parser& tail) {
  using namespace peg;
  GrammarInputs inputs = in;
  switch (f) {
    case ChatFormat::GptOss: return grammar::gpt_oss(inputs, tail);
    case ChatFormat::KimiK2: return grammar::kimi_k2(inputs, tail);
    case ChatFormat::Magistral: return grammar::magistral(inputs, tail);
    case ChatFormat::FunctionaryV3_2: return grammar::functionary_v3_2(inputs, tail);
    case ChatFormat::Qwen3Coder:
    case ChatFormat::Qwen35: return grammar::qwen3_coder(f, inputs, tail);
    case ChatFormat::Glm45:
    case ChatFormat::Glm47: return grammar::tagged_family(f, inputs, tail);
    case ChatFormat::ContentOnly: return seq({tag("content", rest()), tail});
    case ChatFormat::ReasoningOnly:
      return seq({space(), grammar::reasoning_block(inputs, family_reasoning(f)), tag("content", rest()), tail});
    default: break;
  }
  if (inputs.tools.empty() && f == ChatFormat::CommandR7B) {
    // Its content is always wrapped in a response block.
    return seq({space(), grammar::reasoning_block(inputs, family_reasoning(f)), lit("<|START_RESPONSE|>"),
                tag("content", until("<|END_RESPONSE|>")), lit("<|END_RESPONSE|>"), tail});
  }
  if (inputs.tools.empty()) {
    // The reference's content parser: no leading-space skip unless the
    // family has reasoning.
    if (!is_reasoning_family(f)) return seq({tag("content", rest()), tail});
    return seq({space(), grammar::reasoning_block(inputs, family_reasoning(f)), tag("content", rest()), tail});
  }
  return grammar::json_family(f, inputs, tail);
}

namespace {

// A request's compiled grammars and how to feed them.
struct Compiled {
  ChatFormat format;
  std::string input_prefix;
  peg::Parser strict, lenient, fallback;
};

Compiled compile(const ParseOptions& options, bool streaming_prefix = false) {
  GrammarInputs in;
  in.streaming_prefix = streaming_prefix;
  if (options.parse_tool_calls) in.tools = tool_specs_from_json(options.tools_json);
  in.parallel = options.parallel_tool_calls;
  in.extract_reasoning = options.extract_reasoning;
  Compiled c;
  c.format = options.format;
  c.input_prefix = family_input_prefix(options.format, options.thinking_forced_open, options.generation_prompt);
  // The generic format is one JSON object, read by parse_generic; its PEG
  // grammars are never used.
  const ChatFormat grammar_format = options.format == ChatFormat::Generic ? ChatFormat::ContentOnly : options.format;
  c.strict = family_grammar(grammar_format, in, peg::end());
  GrammarInputs lenient = in;
  lenient.lenient_sections = true;
  c.lenient = family_grammar(grammar_format, lenient, peg::tag("content", peg::rest()));
  c.fallback = peg::seq({peg::space(), grammar::reasoning_block(in, family_reasoning(options.format)),
                         peg::tag("content", peg::rest())});
  return c;
}

bool try_parse(const peg::Parser& grammar, std::string_view input, MappedMessage& out) {
  peg::Context ctx(input);
  const peg::Result r = ctx.parse(grammar);
  if (r.fail()) return false;
  out = map_ast(ctx, r);
  return true;
}

// Strict, then trailing text as content, then reasoning + plain content.
// The generic format: its JSON object, whole; a prefix still being
// generated shows nothing yet (it is JSON until it ends).
MappedMessage parse_compiled(const Compiled& c, std::string_view text, bool prefix = false) {
  if (c.format == ChatFormat::Generic) {
    MappedMessage m;
    if (prefix) return m;
    m.message = parse_generic(text);
    m.call_closed.assign(m.message.tool_calls.size(), true);
    return m;
  }
  const std::string input = c.input_prefix + std::string(text);
  MappedMessage m;
  if (try_parse(c.strict, input, m) || try_parse(c.lenient, input, m)) return m;
  // gpt-oss's header is the grammar's, not text to show.
  const std::string fallback_input = c.format == ChatFormat::GptOss ? std::string(text) : input;
  if (try_parse(c.fallback, fallback_input, m)) return m;
  m = MappedMessage{};
  m.message.content = std::string(text);
  return m;
}

class IdSource {
 public:
  explicit IdSource(unsigned long long seed)
      : rng_(seed != 0 ? seed : static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count())) {}
  std::string next() {
    static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    std::string id = "call_";
    for (int i = 0; i < 24; ++i) id += kAlphabet[rng_() % (sizeof(kAlphabet) - 1)];
    return id;
  }

 private:
  std::mt19937_64 rng_;
};

void assign_ids(std::vector<ToolCall>& calls, IdSource& ids) {
  for (auto& call : calls) {
    if (call.id.empty()) call.id = ids.next();
  }
}

bool extends(const std::string& longer, const std::string& prefix) {
  return longer.size() >= prefix.size() && longer.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

ParsedMessage parse_output(std::string_view text, const ParseOptions& options, bool partial) {
  (void)partial;  // a prefix parses the same way: the grammars are lenient at the end of input
  const Compiled compiled = compile(options);
  MappedMessage m = parse_compiled(compiled, text);
  IdSource ids(options.id_seed);
  assign_ids(m.message.tool_calls, ids);
  return std::move(m.message);
}

struct StreamingParser::State {
  explicit State(ParseOptions o)
      : options(std::move(o)), compiled(compile(options)), prefix_compiled(compile(options, true)), ids(options.id_seed) {}
  ParseOptions options;
  Compiled compiled, prefix_compiled;
  IdSource ids;
  std::string text;
  ParsedMessage emitted;
  bool finished = false;

  // Deltas from what was emitted to `now`; tool calls only once complete
  // (or, at the end, as they are).
  std::vector<MessageDelta> advance(MappedMessage now, bool final) {
    std::vector<MessageDelta> deltas;
    if (extends(now.message.reasoning_content, emitted.reasoning_content) &&
        now.message.reasoning_content.size() > emitted.reasoning_content.size()) {
      MessageDelta d;
      d.reasoning_content = now.message.reasoning_content.substr(emitted.reasoning_content.size());
      emitted.reasoning_content = now.message.reasoning_content;
      deltas.push_back(std::move(d));
    }
    if (extends(now.message.content, emitted.content) && now.message.content.size() > emitted.content.size()) {
      MessageDelta d;
      d.content = now.message.content.substr(emitted.content.size());
      emitted.content = now.message.content;
      deltas.push_back(std::move(d));
    }
    for (size_t i = emitted.tool_calls.size(); i < now.message.tool_calls.size(); ++i) {
      if (!final && !now.call_closed[i]) break;
      ToolCall call = now.message.tool_calls[i];
      if (call.id.empty()) call.id = ids.next();
      MessageDelta d;
      d.tool_index = static_cast<int>(i);
      d.tool_id = call.id;
      d.tool_name = call.name;
      d.tool_arguments = call.arguments;
      emitted.tool_calls.push_back(std::move(call));
      deltas.push_back(std::move(d));
    }
    return deltas;
  }
};

StreamingParser::StreamingParser(ParseOptions options) : state_(std::make_unique<State>(std::move(options))) {}
StreamingParser::~StreamingParser() = default;
StreamingParser::StreamingParser(StreamingParser&&) noexcept = default;
StreamingParser& StreamingParser::operator=(StreamingParser&&) noexcept = default;

std::vector<MessageDelta> StreamingParser::feed(std::string_view new_text) {
  if (state_->finished) return {};
  state_->text.append(new_text);
  return state_->advance(parse_compiled(state_->prefix_compiled, state_->text, /*prefix=*/true), false);
}

std::vector<MessageDelta> StreamingParser::finish() {
  if (state_->finished) return {};
  state_->finished = true;
  return state_->advance(parse_compiled(state_->compiled, state_->text), true);
}

const ParsedMessage& StreamingParser::message() const { return state_->emitted; }

std::string generation_prompt_suffix(std::string_view with_generation_prompt, std::string_view without) {
  size_t common = 0;
  while (common < with_generation_prompt.size() && common < without.size() &&
         with_generation_prompt[common] == without[common]) {
    ++common;
  }
  return std::string(with_generation_prompt.substr(common));
}

bool generation_prompt_opens_thinking(std::string_view prompt, ChatFormat format) {
  std::string start = family_reasoning(format).start;
  while (!start.empty() && std::isspace(static_cast<unsigned char>(start.back()))) start.pop_back();
  if (start.empty()) return false;
  while (!prompt.empty() && std::isspace(static_cast<unsigned char>(prompt.back()))) prompt.remove_suffix(1);
  return prompt.size() >= start.size() && prompt.substr(prompt.size() - start.size()) == start;
}

}  // namespace vtc::chat
