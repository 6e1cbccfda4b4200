// Issue 17, the OpenAI fields clients send: n > 1 (choices sharing the
// prompt's KV pages), logit_bias, echo, max_completion_tokens, vLLM's
// stop_token_ids / ignore_eos / min_tokens, harmless fields accepted and
// logged, /apply-template, latency histograms in /metrics, /health while
// draining, and start-up errors for a bad chat template.
//
// Each expected value comes from a second request, not from the code
// under test: a strong logit bias forces a known token, so what stop ids,
// min_tokens and ignore_eos must do to it is known in advance.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "serve/api/openai/completions.h"
#include "tests/serve/in_process_server.h"
#include "tests/serve/serve_fixtures.h"
#include "tests/test_process.h"

using namespace vtc;
using nlohmann::json;

namespace {

struct Server : test::InProcessServer {
  Server() : test::InProcessServer(test::tiny_model(), "tiny-llama") {}
  json complete(json body, int expect = 200) const { return post("/v1/completions", body, expect); }
  std::string piece(int32_t id) const { return engine.tokenizer().token_piece(id); }
  std::string metrics() const {
    httplib::Client c("127.0.0.1", port);
    auto res = c.Get("/metrics");
    REQUIRE(res);
    return res->body;
  }
};

const json kPrompt = "Once upon a time, in a land far away, there lived a king who had three daughters and a very old dog.";

// A token that decodes to plain text on its own (for bias tests).
int32_t plain_token(const Server& s) {
  for (int32_t id = 300; id < 2000; ++id) {
    const std::string p = s.piece(id);
    if (p.size() >= 3 && std::all_of(p.begin(), p.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); }))
      return id;
  }
  FAIL("no plain token in the vocabulary");
  return -1;
}

double metric_value(const std::string& text, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("\n" + name + " ([0-9.e+-]+)"))) return -1;
  return std::stod(m[1]);
}

}  // namespace

TEST_CASE("n choices: each equals its own solo run, and they share the prompt's KV pages", "[serve][openai][reference]") {
  Server s;
  const json base = {{"prompt", kPrompt}, {"max_tokens", 8}, {"temperature", 1.0}, {"seed", 7}};
  json two = base;
  two["n"] = 3;
  const double cached_before = metric_value(s.metrics(), "vtc_prompt_tokens_cached_total");
  const json r = s.complete(two);
  REQUIRE(r["choices"].size() == 3);
  const double cached_after = metric_value(s.metrics(), "vtc_prompt_tokens_cached_total");
  int32_t completion = 0;
  for (int i = 0; i < 3; ++i) {
    CHECK(r["choices"][i]["index"] == i);
    json solo = base;
    solo["seed"] = 7 + i;
    const json one = s.complete(solo);
    CHECK(r["choices"][i]["text"] == one["choices"][0]["text"]);
    completion += one["usage"]["completion_tokens"].get<int32_t>();
  }
  CHECK(r["usage"]["completion_tokens"] == completion);
  CHECK(r["usage"]["prompt_tokens"] == s.complete(base)["usage"]["prompt_tokens"]);
  // Choices 1 and 2 found the prompt's full pages (16 positions each) cached.
  const int64_t prompt = r["usage"]["prompt_tokens"].get<int64_t>();
  REQUIRE(prompt >= 16);
  CHECK(cached_after - cached_before >= 2.0 * double((prompt - 1) / 16 * 16));
  CHECK(r["choices"][0]["text"] != r["choices"][1]["text"]);

  // Streamed: every chunk names its choice, and each choice ends once.
  two["stream"] = true;
  auto [status, raw] = s.post_raw("/v1/completions", two);
  REQUIRE(status == 200);
  std::map<int, std::string> text;
  std::map<int, int> finishes;
  std::stringstream ss(raw);
  for (std::string line; std::getline(ss, line);) {
    if (line.rfind("data: {", 0) != 0) continue;
    const json ch = json::parse(line.substr(6));
    for (const json& c : ch["choices"]) {
      text[c["index"].get<int>()] += c["text"].get<std::string>();
      if (!c["finish_reason"].is_null()) ++finishes[c["index"].get<int>()];
    }
  }
  for (int i = 0; i < 3; ++i) {
    CHECK(text[i] == r["choices"][i]["text"]);
    CHECK(finishes[i] == 1);
  }
}

TEST_CASE("logit_bias, stop_token_ids, min_tokens and ignore_eos act on the sampled tokens", "[serve][openai][reference]") {
  Server s;
  const int32_t x = plain_token(s);
  const int32_t eos = s.engine.tokenizer().eos();
  REQUIRE(eos >= 0);
  const json greedy = {{"prompt", kPrompt}, {"max_tokens", 4}, {"temperature", 0}};
  auto with = [&](json extra) {
    json b = greedy;
    b.update(extra);
    return s.complete(b)["choices"][0];
  };
  // +100 makes x the argmax at every step; -100 bans the unbiased argmax.
  CHECK(with({{"logit_bias", {{std::to_string(x), 100}}}})["text"] == s.piece(x) + s.piece(x) + s.piece(x) + s.piece(x));
  // The unbiased greedy run's first token, by its logprobs label.
  const std::string first_label = with({{"logprobs", 0}})["logprobs"]["tokens"][0];
  int32_t first = -1;
  for (int32_t id = 0; id < int32_t(s.engine.n_vocab()) && first < 0; ++id)
    if (s.piece(id) == first_label) first = id;
  REQUIRE(first >= 0);
  CHECK(with({{"logit_bias", {{std::to_string(first), -100}}}, {"logprobs", 0}})["logprobs"]["tokens"][0] != first_label);

  // A stop id ends generation; its text is not sent.
  json stopped = with({{"logit_bias", {{std::to_string(x), 100}}}, {"stop_token_ids", {x}}});
  CHECK(stopped["text"] == "");
  CHECK(stopped["finish_reason"] == "stop");
  // Before min_tokens the stop id cannot be sampled: 2 other tokens, then x stops.
  json late = s.complete({{"prompt", kPrompt}, {"max_tokens", 8}, {"temperature", 0},
                          {"logit_bias", {{std::to_string(x), 100}}}, {"stop_token_ids", {x}}, {"min_tokens", 2}});
  CHECK(late["usage"]["completion_tokens"] == 3);
  CHECK(late["choices"][0]["finish_reason"] == "stop");
  CHECK(late["choices"][0]["text"].get<std::string>().find(s.piece(x)) == std::string::npos);

  // EOS forced: it stops at once, unless ignore_eos; min_tokens delays it.
  const json eos_bias = {{std::to_string(eos), 100}};
  json at_once = s.complete({{"prompt", kPrompt}, {"max_tokens", 6}, {"temperature", 0}, {"logit_bias", eos_bias}});
  CHECK(at_once["usage"]["completion_tokens"] == 1);
  CHECK(at_once["choices"][0]["finish_reason"] == "stop");
  json ignored = s.complete({{"prompt", kPrompt}, {"max_tokens", 6}, {"temperature", 0}, {"logit_bias", eos_bias}, {"ignore_eos", true}});
  CHECK(ignored["usage"]["completion_tokens"] == 6);
  CHECK(ignored["choices"][0]["finish_reason"] == "length");
  json delayed = s.complete({{"prompt", kPrompt}, {"max_tokens", 6}, {"temperature", 0}, {"logit_bias", eos_bias}, {"min_tokens", 3}});
  CHECK(delayed["usage"]["completion_tokens"] == 4);
  CHECK(delayed["choices"][0]["finish_reason"] == "stop");

  // Bad values name the field.
  CHECK(s.complete({{"prompt", "x"}, {"logit_bias", {{"abc", 1}}}}, 400)["error"]["param"] == "logit_bias");
  CHECK(s.complete({{"prompt", "x"}, {"logit_bias", {{"5", 101}}}}, 400)["error"]["param"] == "logit_bias");
  CHECK(s.complete({{"prompt", "x"}, {"logit_bias", {{"99999999", 1}}}}, 400)["error"]["param"] == "logit_bias");
  CHECK(s.complete({{"prompt", "x"}, {"stop_token_ids", {-1}}}, 400)["error"]["param"] == "stop_token_ids");
  CHECK(s.complete({{"prompt", "x"}, {"max_tokens", 2}, {"min_tokens", 3}}, 400)["error"]["param"] == "min_tokens");
}

TEST_CASE("echo, max_completion_tokens, and fields that cannot change the result", "[serve][openai][reference]") {
  Server s;
  const json plain = s.complete({{"prompt", kPrompt}, {"max_tokens", 4}, {"temperature", 0}});
  const json echoed = s.complete({{"prompt", kPrompt}, {"max_tokens", 4}, {"temperature", 0}, {"echo", true}});
  CHECK(echoed["choices"][0]["text"] == kPrompt.get<std::string>() + plain["choices"][0]["text"].get<std::string>());
  CHECK(s.complete({{"prompt", kPrompt}, {"echo", true}, {"logprobs", 1}}, 400)["error"]["param"] == "echo");

  const json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"temperature", 0}};
  json capped = chat;
  capped["max_completion_tokens"] = 3;
  CHECK(s.post("/v1/chat/completions", capped, 200)["usage"]["completion_tokens"].get<int>() <= 3);

  json harmless = chat;
  harmless.update({{"max_tokens", 2}, {"store", false}, {"metadata", {{"k", "v"}}}, {"user", "u1"}, {"service_tier", "auto"},
                   {"parallel_tool_calls", true}, {"chat_template_kwargs", {{"enable_thinking", false}}}});
  CHECK(s.post("/v1/chat/completions", harmless, 200)["choices"].size() == 1);
  json unknown = chat;
  unknown["frobnicate"] = 1;
  CHECK(s.post("/v1/chat/completions", unknown, 400)["error"]["param"] == "frobnicate");
}

// A request that does not fit the context is a 400 naming the limit, with
// OpenAI's code; nothing is truncated, and the server goes on serving.
TEST_CASE("a request longer than the context is a 400 naming the limit", "[serve][openai][reference]") {
  Server s;
  const int64_t n_ctx = s.engine.n_ctx();
  auto ids = [](int64_t n) { return json(std::vector<int32_t>(size_t(n), 300)); };
  const json whole = s.complete({{"prompt", ids(n_ctx)}, {"max_tokens", 1}}, 400);
  CHECK(whole["error"]["code"] == "context_length_exceeded");
  CHECK(whole["error"]["param"] == "prompt");
  CHECK_THAT(whole["error"]["message"].get<std::string>(),
             Catch::Contains(fmt::format("maximum context length is {} tokens", n_ctx)) &&
                 Catch::Contains(fmt::format("your prompt is {} tokens", n_ctx)));
  const json over = s.complete({{"prompt", ids(n_ctx - 4)}, {"max_tokens", 10}}, 400);
  CHECK(over["error"]["param"] == "max_tokens");
  CHECK_THAT(over["error"]["message"].get<std::string>(),
             Catch::Contains(fmt::format("({} in the prompt, 10 for the completion)", n_ctx - 4)));
  const json fits = s.complete({{"prompt", ids(n_ctx - 4)}, {"max_tokens", 3}, {"ignore_eos", true}, {"temperature", 0}});
  CHECK(fits["usage"]["prompt_tokens"] == n_ctx - 4);
  CHECK(fits["usage"]["completion_tokens"] == 3);
}

TEST_CASE("/apply-template renders the request, and /metrics has latency histograms", "[serve][openai][reference]") {
  Server s;
  const json body = {{"messages", {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}}}};
  CHECK(s.post("/apply-template", body, 200)["prompt"] ==
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  CHECK(s.post("/apply-template", {{"messages", "x"}}, 400)["error"]["param"] == "messages");

  s.complete({{"prompt", kPrompt}, {"max_tokens", 5}, {"temperature", 0}});
  const std::string m = s.metrics();
  CHECK(metric_value(m, "vtc_time_to_first_token_seconds_count") >= 1);
  CHECK(metric_value(m, "vtc_inter_token_latency_seconds_count") >= 4);
  CHECK(metric_value(m, "vtc_e2e_request_latency_seconds_count") >= 1);
  CHECK(metric_value(m, "vtc_e2e_request_latency_seconds_sum") >= metric_value(m, "vtc_time_to_first_token_seconds_sum"));
}

TEST_CASE("/health answers 503 from the moment draining begins", "[serve][openai][reference]") {
  Server s;
  httplib::Client c("127.0.0.1", s.port);
  auto ok = c.Get("/health");
  REQUIRE(ok);
  CHECK(ok->status == 200);
  s.http.drain();
  auto draining = c.Get("/health");
  REQUIRE(draining);
  CHECK(draining->status == 503);
  CHECK(json::parse(draining->body)["status"] == "draining");
}

TEST_CASE("a chat template vtc cannot use is a start-up error, not an abort", "[serve][openai][reference]") {
  const std::string model = test::tiny_model();
  const std::string bad_name = test::run_capture(fmt::format("{} serve -m {} --port 0 --chat-template nonesuch 2>&1; echo rc=$?", VTC_TOOL, model));
  CHECK(bad_name.find("rc=1") != std::string::npos);
  CHECK(bad_name.find("nonesuch") != std::string::npos);
  CHECK(bad_name.find("terminate called") == std::string::npos);
  const std::string bad_jinja = test::run_capture(
      fmt::format("{} serve {} --port 0 --chat-template '{{% for x in %}}' 2>&1; echo rc=$?", VTC_TOOL, model));
  CHECK(bad_jinja.find("rc=1") != std::string::npos);
  CHECK(bad_jinja.find("chat template") != std::string::npos);
  CHECK(bad_jinja.find("terminate called") == std::string::npos);
}
