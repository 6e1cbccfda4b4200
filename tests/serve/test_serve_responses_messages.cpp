// Issue 29: the Responses and Messages APIs as chat bodies (what the shared
// chat parser then sees), the 400s they answer in their own terms, and the
// error shapes on the wire. The client-facing behaviour is tested with the
// official SDKs (responses_client.mjs, anthropic_messages_client.mjs).
#include <catch2/catch.hpp>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "serve/api/anthropic/messages.h"
#include "serve/api/responses/responses.h"
#include "tests/serve/in_process_server.h"
#include "tests/serve/serve_fixtures.h"

using namespace vtc;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// The param of the ApiError a translation throws ("" when it does not).
template <class F>
std::string rejected_param(F&& translate) {
  try {
    translate();
  } catch (const serve::ApiError& e) {
    CHECK(e.status == 400);
    return e.param.empty() ? std::string("<none>") : e.param;
  }
  return "";
}

const ordered_json kWeatherSchema = {{"type", "object"},
                                     {"properties", {{"city", {{"type", "string"}}}}},
                                     {"required", {"city"}}};

}  // namespace

TEST_CASE("a Responses body becomes the chat body it stands for", "[serve][responses]") {
  SECTION("a string input, instructions, and the sampling fields") {
    const ordered_json chat = serve::chat_body_from_responses(
        {{"model", "m"}, {"instructions", "Be brief."}, {"input", "Hi"}, {"max_output_tokens", 7},
         {"temperature", 0.5}, {"top_p", 0.9}, {"stream", true}});
    CHECK(chat["messages"] == ordered_json::parse(R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}])"));
    CHECK(chat["max_tokens"] == 7);
    CHECK(chat["temperature"] == 0.5);
    CHECK(chat["top_p"] == 0.9);
    CHECK(chat["stream"] == true);
    CHECK(!chat.contains("max_output_tokens"));
  }
  SECTION("items: messages with parts, reasoning, function_call and its output") {
    const ordered_json items = ordered_json::parse(R"([
      {"role": "developer", "content": "Use tools."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather "}, {"type": "input_text", "text": "in Paris?"}]},
      {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Call it."}]},
      {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}", "status": "completed"},
      {"type": "function_call", "call_id": "call_2", "name": "get_weather", "arguments": "{\"city\":\"Lyon\"}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "18 C"},
      {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "20 C"}]},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Warm.", "annotations": []}]}
    ])");
    const ordered_json chat = serve::chat_body_from_responses({{"input", items}});
    const ordered_json expected = ordered_json::parse(R"([
      {"role": "developer", "content": "Use tools."},
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "", "reasoning_content": "Call it.", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
        {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Lyon\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
      {"role": "tool", "tool_call_id": "call_2", "content": "20 C"},
      {"role": "assistant", "content": "Warm."}
    ])");
    CHECK(chat["messages"] == expected);
  }
  SECTION("flat function tools, tool_choice, text.format and reasoning.effort") {
    const ordered_json chat = serve::chat_body_from_responses(
        {{"input", "x"},
         {"tools", {{{"type", "function"}, {"name", "get_weather"}, {"description", "d"}, {"parameters", kWeatherSchema},
                     {"strict", true}}}},
         {"tool_choice", {{"type", "function"}, {"name", "get_weather"}}},
         {"parallel_tool_calls", false},
         {"text", {{"format", {{"type", "json_schema"}, {"name", "w"}, {"schema", kWeatherSchema}, {"strict", true}}}}},
         {"reasoning", {{"effort", "none"}}}});
    CHECK(chat["tools"] == ordered_json::parse(R"([{"type":"function","function":{"name":"get_weather","description":"d",
      "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":true}}])"));
    CHECK(chat["tool_choice"] == ordered_json::parse(R"({"type":"function","function":{"name":"get_weather"}})"));
    CHECK(chat["parallel_tool_calls"] == false);
    CHECK(chat["response_format"]["type"] == "json_schema");
    CHECK(chat["response_format"]["json_schema"]["schema"] == kWeatherSchema);
    CHECK(chat["reasoning_effort"] == "none");
    CHECK(chat["chat_template_kwargs"]["enable_thinking"] == false);
    CHECK(serve::chat_body_from_responses({{"input", "x"}, {"reasoning", {{"effort", "high"}}}})["chat_template_kwargs"]["enable_thinking"] == true);
    CHECK(!serve::chat_body_from_responses({{"input", "x"}, {"text", {{"format", {{"type", "text"}}}}}}).contains("response_format"));
  }
  SECTION("400s name the Responses field") {
    CHECK(rejected_param([] { serve::chat_body_from_responses({{"input", "x"}, {"store", true}}); }) == "store");
    CHECK(rejected_param([] { serve::chat_body_from_responses({{"input", "x"}, {"store", false}}); }).empty());
    CHECK(rejected_param([] { serve::chat_body_from_responses({{"input", "x"}, {"previous_response_id", "resp_1"}}); }) ==
          "previous_response_id");
    CHECK(rejected_param([] { serve::chat_body_from_responses({{"input", "x"}, {"conversation", "c"}}); }) == "conversation");
    CHECK(rejected_param([] { serve::chat_body_from_responses({{"max_output_tokens", 4}}); }) == "input");
    CHECK(rejected_param([] { serve::chat_body_from_responses({{"input", 3}}); }) == "input");
    CHECK(rejected_param([] { serve::chat_body_from_responses({{"input", "x"}, {"frobnicate", 1}}); }) == "frobnicate");
    CHECK(rejected_param([] {
            serve::chat_body_from_responses({{"input", {{{"type", "item_reference"}, {"id", "msg_1"}}}}});
          }) == "input[0].type");
    CHECK(rejected_param([] {
            serve::chat_body_from_responses(
                {{"input", {{{"role", "user"}, {"content", {{{"type", "input_image"}, {"image_url", "u"}}}}}}}});
          }) == "input[0].content[0]");
    CHECK(rejected_param([] {
            serve::chat_body_from_responses({{"input", {{{"type", "function_call"}, {"name", "f"}}}}});
          }) == "input[0].call_id");
    CHECK(rejected_param([] { serve::chat_body_from_responses({{"input", "x"}, {"tools", {{{"type", "web_search"}}}}}); }) ==
          "tools[0].type");
    CHECK(rejected_param([] {
            serve::chat_body_from_responses({{"input", "x"}, {"text", {{"format", {{"type", "json_schema"}}}}}});
          }) == "text.format.schema");
    CHECK(rejected_param([] { serve::chat_body_from_responses({{"input", "x"}, {"reasoning", {{"effort", "max"}}}}); }) ==
          "reasoning.effort");
  }
  SECTION("errors from the shared chat parser are renamed to the Responses field") {
    const serve::ApiError e(400, "'max_tokens' must be in [1, 2147483647], got 0", "max_tokens");
    const serve::ApiError renamed = serve::with_field_names(e, {{"max_tokens", "max_output_tokens"}});
    CHECK(renamed.param == "max_output_tokens");
    CHECK(std::string(renamed.what()) == "'max_output_tokens' must be in [1, 2147483647], got 0");
    CHECK(serve::with_field_names(serve::ApiError(400, "bad", "messages[2].content"), {{"messages", "input"}}).param ==
          "input[2].content");
  }
}

TEST_CASE("a Messages body becomes the chat body it stands for", "[serve][messages]") {
  SECTION("system blocks, text, tool_use, tool_result and thinking blocks") {
    const ordered_json body = ordered_json::parse(R"({
      "model": "m", "max_tokens": 64, "temperature": 0.2, "top_k": 5, "stop_sequences": ["END"],
      "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Use tools."}],
      "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [
          {"type": "thinking", "thinking": "Call it.", "signature": ""},
          {"type": "text", "text": "Checking."},
          {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
          {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "18 C"}]},
          {"type": "text", "text": "And tomorrow?"}]}
      ]})");
    const ordered_json chat = serve::chat_body_from_messages(body);
    const ordered_json expected = ordered_json::parse(R"([
      {"role": "system", "content": "Be brief.\n\nUse tools."},
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "Checking.", "reasoning_content": "Call it.", "tool_calls": [
        {"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "toolu_1", "content": "18 C"},
      {"role": "user", "content": "And tomorrow?"}
    ])");
    CHECK(chat["messages"] == expected);
    CHECK(chat["max_tokens"] == 64);
    CHECK(chat["stop"] == ordered_json::array({"END"}));
    CHECK(chat["top_k"] == 5);
    CHECK(chat["temperature"] == 0.2);
  }
  SECTION("tools, tool_choice and thinking") {
    ordered_json body = {{"max_tokens", 8},
                         {"messages", {{{"role", "user"}, {"content", "x"}}}},
                         {"tools", {{{"name", "get_weather"}, {"description", "d"}, {"input_schema", kWeatherSchema}}}},
                         {"tool_choice", {{"type", "any"}, {"disable_parallel_tool_use", true}}},
                         {"thinking", {{"type", "disabled"}}}};
    ordered_json chat = serve::chat_body_from_messages(body);
    CHECK(chat["tools"][0]["function"]["parameters"] == kWeatherSchema);
    CHECK(chat["tool_choice"] == "required");
    CHECK(chat["parallel_tool_calls"] == false);
    CHECK(chat["chat_template_kwargs"]["enable_thinking"] == false);
    body["tool_choice"] = {{"type", "tool"}, {"name", "get_weather"}};
    body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 1024}};
    chat = serve::chat_body_from_messages(body);
    CHECK(chat["tool_choice"]["function"]["name"] == "get_weather");
    CHECK(chat["chat_template_kwargs"]["enable_thinking"] == true);
  }
  SECTION("400s name the Messages field") {
    const ordered_json user = {{{"role", "user"}, {"content", "x"}}};
    CHECK(rejected_param([&] { serve::chat_body_from_messages({{"messages", user}}); }) == "max_tokens");
    CHECK(rejected_param([&] { serve::chat_body_from_messages({{"messages", user}}, /*count_only=*/true); }).empty());
    CHECK(rejected_param([] { serve::chat_body_from_messages({{"max_tokens", 8}}); }) == "messages");
    CHECK(rejected_param([&] { serve::chat_body_from_messages({{"max_tokens", 8}, {"messages", user}, {"n", 2}}); }) == "n");
    CHECK(rejected_param([] {
            serve::chat_body_from_messages(
                {{"max_tokens", 8},
                 {"messages", {{{"role", "user"}, {"content", {{{"type", "image"}, {"source", json::object()}}}}}}}});
          }) == "messages[0].content[0].type");
    CHECK(rejected_param([] {
            serve::chat_body_from_messages({{"max_tokens", 8}, {"messages", {{{"role", "system"}, {"content", "x"}}}}});
          }) == "messages[0].role");
    CHECK(rejected_param([&] {
            serve::chat_body_from_messages({{"max_tokens", 8}, {"messages", user}, {"tools", {{{"type", "bash_20250124"}, {"name", "bash"}}}}});
          }) == "tools[0].type");
    CHECK(rejected_param([&] {
            serve::chat_body_from_messages({{"max_tokens", 8}, {"messages", user}, {"tool_choice", {{"type", "some"}}}});
          }) == "tool_choice.type");
    CHECK(serve::with_field_names(serve::ApiError(400, "'stop' holds at most 4 strings, got 5", "stop"),
                                  {{"stop", "stop_sequences"}}).param == "stop_sequences");
  }
  SECTION("Anthropic's error shape") {
    CHECK(serve::anthropic_error_body(400, "bad") ==
          json::parse(R"({"type":"error","error":{"type":"invalid_request_error","message":"bad"}})"));
    CHECK(serve::anthropic_error_body(401, "k")["error"]["type"] == "authentication_error");
    CHECK(serve::anthropic_error_body(503, "busy")["error"]["type"] == "overloaded_error");
  }
}

TEST_CASE("the new routes answer 400s in their API's shape", "[serve][responses][messages][reference]") {
  test::InProcessServer s(test::tiny_model(), "tiny-llama");
  auto [status, raw] = s.post_raw("/v1/messages", {{"messages", {{{"role", "user"}, {"content", "x"}}}}});
  CHECK(status == 400);
  const json anthropic = json::parse(raw);
  CHECK(anthropic["type"] == "error");
  CHECK(anthropic["error"]["type"] == "invalid_request_error");
  CHECK(anthropic["error"]["message"].get<std::string>().find("max_tokens") != std::string::npos);
  // Not JSON at all: still Anthropic's shape on that path.
  httplib::Client c("127.0.0.1", s.port);
  auto res = c.Post("/v1/messages", "{", "application/json");
  REQUIRE(res);
  CHECK(res->status == 400);
  CHECK(json::parse(res->body)["type"] == "error");

  const json openai = s.post("/v1/responses", {{"input", "x"}, {"store", true}}, 400);
  CHECK(openai["error"]["param"] == "store");
  CHECK(openai["error"]["type"] == "invalid_request_error");
  const json zero = s.post("/v1/responses", {{"input", "x"}, {"max_output_tokens", 0}}, 400);
  CHECK(zero["error"]["param"] == "max_output_tokens");

  // count_tokens: the rendered prompt's tokens, as /v1/messages counts them.
  const json body = {{"messages", {{{"role", "user"}, {"content", "Hello"}}}}};
  const json counted = s.post("/v1/messages/count_tokens", body, 200);
  json create = body;
  create["max_tokens"] = 1;
  CHECK(counted["input_tokens"] == s.post("/v1/messages", create, 200)["usage"]["input_tokens"]);
}
