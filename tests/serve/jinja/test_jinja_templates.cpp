// The template gate: vtc's Jinja engine against the llama.cpp reference's
// own engine (common/jinja, run as `vtc-chat-ref render`), byte for byte, on
// every chat template of the reference (models/templates/*.jinja) × a fixed
// set of conversations (the brief's four — system + user, multi-turn, a
// tool call with its result and a reply, reasoning_content — each with and
// without add_generation_prompt, and with enable_thinking=false; and probes
// of what real clients send: null content beside parallel tool calls,
// schemas with floats, content parts, special characters). One oracle: the
// engine llama.cpp serves with.
//
// For each (template, conversation) the context JSON is written once and
// both engines render it: the same bos/eos strings, the same strftime_now()
// date (RenderOptions::now_epoch_s here, --now there). Equal means: both
// render the same bytes, or both raise (the reference raising and vtc
// rendering is a mismatch, and so is the reverse; a raise_exception() must
// be one in both, with the same message). The test prints
// "jinja templates: N/M renderings equal the reference", names every
// mismatch by template and conversation with the first differing byte
// offset and a little context, and fails on any.
//
// The contexts are what llama.cpp's chat layer (common_chat_template_direct_
// apply) hands the engine: messages, bos_token, eos_token, enable_thinking
// (always set; chat_template_kwargs such as enable_thinking=false merged on
// top), add_generation_prompt only when on, tools only when there are any.
// Tool-call arguments are an object, as the chat layer makes them for
// templates; both engines see the same context, so no chat-layer
// normalization is involved.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "serve/jinja/template.h"

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;  // key order matters to tojson output
using vtc::jinja::RenderOptions;
using vtc::jinja::Template;
using vtc::jinja::TemplateError;

namespace {

constexpr int64_t kNow = 1700000000;  // strftime_now: 2023-11-14 22:13:20 UTC

fs::path reference_dir() {
  const char* env = std::getenv("VTC_REF_CACHE");
  return env && *env ? fs::path(env) : fs::path(VTC_REFERENCE_DIR_DEFAULT);
}

fs::path templates_dir() { return reference_dir() / "llama.cpp" / "models" / "templates"; }

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

// name -> path of every reference template, sorted by name.
std::map<std::string, fs::path> template_paths() {
  std::map<std::string, fs::path> out;
  for (auto& e : fs::directory_iterator(templates_dir()))
    if (e.path().extension() == ".jinja") out[e.path().stem().string()] = e.path();
  return out;
}

// ---- conversations ---------------------------------------------------------

const char* const kSystem = R"({"role": "system", "content": "You are a helpful assistant."})";

ojson messages_of(const std::string& conversation) {
  if (conversation == "system_user")
    return ojson::parse(std::string("[") + kSystem + R"(, {"role": "user", "content": "Hello, who are you?"}])");
  if (conversation == "multi_turn")
    return ojson::parse(std::string("[") + kSystem + R"(,
      {"role": "user", "content": "Hello, who are you?"},
      {"role": "assistant", "content": "I am an assistant. How can I help?"},
      {"role": "user", "content": "Write \"hi\" in French, please."}])");
  if (conversation == "tools")
    // The call id is nine alphanumerics: Mistral's templates raise on others.
    return ojson::parse(std::string("[") + kSystem + R"(,
      {"role": "user", "content": "What is the weather in Paris?"},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "a1b2c3d4e", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
      {"role": "tool", "tool_call_id": "a1b2c3d4e", "name": "get_weather", "content": "{\"temperature\": 18}"},
      {"role": "assistant", "content": "It is 18 °C in Paris."}])");
  if (conversation == "parallel_calls")
    // What OpenAI clients send: content null beside tool calls; two calls
    // with arguments of every JSON type, two results, a reply, a new turn.
    return ojson::parse(std::string("[") + kSystem + R"(,
      {"role": "user", "content": "Weather in Paris and Tokyo?"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "a1b2c3d4e", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
        {"id": "b1b2c3d4e", "type": "function", "function": {"name": "get_weather", "arguments":
          {"city": "Tokyo", "unit": "celsius", "n": 3, "f": 1.5, "ok": true, "z": null, "l": [1, "a"]}}}]},
      {"role": "tool", "tool_call_id": "a1b2c3d4e", "name": "get_weather", "content": "18"},
      {"role": "tool", "tool_call_id": "b1b2c3d4e", "name": "get_weather", "content": "21"},
      {"role": "assistant", "content": "Paris 18, Tokyo 21."},
      {"role": "user", "content": "ok"}])");
  if (conversation == "rich_tools")
    // A schema with floats, integers, booleans, enums, nested items, an
    // empty tool; arguments with large, small and inexact floats.
    return ojson::parse(R"([{"role": "system", "content": "  Be brief.  \n"},
      {"role": "user", "content": "Set 21.5 eco"},
      {"role": "assistant", "content": "Setting it.", "tool_calls": [{"id": "c1c2c3c4c", "type": "function",
        "function": {"name": "set_temp", "arguments": {"value": 21.5, "mode": "eco", "flags": [true, false], "n": 2,
          "big": 1e20, "small": 1e-7, "third": 0.3333333333333333}}}]},
      {"role": "tool", "tool_call_id": "c1c2c3c4c", "content": "done"},
      {"role": "user", "content": "thanks"}])");
  if (conversation == "content_parts")
    return ojson::parse(std::string("[") + kSystem + R"(,
      {"role": "user", "content": [{"type": "text", "text": "Name a colour."}]},
      {"role": "assistant", "content": "  Blue.  "},
      {"role": "user", "content": [{"type": "text", "text": "Another,"}, {"type": "text", "text": " please."}]}])");
  if (conversation == "special_characters")
    return ojson::parse(R"([{"role": "user", "content": "Hi <b>&amp; 'x' \"y\" \\ é 😀 {{ x }} {% if %}"}])");
  // "reasoning": assistant turns with reasoning_content, before and after
  // the last user message (templates treat the two differently).
  return ojson::parse(R"([
      {"role": "user", "content": "Name a colour."},
      {"role": "assistant", "content": "Blue.", "reasoning_content": "Any colour will do."},
      {"role": "user", "content": "Another, please."},
      {"role": "assistant", "content": "Green.", "reasoning_content": "Not blue this time."}])");
}

const ojson& rich_tools() {
  static const ojson tools = ojson::parse(R"([{"type": "function", "function": {"name": "set_temp",
    "description": "Set a \"target\" temperature — ünïcode & <tags>",
    "parameters": {"type": "object", "properties": {
      "value": {"type": "number", "minimum": 0.0, "maximum": 100.5, "default": 21.0, "step": 0.1, "pi": 3.14159265},
      "mode": {"type": "string", "enum": ["eco", "boost"]},
      "flags": {"type": "array", "items": {"type": "boolean"}},
      "n": {"type": "integer", "default": 3}}, "required": ["value"]}}},
    {"type": "function", "function": {"name": "noop", "description": "",
      "parameters": {"type": "object", "properties": {}}}}])");
  return tools;
}

const ojson& weather_tools() {
  static const ojson tools = ojson::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "description": "Get the current weather",
    "parameters": {"type": "object", "properties": {
      "city": {"type": "string", "description": "City name"},
      "unit": {"type": "string", "description": "Temperature unit", "enum": ["celsius", "fahrenheit"]}},
      "required": ["city"]}}}])");
  return tools;
}

struct Conversation {
  std::string name;  // e.g. "tools+generation_prompt"
  ojson context;
};

ojson chat_context(const std::string& conversation, bool generation_prompt, const ojson& kwargs) {
  ojson ctx = ojson::object();
  ctx["messages"] = messages_of(conversation);
  ctx["bos_token"] = "<s>";
  ctx["eos_token"] = "</s>";
  ctx["enable_thinking"] = true;
  if (conversation == "tools" || conversation == "parallel_calls") ctx["tools"] = weather_tools();
  if (conversation == "rich_tools") ctx["tools"] = rich_tools();
  for (auto& [k, v] : kwargs.items()) ctx[k] = v;  // chat_template_kwargs
  if (generation_prompt) ctx["add_generation_prompt"] = true;
  return ctx;
}

std::vector<Conversation> conversations() {
  std::vector<Conversation> out;
  for (const char* c : {"system_user", "multi_turn", "tools", "reasoning", "parallel_calls", "rich_tools",
                        "content_parts", "special_characters"})
    for (bool gp : {true, false})
      out.push_back({std::string(c) + (gp ? "+generation_prompt" : ""), chat_context(c, gp, ojson::object())});
  const ojson no_thinking = {{"enable_thinking", false}};
  for (const char* c : {"multi_turn", "reasoning"})
    out.push_back({std::string(c) + "+generation_prompt+enable_thinking=false", chat_context(c, true, no_thinking)});
  return out;
}

// What a template needs beyond the conversation, as its model card says to
// pass it: firefunction-v2 concatenates `functions` and `datetime`.
ojson context_for(const Conversation& conversation, const std::string& template_name) {
  ojson ctx = conversation.context;
  if (template_name == "fireworks-ai-llama-3-firefunction-v2") {
    ctx["functions"] = "";
    ctx["datetime"] = "2023-11-14";
  }
  return ctx;
}

// ---- the two engines -------------------------------------------------------

struct Rendering {
  bool ok = false;
  std::string text;  // the output, or the error message
  // The template's own raise_exception(message), when that is the error.
  bool raised = false;
  std::string raised_message;
};

Rendering render_ours(const std::string& source, const ojson& context) {
  RenderOptions opts;
  opts.now_epoch_s = kNow;
  try {
    return {true, Template::parse(source).render(context, opts), false, ""};
  } catch (const TemplateError& e) {
    return {false, e.what(), e.raised(), e.raised() ? e.bare_message() : ""};
  }
}

// Runs argv with stdout and stderr sent to files; returns the exit status
// (-1 when it did not start or did not exit normally).
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

// The reference: exit 0 renders, exit 1 is the template's error; anything
// else means the oracle itself failed, which fails the test.
Rendering render_reference(const fs::path& tool, const fs::path& template_path, const fs::path& context_path,
                           const fs::path& scratch) {
  const fs::path out = scratch / "ref.out", err = scratch / "ref.err";
  int rc = run_program({tool.string(), "render", "--now", std::to_string(kNow), template_path.string(),
                        context_path.string()},
                       out, err);
  if (rc != 0 && rc != 1) FAIL(tool.string() << " render exited " << rc << ": " << read_file(err));
  Rendering r{rc == 0, read_file(rc == 0 ? out : err), false, ""};
  // The reference reports raise_exception(m) as "Error: Jinja Exception: m".
  const std::string marker = "Error: Jinja Exception: ";
  if (size_t at = r.text.rfind(marker); !r.ok && at != std::string::npos) {
    r.raised = true;
    r.raised_message = r.text.substr(at + marker.size());
    while (!r.raised_message.empty() && r.raised_message.back() == '\n') r.raised_message.pop_back();
  }
  return r;
}

// The line of an error message that says what went wrong: the reference's
// "Error: ..." line (after its source excerpt), else the first line.
std::string first_line(const std::string& s) {
  size_t at = s.rfind("\nError: ");
  at = at == std::string::npos ? 0 : at + 1;
  std::string line = s.substr(at, s.find('\n', at) - at);
  return line.size() > 160 ? line.substr(0, 160) + "..." : line;
}

// Where two renderings part: the offset, and a few bytes before and after.
std::string short_diff(const std::string& expected, const std::string& got) {
  size_t k = 0;
  while (k < expected.size() && k < got.size() && expected[k] == got[k]) ++k;
  const size_t from = k < 20 ? 0 : k - 20;
  auto snip = [&](const std::string& s) {
    return ojson(s.substr(from, k - from + 40)).dump(-1, ' ', false, ojson::error_handler_t::replace);
  };
  return "first difference at byte " + std::to_string(k) + " (sizes " + std::to_string(expected.size()) + " vs " +
         std::to_string(got.size()) + "): reference " + snip(expected) + ", vtc " + snip(got);
}

// Empty when equal; otherwise what differs. Both raising is equal when
// neither is the template's raise_exception(), or both are, with one message.
std::string compare(const Rendering& reference, const Rendering& ours) {
  if (!reference.ok && !ours.ok) {
    if (reference.raised == ours.raised && reference.raised_message == ours.raised_message) return "";
    auto what = [](const Rendering& r) {
      return r.raised ? "raise_exception(" + ojson(r.raised_message).dump() + ")" : "fails (" + first_line(r.text) + ")";
    };
    return "the reference " + what(reference) + ", vtc " + what(ours);
  }
  if (!reference.ok) return "the reference raises (" + first_line(reference.text) + "), vtc renders";
  if (!ours.ok) return "vtc raises (" + first_line(ours.text) + "), the reference renders";
  return reference.text == ours.text ? "" : short_diff(reference.text, ours.text);
}

}  // namespace

TEST_CASE("every reference chat template renders as the reference's engine does", "[jinja][reference][chat-ref]") {
  const fs::path dir = templates_dir();
  if (!fs::is_directory(dir))
    FAIL("no reference templates at " << dir.string() << ": run tests/reference/fetch.sh and reconfigure");
  // VTC_CHAT_REF in the environment overrides the built one.
  const char* tool_env = std::getenv("VTC_CHAT_REF");
  const fs::path tool = tool_env && *tool_env ? fs::path(tool_env) : fs::path(VTC_CHAT_REF);
  if (tool.empty() || !fs::exists(tool))
    FAIL("the reference is present but vtc-chat-ref is not built ("
         << (tool.empty() ? std::string("no vtc-chat-ref target: build test-llama-archs with "
                                        "tests/reference/build-archs.sh and reconfigure")
                          : tool.string() + " is missing: cmake --build build --target vtc-chat-ref")
         << ")");

  const fs::path scratch = fs::temp_directory_path() / ("vtc-jinja-gate-" + std::to_string(::getpid()));
  fs::create_directories(scratch);
  const fs::path context_path = scratch / "context.json";

  int equal = 0, total = 0, both_raise = 0;
  std::vector<std::string> mismatches;
  for (auto& [name, path] : template_paths()) {
    const std::string source = read_file(path);
    for (const Conversation& conversation : conversations()) {
      const ojson context = context_for(conversation, name);
      write_file(context_path, context.dump());
      const Rendering reference = render_reference(tool, path, context_path, scratch);
      const Rendering ours = render_ours(source, context);
      ++total;
      const std::string difference = compare(reference, ours);
      if (difference.empty()) {
        ++equal;
        both_raise += !reference.ok;
      } else {
        mismatches.push_back(name + " × " + conversation.name + ": " + difference);
      }
    }
  }
  fs::remove_all(scratch);

  std::ostringstream report;
  report << "jinja templates: " << equal << "/" << total << " renderings equal the reference (" << both_raise
         << " of them raise in both)";
  for (auto& m : mismatches) report << "\n  " << m;
  std::printf("%s\n", report.str().c_str());
  std::fflush(stdout);
  CHECK(total > 0);
  if (!mismatches.empty()) FAIL(report.str());
}

// Issue 41: a tool with a nested object parameter. Command-R+'s tool_use
// template renders its type with json_to_python_type(json_spec.
// additionalProperties), reading `.type` of undefined: llama.cpp's engine
// yields undefined there, where vtc used to raise (a 400); the reference
// then prints "Dict[str, Union[]]" (undefined is iterable there, as empty).
// (An array parameter fails in both: json_spec.items is the dict method.)
TEST_CASE("Command-R+ tool_use renders a nested object parameter as the reference does",
          "[jinja][reference][chat-ref]") {
  const fs::path path = templates_dir() / "CohereForAI-c4ai-command-r-plus-tool_use.jinja";
  if (!fs::exists(path)) FAIL("no reference template at " << path.string() << ": run tests/reference/fetch.sh");
  const char* tool_env = std::getenv("VTC_CHAT_REF");
  const fs::path tool = tool_env && *tool_env ? fs::path(tool_env) : fs::path(VTC_CHAT_REF);
  if (tool.empty() || !fs::exists(tool)) FAIL("vtc-chat-ref is not built: cmake --build build --target vtc-chat-ref");

  ojson ctx = chat_context("tools", true, ojson::object());
  ctx["tools"] = ojson::parse(R"([{"type": "function", "function": {"name": "book_trip",
    "description": "Book a trip",
    "parameters": {"type": "object", "properties": {
      "city": {"type": "string", "description": "City name"},
      "traveller": {"type": "object", "description": "Who travels",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}},
      "extras": {"type": "object", "description": "Extra options", "additionalProperties": {"type": "string"}}},
      "required": ["city", "traveller"]}}}])");

  const fs::path scratch = fs::temp_directory_path() / ("vtc-jinja-cohere-" + std::to_string(::getpid()));
  fs::create_directories(scratch);
  write_file(scratch / "context.json", ctx.dump());
  const Rendering reference = render_reference(tool, path, scratch / "context.json", scratch);
  const Rendering ours = render_ours(read_file(path), ctx);
  fs::remove_all(scratch);
  INFO("reference: " << reference.text.substr(0, 2000));
  REQUIRE(reference.ok);
  CHECK_THAT(reference.text, Catch::Contains("traveller: Dict[str, Union[]]"));
  CHECK(compare(reference, ours) == "");
}

// Truncated and corrupted templates: parsing and rendering either works or
// throws TemplateError, never anything else, and always finishes.
TEST_CASE("damaged reference templates fail cleanly", "[jinja][reference]") {
  const fs::path dir = templates_dir();
  if (!fs::is_directory(dir))
    FAIL("no reference templates at " << dir.string() << ": run tests/reference/fetch.sh and reconfigure");
  RenderOptions opts;
  opts.now_epoch_s = kNow;
  opts.max_steps = 2'000'000;
  const ojson ctx = chat_context("tools", true, ojson::object());
  uint64_t seed = 12345;
  auto rnd = [&seed] {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return seed >> 33;
  };
  const std::string junk = "{}%#-+|()[]'\".,:=~ \n";
  int runs = 0, errors = 0;
  for (auto& [name, path] : template_paths()) {
    const std::string text = read_file(path);
    for (int k = 0; k < 40; ++k) {
      std::string damaged = text;
      if (k < 20) {
        damaged.resize(text.size() * static_cast<size_t>(k) / 20);  // truncated
      } else {
        for (int m = 0; m < 3; ++m) damaged[rnd() % damaged.size()] = junk[rnd() % junk.size()];  // corrupted
      }
      ++runs;
      try {
        (void)Template::parse(damaged).render(ctx, opts);
      } catch (const TemplateError&) {
        ++errors;
      } catch (const std::exception& e) {
        FAIL(name << " (variant " << k << "): a non-TemplateError escaped: " << e.what());
      }
    }
  }
  WARN(runs << " damaged templates: " << errors << " TemplateErrors, the rest rendered");
}
