#include "serve/api/openai/completions.h"

#include <fmt/format.h>

#include <mutex>
#include <optional>
#include <random>
#include <set>

#include "serve/api/common/choice_output.h"
#include "serve/api/common/json_text.h"
#include "serve/api/common/fields.h"
#include "serve/api/common/structured_output.h"
#include "support/error.h"

namespace vtc::serve {

using nlohmann::json;
using namespace std::chrono_literals;

namespace {

using fields::bad;
using fields::expect;
using fields::field;
using fields::get_bool;
using fields::get_int;
using fields::get_number;
using fields::type_name;

std::vector<std::string> get_stop(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  if (v->is_string()) return {v->get<std::string>()};
  expect(*v, v->is_array(), "stop", "a string or an array of strings");
  if (v->size() > 4) bad("stop", fmt::format("'stop' holds at most 4 strings, got {}", v->size()));
  std::vector<std::string> out;
  for (const json& s : *v) {
    expect(s, s.is_string(), "stop", "a string or an array of strings");
    if (!s.get<std::string>().empty()) out.push_back(s.get<std::string>());
  }
  return out;
}

// Fields that cannot change the result: accepted, and each logged once per
// process so an operator sees what clients send.
void note_ignored_field(const std::string& key) {
  static std::mutex mu;
  static std::set<std::string> logged;
  std::lock_guard<std::mutex> lock(mu);
  if (logged.insert(key).second) fmt::print(stderr, "serve: ignoring request field '{}' (it does not change the result)\n", key);
}

void check_known_fields(const json& body, bool chat) {
  static const std::set<std::string> common = {
      "model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "presence_penalty",
      "frequency_penalty", "repeat_penalty", "repeat_last_n", "n", "stream", "stream_options", "logprobs", "logit_bias",
      "stop_token_ids", "ignore_eos", "min_tokens", "grammar", "regex", "json_schema", "speculative",
      "speculative.n_max", "speculative.n_min", "speculative.p_min"};
  static const std::set<std::string> completions = {"prompt", "echo", "suffix", "best_of"};
  static const std::set<std::string> chats = {"messages", "top_logprobs", "max_completion_tokens", "response_format",
                                              "tools", "tool_choice", "parallel_tool_calls", "chat_template_kwargs",
                                              "add_generation_prompt", "reasoning_effort"};
  // Bookkeeping and hints that leave the tokens as they are.
  static const std::set<std::string> harmless = {"user", "store", "metadata", "service_tier", "prediction",
                                                 "cache_prompt", "id_slot", "priority", "request_id",
                                                 "timings_per_token", "return_tokens", "stream_options_extra"};
  for (const auto& [key, value] : body.items()) {
    if (common.count(key) || (chat ? chats : completions).count(key)) continue;
    if (harmless.count(key)) {
      note_ignored_field(key);
      continue;
    }
    throw ApiError(400, fmt::format("Unrecognized request argument supplied: {}", key), key);
  }
}

// Fields OpenAI defines that vtc accepts only in their default form.
void check_defaults_only(const json& body, bool chat) {
  if (!chat) {
    get_int(body, "best_of", 1, 1);
    if (const json* v = field(body, "suffix")) {
      expect(*v, v->is_string(), "suffix", "a string");
      if (!v->get<std::string>().empty()) bad("suffix", "'suffix' is not supported");
    }
  }
  if (const json* v = field(body, "user")) expect(*v, v->is_string(), "user", "a string");
  if (const json* v = field(body, "model")) expect(*v, v->is_string(), "model", "a string");
}

// logit_bias: {"token id": bias in [-100, 100]}, as OpenAI has it.
std::vector<std::pair<int32_t, float>> logit_bias_of(const json& body, int64_t n_vocab) {
  const json* v = field(body, "logit_bias");
  if (!v) return {};
  expect(*v, v->is_object(), "logit_bias", "an object of token id to bias");
  std::vector<std::pair<int32_t, float>> out;
  for (const auto& [key, bias] : v->items()) {
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != key.size()) bad("logit_bias", fmt::format("'logit_bias' key '{}' is not a token id", key));
    if (id < 0 || id >= n_vocab)
      bad("logit_bias", fmt::format("'logit_bias' token id {} is outside the vocabulary [0, {})", id, n_vocab));
    if (!bias.is_number() || !(bias.get<double>() >= -100 && bias.get<double>() <= 100))
      bad("logit_bias", fmt::format("'logit_bias' for token {} must be a number in [-100, 100]", id));
    out.emplace_back(int32_t(id), float(bias.get<double>()));
  }
  return out;
}

// llama-server's per-request speculation fields (flat keys with a dot), and
// "speculative": false to opt out.
SpecRequest speculative_of(const json& body) {
  SpecRequest s;
  s.enabled = get_bool(body, "speculative").value_or(true);
  if (auto v = get_int(body, "speculative.n_max", 0, 1024)) s.n_max = int32_t(*v);
  if (auto v = get_int(body, "speculative.n_min", 0, 1024)) s.n_min = int32_t(*v);
  if (auto v = get_number(body, "speculative.p_min", 0.0, 1.0)) s.p_min = float(*v);
  if (s.n_max && s.n_min && *s.n_min > *s.n_max)
    bad("speculative.n_min", fmt::format("'speculative.n_min' ({}) is above 'speculative.n_max' ({})", *s.n_min, *s.n_max));
  return s;
}

std::vector<int32_t> stop_token_ids_of(const json& body, int64_t n_vocab) {
  const json* v = field(body, "stop_token_ids");
  if (!v) return {};
  expect(*v, v->is_array(), "stop_token_ids", "an array of token ids");
  std::vector<int32_t> out;
  for (const json& t : *v) {
    expect(t, t.is_number_integer(), "stop_token_ids", "an array of token ids");
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= n_vocab)
      bad("stop_token_ids", fmt::format("stop token id {} is outside the vocabulary [0, {})", id, n_vocab));
    out.push_back(int32_t(id));
  }
  return out;
}

// What echo repeats: the prompt as the client sent it, or the text of its
// token ids (special tokens left out).
std::string echo_text_of(const json& body, const std::vector<int32_t>& ids, const Tokenizer& tok) {
  const json& p = body["prompt"];
  if (p.is_string()) return valid_utf8(p.get<std::string>());
  if (p.is_array() && p.size() == 1 && p[0].is_string()) return valid_utf8(p[0].get<std::string>());
  return tok.has_vocab() ? valid_utf8(tok.decode(ids, /*skip_special=*/true)) : std::string();
}

std::vector<int32_t> completion_prompt(const json& body, const Engine& engine) {
  const json* v = field(body, "prompt");
  if (!v) bad("prompt", "'prompt' is required");
  if (v->is_array() && v->size() == 1 && (*v)[0].is_string()) v = &(*v)[0];
  // Special tokens in the text are parsed, as llama-server's tokenize_mixed
  // does (add_special and parse_special both true).
  if (v->is_string()) return tokenize_request_text(engine.tokenizer(), v->get<std::string>(), true, true, "prompt");
  expect(*v, v->is_array() && !v->empty(), "prompt", "a string, an array of one string, or an array of token ids");
  std::vector<int32_t> ids;
  for (const json& t : *v) {
    expect(t, t.is_number_integer(), "prompt", "a string, an array of one string, or an array of token ids");
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= engine.n_vocab())
      bad("prompt", fmt::format("token id {} is outside the vocabulary [0, {})", id, engine.n_vocab()));
    ids.push_back(int32_t(id));
  }
  return ids;
}

std::vector<int32_t> chat_prompt(const json& /*body*/, const nlohmann::ordered_json& ordered, const PromptTemplate& tmpl,
                                 CompletionRequest& r) {
  ChatInputs in = chat_inputs_from_request(ordered);  // reasoning_effort included
  r.has_tools = in.tools.is_array() && !in.tools.empty();
  if (r.has_tools) r.tools_json = in.tools.dump();
  r.prompt_text = tmpl.render(in);
  if (in.add_generation_prompt) {
    // What the generation prompt appends decides how the output parser
    // reads the output's start (a closed or open think block).
    ChatInputs without = in;
    without.add_generation_prompt = false;
    r.generation_prompt = chat::generation_prompt_suffix(r.prompt_text, tmpl.render(without));
  }
  r.template_source = tmpl.source_for(in);
  return tmpl.tokenize(r.prompt_text);
}

// tool_choice: "none" | "auto" | "required" | {"type": "function",
// "function": {"name": N}} naming one of the request's tools.
void tool_choice_of(const json& body, CompletionRequest& r) {
  r.parallel_tool_calls = get_bool(body, "parallel_tool_calls").value_or(true);
  const json* v = field(body, "tool_choice");
  if (!v) {
    r.tool_choice = r.has_tools ? ToolChoice::Auto : ToolChoice::None;
    return;
  }
  if (v->is_string()) {
    const std::string c = v->get<std::string>();
    if (c == "none") r.tool_choice = ToolChoice::None;
    else if (c == "auto") r.tool_choice = ToolChoice::Auto;
    else if (c == "required") r.tool_choice = ToolChoice::Required;
    else bad("tool_choice", fmt::format("'tool_choice' must be none, auto, required or a function, got '{}'", c));
  } else {
    expect(*v, v->is_object() && v->contains("function") && (*v)["function"].is_object() &&
                   (*v)["function"].contains("name") && (*v)["function"]["name"].is_string(),
           "tool_choice", "a string or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    r.tool_choice = ToolChoice::Function;
    r.tool_function = (*v)["function"]["name"].get<std::string>();
    bool known = false;
    for (const json& t : body["tools"]) known = known || t["function"]["name"] == r.tool_function;
    if (!known) bad("tool_choice", fmt::format("'tool_choice' names '{}', which is not in 'tools'", r.tool_function));
  }
  if (r.tool_choice != ToolChoice::None && !r.has_tools) bad("tool_choice", "'tool_choice' needs 'tools'");
}

SamplingParams sampling_of(const json& body, int64_t n_ctx) {
  SamplingParams s;
  s.temperature = float(get_number(body, "temperature", 0, 2).value_or(1.0));
  s.top_p = float(get_number(body, "top_p", 0, 1).value_or(1.0));
  s.top_k = int32_t(get_int(body, "top_k", 0, INT32_MAX).value_or(0));
  s.min_p = float(get_number(body, "min_p", 0, 1).value_or(0.0));
  s.presence_penalty = float(get_number(body, "presence_penalty", -2, 2).value_or(0.0));
  s.frequency_penalty = float(get_number(body, "frequency_penalty", -2, 2).value_or(0.0));
  s.repeat_penalty = float(get_number(body, "repeat_penalty", 0, 10).value_or(1.0));
  // llama-server's repeat_last_n: the penalty window (the prompt's last
  // tokens, then the generated ones; serve/engine/output.h); -1 the whole
  // context, 0 no penalties; 64 by default, as llama-server and vtc run.
  const int64_t last_n = get_int(body, "repeat_last_n", -1, INT32_MAX).value_or(64);
  s.penalty_last_n = int32_t(last_n < 0 ? n_ctx : last_n);
  // Every 64-bit seed is used as given (seed_exact: 4294967295 is not
  // vtc run's "random"); -2^63 .. 2^64-1, a negative one modulo 2^64.
  s.seed_exact = true;
  if (const json* v = field(body, "seed")) {
    expect(*v, v->is_number_integer() || v->is_number_unsigned(), "seed", "an integer");
    s.seed = v->is_number_unsigned() ? v->get<uint64_t>() : uint64_t(v->get<int64_t>());
  } else {
    static std::mutex mu;
    static std::random_device rd;
    std::lock_guard<std::mutex> lock(mu);
    s.seed = uint64_t(rd()) << 32 | rd();
  }
  return s;
}

}  // namespace

CompletionRequest parse_completion(const nlohmann::ordered_json& ordered, bool chat, const Engine& engine,
                                   const PromptTemplate& tmpl) {
  const json body = ordered;  // validation reads the sorted form; templates and schemas keep the client's order
  fields::expect_object(body);
  check_known_fields(body, chat);
  check_defaults_only(body, chat);
  CompletionRequest r;
  r.chat = chat;
  r.stream = get_bool(body, "stream").value_or(false);
  if (const json* so = field(body, "stream_options")) {
    expect(*so, so->is_object(), "stream_options", "an object");
    for (const auto& [k, v] : so->items())
      if (k != "include_usage") throw ApiError(400, fmt::format("Unrecognized request argument supplied: stream_options.{}", k), "stream_options");
    r.include_usage = get_bool(*so, "include_usage").value_or(false);
    if (!r.stream) bad("stream_options", "'stream_options' is only allowed with 'stream': true");
  }
  r.n = int32_t(get_int(body, "n", 1, kMaxChoices).value_or(1));
  if (chat) {
    r.logprobs = get_bool(body, "logprobs").value_or(false);
    auto top = get_int(body, "top_logprobs", 0, 20);
    if (top && !r.logprobs) bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    r.gen.top_logprobs = r.logprobs ? int32_t(top.value_or(0)) : -1;
  } else if (auto lp = get_int(body, "logprobs", 0, 20)) {
    r.logprobs = true;
    r.gen.top_logprobs = int32_t(*lp);
  }
  const bool echo = !chat && get_bool(body, "echo").value_or(false);
  if (echo && r.logprobs) bad("echo", "'echo' with 'logprobs' (the prompt's logprobs) is not supported");
  r.gen.logit_bias = logit_bias_of(body, engine.n_vocab());
  r.gen.stop_token_ids = stop_token_ids_of(body, engine.n_vocab());
  r.gen.ignore_eos = get_bool(body, "ignore_eos").value_or(false);
  r.gen.min_tokens = int32_t(get_int(body, "min_tokens", 0, INT32_MAX).value_or(0));
  r.gen.speculative = speculative_of(body);
  r.gen.sampling = sampling_of(body, engine.n_ctx());
  r.gen.stop = get_stop(body);
  r.gen.prompt = chat ? chat_prompt(body, ordered, tmpl, r) : completion_prompt(body, engine);
  if (chat) tool_choice_of(body, r);
  // An output parser needs the family's markers, special tokens included.
  r.gen.keep_special_text = output_format(r).has_value();
  if (auto g = requested_grammar(ordered, r)) {
    r.grammar = g->gbnf;
    r.grammar_trigger = g->trigger;
    r.gen.constraint = grammar_constraint(*g, engine);  // a bad grammar is a 400 here
  }
  if (echo) r.echo_text = echo_text_of(body, r.gen.prompt, engine.tokenizer());
  const int64_t n_prompt = int64_t(r.gen.prompt.size());
  if (n_prompt >= engine.n_ctx())
    throw ApiError(400,
                   fmt::format("This model's maximum context length is {} tokens. However, your prompt is {} tokens, "
                               "which leaves no room to generate.", engine.n_ctx(), n_prompt),
                   chat ? "messages" : "prompt", "context_length_exceeded");
  std::optional<int64_t> max_tokens = get_int(body, "max_tokens", 1, INT32_MAX);
  if (chat && !max_tokens) max_tokens = get_int(body, "max_completion_tokens", 1, INT32_MAX);
  const int64_t room = engine.n_ctx() - n_prompt;
  const int64_t n = max_tokens.value_or(chat ? room : 16);
  if (n > room)
    throw ApiError(400,
                   fmt::format("This model's maximum context length is {} tokens. However, you requested {} tokens "
                               "({} in the prompt, {} for the completion).", engine.n_ctx(), n_prompt + n, n_prompt, n),
                   "max_tokens", "context_length_exceeded");
  if (!engine.fits_pool(n_prompt + n))
    throw ApiError(400, fmt::format("the request needs {} KV positions, more than the KV pool holds", n_prompt + n),
                   "max_tokens");
  r.gen.max_tokens = int32_t(n);
  if (r.gen.min_tokens > r.gen.max_tokens)
    bad("min_tokens", fmt::format("'min_tokens' ({}) is more than the tokens to generate ({})", r.gen.min_tokens, r.gen.max_tokens));
  return r;
}

std::vector<int32_t> chat_prompt_tokens(const nlohmann::ordered_json& chat_body, const PromptTemplate& tmpl) {
  CompletionRequest unused;
  return chat_prompt(json(chat_body), chat_body, tmpl, unused);
}

ApiError with_field_names(const ApiError& e, const std::vector<std::pair<std::string, std::string>>& chat_to_api) {
  std::string message = e.what(), param = e.param;
  for (const auto& [chat_name, api_name] : chat_to_api) {
    if (param == chat_name || param.rfind(chat_name + "[", 0) == 0 || param.rfind(chat_name + ".", 0) == 0)
      param = api_name + param.substr(chat_name.size());
    for (const char* quote : {"'", " "}) {
      const std::string from = quote + chat_name + (quote[0] == '\'' ? "'" : " "), to = quote + api_name + (quote[0] == '\'' ? "'" : " ");
      for (size_t at = message.find(from); at != std::string::npos; at = message.find(from, at + to.size()))
        message.replace(at, from.size(), to);
    }
  }
  return ApiError(e.status, message, param, e.code, e.type);
}

GenerationAnswer completions_answer(const nlohmann::ordered_json& body, bool chat, const Engine& engine,
                                    const PromptTemplate& chat_template, const ResponseInfo& info) {
  auto req = std::make_shared<CompletionRequest>(parse_completion(body, chat, engine, chat_template));
  std::shared_ptr<ResponseFormat> format = chat_completion_format(info, *req, engine.tokenizer());
  return {std::move(req), std::move(format)};
}

}  // namespace vtc::serve
