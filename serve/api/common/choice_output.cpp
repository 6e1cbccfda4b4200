#include "serve/api/common/choice_output.h"

#include <optional>

#include "serve/api/common/json_text.h"
#include "serve/chat/output_parser.h"

namespace vtc::serve {

using nlohmann::json;

// The family's streaming parser, for chat requests whose template has an
// output format.
struct ChoiceOutput::Parser {
  chat::StreamingParser stream;
  explicit Parser(chat::ParseOptions o) : stream(std::move(o)) {}
};

std::optional<chat::ParseOptions> output_format(const CompletionRequest& req) {
  if (!req.chat || req.template_source.empty()) return std::nullopt;
  const chat::ChatFormat format = chat::detect_chat_format(req.template_source);
  if (format == chat::ChatFormat::ContentOnly) return std::nullopt;
  chat::ParseOptions o;
  o.format = format;
  o.thinking_forced_open = chat::generation_prompt_opens_thinking(req.prompt_text, format);
  o.generation_prompt = req.generation_prompt;
  o.parse_tool_calls = req.has_tools && req.tool_choice != ToolChoice::None;
  o.tools_json = o.parse_tool_calls ? req.tools_json : std::string();
  o.parallel_tool_calls = req.parallel_tool_calls;
  return o;
}

namespace {

json delta_of(const chat::MessageDelta& d) {
  json out = json::object();
  if (!d.reasoning_content.empty()) out["reasoning_content"] = valid_utf8(d.reasoning_content);
  if (!d.content.empty()) out["content"] = valid_utf8(d.content);
  if (d.tool_index >= 0)
    out["tool_calls"] = json::array({{{"index", d.tool_index},
                                      {"id", d.tool_id},
                                      {"type", "function"},
                                      {"function", {{"name", valid_utf8(d.tool_name)}, {"arguments", valid_utf8(d.tool_arguments)}}}}});
  return out;
}

std::vector<json> deltas_of(const std::vector<chat::MessageDelta>& ds) {
  std::vector<json> out;
  for (const auto& d : ds) {
    json j = delta_of(d);
    if (!j.empty()) out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

ChoiceOutput::ChoiceOutput(const CompletionRequest& req) : chat_(req.chat) {
  if (auto o = output_format(req)) parser_ = std::make_unique<Parser>(std::move(*o));
}
ChoiceOutput::~ChoiceOutput() = default;
ChoiceOutput::ChoiceOutput(ChoiceOutput&&) noexcept = default;
ChoiceOutput& ChoiceOutput::operator=(ChoiceOutput&&) noexcept = default;

std::vector<json> ChoiceOutput::feed(const std::string& text) {
  if (text.empty()) return {};
  if (parser_) return deltas_of(parser_->stream.feed(text));
  const std::string clean = valid_utf8(text);
  text_ += clean;
  if (!chat_) return {json(clean)};
  return {json{{"content", clean}}};
}

std::vector<json> ChoiceOutput::finish() {
  if (parser_) return deltas_of(parser_->stream.finish());
  return {};
}

json ChoiceOutput::message() const {
  if (!chat_) return {{"content", valid_utf8(text_)}};
  if (!parser_) return {{"role", "assistant"}, {"content", valid_utf8(text_)}};
  const chat::ParsedMessage& m = parser_->stream.message();
  json msg = {{"role", "assistant"}};
  msg["content"] = m.content.empty() && !m.tool_calls.empty() ? json(nullptr) : json(valid_utf8(m.content));
  if (!m.reasoning_content.empty()) msg["reasoning_content"] = valid_utf8(m.reasoning_content);
  if (!m.tool_calls.empty()) {
    json calls = json::array();
    for (const auto& c : m.tool_calls)
      calls.push_back({{"id", c.id},
                       {"type", "function"},
                       {"function", {{"name", valid_utf8(c.name)}, {"arguments", valid_utf8(c.arguments)}}}});
    msg["tool_calls"] = std::move(calls);
  }
  return msg;
}

ChoiceOutput ChoiceOutput::whole(const CompletionRequest& req, const std::vector<TokenEvent>& events) {
  ChoiceOutput out(req);
  std::string text;
  for (const TokenEvent& e : events) text += e.text;
  out.feed(text);
  out.finish();
  return out;
}

ChoiceFinish ChoiceOutput::finish_reason(const FinishReason& engine) const {
  ChoiceFinish f{engine.kind, false, engine.matched_stop};
  f.tool_calls = parser_ && engine.kind == Finish::Stop && !parser_->stream.message().tool_calls.empty();
  return f;
}

std::string_view openai_finish_reason(const ChoiceFinish& f) {
  return f.tool_calls ? "tool_calls" : finish_name(f.kind);
}

}  // namespace vtc::serve
