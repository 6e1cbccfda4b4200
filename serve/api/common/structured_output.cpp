#include "serve/api/common/structured_output.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>


#include "serve/api/common/fields.h"
#include "serve/api/common/json_text.h"
#include "serve/chat/generic_tools.h"
#include "serve/chat/output_parser.h"
#include "serve/constraints/grammar/grammar.h"
#include "serve/constraints/grammar/json_schema.h"
#include "serve/constraints/grammar/regex.h"

namespace vtc::serve {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

using fields::bad;

// A GBNF string literal for `text`.
std::string literal(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else out += c;
  }
  return out + "\"";
}

// The family's syntax for calls: raw text around the name and the
// arguments, between calls and around the list (the closing text may hold
// a rule: Mistral's call ids), and the text that starts a call (`trigger`:
// with tool_choice auto the grammar applies from there on).
struct CallSyntax {
  std::string list_open, call_open, mid, close_expr, separator, list_close, trigger;
};

std::optional<CallSyntax> call_syntax(chat::ChatFormat f) {
  using F = chat::ChatFormat;
  switch (f) {
    case F::Hermes:
    case F::Qwen3:
    case F::QwQ:
      return CallSyntax{"", "<tool_call>\n{\"name\": \"", "\", \"arguments\": ", literal("}\n</tool_call>"), "\n", "",
                        "<tool_call>"};
    case F::Llama3:
      return CallSyntax{"", "{\"name\": \"", "\", \"parameters\": ", literal("}"), "; ", "", "{\"name\": \""};
    case F::MistralNemo:
      return CallSyntax{"[TOOL_CALLS][", "{\"name\": \"", "\", \"arguments\": ",
                        literal(", \"id\": \"") + " [a-zA-Z0-9]{9} " + literal("\"}"), ", ", "]", "[TOOL_CALLS]"};
    default:
      return std::nullopt;
  }
}

bool has_think_block(chat::ChatFormat f) { return f == chat::ChatFormat::Qwen3 || f == chat::ChatFormat::QwQ; }

bool prompt_closed_thinking(std::string_view prompt) {
  while (!prompt.empty() && (prompt.back() == '\n' || prompt.back() == ' ')) prompt.remove_suffix(1);
  return prompt.size() >= 8 && prompt.substr(prompt.size() - 8) == "</think>";
}

// tool_choice "required" / a named function: the output is one call (or,
// with parallel_tool_calls, several) of the allowed tools. With "auto"
// (lazy), the grammar covers what follows the family's trigger text.
GrammarRequest tool_call_grammar(const CompletionRequest& req, bool lazy) {
  const chat::ChatFormat format = chat::detect_chat_format(req.template_source);
  if (format == chat::ChatFormat::Generic) {
    // The whole output is the generic format's JSON object, from its first
    // byte (no trigger): a call, or with "auto" a call or a response.
    const ordered_json schema = chat::generic_output_schema(ordered_json::parse(req.tools_json),
                                                            lazy ? ToolChoice::Auto : req.tool_choice, req.tool_function,
                                                            req.parallel_tool_calls);
    try {
      return {grammar::json_schema_to_gbnf(schema), ""};
    } catch (const grammar::GrammarError& e) {
      bad("tools", fmt::format("'tools': a tool's parameters cannot be held to a grammar: {}", e.what()));
    }
  }
  const auto syntax = call_syntax(format);
  if (!syntax) {
    if (lazy) return {};
    bad("tool_choice", fmt::format("'tool_choice': \"{}\" needs a tool-call grammar, which vtc has for the Hermes/Qwen, "
                                   "Llama 3 and Mistral Nemo template families, not for '{}'",
                                   req.tool_choice == ToolChoice::Function ? req.tool_function
                                                                           : std::string(tool_choice_name(req.tool_choice)),
                                   chat::chat_format_name(format)));
  }
  grammar::SchemaGrammarBuilder b;
  std::vector<std::string> calls, bodies;
  const ordered_json tools = ordered_json::parse(req.tools_json);
  for (size_t k = 0; k < tools.size(); ++k) {
    const ordered_json& fn = tools[k]["function"];
    const std::string name = fn["name"].get<std::string>();
    if (req.tool_choice == ToolChoice::Function && name != req.tool_function) continue;
    const ordered_json params = fn.contains("parameters") ? fn["parameters"] : ordered_json{{"type", "object"}};
    std::string args;
    try {
      args = b.add_schema(fmt::format("tool-{}-args", k), params);
    } catch (const grammar::GrammarError& e) {
      if (lazy) return {};  // auto: the call stays unconstrained; the parser still reads it
      bad(fmt::format("tools[{}].function.parameters", k), e.what());
    }
    b.add_rule(fmt::format("tool-{}-body", k), fmt::format("{} {} {} {}", literal(name), literal(syntax->mid), args, syntax->close_expr));
    b.add_rule(fmt::format("tool-{}-call", k), fmt::format("{} tool-{}-body", literal(syntax->call_open), k));
    calls.push_back(fmt::format("tool-{}-call", k));
    bodies.push_back(fmt::format("tool-{}-body", k));
  }
  b.add_rule("tool-call", fmt::format("({})", fmt::join(calls, " | ")));
  const std::string more = req.parallel_tool_calls ? fmt::format(" ({} tool-call)*", literal(syntax->separator)) : "";
  GrammarRequest out;
  if (lazy) {
    // From the trigger on: the rest of the first call's opening, the call,
    // any further calls, the list's end.
    const std::string opening = syntax->list_open + syntax->call_open;
    b.add_rule("root", fmt::format("{} ({}){} {}", literal(opening.substr(syntax->trigger.size())), fmt::join(bodies, " | "),
                                   more, literal(syntax->list_close)));
    out.trigger = syntax->trigger;
    out.gbnf = b.gbnf();
    return out;
  }
  std::string root = fmt::format("{} tool-call{} {}", literal(syntax->list_open), more, literal(syntax->list_close));
  if (has_think_block(format) && !prompt_closed_thinking(req.prompt_text)) {
    // Reasoning may come first, or is already open after the prompt; a
    // prompt that closed an empty think block (enable_thinking false) has
    // none to come.
    b.add_rule("think-body", "([^<] | \"<\" [^/])*");
    const bool open = chat::generation_prompt_opens_thinking(req.prompt_text, format);
    root = (open ? "think-body \"</think>\" [ \\n]* " : "(\"<think>\" think-body \"</think>\" [ \\n]*)? ") + root;
  }
  b.add_rule("root", root);
  out.gbnf = b.gbnf();
  return out;
}

std::string schema_grammar(const ordered_json& schema, const std::string& field) {
  if (!schema.is_object() && !schema.is_boolean()) bad(field, fmt::format("'{}' must be a JSON schema object", field));
  try {
    return grammar::json_schema_to_gbnf(schema);
  } catch (const grammar::GrammarError& e) {
    bad(field, fmt::format("'{}': {}", field, e.what()));
  }
}

std::optional<std::string> response_format_grammar(const ordered_json& body) {
  auto it = body.find("response_format");
  if (it == body.end() || it->is_null()) return std::nullopt;
  const ordered_json& rf = *it;
  if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
    bad("response_format", "'response_format' must be {\"type\": \"text\" | \"json_object\" | \"json_schema\", ...}");
  const std::string type = rf["type"].get<std::string>();
  if (type == "text") return std::nullopt;
  if (type == "json_object") return grammar::json_object_gbnf();
  if (type != "json_schema")
    bad("response_format", fmt::format("'response_format.type' must be text, json_object or json_schema, got '{}'", type));
  if (!rf.contains("json_schema") || !rf["json_schema"].is_object())
    bad("response_format", "'response_format.json_schema' must be {\"name\": ..., \"schema\": {...}}");
  const ordered_json& js = rf["json_schema"];
  return schema_grammar(js.contains("schema") ? js["schema"] : ordered_json::object(), "response_format.json_schema.schema");
}

}  // namespace

std::optional<GrammarRequest> requested_grammar(const ordered_json& body, const CompletionRequest& req) {
  std::vector<std::pair<std::string, std::string>> found;  // field, grammar
  if (auto g = response_format_grammar(body)) found.emplace_back("response_format", *g);
  if (auto it = body.find("json_schema"); it != body.end() && !it->is_null())
    found.emplace_back("json_schema", schema_grammar(*it, "json_schema"));
  if (auto it = body.find("grammar"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) bad("grammar", "'grammar' must be GBNF text");
    found.emplace_back("grammar", it->get<std::string>());
  }
  if (auto it = body.find("regex"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) bad("regex", "'regex' must be a string");
    try {
      found.emplace_back("regex", grammar::regex_to_gbnf(it->get<std::string>()));
    } catch (const grammar::GrammarError& e) {
      bad("regex", fmt::format("'regex': {}", e.what()));
    }
  }
  if (req.chat && (req.tool_choice == ToolChoice::Required || req.tool_choice == ToolChoice::Function))
    found.emplace_back("tool_choice", tool_call_grammar(req, false).gbnf);
  if (found.size() > 1)
    bad(found[1].first, fmt::format("'{}' and '{}' both constrain the output; give one", found[0].first, found[1].first));
  if (!found.empty()) return GrammarRequest{found[0].second, ""};
  // tool_choice auto: a call, once started, is held to its tool's schema.
  if (req.chat && req.tool_choice == ToolChoice::Auto && req.has_tools)
    if (GrammarRequest lazy = tool_call_grammar(req, true); !lazy.gbnf.empty()) return lazy;
  return std::nullopt;
}

}  // namespace vtc::serve
