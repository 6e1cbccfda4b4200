// A chat request's prompt: OpenAI messages and tools rendered by the model's
// chat template. `vtc serve`, `vtc apply-template` and `vtc run --chat` all
// come through here, so one request renders the same everywhere.
//
// Which template (PromptTemplate::load), first match wins:
//   1. --chat-template-file F: Jinja text from F;
//   2. --chat-template X: a built-in format name (chatml, llama3, ...:
//      frontends/gguf/chat_template.h) or Jinja text;
//   3. the GGUF's tokenizer.chat_template (Jinja); a request with tools
//      uses its named variant tokenizer.chat_template.tool_use when the
//      file has one;
//   4. none of these: the built-in chatml.
// A template that does not parse is a start-up error naming it and the line.
//
// Jinja templates run on vtc's engine (serve/jinja) and get what the
// llama.cpp reference's chat layer (common/chat.cpp,
// common_chat_templates_apply with its default inputs) gives them, so a
// request renders the prompt llama-server renders (serve/chat/chat_layer.h;
// tests/serve/chat_layer compares the two over the reference's templates):
//   - messages in the reference's shape: content "" when null; content
//     parts kept as parts for templates that take them, else joined with
//     "\n"; reasoning_content, name, tool_call_id only when non-empty;
//     "developer" as "system" (not for harmony templates); a system
//     message folded into the first user turn ("SYSTEM\nUSER") where the
//     template has no system role; tool-call arguments as objects where
//     the template reads them as objects (found by probe renders at load);
//     the reshaping of the reference's dedicated handlers (Ministral 3
//     content blocks, gpt-oss / LFM2 "thinking", DeepSeek V4 result order,
//     older Gemma 4 tool_responses, StepFun's trimmed contents);
//   - tools rebuilt as {type, function: {name, description, parameters}};
//   - add_generation_prompt (only when true), bos_token, eos_token;
//   - enable_thinking, always: true unless chat_template_kwargs says false
//     or reasoning_effort is "none";
//   - date_string ("%d %b %Y") and datetime ("%b %d %Y"): today, local
//     time (or --now); strftime_now() formats the same instant;
//   - every chat_template_kwargs entry as a top-level variable (last, so
//     it overrides; for DeepSeek V4 then response_format, the request's
//     output schema), reasoning_effort (the request's, or a kwarg) also as
//     reasoning_strength, and a preserve_reasoning kwarg as
//     preserve_thinking / clear_thinking / truncate_history_thinking /
//     drop_thinking;
//   - after rendering, a leading BOS text is cut when the vocabulary adds
//     BOS itself (tokenize() adds it back), and a trailing EOS text when it
//     adds EOS; gpt-oss without a generation prompt ends in <|end|>.
// A template error while rendering (its own raise_exception included) is
// an ApiError 400 with the template's message.
//
// Built-in formats (chatml when the model has no template) have no tool
// syntax of their own: a request with tools uses the generic JSON
// tool-call format (serve/chat/generic_tools.h): the tools and the answer
// shape go into the system prompt, earlier calls and results are written
// as that JSON, and the output is held to it and parsed back into
// tool_calls.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "frontends/gguf/chat_template.h"
#include "frontends/gguf/gguf.h"
#include "frontends/gguf/tokenizer/tokenizer.h"

namespace vtc::jinja {
class Template;
}

namespace vtc::serve {

struct ChatInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null, or the request's tools array
  bool add_generation_prompt = true;
  // The reference's default is on; chat_template_kwargs.enable_thinking
  // false or reasoning_effort "none" turn it off.
  bool enable_thinking = true;
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
  // The schema the output is held to (response_format json_schema /
  // json_object, or llama-server's json_schema), as llama-server derives
  // it; null when none. DeepSeek V4 templates print it (response_format).
  nlohmann::ordered_json response_schema;
};

// Validates an OpenAI chat body's messages, tools, chat_template_kwargs and
// add_generation_prompt (roles system / developer / user / assistant /
// tool; content a string, text parts or null beside tool_calls; tool_calls
// with function name and arguments; tool_call_id; reasoning_content), and
// reads reasoning_effort ("none" disables thinking, any other value is the
// reasoning_effort kwarg, as llama-server does).
// ApiError 400 naming the field. The body is an ordered_json: the client's
// key order survives into tojson output (tool schemas), as in Python.
ChatInputs chat_inputs_from_request(const nlohmann::ordered_json& body);

class PromptTemplate {
 public:
  // See the header comment. `name_or_text` is --chat-template, `file`
  // --chat-template-file (either may be empty). `now_epoch_s` >= 0 fixes
  // what strftime_now() formats (reproducible output). Throws vtc::Error.
  static std::shared_ptr<const PromptTemplate> load(const gguf::GgufFile& model, const Tokenizer& tok,
                                                    const std::string& name_or_text, const std::string& file,
                                                    int64_t now_epoch_s = -1);
  // A Jinja template from its text, as the reference loads one with no
  // model: bos/eos texts as given, nothing cut after rendering unless
  // add_bos / add_eos. For tests and tools. Throws vtc::Error.
  static std::shared_ptr<const PromptTemplate> from_jinja(const std::string& text, const std::string& bos_text,
                                                          const std::string& eos_text, int64_t now_epoch_s = -1,
                                                          bool add_bos = false, bool add_eos = false);
  ~PromptTemplate();

  // The prompt text. Throws ApiError 400 (a template error, or tools for a
  // built-in format that has none).
  std::string render(const ChatInputs& inputs) const;
  // Token ids of a rendered prompt: special tokens parsed, and a BOS added
  // only when the text does not already start with it.
  std::vector<int32_t> tokenize(const std::string& prompt) const;

  // Where the template came from, for the start-up log.
  const std::string& description() const { return description_; }
  // The Jinja source a request renders with ("" for a built-in format;
  // chat::kGenericToolsSource for a built-in format with tools): output
  // parsers pick their format from it.
  const std::string& source_for(const ChatInputs& inputs) const;

 private:
  struct Jinja;
  PromptTemplate() = default;
  const Jinja* pick(const ChatInputs& inputs) const;
  static std::unique_ptr<Jinja> parse_jinja(const std::string& text, const std::string& where);

  std::optional<vtc::ChatTemplate> builtin_;
  std::unique_ptr<Jinja> main_, tool_use_;
  std::string description_, bos_text_, eos_text_;
  bool add_bos_ = false, add_eos_ = false;  // the vocabulary adds them when tokenizing
  const Tokenizer* tok_ = nullptr;
  int64_t now_epoch_s_ = -1;
};

}  // namespace vtc::serve
