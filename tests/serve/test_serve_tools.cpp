// Issue 17 over HTTP: tool calls (rendered with a real model template from
// the reference bundle, parsed back into OpenAI tool_calls, streamed and
// not), and structured output (response_format json_object / json_schema,
// grammar, regex) on the tiny random-weight model.
//
// A random-weight model writes no tool call by itself, so the tests use
// tool_choice "required": the grammar forces a call in the template
// family's syntax, and the parser must then find exactly that call. The
// expected values (the tool's name, arguments that validate against its
// schema, the family's tool-response rendering) come from the request and
// the template, not from the code under test.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <iterator>
#include <map>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "serve/api/common/structured_output.h"
#include "tests/serve/in_process_server.h"
#include "tests/serve/serve_fixtures.h"
#include "tests/test_process.h"

using namespace vtc;
using nlohmann::json;

namespace {

std::string reference_template(const std::string& name) {
  const char* cache = std::getenv("VTC_REF_CACHE");
  REQUIRE(cache);
  const auto path = std::filesystem::path(cache) / "llama.cpp" / "models" / "templates" / name;
  REQUIRE(std::filesystem::exists(path));
  return path.string();
}

const json kWeatherTool = json::parse(R"({"type": "function", "function": {
  "name": "get_weather", "description": "Current weather in a city",
  "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                                  "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                 "required": ["city", "unit"], "additionalProperties": false}}})");
const json kTimeTool = json::parse(R"({"type": "function", "function": {
  "name": "get_time", "parameters": {"type": "object", "properties": {"zone": {"type": "integer"}}, "required": ["zone"]}}})");

// Characters (code points) in UTF-8 text: JSON schema lengths count them.
size_t chars(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool valid_weather_args(const json& a) {
  return a.is_object() && a.size() == 2 && a["city"].is_string() && chars(a["city"].get<std::string>()) <= 12 &&
         (a["unit"] == "celsius" || a["unit"] == "fahrenheit");
}

// The data payloads of a stream, and whether it ended with [DONE].
std::vector<json> stream_chunks(const test::InProcessServer& s, json body, bool& done) {
  body["stream"] = true;
  auto [status, raw] = s.post_raw("/v1/chat/completions", body);
  REQUIRE(status == 200);
  std::vector<json> out;
  done = false;
  std::stringstream ss(raw);
  for (std::string line; std::getline(ss, line);) {
    if (line == "data: [DONE]") done = true;
    else if (line.rfind("data: ", 0) == 0) out.push_back(json::parse(line.substr(6)));
  }
  return out;
}

}  // namespace

TEST_CASE("a required tool call on a Qwen3 template: rendered, forced, parsed, streamed, answered", "[serve][tools][reference]") {
  test::InProcessServer s(test::tiny_model(), "tiny", reference_template("Qwen-Qwen3-0.6B.jinja"));
  const json request = {{"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}},
                        {"tools", {kWeatherTool, kTimeTool}},
                        {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}},
                        {"parallel_tool_calls", false},  // one call, then the grammar ends generation
                        {"chat_template_kwargs", {{"enable_thinking", false}}},
                        {"max_tokens", 150}, {"temperature", 0}};  // the prompt is ~315 of the 512 tokens
  // The tools are in the prompt, as the template lays them out.
  const std::string prompt = s.post("/apply-template", request, 200)["prompt"];
  CHECK(prompt.find("<tools>") != std::string::npos);
  CHECK(prompt.find("\"name\": \"get_weather\"") != std::string::npos);

  const json r = s.post("/v1/chat/completions", request, 200);
  const json& choice = r["choices"][0];
  INFO(r.dump());
  CHECK(choice["finish_reason"] == "tool_calls");
  REQUIRE(choice["message"]["tool_calls"].size() == 1);
  const json& call = choice["message"]["tool_calls"][0];
  CHECK(call["type"] == "function");
  CHECK(call["function"]["name"] == "get_weather");
  CHECK(call["id"].get<std::string>().size() > 4);
  const json args = json::parse(call["function"]["arguments"].get<std::string>());
  CHECK(valid_weather_args(args));

  // Streamed: the deltas add up to the same call.
  bool done = false;
  const auto chunks = stream_chunks(s, request, done);
  CHECK(done);
  std::string name, arguments, finish;
  for (const json& ch : chunks) {
    const json& c = ch["choices"][0];
    if (c["delta"].contains("tool_calls"))
      for (const json& t : c["delta"]["tool_calls"]) {
        name += t["function"].value("name", "");
        arguments += t["function"].value("arguments", "");
      }
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  CHECK(name == "get_weather");
  CHECK(json::parse(arguments) == args);
  CHECK(finish == "tool_calls");

  // The round trip: the call and its result go back in; the template
  // renders the result as a tool response.
  json next = request;
  next.erase("tool_choice");
  next["messages"].push_back(choice["message"]);
  next["messages"].push_back({{"role", "tool"}, {"tool_call_id", call["id"]}, {"content", "18 C, clear"}});
  const std::string replay = s.post("/apply-template", next, 200)["prompt"];
  CHECK(replay.find("<tool_response>\n18 C, clear\n</tool_response>") != std::string::npos);
  CHECK(replay.find("\"name\": \"get_weather\"") != std::string::npos);
  next["max_tokens"] = 4;
  CHECK(s.post("/v1/chat/completions", next, 200)["choices"].size() == 1);
}

TEST_CASE("tool_choice required on a Llama 3.1 template gives a parsed call of one of the tools", "[serve][tools][reference]") {
  test::InProcessServer s(test::tiny_model(), "tiny", reference_template("meta-llama-Llama-3.1-8B-Instruct.jinja"));
  const json request = {{"messages", {{{"role", "user"}, {"content", "What time is it in zone 3?"}}}},
                        {"tools", {kWeatherTool, kTimeTool}}, {"tool_choice", "required"},
                        {"parallel_tool_calls", false}, {"max_tokens", 60}, {"temperature", 0}};
  const std::string prompt = s.post("/apply-template", request, 200)["prompt"];
  CHECK(prompt.find("Cutting Knowledge Date") != std::string::npos);
  const json r = s.post("/v1/chat/completions", request, 200);
  INFO(r.dump());
  const json& msg = r["choices"][0]["message"];
  REQUIRE(msg["tool_calls"].size() == 1);
  const std::string name = msg["tool_calls"][0]["function"]["name"];
  CHECK((name == "get_weather" || name == "get_time"));
  const json args = json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>());
  CHECK((name == "get_weather" ? valid_weather_args(args) : args["zone"].is_number_integer()));
  CHECK(r["choices"][0]["finish_reason"] == "tool_calls");
}

TEST_CASE("tool requests that cannot work are a 400 naming the field", "[serve][tools][reference]") {
  test::InProcessServer s(test::tiny_model(), "tiny");  // built-in chatml (tools: test_serve_generic_tools.cpp)
  const json msgs = {{{"role", "user"}, {"content", "hi"}}};
  CHECK(s.post("/v1/chat/completions", {{"messages", msgs}, {"tool_choice", "required"}}, 400)["error"]["param"] == "tool_choice");
  CHECK(s.post("/v1/chat/completions", {{"messages", msgs}, {"tools", {{{"type", "function"}}}}}, 400)["error"]["param"] ==
        "tools[0].function.name");
}

TEST_CASE("structured output: json_schema, json_object, grammar and regex hold on sampled output", "[serve][structured][reference]") {
  test::InProcessServer s(test::tiny_model(), "tiny");
  const json schema = json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 10},
      "age": {"type": "integer", "minimum": 0, "maximum": 150},
      "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "maxItems": 3},
      "address": {"type": "object", "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}}, "required": ["zip"],
                  "additionalProperties": false}},
    "required": ["name", "age", "tags", "address"], "additionalProperties": false})");
  const json msgs = {{{"role", "user"}, {"content", "Describe a person as JSON."}}};
  const json rf = {{"type", "json_schema"}, {"json_schema", {{"name", "person"}, {"strict", true}, {"schema", schema}}}};
  int valid = 0;
  for (int seed = 0; seed < 20; ++seed) {
    const json r = s.post("/v1/chat/completions",
                          {{"messages", msgs}, {"response_format", rf}, {"max_tokens", 200}, {"temperature", 1.0}, {"seed", seed}}, 200);
    const std::string text = r["choices"][0]["message"]["content"];
    const json v = json::parse(text, nullptr, false);
    const bool ok = !v.is_discarded() && v.is_object() && v.size() == 4 && v["name"].is_string() &&
                    chars(v["name"].get<std::string>()) <= 10 && v["age"].is_number_integer() && v["age"].get<int>() >= 0 &&
                    v["age"].get<int>() <= 150 && v["tags"].is_array() && v["tags"].size() <= 3 &&
                    std::regex_match(v["address"].value("zip", std::string()), std::regex("[0-9]{5}")) &&
                    v["address"].size() == 1 && r["choices"][0]["finish_reason"] == "stop";
    if (!ok) UNSCOPED_INFO("seed " << seed << ": " << text);
    valid += ok;
  }
  CHECK(valid == 20);

  const json obj = s.post("/v1/completions", {{"prompt", "JSON:"}, {"response_format", {{"type", "json_object"}}},
                                             {"max_tokens", 120}, {"temperature", 1.0}, {"seed", 3}}, 400);
  CHECK(obj["error"]["param"] == "response_format");  // completions have no response_format (OpenAI's chat field)
  // Room for the object to close (a cut one ends with "length").
  const json chat_obj = s.post("/v1/chat/completions", {{"messages", msgs}, {"response_format", {{"type", "json_object"}}},
                                                        {"max_tokens", 400}, {"temperature", 1.0}, {"seed", 3}}, 200);
  CHECK(chat_obj["choices"][0]["finish_reason"] == "stop");
  const json parsed = json::parse(chat_obj["choices"][0]["message"]["content"].get<std::string>(), nullptr, false);
  CHECK((!parsed.is_discarded() && parsed.is_object()));

  const json yes_no = s.post("/v1/completions", {{"prompt", "Answer:"}, {"grammar", "root ::= \"yes\" | \"no\""},
                                                {"max_tokens", 10}, {"temperature", 1.0}, {"seed", 1}}, 200);
  const std::string answer = yes_no["choices"][0]["text"];
  CHECK((answer == "yes" || answer == "no"));
  const json code = s.post("/v1/completions", {{"prompt", "Code:"}, {"regex", "[0-9]{3}-[a-z]{2}"},
                                              {"max_tokens", 20}, {"temperature", 1.0}, {"seed", 2}}, 200);
  CHECK(std::regex_match(code["choices"][0]["text"].get<std::string>(), std::regex("[0-9]{3}-[a-z]{2}")));

  // Bad constraints are a 400 naming the field; two at once too.
  CHECK(s.post("/v1/completions", {{"prompt", "x"}, {"grammar", "root ::= ("}}, 400)["error"]["param"] == "grammar");
  CHECK(s.post("/v1/completions", {{"prompt", "x"}, {"regex", "(?<=a)b"}}, 400)["error"]["param"] == "regex");
  CHECK(s.post("/v1/chat/completions", {{"messages", msgs}, {"response_format", {{"type", "json_schema"},
            {"json_schema", {{"schema", {{"type", "object"}, {"not", {{"type", "null"}}}}}}}}}}, 400)["error"]["param"] ==
        "response_format.json_schema.schema");
  CHECK(s.post("/v1/completions", {{"prompt", "x"}, {"grammar", "root ::= \"a\""}, {"regex", "a"}}, 400)["error"]["param"] == "regex");
}

TEST_CASE("vtc apply-template prints exactly what /apply-template returns", "[serve][tools][reference]") {
  const std::string tmpl = reference_template("Qwen-Qwen3-0.6B.jinja");
  test::InProcessServer s(test::tiny_model(), "tiny", tmpl);
  const json request = {{"messages", {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Weather?"}}}},
                        {"tools", {kWeatherTool}}, {"chat_template_kwargs", {{"enable_thinking", false}}}};
  const auto path = std::filesystem::temp_directory_path() / fmt::format("vtc-apply-{}.json", getpid());
  std::ofstream(path) << request.dump();
  const std::string cli = test::run_capture(
      fmt::format("{} apply-template {} {} --chat-template-file {}", VTC_TOOL, test::tiny_model(), path.string(), tmpl));
  std::filesystem::remove(path);
  CHECK(cli == s.post("/apply-template", request, 200)["prompt"].get<std::string>());
  CHECK(cli.find("<|im_start|>assistant\n<think>\n\n</think>\n\n") != std::string::npos);  // enable_thinking false
}

TEST_CASE("tool_choice auto: text is free until the call marker, then the call is held to the tool's schema", "[serve][tools][reference]") {
  test::InProcessServer s(test::tiny_model(), "tiny");
  std::ifstream in(reference_template("Qwen-Qwen3-0.6B.jinja"));
  serve::CompletionRequest req;
  req.chat = true;
  req.template_source.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  req.has_tools = true;
  req.tools_json = json::array({kWeatherTool}).dump();
  req.tool_choice = vtc::serve::ToolChoice::Auto;
  req.parallel_tool_calls = false;
  const auto g = serve::requested_grammar(nlohmann::ordered_json::object(), req);
  REQUIRE(g.has_value());
  CHECK(g->trigger == "<tool_call>");
  auto constraint = serve::grammar_constraint(*g, s.engine);
  const auto& tok = s.engine.tokenizer();
  // Text goes in one character per token (single-byte pieces): the
  // tokenizer's own encoding may add a space prefix (SentencePiece).
  std::map<char, int32_t> byte_token;
  for (int32_t id = 0; id < int32_t(s.engine.n_vocab()); ++id) {
    const std::string p = tok.token_piece(id);
    if (p.size() == 1 && !byte_token.count(p[0]) && !tok.is_control(id)) byte_token[p[0]] = id;
  }
  const size_t V = size_t(s.engine.n_vocab());
  auto allowed = [&](char c) {  // may `c` come next?
    std::vector<float> logits(V, 0.0f);
    constraint->mask(logits);
    return std::isfinite(logits[size_t(byte_token.at(c))]);
  };
  auto feed = [&](const std::string& text) {
    for (char c : text) REQUIRE(constraint->accept(byte_token.at(c)));
  };
  CHECK(allowed('A'));  // before the marker: no constraint
  feed("Let me look that up. <tool_call>");
  CHECK(allowed('\n'));
  CHECK_FALSE(allowed('A'));
  feed("\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"");
  CHECK_FALSE(allowed('k'));  // the schema's enum holds: celsius or fahrenheit
  CHECK(allowed('c'));
  CHECK_FALSE(constraint->finished());
  feed("celsius\"}}\n</tool_call>");
  CHECK(constraint->finished());  // one call (parallel_tool_calls false): generation ends
}
