// The chat-layer gate: a chat request's prompt, rendered by vtc's chat
// layer (chat_inputs_from_request + PromptTemplate::render: what `vtc
// serve`, `vtc apply-template` and POST /apply-template run) and by the
// llama.cpp reference's (common_chat_templates_init +
// common_chat_templates_apply with default inputs, run as `vtc-chat-ref
// apply --batch`, one process for every case), byte for byte, over every
// chat template of the reference (models/templates/*.jinja) × the
// conversations below. Both sides get the same template text, bos "<s>" /
// eos "</s>", the same clock (kNow: strftime_now, date_string, datetime)
// and the UTC time zone. Equal means the same bytes, or an error on both
// sides. The test prints a table (template × conversation: "=" equal, "x"
// both raise, "D" differ) and fails on any "D", naming the first
// differing byte.
//
// Without the reference build the [chat-ref] case reports SKIPPED; the
// [chat-layer] cases need nothing.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "serve/api/common/api_error.h"
#include "serve/chat/generic_tools.h"
#include "serve/chat/output_parser.h"
#include "serve/chat/chat_prompt.h"

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;
using vtc::serve::ApiError;
using vtc::serve::PromptTemplate;

namespace {

constexpr int64_t kNow = 1700000000;  // 2023-11-14 22:13:20 UTC

fs::path reference_dir() {
  const char* env = std::getenv("VTC_REF_CACHE");
  return env && *env ? fs::path(env) : fs::path(VTC_REFERENCE_DIR_DEFAULT);
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ---- conversations ---------------------------------------------------------

const char* const kWeatherTools = R"([{"type": "function", "function": {"name": "get_weather",
  "description": "Get the current weather", "strict": true,
  "parameters": {"type": "object", "properties": {
    "city": {"type": "string", "description": "City name"},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}}}])";

struct Conversation {
  std::string name;
  ojson request;  // an OpenAI chat body
};

std::vector<Conversation> conversations() {
  auto body = [](const char* messages) { return ojson{{"messages", ojson::parse(messages)}}; };
  std::vector<Conversation> out;
  out.push_back({"system", body(R"([{"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Hello, who are you?"}])")});
  // What OpenAI clients send back: arguments as JSON text, content null.
  // Call ids are nine alphanumerics (Mistral's templates raise on others).
  Conversation tools{"tool_string_args", body(R"([{"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "a1b2c3d4e", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}]},
    {"role": "tool", "tool_call_id": "a1b2c3d4e", "content": "{\"temperature\": 18}"},
    {"role": "assistant", "content": "It is 18 °C in Paris."},
    {"role": "user", "content": "Thanks!"}])")};
  tools.request["tools"] = ojson::parse(kWeatherTools);
  out.push_back(tools);
  Conversation parallel{"multi_tool_calls", body(R"([{"role": "user", "content": "Weather in Paris and the time in Tokyo?"},
    {"role": "assistant", "content": "Let me check.", "tool_calls": [
      {"id": "a1b2c3d4e", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
      {"id": "b1b2c3d4e", "type": "function", "function": {"name": "get_time", "arguments": "{\"zone\": \"Asia/Tokyo\", \"n\": 2, \"f\": 1.5, \"ok\": true}"}}]},
    {"role": "tool", "tool_call_id": "b1b2c3d4e", "name": "get_time", "content": "09:00"},
    {"role": "tool", "tool_call_id": "a1b2c3d4e", "name": "get_weather", "content": "18"},
    {"role": "assistant", "content": "18 °C in Paris; 09:00 in Tokyo."},
    {"role": "user", "content": "ok"}])")};
  parallel.request["tools"] = ojson::parse(kWeatherTools);
  out.push_back(parallel);
  Conversation offer{"tools_offered", body(R"([{"role": "system", "content": "Use tools when needed."},
    {"role": "user", "content": "What time is it in Tokyo?"}])")};
  offer.request["tools"] = ojson::parse(kWeatherTools);
  out.push_back(offer);
  out.push_back({"reasoning_history", body(R"([{"role": "user", "content": "Name a colour."},
    {"role": "assistant", "content": "Blue.", "reasoning_content": "Any colour will do."},
    {"role": "user", "content": "Another, please."},
    {"role": "assistant", "content": "Green.", "reasoning_content": "Not blue this time."},
    {"role": "user", "content": "And one more?"}])")});
  Conversation no_gen{"no_generation_prompt", body(R"([{"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"}])")};
  no_gen.request["add_generation_prompt"] = false;
  out.push_back(no_gen);
  Conversation on{"thinking_on", body(R"([{"role": "user", "content": "Is 17 prime?"}])")};
  on.request["chat_template_kwargs"] = {{"enable_thinking", true}};
  out.push_back(on);
  Conversation off{"thinking_off", body(R"([{"role": "user", "content": "Is 17 prime?"},
    {"role": "assistant", "content": "Yes.", "reasoning_content": "17 has no divisors but 1 and 17."},
    {"role": "user", "content": "And 21?"}])")};
  off.request["chat_template_kwargs"] = {{"enable_thinking", false}};
  out.push_back(off);
  out.push_back({"developer_role", body(R"([{"role": "developer", "content": "Answer in French."},
    {"role": "user", "content": "Good morning"}])")});
  out.push_back({"content_parts", body(R"([{"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
    {"role": "user", "content": [{"type": "text", "text": "Name a colour."}, {"type": "text", "text": "Just one."}]},
    {"role": "assistant", "content": [{"type": "text", "text": "Blue."}]},
    {"role": "user", "content": "Another"}])")});
  // An empty assistant turn (Mistral templates refuse it) and channel
  // markers in an assistant's text (gpt-oss's refuses them): the reference
  // patches both checks out of the template at load.
  out.push_back({"assistant_edge_cases", body(R"([{"role": "user", "content": "Hi"},
    {"role": "assistant", "content": ""}, {"role": "user", "content": "Say the tag."},
    {"role": "assistant", "content": "It is <|channel|>final<|message|>."}, {"role": "user", "content": "Thanks"}])")});
  Conversation effort{"reasoning_effort", body(R"([{"role": "user", "content": "Sum 2 and 3 <b>&amp; 'x' \"y\" é"}])")};
  effort.request["reasoning_effort"] = "low";
  out.push_back(effort);
  Conversation schema{"response_format", body(R"([{"role": "system", "content": "Answer in JSON."},
    {"role": "user", "content": "Capital of France?"}])")};
  schema.request["response_format"] = ojson::parse(R"({"type": "json_schema", "json_schema": {"name": "a",
    "schema": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}}})");
  out.push_back(schema);
  Conversation no_effort{"reasoning_effort_none", body(R"([{"role": "user", "content": "Sum 2 and 3"}])")};
  no_effort.request["reasoning_effort"] = "none";  // thinking off, no reasoning_effort variable
  out.push_back(no_effort);
  return out;
}

// ---- the two sides ---------------------------------------------------------

struct Rendering {
  bool ok = false;
  std::string text;  // the prompt, or the error
};

Rendering render_vtc(const PromptTemplate& tmpl, const ojson& request) {
  try {
    return {true, tmpl.render(vtc::serve::chat_inputs_from_request(request))};
  } catch (const ApiError& e) {
    return {false, e.what()};
  }
}

int run_program(const std::vector<std::string>& argv, const fs::path& out, const fs::path& err) {
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t redirect;
  posix_spawn_file_actions_init(&redirect);
  posix_spawn_file_actions_addopen(&redirect, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&redirect, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, args[0], &redirect, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&redirect);
  if (spawned != 0) return -1;
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string first_line(const std::string& s) {
  size_t at = s.rfind("\nError: ");
  at = at == std::string::npos ? 0 : at + 1;
  std::string line = s.substr(at, s.find('\n', at) - at);
  return line.size() > 160 ? line.substr(0, 160) + "..." : line;
}

std::string short_diff(const std::string& expected, const std::string& got) {
  size_t k = 0;
  while (k < expected.size() && k < got.size() && expected[k] == got[k]) ++k;
  const size_t from = k < 30 ? 0 : k - 30;
  auto snip = [&](const std::string& s) {
    return ojson(s.substr(from, k - from + 50)).dump(-1, ' ', false, ojson::error_handler_t::replace);
  };
  return "first difference at byte " + std::to_string(k) + " (sizes " + std::to_string(expected.size()) + " vs " +
         std::to_string(got.size()) + "): reference " + snip(expected) + ", vtc " + snip(got);
}

}  // namespace

TEST_CASE("chat requests render as llama.cpp's chat layer renders them", "[chat-layer][reference][chat-ref]") {
  const fs::path dir = reference_dir() / "llama.cpp" / "models" / "templates";
  if (!fs::is_directory(dir)) FAIL("no reference templates at " << dir.string() << ": run tests/reference/fetch.sh");
  const char* tool_env = std::getenv("VTC_CHAT_REF");
  const fs::path tool = tool_env && *tool_env ? fs::path(tool_env) : fs::path(VTC_CHAT_REF);
  if (tool.empty() || !fs::exists(tool)) FAIL("vtc-chat-ref is not built: cmake --build build --target vtc-chat-ref");
  // Dates are local time on both sides (the reference's localtime).
  setenv("TZ", "UTC", 1);
  tzset();

  std::map<std::string, fs::path> templates;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".jinja") templates[e.path().stem().string()] = e.path();
  const std::vector<Conversation> convs = conversations();

  // One batch for the reference.
  ojson cases = ojson::array();
  for (auto& [name, path] : templates)
    for (const Conversation& c : convs) {
      ojson request = c.request;
      request["bos_token"] = "<s>";
      request["eos_token"] = "</s>";
      cases.push_back({{"template", path.string()}, {"request", request}});
    }
  const fs::path scratch = fs::temp_directory_path() / ("vtc-chat-layer-" + std::to_string(::getpid()));
  fs::create_directories(scratch);
  {
    std::ofstream out(scratch / "cases.json", std::ios::binary);
    out << cases.dump();
  }
  const int rc = run_program({tool.string(), "apply", "--now", std::to_string(kNow), "--batch",
                              (scratch / "cases.json").string()},
                             scratch / "out.jsonl", scratch / "err.txt");
  if (rc != 0) FAIL(tool.string() << " apply exited " << rc << ": " << read_file(scratch / "err.txt"));
  std::vector<ojson> reference_lines;
  {
    std::ifstream in(scratch / "out.jsonl", std::ios::binary);
    for (std::string line; std::getline(in, line);) reference_lines.push_back(ojson::parse(line));
  }
  fs::remove_all(scratch);
  REQUIRE(reference_lines.size() == cases.size());

  int equal = 0, both_raise = 0, differ = 0;
  std::vector<std::string> mismatches, raised;
  std::ostringstream table;
  table << "chat layer vs the reference (= equal, x both raise, D differ); columns:";
  for (size_t c = 0; c < convs.size(); ++c) table << " " << c + 1 << "=" << convs[c].name;
  table << "\n";
  size_t k = 0;
  for (auto& [name, path] : templates) {
    std::string row;
    std::shared_ptr<const PromptTemplate> tmpl;
    std::string load_error;
    try {
      tmpl = PromptTemplate::from_jinja(read_file(path), "<s>", "</s>", kNow);
    } catch (const std::exception& e) {
      load_error = e.what();
    }
    for (const Conversation& c : convs) {
      const ojson& ref = reference_lines[k++];
      const Rendering reference = ref.contains("prompt") ? Rendering{true, ref["prompt"].get<std::string>()}
                                                         : Rendering{false, ref["error"].get<std::string>()};
      const Rendering ours = tmpl ? render_vtc(*tmpl, c.request) : Rendering{false, load_error};
      std::string why;
      if (!reference.ok && !ours.ok) {
        ++both_raise;
        row += 'x';
        raised.push_back(name + " × " + c.name + ": reference: " + first_line(reference.text) + " | vtc: " +
                         first_line(ours.text));
        continue;
      }
      if (!reference.ok) why = "the reference raises (" + first_line(reference.text) + "), vtc renders";
      else if (!ours.ok) why = "vtc raises (" + first_line(ours.text) + "), the reference renders";
      else if (reference.text != ours.text) why = short_diff(reference.text, ours.text);
      if (why.empty()) {
        ++equal;
        row += '=';
      } else {
        ++differ;
        row += 'D';
        mismatches.push_back(name + " × " + c.name + ": " + why);
      }
    }
    table << "  " << row << "  " << name << "\n";
  }
  table << "chat layer: " << equal + both_raise << "/" << cases.size() << " agree with the reference (" << equal
        << " equal, " << both_raise << " raise in both), " << differ << " differ";
  for (auto& m : raised) table << "\n  both raise: " << m;
  for (auto& m : mismatches) table << "\n  " << m;
  std::printf("%s\n", table.str().c_str());
  std::fflush(stdout);
  CHECK(templates.size() >= 68);
  CHECK(convs.size() >= 10);
  if (differ > 0) FAIL(table.str());
}

// ---- the generic JSON tool-call format (no reference needed) --------------

TEST_CASE("the generic tool format describes the tools and replays calls as JSON", "[chat-layer]") {
  const ojson tools = ojson::parse(kWeatherTools);
  const ojson messages = ojson::parse(R"([{"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "18"}])");
  const ojson out = vtc::chat::generic_prompt_messages(messages, tools);
  REQUIRE(out.size() == 4);
  CHECK(out[0]["role"] == "system");
  CHECK(out[0]["content"].get<std::string>().find("\"get_weather\"") != std::string::npos);
  CHECK(out[0]["content"].get<std::string>().find("Respond in JSON format") != std::string::npos);
  CHECK(ojson::parse(out[2]["content"].get<std::string>()) ==
        ojson::parse(R"({"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "call_1"}]})"));
  CHECK(out[3]["role"] == "user");
  CHECK(ojson::parse(out[3]["content"].get<std::string>()) ==
        ojson::parse(R"({"tool_response": {"tool": "get_weather", "content": "18", "tool_call_id": "call_1"}})"));
}

TEST_CASE("generic tool-format output comes back as tool calls or content", "[chat-layer]") {
  using vtc::chat::parse_generic;
  auto one = parse_generic(R"({"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}})");
  REQUIRE(one.tool_calls.size() == 1);
  CHECK(one.tool_calls[0].name == "get_weather");
  CHECK(one.tool_calls[0].arguments == R"({"city":"Paris"})");
  auto many = parse_generic(R"({"tool_calls": [{"name": "a", "arguments": {}, "id": "id01"},
                                               {"name": "b", "arguments": {"x": 1}, "id": "id02"}]})");
  REQUIRE(many.tool_calls.size() == 2);
  CHECK(many.tool_calls[1].id == "id02");
  CHECK(parse_generic(R"({"response": "Hello there"})").content == "Hello there");
  CHECK(parse_generic(R"({"response": "cut sh)").content == R"({"response": "cut sh)");
  // Through the streaming parser the server uses: nothing until the end,
  // then the call.
  vtc::chat::ParseOptions o;
  o.format = vtc::chat::detect_chat_format(vtc::chat::kGenericToolsSource);
  CHECK(o.format == vtc::chat::ChatFormat::Generic);
  vtc::chat::StreamingParser stream(o);
  CHECK(stream.feed(R"({"tool_call": {"name": "get_weather", )").empty());
  CHECK(stream.feed(R"("arguments": {"city": "Paris"}}})").empty());
  auto deltas = stream.finish();
  REQUIRE(deltas.size() == 1);
  CHECK(deltas[0].tool_name == "get_weather");
  CHECK(!deltas[0].tool_id.empty());
}

TEST_CASE("the generic format's schema offers a call or a response", "[chat-layer]") {
  const ojson tools = ojson::parse(kWeatherTools);
  const ojson automatic = vtc::chat::generic_output_schema(tools, vtc::serve::ToolChoice::Auto, "", true);
  REQUIRE(automatic.contains("anyOf"));
  CHECK(automatic["anyOf"][1]["required"] == ojson::array({"response"}));
  CHECK(automatic["anyOf"][0]["properties"]["tool_calls"]["items"]["anyOf"].size() == 2);
  const ojson named = vtc::chat::generic_output_schema(tools, vtc::serve::ToolChoice::Function, "get_time", false);
  CHECK(named["properties"]["tool_call"]["properties"]["name"]["const"] == "get_time");
}

TEST_CASE("a BOS or EOS the vocabulary adds itself is cut from the rendered prompt", "[chat-layer]") {
  // As the reference's direct apply does with add_bos / add_eos: the
  // tokenizer adds them back, once.
  const std::string tmpl = "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}{{ eos_token }}";
  const ojson request = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  const auto inputs = vtc::serve::chat_inputs_from_request(request);
  CHECK(PromptTemplate::from_jinja(tmpl, "<s>", "</s>", kNow)->render(inputs) == "<s>hi</s>");
  CHECK(PromptTemplate::from_jinja(tmpl, "<s>", "</s>", kNow, true, false)->render(inputs) == "hi</s>");
  CHECK(PromptTemplate::from_jinja(tmpl, "<s>", "</s>", kNow, true, true)->render(inputs) == "hi");
}
