// The chat.completion and text_completion shapes of /v1/chat/completions
// and /v1/completions: whole bodies, streamed chunks, logprobs and usage.
//
// Chat output goes through a ChoiceOutput (serve/api/common/choice_output.h),
// which splits what the model wrote into content, reasoning and tool calls
// for the template's family, and turns streamed text into OpenAI deltas.
#include <fmt/format.h>

#include "serve/api/common/choice_output.h"
#include "serve/api/common/json_text.h"
#include "serve/api/openai/completions.h"

namespace vtc::serve {

using nlohmann::json;

namespace {

// How completions logprobs name a token (the legacy format has no `bytes`):
// its text when that is valid UTF-8; otherwise, as OpenAI does, "bytes:"
// and each byte as \xNN, so distinct tokens keep distinct names (they key
// top_logprobs); for a model without a vocabulary, its id in decimal.
std::string token_label(const Tokenizer& tok, int32_t id) {
  if (!tok.has_vocab()) return std::to_string(id);
  const std::string piece = tok.token_piece(id);
  if (is_valid_utf8(piece)) return piece;
  std::string label = "bytes:";
  for (unsigned char c : piece) label += fmt::format("\\x{:02x}", c);
  return label;
}

// Chat logprobs: `token` is the text with invalid UTF-8 replaced, `bytes`
// the raw bytes (a character split across tokens is whole again in the
// concatenated bytes).
json logprob_entry_chat(const TokenEvent& e, const Tokenizer& tok) {
  const std::string piece = tok.token_piece(e.id);
  json top = json::array();
  for (const auto& [id, lp] : e.top) {
    const std::string p = tok.token_piece(id);
    top.push_back({{"token", valid_utf8(p)}, {"logprob", lp}, {"bytes", bytes_json(p)}});
  }
  return {{"token", valid_utf8(piece)}, {"logprob", e.logprob}, {"bytes", bytes_json(piece)}, {"top_logprobs", top}};
}

json logprobs_of(const CompletionRequest& req, const std::vector<TokenEvent>& events, const Tokenizer& tok,
                 size_t text_offset) {
  if (!req.logprobs) return nullptr;
  if (req.chat) {
    json content = json::array();
    for (const auto& e : events) content.push_back(logprob_entry_chat(e, tok));
    return {{"content", content}};
  }
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const auto& e : events) {
    tokens.push_back(token_label(tok, e.id));
    lps.push_back(e.logprob);
    json top = json::object();
    for (const auto& [id, lp] : e.top) top[token_label(tok, id)] = lp;
    tops.push_back(top);
    offsets.push_back(text_offset);
    text_offset += e.text.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json base(const ResponseInfo& info, bool chunk) {
  return {{"id", info.id},
          {"object", info.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", info.created},
          {"model", info.model}};
}

std::string data_line(const json& j) { return "data: " + dump_json(j) + "\n\n"; }

}  // namespace

json usage_of(const Request& r) {
  return {{"prompt_tokens", r.prompt_tokens()},
          {"completion_tokens", r.completion_tokens()},
          {"total_tokens", r.prompt_tokens() + r.completion_tokens()},
          {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens()}}}};
}

// One usage for all choices: the prompt once, every choice's completion.
json usage_of(const Choices& choices) {
  const Request& first = *choices.requests()[0];
  int32_t completion = 0;
  for (const auto& r : choices.requests()) completion += r->completion_tokens();
  return {{"prompt_tokens", first.prompt_tokens()},
          {"completion_tokens", completion},
          {"total_tokens", first.prompt_tokens() + completion},
          {"prompt_tokens_details", {{"cached_tokens", first.cached_tokens()}}}};
}

json usage_chunk(const ResponseInfo& info, const Choices& choices) {
  json body = base(info, true);
  body["choices"] = json::array();
  body["usage"] = usage_of(choices);
  return body;
}

// --- The chat.completion format -----------------------------------------------------
namespace {

json chunk_of(const ResponseInfo& info, const CompletionRequest& req, int32_t index, json delta_or_text,
              const std::vector<TokenEvent>& events, const std::string& finish, const Tokenizer& tok) {
  json choice = {{"index", index}, {"logprobs", logprobs_of(req, events, tok, 0)},
                 {"finish_reason", finish.empty() ? json(nullptr) : json(finish)}};
  choice[info.chat ? "delta" : "text"] = std::move(delta_or_text);
  json body = base(info, true);
  body["choices"] = json::array({choice});
  return body;
}

// chat.completion / chat.completion.chunk, and text_completion for
// /v1/completions: `data:` lines, a role on each choice's first delta, the
// echo before a completion's first text, logprobs per token, usage and
// [DONE] at the end.
class ChatCompletionFormat final : public ResponseFormat {
 public:
  ChatCompletionFormat(const ResponseInfo& info, const CompletionRequest& req, const Tokenizer& tok)
      : info_(info), req_(req), tok_(tok), first_(size_t(req.n), true) {}

  std::string stream_token(int32_t i, const TokenEvent& e, std::vector<json> deltas) override {
    if (deltas.empty() && (req_.logprobs || first_[i])) deltas.push_back(info_.chat ? json::object() : json(""));
    std::string out;
    for (size_t k = 0; k < deltas.size(); ++k) {
      json& d = deltas[k];
      if (first_[i] && info_.chat) d["role"] = "assistant";
      if (first_[i] && !info_.chat) d = req_.echo_text + d.get<std::string>();
      if (first_[i] && info_.chat && !d.contains("content") && !d.contains("reasoning_content") && !d.contains("tool_calls"))
        d["content"] = "";
      const std::vector<TokenEvent> lp = k == 0 ? std::vector<TokenEvent>{e} : std::vector<TokenEvent>{};
      out += data_line(chunk_of(info_, req_, i, std::move(d), lp, "", tok_));
      first_[i] = false;
    }
    return out;
  }

  std::string stream_finish(int32_t i, std::vector<json> deltas, const ChoiceFinish& finish,
                            const Request&) override {
    const std::string finish_reason(openai_finish_reason(finish));
    std::string out;
    for (json& d : deltas) {
      if (first_[i] && info_.chat) d["role"] = "assistant";
      if (first_[i] && !info_.chat) d = req_.echo_text + d.get<std::string>();
      out += data_line(chunk_of(info_, req_, i, std::move(d), {}, "", tok_));
      first_[i] = false;
    }
    json last = info_.chat ? json::object() : json(first_[i] ? req_.echo_text : "");
    if (first_[i] && info_.chat) last = {{"role", "assistant"}};
    return out + data_line(chunk_of(info_, req_, i, std::move(last), {}, finish_reason, tok_));
  }

  std::string stream_end(const Choices& choices) override {
    return (req_.include_usage ? data_line(usage_chunk(info_, choices)) : std::string()) + "data: [DONE]\n\n";
  }
  std::string stream_error(const std::string& message) override {
    return data_line(error_body(message, "server_error")) + "data: [DONE]\n\n";
  }
  json body(const Choices& choices, const std::vector<std::vector<TokenEvent>>& events) override {
    return completion_body(info_, req_, choices, events, tok_);
  }
  json error(const std::string& message) override { return error_body(message, "server_error"); }

 private:
  ResponseInfo info_;
  const CompletionRequest& req_;
  const Tokenizer& tok_;
  std::vector<bool> first_;  // per choice: nothing sent yet
};

}  // namespace

std::unique_ptr<ResponseFormat> chat_completion_format(const ResponseInfo& info, const CompletionRequest& req,
                                                       const Tokenizer& tok) {
  return std::make_unique<ChatCompletionFormat>(info, req, tok);
}

// --- Whole responses ---------------------------------------------------------------
json completion_body(const ResponseInfo& info, const CompletionRequest& req, const Choices& choices,
                     const std::vector<std::vector<TokenEvent>>& events, const Tokenizer& tok) {
  json body = base(info, false);
  json list = json::array();
  double prompt_ms = 0, predicted_ms = 0;
  int64_t draft_n = 0, draft_accepted = 0;
  for (size_t i = 0; i < choices.requests().size(); ++i) {
    const Request& r = *choices.requests()[i];
    const ChoiceOutput out = ChoiceOutput::whole(req, events[i]);
    json choice = {{"index", i}, {"logprobs", logprobs_of(req, events[i], tok, req.echo_text.size())},
                   {"finish_reason", std::string(openai_finish_reason(out.finish_reason(r.finish_reason())))}};
    if (info.chat) choice["message"] = out.message();
    else choice["text"] = req.echo_text + out.message()["content"].get<std::string>();
    list.push_back(std::move(choice));
    prompt_ms = std::max(prompt_ms, r.prompt_ms());
    predicted_ms = std::max(predicted_ms, r.generate_ms());
    draft_n += r.draft_tokens();
    draft_accepted += r.draft_tokens_accepted();
  }
  body["choices"] = std::move(list);
  body["usage"] = usage_of(choices);
  const json usage = body["usage"];
  body["timings"] = {{"prompt_n", usage["prompt_tokens"]}, {"cached_n", usage["prompt_tokens_details"]["cached_tokens"]},
                     {"prompt_ms", prompt_ms}, {"predicted_n", usage["completion_tokens"]}, {"predicted_ms", predicted_ms}};
  // llama-server adds these when the request speculated.
  if (draft_n > 0) body["timings"]["draft_n"] = draft_n, body["timings"]["draft_n_accepted"] = draft_accepted;
  return body;
}

}  // namespace vtc::serve
