// vtc-chat-ref parse: the llama.cpp reference's model-output parser (tool
// calls, reasoning) as an oracle for vtc's serve/chat/output_parser.
//
//   vtc-chat-ref parse [--partial] [--dump] TEMPLATE.jinja REQUEST.json OUTPUT.txt [OUTPUT.txt...]
//   vtc-chat-ref parse [--partial] [--dump] --outputs-json TEMPLATE.jinja REQUEST.json OUTPUTS.json
//
// (the second form takes the outputs as one JSON array of strings).
//
// The template is loaded as the server loads an explicit --chat-template
// (common_chat_templates_init with no model; REQUEST may name "bos_token"
// and "eos_token"). The request, an OpenAI-shaped object, is applied with
// common_chat_templates_apply exactly as the server does for
// /v1/chat/completions: messages, tools, tool_choice, parallel_tool_calls
// (default true), enable_thinking (default true) and reasoning_format
// (default "auto"; "none" keeps reasoning inline in content). That yields
// the reference's format, generation prompt and PEG parser for this
// request; each OUTPUT (the model's generated text, exactly the file's
// bytes) is then parsed with common_chat_parse, as a partial (still
// streaming) output with --partial.
//
// Output: one JSON object per OUTPUT, one per line, on stdout:
//   {"format", "generation_prompt", "content", "reasoning_content",
//    "tool_calls": [{"name", "arguments", "id"}]}
// or, where the reference rejects the output (it throws: the server then
// answers with an error), {"format", "generation_prompt", "error": MESSAGE}.
// With --partial, "parse_failed" says whether the grammar itself failed on
// the prefix (common_chat_parse then returns what the failed parse left,
// usually nothing, instead of throwing).
// --dump also writes the generated parser's grammar to stderr. Exit 0
// when every output was handled; 1 when the template or request could
// not be applied (message on stderr); 2 for bad arguments or unreadable files.
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "chat.h"
#include "json.h"
#include "common.h"

namespace {

using chat_ref::read_file;

int usage() {
  std::fprintf(stderr,
               "usage: vtc-chat-ref parse [--partial] [--dump] TEMPLATE.jinja REQUEST.json OUTPUT.txt "
               "[OUTPUT.txt...]\n");
  return 2;
}

std::string string_field(const common_json& request, const char* key, const std::string& fallback) {
  if (request.contains(key) && request.at(key).is_string()) return request.at(key).get<std::string>();
  return fallback;
}

// The request's fields as the server's oaicompat_chat_params_parse maps them.
common_chat_templates_inputs inputs_from_request(const common_json& request) {
  common_chat_templates_inputs inputs;
  inputs.messages = common_chat_msgs_parse_oaicompat(request.value("messages", common_json::array()));
  if (request.contains("tools") && request.at("tools").is_array() && !request.at("tools").empty()) {
    inputs.tools = common_chat_tools_parse_oaicompat(request.at("tools"));
  }
  inputs.tool_choice = common_chat_tool_choice_parse_oaicompat(string_field(request, "tool_choice", "auto"));
  inputs.parallel_tool_calls = request.value("parallel_tool_calls", true);
  inputs.enable_thinking = request.value("enable_thinking", true);
  inputs.reasoning_format = common_reasoning_format_from_name(string_field(request, "reasoning_format", "auto"));
  inputs.add_generation_prompt = request.value("add_generation_prompt", true);
  inputs.use_jinja = true;
  return inputs;
}

common_json message_to_json(const common_chat_msg& msg) {
  common_json calls = common_json::array();
  for (const auto& call : msg.tool_calls) {
    calls.push_back({{"name", call.name}, {"arguments", call.arguments}, {"id", call.id}});
  }
  return {{"content", msg.content}, {"reasoning_content", msg.reasoning_content}, {"tool_calls", calls}};
}

}  // namespace

int cmd_parse(int argc, char** argv) {
  bool partial = false;
  bool dump = false;
  bool outputs_json = false;
  std::vector<const char*> paths;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--partial") == 0) {
      partial = true;
    } else if (std::strcmp(argv[i], "--dump") == 0) {
      dump = true;
    } else if (std::strcmp(argv[i], "--outputs-json") == 0) {
      outputs_json = true;
    } else {
      paths.push_back(argv[i]);
    }
  }
  if (paths.size() < 3) return usage();

  std::string template_text, request_text;
  if (!read_file(paths[0], template_text)) {
    std::fprintf(stderr, "vtc-chat-ref parse: cannot read %s\n", paths[0]);
    return 2;
  }
  if (!read_file(paths[1], request_text)) {
    std::fprintf(stderr, "vtc-chat-ref parse: cannot read %s\n", paths[1]);
    return 2;
  }
  std::vector<std::string> outputs(paths.size() - 2);
  for (size_t i = 2; i < paths.size(); ++i) {
    if (!read_file(paths[i], outputs[i - 2])) {
      std::fprintf(stderr, "vtc-chat-ref parse: cannot read %s\n", paths[i]);
      return 2;
    }
  }
  if (outputs_json) {
    if (outputs.size() != 1) return usage();
    try {
      const common_json list = common_json::parse(outputs[0]);
      outputs.clear();
      for (const auto& item : list) outputs.push_back(item.get<std::string>());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "vtc-chat-ref parse: %s is not a JSON array of strings: %s\n", paths[2], e.what());
      return 2;
    }
  }

  common_chat_params chat_params;
  common_peg_arena arena;
  try {
    const common_json request = common_json::parse(request_text);
    auto templates = common_chat_templates_init(nullptr, template_text, string_field(request, "bos_token", ""),
                                                string_field(request, "eos_token", ""));
    chat_params = common_chat_templates_apply(templates.get(), inputs_from_request(request));
    arena.load(chat_params.parser);
    if (dump && !arena.empty()) std::fprintf(stderr, "%s\n", arena.dump(arena.root()).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vtc-chat-ref parse: %s\n", e.what());
    return 1;
  }

  common_chat_parser_params parser_params(chat_params);
  const common_json request = common_json::parse(request_text);
  parser_params.reasoning_format = common_reasoning_format_from_name(string_field(request, "reasoning_format", "auto"));
  parser_params.parser = arena;
  parser_params.parse_tool_calls = true;

  for (const auto& output : outputs) {
    common_json result = {{"format", common_chat_format_name(chat_params.format)},
                          {"generation_prompt", chat_params.generation_prompt}};
    if (partial) {
      // The same parse common_chat_peg_parse runs, to see whether it failed.
      const std::string input = chat_params.generation_prompt + output;
      common_peg_parse_context ctx(input, COMMON_PEG_PARSE_FLAG_LENIENT);
      result["parse_failed"] = !arena.empty() && arena.parse(ctx).fail();
    }
    try {
      const common_chat_msg msg = common_chat_parse(output, partial, parser_params);
      const common_json parsed = message_to_json(msg);
      for (const char* key : {"content", "reasoning_content", "tool_calls"}) result[key] = parsed.at(key);
    } catch (const std::exception& e) {
      result["error"] = e.what();
    }
    std::printf("%s\n", result.dump().c_str());
  }
  return 0;
}
