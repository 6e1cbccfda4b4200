// Issue 41: serve/ in layers, each tested on its own, with no HTTP server:
// the engine's output (TextStream, Generation), the API layer's field
// helpers and finish reasons, the OpenAI parse, the Responses and Messages
// translations and the embeddings inputs. Every expected value is written
// out by hand. Cases that need a real vocabulary (the reference's llama
// SPM vocab, or an Engine over test::tiny_model()) are tagged [reference].
#include <catch2/catch.hpp>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frontends/gguf/gguf.h"
#include "frontends/gguf/tokenizer/tokenizer.h"
#include "serve/api/anthropic/messages.h"
#include "serve/api/common/choice_output.h"
#include "serve/api/common/fields.h"
#include "serve/api/embeddings/embeddings.h"
#include "serve/api/openai/completions.h"
#include "serve/api/responses/responses.h"
#include "serve/chat/chat_prompt.h"
#include "serve/engine/engine.h"
#include "serve/engine/metrics.h"
#include "serve/engine/output.h"
#include "tests/serve/serve_fixtures.h"

using namespace vtc;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// The llama SPM vocabulary of the reference (bos 1, eos 2; "▁one" is one
// token, so text decodes with its leading space).
const Tokenizer& spm() {
  static const gguf::GgufFile file = gguf::GgufFile::open(synth::find_default_vocab("llama"));
  static const Tokenizer tok = Tokenizer::from_gguf(file);
  return tok;
}

std::vector<int32_t> words(const std::string& text) { return spm().encode(text, false, false); }

// The ApiError `f` throws; fails the case when it throws none.
template <class F>
serve::ApiError api_error(F&& f) {
  try {
    f();
  } catch (const serve::ApiError& e) {
    return e;
  }
  FAIL("no ApiError was thrown");
  return serve::ApiError(0, "");
}

serve::EngineOptions tiny_options() {
  serve::EngineOptions o;
  o.model = test::tiny_model();
  o.threads = 2;
  o.parallel = 1;
  return o;
}

}  // namespace

// --- engine/: TextStream ------------------------------------------------------------

TEST_CASE("TextStream ends at the earliest stop string in the text and not the first listed", "[serve][layers][reference]") {
  // " the" is one token, so both stop strings arrive in one push: "h" is
  // listed second but comes first in the text.
  const std::vector<int32_t> the = words("the");
  REQUIRE(the.size() == 1);
  serve::TextStream ts(spm(), {"e", "h"});
  CHECK(ts.push(the[0]) == " t");
  CHECK(ts.stopped());
  CHECK(ts.matched_stop() == "h");
  CHECK(ts.finish() == "");  // nothing after a stop string

  // Across tokens: {"B", "A"} with "A" ("two") before "B" ("three").
  serve::TextStream ts2(spm(), {"three", "two"});
  std::string out;
  for (int32_t id : words("one two three four")) out += ts2.push(id);
  out += ts2.finish();
  CHECK(out == " one ");
  CHECK(ts2.matched_stop() == "two");
}

TEST_CASE("TextStream holds a partial stop string back and releases it at finish", "[serve][layers][reference]") {
  const std::vector<int32_t> ids = words("one two");
  REQUIRE(ids.size() == 2);
  serve::TextStream ts(spm(), {" two three"});
  CHECK(ts.push(ids[0]) == " one");  // the first piece keeps its leading space (continuation)
  CHECK(ts.push(ids[1]) == "");      // " two" may still become " two three"
  CHECK(!ts.stopped());
  CHECK(ts.finish() == " two");
  CHECK(ts.matched_stop() == "");
}

// --- engine/: Generation ------------------------------------------------------------

TEST_CASE("Generation puts the prompt in the penalty window", "[serve][layers][reference]") {
  // argmax is id 2 (3.0), the runner-up id 3 (2.5); repeat_penalty 2
  // divides a penalised positive logit: 3.0 -> 1.5.
  const std::vector<float> row = {0.0f, 1.0f, 3.0f, 2.5f, 0.5f, 0.0f, 0.0f, 0.0f};
  serve::GenerationParams p;
  p.sampling = SamplingParams::greedy();
  p.sampling.temperature = 0;
  p.sampling.repeat_penalty = 2.0f;
  p.sampling.penalty_last_n = 64;
  p.max_tokens = 4;
  SECTION("the argmax is a prompt token: the runner-up") {
    p.prompt = {1, 2};
    serve::Generation g(p, spm());
    CHECK(g.draw(row) == 3);
  }
  SECTION("the argmax is not in the prompt: the argmax") {
    p.prompt = {1, 4};
    serve::Generation g(p, spm());
    CHECK(g.draw(row) == 2);
  }
}

TEST_CASE("Generation::emit names how a generation ended", "[serve][layers][reference]") {
  serve::GenerationParams p;
  p.sampling = SamplingParams::greedy();
  p.prompt = {1};
  const std::vector<int32_t> ids = words("one two");
  REQUIRE(ids.size() == 2);
  serve::FinishReason f;

  SECTION("max_tokens: Length") {
    p.max_tokens = 1;
    serve::Generation g(p, spm());
    const serve::TokenEvent ev = g.emit(ids[0], {}, 1, 512, f);
    CHECK(f.kind == serve::Finish::Length);
    CHECK(!f.context_full);
    CHECK(ev.text == " one");
  }
  SECTION("a full context: Length with context_full") {
    p.max_tokens = 100;
    serve::Generation g(p, spm());
    g.emit(ids[0], {}, 10, 512, f);
    CHECK(f.kind == serve::Finish::None);
    g.emit(ids[1], {}, 511, 512, f);
    CHECK(f.kind == serve::Finish::Length);
    CHECK(f.context_full);
  }
  SECTION("a stop string: Stop with matched_stop") {
    p.max_tokens = 100;
    p.stop = {"two"};
    serve::Generation g(p, spm());
    CHECK(g.emit(ids[0], {}, 1, 512, f).text == " one");
    CHECK(f.kind == serve::Finish::None);
    CHECK(g.emit(ids[1], {}, 2, 512, f).text == " ");
    CHECK(f.kind == serve::Finish::Stop);
    CHECK(f.matched_stop == "two");
    CHECK(!f.eog);
  }
  SECTION("an end-of-generation token: Stop with eog") {
    p.max_tokens = 100;
    serve::Generation g(p, spm());
    REQUIRE(spm().eos() == 2);
    const serve::TokenEvent ev = g.emit(2, {}, 1, 512, f);
    CHECK(f.kind == serve::Finish::Stop);
    CHECK(f.eog);
    CHECK(f.matched_stop == "");
    CHECK(ev.text == "");
  }
}

// --- api/common: fields, finish reasons ---------------------------------------------

TEST_CASE("fields: range and type errors are 400s naming the field", "[serve][layers]") {
  const json body = {{"n", 20}, {"top_p", "high"}, {"stream", true}};
  serve::ApiError e = api_error([&] { serve::fields::get_int(body, "n", 1, 16); });
  CHECK(e.status == 400);
  CHECK(e.param == "n");
  CHECK(std::string(e.what()) == "'n' must be in [1, 16], got 20");
  CHECK(serve::fields::get_int(body, "best_of", 1, 16) == std::nullopt);
  CHECK(serve::fields::get_int(json{{"n", 16}}, "n", 1, 16) == 16);

  e = api_error([&] { serve::fields::get_number(body, "top_p", 0, 1); });
  CHECK(e.param == "top_p");
  CHECK(std::string(e.what()) == "'top_p' must be a number, got a string");
  e = api_error([&] { serve::fields::get_bool(json{{"stream", 1}}, "stream"); });
  CHECK(std::string(e.what()) == "'stream' must be a boolean, got an integer");
  CHECK(serve::fields::get_bool(body, "stream") == true);

  const auto expect_msg = [](const json& v) {
    return std::string(api_error([&] { serve::fields::expect(v, false, "x", "something"); }).what());
  };
  CHECK(expect_msg(json(nullptr)) == "'x' must be something, got null");
  CHECK(expect_msg(json(true)) == "'x' must be something, got a boolean");
  CHECK(expect_msg(json("s")) == "'x' must be something, got a string");
  CHECK(expect_msg(json::array()) == "'x' must be something, got an array");
  CHECK(expect_msg(json::object()) == "'x' must be something, got an object");
  CHECK(expect_msg(json(1.5)) == "'x' must be something, got a number");
  CHECK(expect_msg(json(3)) == "'x' must be something, got an integer");
  CHECK(expect_msg(json(3u)) == "'x' must be something, got an integer");
  serve::fields::expect(json(3), true, "x", "something");  // ok: no throw

  e = api_error([] { serve::fields::check_known(json{{"model", "m"}, {"frobnicate", 1}}, {"model", "prompt"}); });
  CHECK(e.status == 400);
  CHECK(e.param == "frobnicate");
  CHECK(std::string(e.what()) == "Unrecognized request argument supplied: frobnicate");
  serve::fields::check_known(ordered_json{{"prompt", "p"}}, {"model", "prompt"});  // ok

  e = api_error([] { serve::fields::expect_object(json::array()); });
  CHECK(std::string(e.what()) == "the request body must be a JSON object, got an array");
}

TEST_CASE("finish reasons: finish_name and openai_finish_reason for each Finish kind", "[serve][layers]") {
  CHECK(serve::finish_name(serve::Finish::None) == "");
  CHECK(serve::finish_name(serve::Finish::Stop) == "stop");
  CHECK(serve::finish_name(serve::Finish::Length) == "length");
  CHECK(serve::finish_name(serve::Finish::Cancelled) == "cancelled");
  CHECK(serve::finish_name(serve::Finish::Error) == "error");
  using CF = serve::ChoiceFinish;
  CHECK(serve::openai_finish_reason(CF{serve::Finish::None, false, ""}) == "");
  CHECK(serve::openai_finish_reason(CF{serve::Finish::Stop, false, ""}) == "stop");
  CHECK(serve::openai_finish_reason(CF{serve::Finish::Stop, false, "END"}) == "stop");
  CHECK(serve::openai_finish_reason(CF{serve::Finish::Length, false, ""}) == "length");
  CHECK(serve::openai_finish_reason(CF{serve::Finish::Cancelled, false, ""}) == "cancelled");
  CHECK(serve::openai_finish_reason(CF{serve::Finish::Error, false, ""}) == "error");
  CHECK(serve::openai_finish_reason(CF{serve::Finish::Stop, true, ""}) == "tool_calls");
}

// --- api/openai: parse_completion ---------------------------------------------------

TEST_CASE("parse_completion: tool_choice values and repeat_last_n", "[serve][layers][reference]") {
  serve::Metrics metrics;
  serve::Engine engine(tiny_options(), metrics);
  const auto tmpl = serve::PromptTemplate::load(engine.file(), engine.tokenizer(), "chatml", "");
  REQUIRE(engine.n_ctx() == 512);  // the tiny llama's context

  const ordered_json tools = ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  const auto chat_with = [&](const ordered_json& choice) {
    ordered_json b = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 4}, {"tools", tools}};
    if (!choice.is_null()) b["tool_choice"] = choice;
    return b;
  };
  CHECK(serve::parse_completion(chat_with("none"), true, engine, *tmpl).tool_choice == serve::ToolChoice::None);
  CHECK(serve::parse_completion(chat_with("auto"), true, engine, *tmpl).tool_choice == serve::ToolChoice::Auto);
  CHECK(serve::parse_completion(chat_with("required"), true, engine, *tmpl).tool_choice == serve::ToolChoice::Required);
  CHECK(serve::parse_completion(chat_with(nullptr), true, engine, *tmpl).tool_choice == serve::ToolChoice::Auto);
  const serve::CompletionRequest fn = serve::parse_completion(
      chat_with({{"type", "function"}, {"function", {{"name", "get_weather"}}}}), true, engine, *tmpl);
  CHECK(fn.tool_choice == serve::ToolChoice::Function);
  CHECK(fn.tool_function == "get_weather");
  serve::ApiError e = api_error([&] { serve::parse_completion(chat_with("sometimes"), true, engine, *tmpl); });
  CHECK(e.status == 400);
  CHECK(e.param == "tool_choice");
  CHECK(std::string(e.what()) == "'tool_choice' must be none, auto, required or a function, got 'sometimes'");
  ordered_json no_tools = chat_with("auto");
  no_tools.erase("tools");
  e = api_error([&] { serve::parse_completion(no_tools, true, engine, *tmpl); });
  CHECK(e.param == "tool_choice");
  CHECK(std::string(e.what()) == "'tool_choice' needs 'tools'");

  const auto last_n = [&](const ordered_json& extra) {
    ordered_json b = {{"prompt", "hello"}, {"max_tokens", 2}};
    for (const auto& [k, v] : extra.items()) b[k] = v;
    return serve::parse_completion(b, false, engine, *tmpl).gen.sampling.penalty_last_n;
  };
  CHECK(last_n(ordered_json::object()) == 64);
  CHECK(last_n({{"repeat_last_n", -1}}) == 512);
  CHECK(last_n({{"repeat_last_n", 0}}) == 0);
  CHECK(last_n({{"repeat_last_n", 7}}) == 7);
  e = api_error([&] { last_n({{"repeat_last_n", -2}}); });
  CHECK(e.param == "repeat_last_n");
  CHECK(std::string(e.what()) == "'repeat_last_n' must be in [-1, 2147483647], got -2");
}

// --- api/anthropic, api/responses: the chat body --------------------------------------

TEST_CASE("a small Messages body and a small Responses body become these chat bodies", "[serve][layers]") {
  const ordered_json messages = ordered_json::parse(R"({
    "model": "claude", "max_tokens": 8, "system": "Be brief.", "temperature": 0.5, "stop_sequences": ["END"],
    "messages": [{"role": "user", "content": "Hi"}], "thinking": {"type": "disabled"}})");
  const json expected_from_messages = json::parse(R"({
    "model": "claude", "temperature": 0.5, "max_tokens": 8, "stop": ["END"],
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
    "chat_template_kwargs": {"enable_thinking": false}})");
  CHECK(json(serve::chat_body_from_messages(messages)) == expected_from_messages);

  const ordered_json responses = ordered_json::parse(R"({
    "model": "gpt", "instructions": "Be brief.", "input": "Hi", "max_output_tokens": 7, "top_p": 0.9,
    "text": {"format": {"type": "json_object"}}})");
  const json expected_from_responses = json::parse(R"({
    "model": "gpt", "top_p": 0.9, "max_tokens": 7, "response_format": {"type": "json_object"},
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]})");
  CHECK(json(serve::chat_body_from_responses(responses)) == expected_from_responses);
}

// --- api/embeddings: the inputs' errors ------------------------------------------------
// (the HTTP test embeddings_test.sh checks the messages of the length,
// empty and vocabulary errors; these check the shape errors and `param`.)

TEST_CASE("embedding_inputs: shape errors name the input", "[serve][layers][reference]") {
  serve::Metrics metrics;
  serve::Engine engine(tiny_options(), metrics);
  const std::string shape = "a string, an array of strings, an array of token ids, or an array of arrays of token ids";
  serve::ApiError e = api_error([&] { serve::embedding_inputs(json(3), engine); });
  CHECK(e.status == 400);
  CHECK(e.param == "input");
  CHECK(std::string(e.what()) == "'input' must be " + shape + ", and not empty");
  e = api_error([&] { serve::embedding_inputs(json::array({"a", 3}), engine); });
  CHECK(e.param == "input[1]");
  CHECK(std::string(e.what()) == "'input[1]' must be " + shape);
  e = api_error([&] { serve::embedding_inputs(json::parse(R"([[1, 2], [3, "x"]])"), engine, "content"); });
  CHECK(e.param == "content[1]");
  CHECK(std::string(e.what()) == "'content[1]' must be " + shape);
  e = api_error([&] { serve::embedding_inputs(json::array({1, 99999999}), engine); });
  CHECK(e.param == "input");
  CHECK(std::string(e.what()) == "input: token id 99999999 is outside the vocabulary [0, 32000)");
  const auto ok = serve::embedding_inputs(json::array({json::array({1, 2}), json::array({3})}), engine);
  CHECK(ok == std::vector<std::vector<int32_t>>{{1, 2}, {3}});
}
