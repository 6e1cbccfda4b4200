#include "serve/chat/chat_prompt.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "serve/api/common/fields.h"
#include "serve/chat/generic_tools.h"
#include "serve/chat/chat_layer.h"
#include "serve/jinja/template.h"
#include "support/error.h"

namespace vtc::serve {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

using fields::bad;
using fields::field;

void expect_string(const ordered_json* v, const std::string& name) {
  if (v && !v->is_string()) bad(name, fmt::format("'{}' must be a string", name));
}

// A message's content: a string, or text parts (kept as parts: the
// template decides how they join); null is allowed only where `null_ok`
// (an assistant turn with tool calls), and becomes "".
ordered_json message_content(const ordered_json& m, const std::string& name, bool null_ok) {
  const ordered_json* c = field(m, "content");
  if (!c) {
    if (null_ok) return "";
    bad(name + ".content", fmt::format("'{}.content' is required", name));
  }
  if (c->is_string()) return *c;
  if (!c->is_array())
    bad(name + ".content", fmt::format("'{}.content' must be a string or an array of text parts", name));
  ordered_json parts = ordered_json::array();
  for (const auto& part : *c) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      bad(name + ".content", fmt::format("'{}.content' parts must be {{\"type\": \"text\", \"text\": ...}} (this server "
                                         "takes text only)", name));
    parts.push_back({{"type", "text"}, {"text", part["text"]}});
  }
  return parts;
}

ordered_json tool_calls_of(const ordered_json& calls, const std::string& name) {
  if (!calls.is_array()) bad(name, fmt::format("'{}' must be an array", name));
  ordered_json out = ordered_json::array();
  for (size_t k = 0; k < calls.size(); ++k) {
    const std::string at = fmt::format("{}[{}]", name, k);
    const ordered_json& call = calls[k];
    if (!call.is_object()) bad(at, fmt::format("'{}' must be an object", at));
    const ordered_json* fn = field(call, "function");
    if (!fn || !fn->is_object()) bad(at + ".function", fmt::format("'{}.function' must be an object", at));
    const ordered_json* fname = field(*fn, "name");
    if (!fname || !fname->is_string()) bad(at + ".function.name", fmt::format("'{}.function.name' must be a string", at));
    const ordered_json* args = field(*fn, "arguments");
    if (args && !args->is_string() && !args->is_object())
      bad(at + ".function.arguments", fmt::format("'{}.function.arguments' must be a JSON string", at));
    expect_string(field(call, "id"), at + ".id");
    ordered_json c = ordered_json::object();
    if (const ordered_json* id = field(call, "id")) c["id"] = *id;
    c["type"] = "function";
    c["function"] = {{"name", *fname}, {"arguments", args ? *args : ordered_json("{}")}};
    out.push_back(std::move(c));
  }
  return out;
}

ordered_json message_of(const ordered_json& m, size_t i) {
  const std::string name = fmt::format("messages[{}]", i);
  if (!m.is_object()) bad(name, fmt::format("'{}' must be an object", name));
  // "parsed" and "annotations" are what SDKs' response objects carry when a
  // client sends an assistant message back as it got it: they say nothing
  // the template renders.
  static const char* known[] = {"role",      "content", "name",  "tool_calls", "tool_call_id", "reasoning_content",
                                "refusal",   "parsed",  "annotations"};
  for (const auto& [key, value] : m.items())
    if (std::find_if(std::begin(known), std::end(known), [&](const char* k) { return key == k; }) == std::end(known))
      bad(name + "." + key, fmt::format("Unrecognized request argument supplied: {}.{}", name, key));
  const ordered_json* role = field(m, "role");
  if (!role || !role->is_string()) bad(name + ".role", fmt::format("'{}.role' must be a string", name));
  const std::string r = role->get<std::string>();
  if (r != "system" && r != "developer" && r != "user" && r != "assistant" && r != "tool")
    bad(name + ".role", fmt::format("'{}.role' must be system, developer, user, assistant or tool, got '{}'", name, r));
  ordered_json out = {{"role", r}};
  const ordered_json* calls = field(m, "tool_calls");
  if (calls && r != "assistant") bad(name + ".tool_calls", fmt::format("'{}.tool_calls' is only allowed on assistant messages", name));
  const ordered_json* reasoning = field(m, "reasoning_content");
  expect_string(reasoning, name + ".reasoning_content");
  out["content"] = message_content(m, name, r == "assistant" && (calls || reasoning));
  if (const ordered_json* n = field(m, "name")) {
    expect_string(n, name + ".name");
    out["name"] = *n;
  }
  if (calls) out["tool_calls"] = tool_calls_of(*calls, name + ".tool_calls");
  if (reasoning) out["reasoning_content"] = *reasoning;
  const ordered_json* call_id = field(m, "tool_call_id");
  expect_string(call_id, name + ".tool_call_id");
  if (r == "tool" && !call_id) bad(name + ".tool_call_id", fmt::format("'{}.tool_call_id' is required for role tool", name));
  if (call_id) out["tool_call_id"] = *call_id;
  if (const ordered_json* refusal = field(m, "refusal")) expect_string(refusal, name + ".refusal");
  return out;
}

ordered_json tools_of(const ordered_json& tools) {
  if (!tools.is_array()) bad("tools", "'tools' must be an array");
  for (size_t k = 0; k < tools.size(); ++k) {
    const std::string at = fmt::format("tools[{}]", k);
    const ordered_json& t = tools[k];
    if (!t.is_object() || t.value("type", "function") != "function")
      bad(at, fmt::format("'{}' must be {{\"type\": \"function\", \"function\": {{...}}}}", at));
    const ordered_json* fn = field(t, "function");
    if (!fn || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
      bad(at + ".function.name", fmt::format("'{}.function.name' must be a string", at));
    if (const ordered_json* p = field(*fn, "parameters"); p && !p->is_object())
      bad(at + ".function.parameters", fmt::format("'{}.function.parameters' must be a JSON schema object", at));
  }
  return tools;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("--chat-template-file {}: cannot read it", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool looks_like_jinja(std::string_view s) {
  return s.find("{%") != std::string_view::npos || s.find("{{") != std::string_view::npos;
}

}  // namespace

ChatInputs chat_inputs_from_request(const ordered_json& body) {
  ChatInputs in;
  const ordered_json* msgs = field(body, "messages");
  if (!msgs) bad("messages", "'messages' is required");
  if (!msgs->is_array() || msgs->empty()) bad("messages", "'messages' must be a non-empty array");
  for (size_t i = 0; i < msgs->size(); ++i) in.messages.push_back(message_of((*msgs)[i], i));
  if (const ordered_json* t = field(body, "tools"); t && !t->empty()) in.tools = tools_of(*t);
  if (const ordered_json* g = field(body, "add_generation_prompt")) {
    if (!g->is_boolean()) bad("add_generation_prompt", "'add_generation_prompt' must be a boolean");
    in.add_generation_prompt = g->get<bool>();
  }
  if (const ordered_json* k = field(body, "chat_template_kwargs")) {
    if (!k->is_object()) bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    in.kwargs = *k;
    if (const ordered_json* t = field(*k, "enable_thinking")) {
      if (!t->is_boolean())
        bad("chat_template_kwargs.enable_thinking", "'chat_template_kwargs.enable_thinking' must be a boolean");
      in.enable_thinking = t->get<bool>();
    }
  }
  // The output schema, as llama-server's oaicompat_chat_params_parse reads
  // it (structured_output.h validates these fields).
  if (const ordered_json* s = field(body, "json_schema")) in.response_schema = *s;
  if (const ordered_json* rf = field(body, "response_format"); rf && rf->is_object()) {
    const std::string type = rf->value("type", "");
    if (type == "json_object" && (rf->contains("schema") || in.response_schema.is_null()))
      in.response_schema = rf->value("schema", ordered_json::object());
    if (type == "json_schema") {
      const ordered_json wrapper = rf->value("json_schema", ordered_json::object());
      in.response_schema = wrapper.is_object() ? wrapper.value("schema", ordered_json::object()) : ordered_json::object();
    }
  }
  if (const ordered_json* effort = field(body, "reasoning_effort")) {
    if (!effort->is_string()) bad("reasoning_effort", "'reasoning_effort' must be a string");
    if (*effort == "none") {
      in.enable_thinking = false;
      in.kwargs.erase("reasoning_effort");
    } else if (!effort->get<std::string>().empty()) {
      in.kwargs["reasoning_effort"] = *effort;
    }
  }
  return in;
}

struct PromptTemplate::Jinja {
  jinja::Template tmpl;
  std::string source;
  chat_layer::TemplateCaps caps;
  chat_layer::Dedicated dedicated = chat_layer::Dedicated::None;
};

std::unique_ptr<PromptTemplate::Jinja> PromptTemplate::parse_jinja(const std::string& text, const std::string& where) {
  try {
    auto j = std::make_unique<PromptTemplate::Jinja>(PromptTemplate::Jinja{jinja::Template::parse(text), text, {}, {}});
    j->caps = chat_layer::caps_of(j->tmpl);
    j->dedicated = chat_layer::dedicated_of(text);
    return j;
  } catch (const jinja::TemplateError& e) {
    throw Error(fmt::format("chat template ({}): {}. Pick another with --chat-template NAME or --chat-template-file F",
                            where, e.what()));
  }
}

PromptTemplate::~PromptTemplate() = default;

std::shared_ptr<const PromptTemplate> PromptTemplate::load(const gguf::GgufFile& model, const Tokenizer& tok,
                                                           const std::string& name_or_text, const std::string& file,
                                                           int64_t now_epoch_s) {
  auto t = std::shared_ptr<PromptTemplate>(new PromptTemplate());
  t->tok_ = &tok;
  t->now_epoch_s_ = now_epoch_s;
  if (tok.has_vocab()) {
    if (tok.bos() >= 0) t->bos_text_ = tok.token_text(tok.bos());
    if (tok.eos() >= 0) t->eos_text_ = tok.token_text(tok.eos());
    t->add_bos_ = tok.bos() >= 0 && tok.add_bos();
    t->add_eos_ = tok.eos() >= 0 && tok.add_eos();
  }
  if (!file.empty()) {
    t->main_ = parse_jinja(chat_layer::patched_source(read_file(file)), "--chat-template-file " + file);
    t->description_ = "Jinja template from " + file;
  } else if (!name_or_text.empty()) {
    try {
      t->builtin_ = detect_chat_template(name_or_text);
      t->description_ = fmt::format("built-in {}", chat_template_name(*t->builtin_));
    } catch (const Error& e) {
      if (!looks_like_jinja(name_or_text))
        throw Error(fmt::format("--chat-template: '{}' is neither a built-in template name ({}) nor Jinja text; "
                                "for a template file use --chat-template-file",
                                name_or_text, fmt::join(chat_template_names(), ", ")));
      t->main_ = parse_jinja(chat_layer::patched_source(name_or_text), "--chat-template");
      t->description_ = "Jinja template from --chat-template";
    }
  } else if (auto text = model.get_string("tokenizer.chat_template")) {
    t->main_ = parse_jinja(chat_layer::patched_source(*text), "the model's tokenizer.chat_template");
    t->description_ = "the model's tokenizer.chat_template (Jinja)";
    if (auto tools = model.get_string("tokenizer.chat_template.tool_use")) {
      t->tool_use_ = parse_jinja(*tools, "the model's tokenizer.chat_template.tool_use");
      t->description_ += ", tool_use variant for requests with tools";
    }
  } else {
    t->builtin_ = vtc::ChatTemplate::ChatML;
    t->description_ = "built-in chatml (the model has no tokenizer.chat_template)";
  }
  return t;
}

std::shared_ptr<const PromptTemplate> PromptTemplate::from_jinja(const std::string& text, const std::string& bos_text,
                                                                 const std::string& eos_text, int64_t now_epoch_s,
                                                                 bool add_bos, bool add_eos) {
  auto t = std::shared_ptr<PromptTemplate>(new PromptTemplate());
  t->main_ = parse_jinja(chat_layer::patched_source(text), "from text");
  t->description_ = "Jinja template from text";
  t->bos_text_ = bos_text;
  t->eos_text_ = eos_text;
  t->add_bos_ = add_bos;
  t->add_eos_ = add_eos;
  t->now_epoch_s_ = now_epoch_s;
  return t;
}

const PromptTemplate::Jinja* PromptTemplate::pick(const ChatInputs& inputs) const {
  if (tool_use_ && inputs.tools.is_array() && !inputs.tools.empty()) return tool_use_.get();
  return main_.get();
}

const std::string& PromptTemplate::source_for(const ChatInputs& inputs) const {
  static const std::string none, generic(chat::kGenericToolsSource);
  const Jinja* j = pick(inputs);
  if (j) return j->source;
  return inputs.tools.is_array() && !inputs.tools.empty() ? generic : none;
}

namespace {

// A built-in format's messages: roles and text (parts joined with "\n", as
// the reference's legacy path joins them).
std::vector<ChatMessage> builtin_messages(const ordered_json& messages, const std::string& format_name) {
  std::vector<ChatMessage> out;
  for (const auto& m : messages) {
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";
    if (role == "tool" || m.contains("tool_calls"))
      bad("messages", fmt::format("the built-in '{}' chat format has no tool turns unless the request has tools; "
                                  "send the tools, or serve with a Jinja template (--chat-template-file)",
                                  format_name));
    const ordered_json& c = m["content"];
    std::string text;
    if (c.is_string()) {
      text = c.get<std::string>();
    } else {
      for (const auto& part : c) text += (text.empty() ? "" : "\n") + part["text"].get<std::string>();
    }
    out.push_back({role, text});
  }
  return out;
}

}  // namespace

std::string PromptTemplate::render(const ChatInputs& inputs) const {
  const bool has_tools = inputs.tools.is_array() && !inputs.tools.empty();
  const Jinja* j = pick(inputs);
  if (!j) {
    const std::string name(chat_template_name(*builtin_));
    const ordered_json messages =
        has_tools ? chat::generic_prompt_messages(inputs.messages, chat_layer::template_tools(inputs.tools))
                  : inputs.messages;
    return apply_chat_template(*builtin_, builtin_messages(messages, name), inputs.add_generation_prompt);
  }
  // common_chat_template_direct_apply's context, in its order: later
  // entries override earlier ones.
  ordered_json ctx = {{"messages", chat_layer::template_messages(inputs.messages, j->caps, j->source)},
                      {"bos_token", bos_text_},
                      {"eos_token", eos_text_},
                      {"enable_thinking", inputs.enable_thinking}};
  if (has_tools) ctx["tools"] = chat_layer::template_tools(inputs.tools);
  const ordered_json dates = chat_layer::date_variables(now_epoch_s_);
  for (const auto& [k, v] : dates.items()) ctx[k] = v;
  for (const auto& [k, v] : inputs.kwargs.items()) ctx[k] = v;
  if (j->dedicated == chat_layer::Dedicated::DeepSeekV4 && inputs.response_schema.is_object())
    ctx["response_format"] = inputs.response_schema;
  if (inputs.add_generation_prompt) ctx["add_generation_prompt"] = true;
  // Variables derived from two kwargs; the kwargs themselves win.
  ordered_json derived = ordered_json::object();
  if (auto p = ctx.find("preserve_reasoning"); p != ctx.end() && p->is_boolean()) {
    const bool keep = p->get<bool>();
    derived = {{"preserve_thinking", keep}, {"clear_thinking", !keep}, {"truncate_history_thinking", !keep},
               {"drop_thinking", !keep}};
  }
  if (auto e = ctx.find("reasoning_effort"); e != ctx.end() && e->is_string() && !e->get<std::string>().empty())
    derived["reasoning_strength"] = *e;
  for (auto& [k, v] : derived.items())
    if (!ctx.contains(k)) ctx[k] = v;
  jinja::RenderOptions opts;
  opts.now_epoch_s = now_epoch_s_;
  std::string prompt;
  try {
    prompt = j->tmpl.render(ctx, opts);
  } catch (const jinja::TemplateError& e) {
    throw ApiError(400, fmt::format("chat template: {}", e.what()), "messages");
  }
  // The vocabulary adds BOS / EOS when the prompt is tokenized.
  if (add_bos_ && !bos_text_.empty() && prompt.compare(0, bos_text_.size(), bos_text_) == 0)
    prompt.erase(0, bos_text_.size());
  if (add_eos_ && !eos_text_.empty() && prompt.size() >= eos_text_.size() &&
      prompt.compare(prompt.size() - eos_text_.size(), eos_text_.size(), eos_text_) == 0)
    prompt.resize(prompt.size() - eos_text_.size());
  return chat_layer::finish_prompt(std::move(prompt), j->dedicated, inputs.add_generation_prompt);
}

std::vector<int32_t> PromptTemplate::tokenize(const std::string& prompt) const {
  const bool has_bos = !bos_text_.empty() && prompt.compare(0, bos_text_.size(), bos_text_) == 0;
  try {
    return tok_->encode(prompt, /*add_special=*/!has_bos, /*parse_special=*/true);
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "messages");
  }
}

}  // namespace vtc::serve
