// Issue 19, the API parts: token pieces that are not valid UTF-8 on their
// own (byte-fallback tokens, split characters) never break a JSON dump;
// every chunked response survives an exception; a generation cut by
// shutdown ends with finish_reason "cancelled", streaming or not; a chat
// message without content is a 400; seeds use all 64 bits.
//
// The engine and the HTTP routes run in-process on a free loopback port.
#include <catch2/catch.hpp>
#include <httplib.h>

#include <future>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "serve/engine/engine.h"
#include "serve/http/server.h"
#include "serve/engine/metrics.h"
#include "serve/api/common/json_text.h"
#include "serve/api/openai/completions.h"
#include "serve/api/openai/tokenize.h"
#include "tests/serve/engine_test_util.h"
#include "tests/serve/in_process_server.h"
#include "tests/serve/serve_fixtures.h"

using namespace vtc;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

serve::EngineOptions engine_options() { return test::InProcessServer::engine_options(test::tiny_model()); }

// The in-process server on the tiny model, with a stream reader.
struct InProcessServer : test::InProcessServer {
  InProcessServer() : test::InProcessServer(test::tiny_model(), "tiny-llama") {}
  // The `data:` payloads of a stream, up to [DONE].
  std::vector<json> stream(const std::string& path, json body, bool& done) const {
    body["stream"] = true;
    auto [status, raw] = post_raw(path, body);
    REQUIRE(status == 200);
    std::vector<json> chunks;
    std::stringstream ss(raw);
    std::string line;
    done = false;
    while (std::getline(ss, line)) {
      if (line.rfind("data: ", 0) != 0) continue;
      if (line == "data: [DONE]") done = true;
      else chunks.push_back(json::parse(line.substr(6)));
    }
    return chunks;
  }
};

std::string bytes_of(const json& bytes) {
  std::string s;
  for (const json& b : bytes) s += char(b.get<int>());
  return s;
}

// A greedy token-id prompt whose completion (16 tokens, 20 alternatives
// each) names a token whose piece is not valid UTF-8 on its own. Found by
// search: the tiny model is deterministic, and ~1% of its vocabulary is
// byte-fallback tokens.
std::vector<int32_t> prompt_with_byte_pieces(serve::Engine& engine) {
  const Tokenizer& tok = engine.tokenizer();
  for (int salt = 0; salt < 64; ++salt) {
    serve::GenerationParams p;
    p.prompt = {1};
    for (int i = 0; i < 8; ++i) p.prompt.push_back(100 + (i * 37 + salt * 1013) % 20000);
    p.max_tokens = 16;
    p.sampling = SamplingParams::greedy();
    p.top_logprobs = 20;
    auto r = engine.submit(p);
    for (const auto& e : vtc::test::drain(*r)) {
      bool hit = !serve::is_valid_utf8(tok.token_piece(e.id));
      for (const auto& [id, lp] : e.top) hit = hit || !serve::is_valid_utf8(tok.token_piece(id));
      if (hit) return p.prompt;
    }
  }
  FAIL("no prompt among 64 gives a byte-fallback token in its logprobs");
  return {};
}

// A sink that records what a content provider writes.
struct RecordingSink {
  std::string written;
  int writes = 0, throw_on_write = -1;  // throw on this write (0-based), -1: never
  bool alive = true, throw_on_alive = false;
  serve::ResponseSink sink() {
    return {[this](const std::string& s) {
              if (writes++ == throw_on_write) throw std::runtime_error("injected write failure");
              written += s;
              return true;
            },
            [this] {
              if (throw_on_alive) throw std::runtime_error("injected failure");
              return alive;
            }};
  }
  std::vector<json> events() const {
    std::vector<json> out;
    std::stringstream ss(written);
    std::string line;
    while (std::getline(ss, line))
      if (line.rfind("data: {", 0) == 0) out.push_back(json::parse(line.substr(6)));
    return out;
  }
};

serve::CompletionRequest completion_request(std::vector<int32_t> prompt, int32_t max_tokens, bool stream) {
  serve::CompletionRequest req;
  req.stream = stream;
  req.gen.prompt = std::move(prompt);
  req.gen.max_tokens = max_tokens;
  req.gen.sampling = SamplingParams::greedy();
  return req;
}

}  // namespace

namespace {
// One submitted request answered in the chat.completion / text_completion
// shape, streamed or whole, through the shared generation loop.
bool respond(vtc::serve::Engine& engine, const std::shared_ptr<vtc::serve::Request>& r, vtc::serve::CompletionRequest req,
             const vtc::serve::ResponseInfo& info, const vtc::serve::ResponseSink& sink, bool stream) {
  req.n = 1;
  vtc::serve::Choices one(r);
  auto format = vtc::serve::chat_completion_format(info, req, engine.tokenizer());
  return stream ? vtc::serve::stream_response(engine, one, req, *format, sink)
                : vtc::serve::whole_response(engine, one, *format, sink);
}
}  // namespace

TEST_CASE("valid_utf8 replaces each byte that starts no well-formed sequence", "[serve][hardening]") {
  CHECK(serve::is_valid_utf8("plain é 😀 中"));
  CHECK(serve::valid_utf8("é😀") == "é😀");
  CHECK(serve::valid_utf8("\x80") == "\uFFFD");
  CHECK(serve::valid_utf8("a\xF0\x9F") == "a\uFFFD\uFFFD");        // truncated emoji
  CHECK(serve::valid_utf8("\xC0\xAF") == "\uFFFD\uFFFD");          // overlong '/'
  CHECK(serve::valid_utf8("\xED\xA0\x80") == "\uFFFD\uFFFD\uFFFD");  // a surrogate
  CHECK(serve::valid_utf8("\xF4\x90\x80\x80") == "\uFFFD\uFFFD\uFFFD\uFFFD");  // past U+10FFFF
  CHECK(serve::valid_utf8("x\xFFy") == "x\uFFFDy");
  CHECK(serve::bytes_json("\xF0\x9F") == json::array({0xF0, 0x9F}));
}

TEST_CASE("token pieces that are not UTF-8 on their own give 200 with valid JSON and bytes", "[serve][hardening][reference]") {
  InProcessServer s;
  const Tokenizer& tok = s.engine.tokenizer();

  SECTION("tokenize with_pieces on é😀: pieces replaced, bytes raw, concatenated bytes are the text") {
    json body = serve::tokenize_response({{"content", "é😀"}, {"with_pieces", true}}, s.engine);
    const std::string dumped = body.dump();  // strict: throws on invalid UTF-8
    std::string all;
    bool some_piece_invalid = false;
    for (const json& t : body["tokens"]) {
      const std::string raw = bytes_of(t["bytes"]);
      CHECK(t["piece"] == serve::valid_utf8(raw));
      some_piece_invalid = some_piece_invalid || !serve::is_valid_utf8(raw);
      all += raw;
    }
    CHECK(some_piece_invalid);  // the case this test is about
    CHECK(all.find("é😀") != std::string::npos);
  }
  SECTION("detokenize of a lone byte token is U+FFFD") {
    int32_t byte_token = -1;
    for (int32_t id = 0; id < 1000 && byte_token < 0; ++id)
      if (!serve::is_valid_utf8(tok.token_piece(id))) byte_token = id;
    REQUIRE(byte_token >= 0);
    json body = serve::detokenize_response({{"tokens", {byte_token}}}, s.engine);
    CHECK_NOTHROW(body.dump());
    CHECK(body["content"] == "\uFFFD");
  }
  SECTION("completions and chat logprobs, streaming and not") {
    const auto prompt = prompt_with_byte_pieces(s.engine);
    const json req = {{"prompt", prompt}, {"max_tokens", 16}, {"temperature", 0}, {"logprobs", 20}};
    json full = s.post("/v1/completions", req, 200);
    const json& lp = full["choices"][0]["logprobs"];
    REQUIRE(lp["tokens"].size() == 16);
    bool labelled_bytes = false;
    for (const json& top : lp["top_logprobs"]) {
      CHECK(top.size() == 20);  // distinct names, so no alternative is lost
      for (const auto& [name, v] : top.items()) labelled_bytes = labelled_bytes || name.rfind("bytes:\\x", 0) == 0;
    }
    CHECK(labelled_bytes);
    bool done = false;
    auto chunks = s.stream("/v1/completions", req, done);
    CHECK(done);
    json streamed_tokens = json::array();
    for (const json& ch : chunks)
      if (!ch["choices"].empty() && ch["choices"][0]["logprobs"].is_object())
        for (const json& t : ch["choices"][0]["logprobs"]["tokens"]) streamed_tokens.push_back(t);
    CHECK(streamed_tokens == lp["tokens"]);

    // Chat: the same completion through logprob entries with `bytes`.
    const serve::ResponseInfo info{"chatcmpl-1", "tiny-llama", 0, true};
    serve::CompletionRequest creq = completion_request(prompt, 16, false);
    creq.chat = true;
    creq.logprobs = true;
    creq.gen.top_logprobs = 20;
    for (bool stream : {false, true}) {
      creq.stream = stream;
      auto r = s.engine.submit(creq.gen);
      RecordingSink rec;
      const bool ok = respond(s.engine, r, creq, info, rec.sink(), stream);
      CHECK(ok);
      std::vector<json> entries;
      if (stream) {
        for (const json& ch : rec.events())
          if (ch["choices"][0]["logprobs"].is_object())
            for (const json& e : ch["choices"][0]["logprobs"]["content"]) entries.push_back(e);
      } else {
        const json body = json::parse(rec.written);
        for (const json& e : body["choices"][0]["logprobs"]["content"]) entries.push_back(e);
      }
      REQUIRE(entries.size() == 16);
      bool invalid_seen = false;
      for (const json& e : entries)
        for (const json& alt : e["top_logprobs"]) {
          const std::string raw = bytes_of(alt["bytes"]);
          CHECK(alt["token"] == serve::valid_utf8(raw));
          invalid_seen = invalid_seen || !serve::is_valid_utf8(raw);
        }
      CHECK(invalid_seen);
    }
  }
  // The server is still up.
  CHECK(s.post("/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2}}, 200)["choices"].size() == 1);
}

TEST_CASE("an exception inside a response ends that response only", "[serve][hardening][reference]") {
  serve::Metrics metrics;
  serve::Engine engine(engine_options(), metrics);
  const serve::ResponseInfo info{"cmpl-1", "tiny-llama", 0, false};
  for (bool stream : {true, false}) {
    serve::CompletionRequest req = completion_request({1, 300, 400}, 300, stream);
    auto r = engine.submit(req.gen);
    RecordingSink rec;
    if (stream) rec.throw_on_write = 1;  // the second write: a chunk or a keep-alive
    else rec.throw_on_alive = true;      // while waiting
    auto run = [&] {
      return respond(engine, r, req, info, rec.sink(), stream);
    };
    REQUIRE_NOTHROW(run());
    vtc::test::drain(*r);
    CHECK(r->finish_reason().kind == serve::Finish::Cancelled);  // the engine stops generating for it
    if (stream) {
      CHECK(rec.written.find("\"error\"") != std::string::npos);
      CHECK(rec.written.find("data: [DONE]") != std::string::npos);
    } else {
      CHECK(json::parse(rec.written)["error"]["type"] == "server_error");
    }
  }
}

TEST_CASE("a generation cut by shutdown ends with finish_reason cancelled, streaming or not", "[serve][hardening][reference]") {
  for (bool stream : {true, false}) {
    serve::Metrics metrics;
    serve::Engine engine(engine_options(), metrics);
    const serve::ResponseInfo info{"cmpl-1", "tiny-llama", 0, false};
    serve::CompletionRequest req = completion_request({1, 300, 400}, 400, stream);
    auto r = engine.submit(req.gen);
    RecordingSink rec;
    auto writer = std::async(std::launch::async, [&] {
      return respond(engine, r, req, info, rec.sink(), stream);
    });
    while (r->completion_tokens() == 0) std::this_thread::sleep_for(5ms);
    engine.shutdown(0ms);
    CHECK(writer.get());
    if (stream) {
      auto events = rec.events();
      REQUIRE(!events.empty());
      CHECK(events.back()["choices"][0]["finish_reason"] == "cancelled");
      CHECK(rec.written.find("data: [DONE]") != std::string::npos);
    } else {
      json body = json::parse(rec.written);
      CHECK(body["choices"][0]["finish_reason"] == "cancelled");
      CHECK(body["usage"]["completion_tokens"].get<int>() < 400);
    }
  }
}

TEST_CASE("malformed chat messages are a 400 naming the field", "[serve][hardening][reference]") {
  InProcessServer s;
  auto error_param = [&](const json& messages) {
    json body = s.post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 2}}, 400);
    return body["error"]["param"];
  };
  CHECK(error_param({{{"role", "user"}}}) == "messages[0].content");
  CHECK(error_param({{{"role", "user"}, {"content", nullptr}}}) == "messages[0].content");
  CHECK(error_param({{{"role", "system"}, {"content", "x"}}, {{"role", "user"}}}) == "messages[1].content");
  CHECK(error_param({{{"content", "x"}}}) == "messages[0].role");
  CHECK(error_param({{{"role", "user"}, {"content", 5}}}) == "messages[0].content");
  CHECK(error_param({{{"role", "user"}, {"content", "x"}, {"tool_calls", json::array()}}}) == "messages[0].tool_calls");
  CHECK(error_param({{{"role", "user"}, {"content", "x"}, {"name", 3}}}) == "messages[0].name");
  CHECK(s.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "x"}, {"name", "bob"}}}}, {"max_tokens", 2}},
               200)["choices"].size() == 1);
}

TEST_CASE("seeds use all 64 bits over the API, and every explicit seed repeats", "[serve][hardening][reference]") {
  InProcessServer s;
  auto text = [&](const json& seed) {
    json body = {{"prompt", "Once upon a time"}, {"max_tokens", 16}, {"temperature", 1.0}, {"seed", seed}};
    return s.post("/v1/completions", body, 200)["choices"][0]["text"].get<std::string>();
  };
  const std::string one = text(1), big = text((uint64_t(1) << 32) + 1), bigger = text((uint64_t(1) << 33) + 1);
  CHECK(one != big);
  CHECK(one != bigger);
  CHECK(big != bigger);
  CHECK(text(4294967295u) == text(4294967295u));
  CHECK(text(UINT64_MAX) == text(UINT64_MAX));
  CHECK(text(-1) == text(UINT64_MAX));  // negative seeds are taken modulo 2^64
  CHECK(text(INT64_MIN) == text(uint64_t(1) << 63));
  s.post("/v1/completions", {{"prompt", "x"}, {"seed", 1.5}}, 400);
}

TEST_CASE("over HTTP: byte pieces in /tokenize and /detokenize, a stream cut by shutdown says cancelled", "[serve][hardening][reference]") {
  InProcessServer s;
  json t = s.post("/tokenize", {{"content", "é😀"}, {"with_pieces", true}}, 200);
  std::string all;
  for (const json& p : t["tokens"]) all += bytes_of(p["bytes"]);
  CHECK(all.find("é😀") != std::string::npos);
  int32_t byte_token = -1;
  for (int32_t id = 0; id < 1000 && byte_token < 0; ++id)
    if (!serve::is_valid_utf8(s.engine.tokenizer().token_piece(id))) byte_token = id;
  REQUIRE(byte_token >= 0);
  CHECK(s.post("/detokenize", {{"tokens", {byte_token}}}, 200)["content"] == "\uFFFD");

  auto streamed = std::async(std::launch::async, [&] {
    bool done = false;
    auto chunks = s.stream("/v1/completions", {{"prompt", {1, 300, 400}}, {"max_tokens", 400}, {"temperature", 0}}, done);
    return std::make_pair(chunks, done);
  });
  while (s.engine.gauges().running == 0) std::this_thread::sleep_for(5ms);
  std::this_thread::sleep_for(50ms);
  s.engine.shutdown(0ms);
  auto [chunks, done] = streamed.get();
  CHECK(done);
  REQUIRE(!chunks.empty());
  CHECK(chunks.back()["choices"][0]["finish_reason"] == "cancelled");
}
