// `vtc apply-template MODEL REQUEST.json`: prints the prompt an OpenAI chat
// request renders to, exactly as `vtc serve` would feed it to the model
// (serve/chat/chat_prompt.h), without loading the weights. REQUEST.json is a
// chat completions body ("-" reads stdin); its messages, tools,
// chat_template_kwargs, add_generation_prompt and reasoning_effort are used.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "frontends/gguf/tokenizer/tokenizer.h"
#include "runtime/compile/artifact.h"
#include "serve/api/common/api_error.h"
#include "serve/chat/chat_prompt.h"
#include "support/error.h"
#include "tools/vtc/commands.h"

namespace vtc::cli {
namespace {

struct ApplyTemplateOptions {
  std::string model, request, chat_template, chat_template_file;
  bool tokens = false;
  int64_t now = -1;
};

nlohmann::ordered_json read_request(const std::string& path) {
  std::stringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(fmt::format("apply-template: cannot read {}", path));
    ss << in.rdbuf();
  }
  auto body = nlohmann::ordered_json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object())
    throw Error(fmt::format("apply-template: {} is not a JSON object (an OpenAI chat request body)", path));
  return body;
}

int apply_template_main(const ApplyTemplateOptions& o) {
  const gguf::GgufFile file =
      is_artifact(o.model) ? load_artifact(o.model).file : gguf::GgufFile::open(o.model);
  const Tokenizer tok = Tokenizer::from_gguf(file);
  auto tmpl = serve::PromptTemplate::load(file, tok, o.chat_template, o.chat_template_file, o.now);
  const nlohmann::ordered_json body = read_request(o.request);
  try {
    serve::ChatInputs in = serve::chat_inputs_from_request(body);
    const std::string prompt = tmpl->render(in);
    if (!o.tokens) {
      std::fwrite(prompt.data(), 1, prompt.size(), stdout);
      return 0;
    }
    const auto ids = tmpl->tokenize(prompt);
    for (size_t i = 0; i < ids.size(); ++i) fmt::print("{}{}", i ? "," : "", ids[i]);
    fmt::print("\n");
    return 0;
  } catch (const serve::ApiError& e) {
    throw Error(fmt::format("apply-template: {}{}", e.param.empty() ? "" : "'" + e.param + "': ", e.what()));
  }
}

}  // namespace

Runner add_apply_template(CLI::App& app) {
  auto* cmd = app.add_subcommand("apply-template",
                                 "Print the prompt an OpenAI chat request renders to with the model's chat template");
  auto o = std::make_shared<ApplyTemplateOptions>();
  cmd->add_option("model", o->model, "Model: GGUF file or .vtc artifact (its metadata only is read)")
      ->required()->check(CLI::ExistingFile);
  cmd->add_option("request", o->request, "OpenAI chat completions body (JSON file, - for stdin)")->required();
  cmd->add_option("--chat-template", o->chat_template, "A built-in template name or Jinja text (as vtc serve)");
  cmd->add_option("--chat-template-file", o->chat_template_file, "A Jinja chat template file (as vtc serve)")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--tokens", o->tokens, "Print the prompt's token ids (comma-separated) instead of its text");
  cmd->add_option("--now", o->now, "Seconds since the epoch that strftime_now() formats (default: the clock)");
  return [o] { return apply_template_main(*o); };
}

}  // namespace vtc::cli
