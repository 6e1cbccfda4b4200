// `vtc serve` as a child process on a free loopback port, driven over HTTP
// with httplib's client and with curl: every endpoint, streaming, errors,
// API keys, concurrency vs solo runs, prefix reuse, disconnects, shutdown.
#include <catch2/catch.hpp>
#include <httplib.h>

#include <future>
#include <nlohmann/json.hpp>
#include <regex>

#include "tests/serve/serve_fixtures.h"

using namespace vtc;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

httplib::Client client(const test::ServerProcess& s) {
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(120, 0);
  return c;
}

json post(const test::ServerProcess& s, const std::string& path, const json& body, int expect = 200) {
  auto c = client(s);
  auto res = c.Post(path.c_str(), body.dump(), "application/json");
  REQUIRE(res);
  INFO(path << " " << body.dump() << " -> " << res->status << " " << res->body);
  CHECK(res->status == expect);
  return json::parse(res->body);
}

// A streamed request: the parsed `data:` payloads up to [DONE].
std::vector<json> stream(const test::ServerProcess& s, const std::string& path, json body, bool* saw_done = nullptr) {
  body["stream"] = true;
  auto c = client(s);
  std::string raw;
  auto res = c.Post(path.c_str(), httplib::Headers{}, body.dump(), "application/json");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  raw = res->body;
  std::vector<json> chunks;
  std::stringstream ss(raw);
  std::string line;
  bool done = false;
  while (std::getline(ss, line)) {
    if (line.rfind("data: ", 0) != 0) continue;
    if (line == "data: [DONE]") done = true;
    else chunks.push_back(json::parse(line.substr(6)));
  }
  if (saw_done) *saw_done = done;
  return chunks;
}

// Without Catch2 assertions (they are not thread-safe): for std::async.
std::string stream_text_raw(int port, json body) {
  body["stream"] = true;
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120, 0);
  auto res = c.Post("/v1/completions", body.dump(), "application/json");
  if (!res || res->status != 200) throw std::runtime_error("stream request failed");
  std::stringstream ss(res->body);
  std::string line, text;
  while (std::getline(ss, line))
    if (line.rfind("data: {", 0) == 0) {
      json ch = json::parse(line.substr(6));
      if (!ch["choices"].empty()) text += ch["choices"][0]["text"].get<std::string>();
    }
  return text;
}

json post_raw(int port, const json& body) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120, 0);
  auto res = c.Post("/v1/completions", body.dump(), "application/json");
  if (!res) throw std::runtime_error("request failed");
  return json::parse(res->body);
}

std::vector<int32_t> token_prompt(int len, int salt) {
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (int i = 0; i < len; ++i) p[size_t(i)] = 100 + (i * 37 + salt * 101) % 20000;
  p[0] = 1;
  return p;
}

double metric(const test::ServerProcess& s, const std::string& name) {
  auto c = client(s);
  auto res = c.Get("/metrics");
  REQUIRE(res);
  std::smatch m;
  const std::regex re("\\n" + name + " ([0-9.e+-]+)\\n");
  if (!std::regex_search(res->body, m, re)) FAIL("metric " << name << " missing");
  return std::stod(m[1]);
}

void check_error(const json& body, const std::string& message_part) {
  REQUIRE(body.contains("error"));
  CHECK(body["error"]["message"].get<std::string>().find(message_part) != std::string::npos);
  CHECK(body["error"].contains("type"));
  CHECK(body["error"].contains("param"));
  CHECK(body["error"].contains("code"));
}

}  // namespace

TEST_CASE("vtc serve answers every endpoint in the OpenAI shapes", "[serve][http][reference]") {
  test::ServerProcess s({"--parallel", "4"});
  auto c = client(s);
  for (int i = 0; i < 200; ++i) {
    auto h = c.Get("/health");
    if (h && h->status == 200) break;
    std::this_thread::sleep_for(50ms);
  }
  auto health = c.Get("/health");
  REQUIRE(health);
  CHECK(health->status == 200);
  auto models = json::parse(c.Get("/v1/models")->body);
  CHECK(models["data"][0]["id"] == "tiny-llama");

  json req = {{"model", "tiny-llama"}, {"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 0}};
  json full = post(s, "/v1/completions", req);
  CHECK(full["object"] == "text_completion");
  CHECK(full["choices"][0]["finish_reason"] == "length");
  CHECK(full["usage"]["completion_tokens"] == 12);
  CHECK(full["usage"]["total_tokens"] == full["usage"]["prompt_tokens"].get<int>() + 12);

  SECTION("streaming matches the non-streaming text, with usage and [DONE]") {
    json sreq = req;
    sreq["stream_options"] = {{"include_usage", true}};
    bool done = false;
    auto chunks = stream(s, "/v1/completions", sreq, &done);
    CHECK(done);
    std::string text;
    for (const auto& ch : chunks)
      if (!ch["choices"].empty()) text += ch["choices"][0]["text"].get<std::string>();
    CHECK(text == full["choices"][0]["text"].get<std::string>());
    REQUIRE(chunks.size() >= 2);
    CHECK(chunks[chunks.size() - 2]["choices"][0]["finish_reason"] == "length");
    CHECK(chunks.back()["choices"].empty());
    CHECK(chunks.back()["usage"]["completion_tokens"] == 12);
  }
  SECTION("chat, streaming chat and logprobs") {
    json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 6}, {"temperature", 0},
                 {"logprobs", true}, {"top_logprobs", 3}};
    json r = post(s, "/v1/chat/completions", chat);
    CHECK(r["object"] == "chat.completion");
    CHECK(r["choices"][0]["message"]["role"] == "assistant");
    REQUIRE(r["choices"][0]["logprobs"]["content"].size() == 6);
    CHECK(r["choices"][0]["logprobs"]["content"][0]["top_logprobs"].size() == 3);
    chat.erase("logprobs");
    chat.erase("top_logprobs");
    auto chunks = stream(s, "/v1/chat/completions", chat);
    REQUIRE(!chunks.empty());
    CHECK(chunks[0]["object"] == "chat.completion.chunk");
    CHECK(chunks[0]["choices"][0]["delta"]["role"] == "assistant");
    std::string text;
    for (const auto& ch : chunks) text += ch["choices"][0]["delta"].value("content", "");
    CHECK(text == r["choices"][0]["message"]["content"].get<std::string>());
  }
  SECTION("seeded sampling repeats; stop strings end with finish_reason stop") {
    json sreq = {{"prompt", "The"}, {"max_tokens", 10}, {"temperature", 1.0}, {"seed", 7}};
    CHECK(post(s, "/v1/completions", sreq)["choices"][0]["text"] == post(s, "/v1/completions", sreq)["choices"][0]["text"]);
    const std::string text = full["choices"][0]["text"];
    REQUIRE(text.size() > 4);
    json stopped = req;
    stopped["stop"] = json::array({text.substr(2, 2)});
    json r = post(s, "/v1/completions", stopped);
    CHECK(r["choices"][0]["finish_reason"] == "stop");
    CHECK(r["choices"][0]["text"] == text.substr(0, text.find(text.substr(2, 2))));
  }
  SECTION("tokenize and detokenize round-trip") {
    json t = post(s, "/tokenize", {{"content", "hello world"}});
    REQUIRE(!t["tokens"].empty());
    json d = post(s, "/detokenize", {{"tokens", t["tokens"]}});
    CHECK(d["content"] == "hello world");
  }
  SECTION("bad input gets an OpenAI error body with the right status; the server keeps serving") {
    auto raw = c.Post("/v1/completions", "{not json", "application/json");
    REQUIRE(raw);
    CHECK(raw->status == 400);
    check_error(json::parse(raw->body), "not valid JSON");
    check_error(post(s, "/v1/completions", {{"prompt", 5}}, 400), "'prompt' must be");
    check_error(post(s, "/v1/completions", {{"prompt", "x"}, {"max_tokens", "ten"}}, 400), "'max_tokens' must be an integer");
    check_error(post(s, "/v1/completions", {{"prompt", "x"}, {"temperature", 9}}, 400), "'temperature' must be in");
    check_error(post(s, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 0}}, 400), "'max_tokens' must be in [1,");
    check_error(post(s, "/v1/completions", {{"prompt", "x"}, {"bogus", {1, 2}}}, 400), "Unrecognized request argument supplied: bogus");
    check_error(post(s, "/v1/completions", {{"prompt", "x"}, {"n", 17}}, 400), "'n' must be in [1, 16]");
    check_error(post(s, "/v1/completions", {{"prompt", token_prompt(600, 1)}}, 400), "maximum context length");
    check_error(post(s, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 100000}}, 400), "maximum context length");
    check_error(post(s, "/v1/chat/completions", {{"messages", "hi"}}, 400), "'messages' must be");
    check_error(post(s, "/v1/chat/completions", {{"messages", {{{"role", "robot"}, {"content", "x"}}}}}, 400), "role");
    check_error(post(s, "/detokenize", {{"tokens", {1, -5}}}, 400), "outside the vocabulary");
    auto unknown = c.Get("/v1/nothing");
    REQUIRE(unknown);
    CHECK(unknown->status == 404);
    check_error(json::parse(unknown->body), "Unknown request URL");
    auto method = c.Get("/v1/completions");
    REQUIRE(method);
    CHECK(method->status == 405);
    check_error(json::parse(method->body), "not allowed");
    CHECK(post(s, "/v1/completions", req)["choices"][0]["text"] == full["choices"][0]["text"]);
  }
  SECTION("metrics are Prometheus text") {
    // A request is counted once its reply has been sent, which can be just
    // after the client has read it: poll briefly for the count (this raced
    // once in CI).
    const std::string completions_ok = "vtc_requests_total{endpoint=\"/v1/completions\",status=\"200\"}";
    std::string body;
    for (int i = 0; i < 100 && body.find(completions_ok) == std::string::npos; ++i) {
      if (i > 0) std::this_thread::sleep_for(50ms);
      auto m = c.Get("/metrics");
      REQUIRE(m);
      body = m->body;
    }
    for (const char* name : {completions_ok.c_str(), "vtc_prompt_tokens_total", "vtc_generated_tokens_total",
                             "vtc_tokens_per_second", "vtc_queue_depth", "vtc_kv_pages_used", "vtc_kv_pages_free",
                             "vtc_batch_sequences_bucket", "vtc_batch_tokens_bucket", "vtc_prompt_tokens_cached_total"})
      CHECK(body.find(name) != std::string::npos);
  }
  CHECK(s.stop(SIGTERM, 20s) == 0);
}

TEST_CASE("vtc serve checks the API key on everything but /health", "[serve][http][reference]") {
  test::ServerProcess s({"--api-key", "sekrit"});
  auto c = client(s);
  for (int i = 0; i < 200 && !(c.Get("/health") && c.Get("/health")->status == 200); ++i) std::this_thread::sleep_for(50ms);
  auto none = c.Get("/v1/models");
  REQUIRE(none);
  CHECK(none->status == 401);
  check_error(json::parse(none->body), "API key");
  auto wrong = c.Get("/v1/models", httplib::Headers{{"Authorization", "Bearer nope"}});
  CHECK(wrong->status == 401);
  check_error(json::parse(wrong->body), "Incorrect API key");
  CHECK(c.Get("/v1/models", httplib::Headers{{"Authorization", "Bearer sekrit"}})->status == 200);
  CHECK(c.Get("/health")->status == 200);
  CHECK(s.stop(SIGINT, 20s) == 0);
}

TEST_CASE("curl drives vtc serve, streaming included", "[serve][http][curl][reference]") {
  if (std::system("command -v curl >/dev/null 2>&1") != 0) {
    WARN("SKIPPED: curl is not installed");
    return;
  }
  test::ServerProcess s({});
  for (int i = 0; i < 200; ++i) {
    if (std::system(fmt::format("curl -sf {}/health >/dev/null", s.url()).c_str()) == 0) break;
    std::this_thread::sleep_for(50ms);
  }
  const std::string out = test::run_capture(fmt::format(
      "curl -sS -N {}/v1/chat/completions -H 'Content-Type: application/json' -d "
      "'{{\"messages\":[{{\"role\":\"user\",\"content\":\"Hello\"}}],\"max_tokens\":5,\"stream\":true}}'", s.url()));
  CHECK(out.find("chat.completion.chunk") != std::string::npos);
  CHECK(out.find("data: [DONE]") != std::string::npos);
  const std::string code = test::run_capture(fmt::format(
      "curl -s -o /dev/null -w '%{{http_code}}' {}/v1/completions -H 'Content-Type: application/json' -d '{{\"prompt\": \"hi\", \"max_tokens\": -1}}'", s.url()));
  CHECK(code == "400");
  CHECK(s.stop(SIGTERM, 20s) == 0);
}

TEST_CASE("8 concurrent streams each match their solo run, and prefix reuse, and disconnects free pages", "[serve][http][reference]") {
  test::ServerProcess s({"--parallel", "8"});
  auto c = client(s);
  for (int i = 0; i < 200 && !(c.Get("/health") && c.Get("/health")->status == 200); ++i) std::this_thread::sleep_for(50ms);
  auto ids_of = [](const std::vector<json>& chunks) {
    std::string text;
    for (const auto& ch : chunks)
      if (!ch["choices"].empty()) text += ch["choices"][0]["text"].get<std::string>();
    return text;
  };
  std::vector<std::string> solo;
  for (int i = 0; i < 8; ++i)
    solo.push_back(ids_of(stream(s, "/v1/completions", {{"prompt", token_prompt(20 + 7 * i, i)}, {"max_tokens", 16}, {"temperature", 0}})));
  std::vector<std::future<std::string>> futures;
  for (int i = 0; i < 8; ++i)
    futures.push_back(std::async(std::launch::async, [port = s.port(), i] {
      return stream_text_raw(port, {{"prompt", token_prompt(20 + 7 * i, i)}, {"max_tokens", 16}, {"temperature", 0}});
    }));
  for (int i = 0; i < 8; ++i) CHECK(futures[size_t(i)].get() == solo[size_t(i)]);

  // That the cached prefix also prefills faster is a timing, which a loaded
  // machine can invert (the tiny model prefills 230 tokens in ~8 ms either
  // way): the bench's figure, not a test's. Here: the reuse is reported in
  // the response, in llama.cpp's timings and in the metric.
  SECTION("a shared 200-token prefix is reported cached") {
    auto base = token_prompt(200, 42);
    auto p1 = base, p2 = base;
    for (int i = 0; i < 30; ++i) p1.push_back(3000 + i), p2.push_back(4000 + i);
    const double cached_before = metric(s, "vtc_prompt_tokens_cached_total");
    json cold = post(s, "/v1/completions", {{"prompt", p1}, {"max_tokens", 2}, {"temperature", 0}});
    json warm = post(s, "/v1/completions", {{"prompt", p2}, {"max_tokens", 2}, {"temperature", 0}});
    CHECK(warm["usage"]["prompt_tokens_details"]["cached_tokens"] == 192);
    CHECK(metric(s, "vtc_prompt_tokens_cached_total") - cached_before == 192);
    CHECK(cold["usage"]["prompt_tokens_details"]["cached_tokens"] == 0);
    CHECK(warm["timings"]["cached_n"] == 192);
    CHECK(warm["timings"]["prompt_n"] == 230);
  }
  SECTION("a client that disconnects mid-stream gets its request cancelled and its pages freed") {
    const double total = metric(s, "vtc_kv_pages_total");
    {
      httplib::Client dc("127.0.0.1", s.port());
      int chunks = 0;
      json body = {{"prompt", token_prompt(40, 5)}, {"max_tokens", 450}, {"stream", true}, {"temperature", 0}};
      httplib::Request req;
      req.method = "POST";
      req.path = "/v1/completions";
      req.body = body.dump();
      req.set_header("Content-Type", "application/json");
      req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 3; };
      dc.send(req);  // returns when the receiver says stop: the connection closes
    }
    bool freed = false;
    for (int i = 0; i < 100 && !freed; ++i) {
      freed = metric(s, "vtc_requests_running") == 0 &&
              metric(s, "vtc_kv_pages_free") + metric(s, "vtc_kv_pages_cached") == total;
      if (!freed) std::this_thread::sleep_for(50ms);
    }
    CHECK(freed);
    auto m = c.Get("/metrics");
    CHECK(m->body.find("vtc_finished_total{reason=\"cancelled\"} 1") != std::string::npos);
  }
  CHECK(s.stop(SIGTERM, 20s) == 0);
}

TEST_CASE("SIGTERM lets an in-flight request finish and exits 0", "[serve][http][reference]") {
  test::ServerProcess s({"--shutdown-timeout", "5"});
  auto c = client(s);
  for (int i = 0; i < 200 && !(c.Get("/health") && c.Get("/health")->status == 200); ++i) std::this_thread::sleep_for(50ms);
  auto pending = std::async(std::launch::async, [port = s.port()] {
    return post_raw(port, {{"prompt", "Once"}, {"max_tokens", 64}, {"temperature", 0}});
  });
  std::this_thread::sleep_for(100ms);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(s.stop(SIGTERM, 30s) == 0);
  CHECK(std::chrono::steady_clock::now() - t0 < 15s);
  json r = pending.get();
  CHECK(r["choices"][0]["finish_reason"] == "length");
}
