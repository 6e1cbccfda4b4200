// The server on a model without a vocabulary (tokenizer.ggml.model =
// "no_vocab"): token-id prompts work and give empty text, anything that
// needs text is a 400 that says to send ids. The engine and the HTTP routes
// run in-process on a free loopback port, with the same template `vtc serve`
// picks for a model that has none (chatml).
#include <catch2/catch.hpp>
#include <httplib.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "serve/engine/engine.h"
#include "serve/http/server.h"
#include "serve/engine/metrics.h"
#include "tests/gguf/no_vocab_copy.h"
#include "tests/serve/in_process_server.h"
#include "tests/serve/serve_fixtures.h"

using namespace vtc;
using nlohmann::json;

namespace {

// A no_vocab copy of the tiny model, removed when the test case ends.
struct NoVocabModel {
  std::string path = test::unique_temp_path("tiny-llama-no-vocab.gguf");
  NoVocabModel() { test::write_no_vocab_copy(test::tiny_model(), path); }
  ~NoVocabModel() { std::filesystem::remove(path); }
};

// The in-process server on `model`, named "no-vocab".
struct InProcessServer : test::InProcessServer {
  explicit InProcessServer(const std::string& model) : test::InProcessServer(model, "no-vocab") {}
};

void check_no_vocab_error(const json& body, const std::string& param) {
  REQUIRE(body.contains("error"));
  const std::string message = body["error"]["message"].get<std::string>();
  CHECK_THAT(message, Catch::Contains("no vocabulary") && Catch::Contains("token ids"));
  CHECK(body["error"]["type"] == "invalid_request_error");
  CHECK(body["error"]["param"] == param);
}

}  // namespace

TEST_CASE("vtc serve on a model without a vocabulary: token-id prompts only", "[serve][http][reference][no_vocab]") {
  const NoVocabModel model;
  InProcessServer server(model.path);
  REQUIRE_FALSE(server.engine.tokenizer().has_vocab());

  SECTION("a token-id prompt completes, with empty text") {
    json r = server.post("/v1/completions", {{"prompt", {1, 2, 3}}, {"max_tokens", 4}, {"temperature", 0}}, 200);
    CHECK(r["choices"][0]["text"] == "");
    CHECK(r["choices"][0]["finish_reason"] == "length");  // no EOS to stop on
    CHECK(r["usage"]["completion_tokens"] == 4);
  }
  SECTION("logprobs name tokens by id") {
    json r = server.post("/v1/completions",
                         {{"prompt", {1, 2, 3}}, {"max_tokens", 3}, {"temperature", 0}, {"logprobs", 2}}, 200);
    const json& lp = r["choices"][0]["logprobs"];
    REQUIRE(lp["tokens"].size() == 3);
    for (const json& t : lp["tokens"]) {
      const std::string id = t.get<std::string>();
      CHECK((!id.empty() && id.find_first_not_of("0123456789") == std::string::npos));
    }
    for (const json& top : lp["top_logprobs"]) CHECK(top.size() == 2);
  }
  SECTION("a streamed token-id prompt ends with [DONE]") {
    httplib::Client c("127.0.0.1", server.port);
    c.set_read_timeout(120, 0);
    json body = {{"prompt", {1, 2, 3}}, {"max_tokens", 3}, {"temperature", 0}, {"stream", true}};
    auto res = c.Post("/v1/completions", body.dump(), "application/json");
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK_THAT(res->body, Catch::Contains("data: [DONE]"));
  }
  SECTION("text needs a vocabulary: 400 with the way out") {
    check_no_vocab_error(server.post("/v1/completions", {{"prompt", "hello"}, {"max_tokens", 4}}, 400), "prompt");
    check_no_vocab_error(server.post("/v1/completions", {{"prompt", {"hello"}}, {"max_tokens", 4}}, 400), "prompt");
    check_no_vocab_error(
        server.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 4}}, 400),
        "messages");
    check_no_vocab_error(server.post("/tokenize", {{"content", "hi"}}, 400), "content");
  }
  SECTION("detokenize gives empty text for in-range ids") {
    CHECK(server.post("/detokenize", {{"tokens", {1, 2, 3}}}, 200)["content"] == "");
    server.post("/detokenize", {{"tokens", {server.engine.n_vocab()}}}, 400);
  }
}
