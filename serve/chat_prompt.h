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
// Jinja templates run on vtc's engine (serve/jinja) with the context HF's
// apply_chat_template gives them: messages, tools, add_generation_prompt,
// bos_token, eos_token, and each chat_template_kwargs entry (e.g.
// enable_thinking, reasoning_effort) as a top-level variable. Before
// rendering, messages are normalised as the llama.cpp reference's chat
// layer does: "developer" becomes "system" (except for harmony templates,
// which know the role), a null content beside tool calls becomes "", and
// tool-call arguments sent as JSON text become an object for templates
// that read them as one (they test `is mapping`, iterate `.items()` or pipe
// them through tojson). A template error while rendering (its own
// raise_exception included) is an ApiError 400 with the template's message.
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
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
};

// Validates an OpenAI chat body's messages, tools, chat_template_kwargs and
// add_generation_prompt (roles system / developer / user / assistant /
// tool; content a string, text parts or null beside tool_calls; tool_calls
// with function name and arguments; tool_call_id; reasoning_content).
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
  ~PromptTemplate();

  // The prompt text. Throws ApiError 400 (a template error, or tools for a
  // built-in format that has none).
  std::string render(const ChatInputs& inputs) const;
  // Token ids of a rendered prompt: special tokens parsed, and a BOS added
  // only when the text does not already start with it.
  std::vector<int32_t> tokenize(const std::string& prompt) const;

  // Where the template came from, for the start-up log.
  const std::string& description() const { return description_; }
  // The Jinja source a request renders with ("" for a built-in format):
  // output parsers pick their format from it.
  const std::string& source_for(const ChatInputs& inputs) const;

 private:
  struct Jinja;
  PromptTemplate() = default;
  const Jinja* pick(const ChatInputs& inputs) const;

  std::optional<vtc::ChatTemplate> builtin_;
  std::unique_ptr<Jinja> main_, tool_use_;
  std::string description_, bos_text_, eos_text_;
  const Tokenizer* tok_ = nullptr;
  int64_t now_epoch_s_ = -1;
};

}  // namespace vtc::serve
