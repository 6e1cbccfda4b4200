// Issue 29: tools on a template with no tool syntax of its own (the model
// has no chat template, so the built-in chatml) use the generic JSON
// tool-call format (serve/chat/generic_tools.h) instead of a 400: the
// prompt describes the tools, the grammar holds the output to the format's
// JSON object, and the parser turns it into OpenAI tool_calls. The tiny
// random-weight model writes only what the grammar lets it, so with
// tool_choice "required" the answer must be a call of one of the request's
// tools whose arguments satisfy the tool's schema (facts of the request,
// not of the code under test).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/serve/in_process_server.h"
#include "tests/serve/serve_fixtures.h"

using namespace vtc;
using nlohmann::json;

namespace {

const json kTools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8},
                 "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                 "required": ["city", "unit"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time",
   "parameters": {"type": "object", "properties": {"zone": {"type": "integer"}}, "required": ["zone"],
                  "additionalProperties": false}}}])");

void check_call(const json& call) {
  const std::string name = call["function"]["name"];
  REQUIRE((name == "get_weather" || name == "get_time"));
  const json args = json::parse(call["function"]["arguments"].get<std::string>());
  if (name == "get_time") {
    CHECK(args.size() == 1);
    CHECK(args["zone"].is_number_integer());
  } else {
    CHECK(args.size() == 2);
    CHECK((args["unit"] == "celsius" || args["unit"] == "fahrenheit"));
  }
  CHECK(!call["id"].get<std::string>().empty());
}

}  // namespace

TEST_CASE("tools on the built-in chatml use the generic JSON tool-call format", "[serve][tools][reference]") {
  test::InProcessServer s(test::tiny_model(), "tiny");  // no template in the model: built-in chatml
  json request = {{"messages", {{{"role", "system"}, {"content", "Be brief."}},
                                {{"role", "user"}, {"content", "What time is it in zone 3?"}}}},
                  {"tools", kTools}, {"tool_choice", "required"}, {"parallel_tool_calls", false},
                  {"max_tokens", 120}, {"temperature", 0}};
  // The prompt: the system message, then the tools and the answer shape.
  const std::string prompt = s.post("/apply-template", request, 200)["prompt"];
  INFO(prompt);
  CHECK(prompt.rfind("<|im_start|>system\nBe brief.\n\nYou can call any of the following tools", 0) == 0);
  CHECK(prompt.find("\"get_time\"") != std::string::npos);
  CHECK(prompt.find("Respond in JSON format, either with `tool_call`") != std::string::npos);

  const json r = s.post("/v1/chat/completions", request, 200);
  INFO(r.dump());
  const json& msg = r["choices"][0]["message"];
  REQUIRE(msg["tool_calls"].size() == 1);
  check_call(msg["tool_calls"][0]);
  CHECK(r["choices"][0]["finish_reason"] == "tool_calls");

  // Streamed: the same call, as one delta.
  request["stream"] = true;
  auto [status, raw] = s.post_raw("/v1/chat/completions", request);
  REQUIRE(status == 200);
  std::stringstream ss(raw);
  int calls = 0;
  for (std::string line; std::getline(ss, line);) {
    if (line.rfind("data: {", 0) != 0) continue;
    const json chunk = json::parse(line.substr(6));
    if (chunk["choices"].empty()) continue;
    const json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("tool_calls")) {
      ++calls;
      check_call(delta["tool_calls"][0]);
      CHECK(delta["tool_calls"][0]["function"]["name"] == msg["tool_calls"][0]["function"]["name"]);
    }
  }
  CHECK(calls == 1);

  // A second turn sends the call and its result back: they are replayed
  // in the format's JSON, not refused.
  json second = {{"messages", {{{"role", "user"}, {"content", "What time is it in zone 3?"}},
                               {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", msg["tool_calls"]}},
                               {{"role", "tool"}, {"tool_call_id", msg["tool_calls"][0]["id"]}, {"content", "09:00"}}}},
                 {"tools", kTools}};
  const std::string replay = s.post("/apply-template", second, 200)["prompt"];
  CHECK(replay.find("\"tool_calls\": [") != std::string::npos);
  CHECK(replay.find("<|im_start|>user\n{\n  \"tool_response\": {") != std::string::npos);
}
