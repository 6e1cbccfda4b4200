// Model-output parsing (serve/chat/output_parser.h).
//
// The corpus (corpus.json) holds, per chat template of the reference's
// bundle, model outputs written the way that template renders tool calls:
// plain content, one and two calls, reasoning with content or a call,
// content around calls, and malformed or truncated calls.
//
//  - Streaming: for every output, the deltas of StreamingParser fed in
//    chunks of 1, 3 and 7 bytes concatenate to parse_output(whole text).
//  - Hostile input: truncations and byte noise never throw.
//  - [reference] the gate: vtc's parse equals the llama.cpp reference's
//    (vtc-chat-ref parse: the template applied to the request gives the
//    reference's parser; content, reasoning_content, tool call names and
//    arguments as parsed JSON; ids excluded), whole and streamed. Outputs
//    the reference rejects (it throws; the server answers an error) are
//    listed and checked only for vtc's streaming consistency.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/chat/output_parser.h"
#include "tests/test_process.h"

namespace fs = std::filesystem;
using vtc::chat::ChatFormat;
using vtc::chat::ParsedMessage;
using vtc::chat::ParseOptions;
using json = nlohmann::ordered_json;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const json& corpus() {
  static const json c = json::parse(read_file(VTC_CHAT_CORPUS));
  return c;
}

fs::path templates_dir() {
  const char* env = std::getenv("VTC_REF_CACHE");
  const fs::path base = env && *env ? fs::path(env) : fs::path(VTC_REFERENCE_DIR_DEFAULT);
  return base / "llama.cpp" / "models" / "templates";
}

ChatFormat format_named(const std::string& name) {
  for (int i = 0; i <= static_cast<int>(ChatFormat::FunctionaryV3_2); ++i) {
    if (vtc::chat::chat_format_name(static_cast<ChatFormat>(i)) == name) return static_cast<ChatFormat>(i);
  }
  FAIL("corpus names an unknown format: " << name);
  return ChatFormat::ContentOnly;
}

ParseOptions options_for(const json& family, bool forced_open) {
  ParseOptions o;
  o.format = format_named(family.at("format"));
  o.thinking_forced_open = forced_open;
  const json& request = corpus().at("requests").at(family.at("request").get<std::string>());
  o.tools_json = request.value("tools", json::array()).dump();
  o.extract_reasoning = request.value("reasoning_format", "auto") != "none";
  o.parallel_tool_calls = request.value("parallel_tool_calls", true);
  o.id_seed = 42;
  return o;
}

// The message a client assembles from streamed deltas.
ParsedMessage stream(std::string_view text, const ParseOptions& options, size_t chunk) {
  vtc::chat::StreamingParser parser(options);
  ParsedMessage m;
  auto apply = [&](const std::vector<vtc::chat::MessageDelta>& deltas) {
    for (const auto& d : deltas) {
      m.content += d.content;
      m.reasoning_content += d.reasoning_content;
      if (d.tool_index >= 0) {
        if (static_cast<size_t>(d.tool_index) >= m.tool_calls.size()) m.tool_calls.resize(d.tool_index + 1);
        auto& call = m.tool_calls[d.tool_index];
        if (!d.tool_id.empty()) call.id = d.tool_id;
        call.name += d.tool_name;
        call.arguments += d.tool_arguments;
      }
    }
  };
  for (size_t pos = 0; pos < text.size(); pos += chunk) apply(parser.feed(text.substr(pos, chunk)));
  apply(parser.finish());
  return m;
}

bool same_json_text(const std::string& a, const std::string& b) {
  const json ja = json::parse(a, nullptr, false), jb = json::parse(b, nullptr, false);
  if (ja.is_discarded() || jb.is_discarded()) return a == b;
  return ja == jb;
}

// The first differing field, or "" when equal.
std::string first_difference(const ParsedMessage& vtc_msg, const ParsedMessage& ref, bool compare_ids) {
  if (vtc_msg.content != ref.content) return "content: vtc " + json(vtc_msg.content).dump() + " ref " + json(ref.content).dump();
  if (vtc_msg.reasoning_content != ref.reasoning_content) {
    return "reasoning_content: vtc " + json(vtc_msg.reasoning_content).dump() + " ref " + json(ref.reasoning_content).dump();
  }
  if (vtc_msg.tool_calls.size() != ref.tool_calls.size()) {
    return "tool_calls: vtc " + std::to_string(vtc_msg.tool_calls.size()) + " ref " + std::to_string(ref.tool_calls.size());
  }
  for (size_t i = 0; i < ref.tool_calls.size(); ++i) {
    const auto &a = vtc_msg.tool_calls[i], &b = ref.tool_calls[i];
    const std::string at = "tool_calls[" + std::to_string(i) + "].";
    if (a.name != b.name) return at + "name: vtc " + a.name + " ref " + b.name;
    if (!same_json_text(a.arguments, b.arguments)) return at + "arguments: vtc " + a.arguments + " ref " + b.arguments;
    if (compare_ids && a.id != b.id) return at + "id: vtc " + a.id + " ref " + b.id;
  }
  return "";
}

std::string label(const json& family, const std::string& entry) {
  return family.at("template").get<std::string>() + " [" + family.at("request").get<std::string>() + "] / " + entry;
}

}  // namespace

TEST_CASE("chat parse: streamed deltas concatenate to the whole parse", "[chat]") {
  size_t checked = 0;
  std::vector<std::string> mismatches;
  for (const auto& family : corpus().at("families")) {
    for (bool forced_open : {false, true}) {
      const ParseOptions options = options_for(family, forced_open);
      for (const auto& [entry, text_json] : family.at("outputs").items()) {
        const std::string text = text_json.get<std::string>();
        const ParsedMessage whole = vtc::chat::parse_output(text, options, false);
        for (size_t chunk : {1, 3, 7}) {
          ++checked;
          const std::string diff = first_difference(stream(text, options, chunk), whole, /*compare_ids=*/true);
          if (!diff.empty()) mismatches.push_back(label(family, entry) + " chunk " + std::to_string(chunk) + ": " + diff);
        }
      }
    }
  }
  for (const auto& m : mismatches) WARN(m);
  INFO(mismatches.size() << " of " << checked << " streamed parses differ");
  CHECK(mismatches.empty());
}

TEST_CASE("chat parse: truncated and noisy output never throws", "[chat]") {
  std::mt19937 rng(7);
  size_t runs = 0;
  for (const auto& family : corpus().at("families")) {
    const ParseOptions options = options_for(family, false);
    for (const auto& [entry, text_json] : family.at("outputs").items()) {
      std::string text = text_json.get<std::string>();
      for (size_t cut = 0; cut <= text.size(); cut += 5) {
        CHECK_NOTHROW(vtc::chat::parse_output(std::string_view(text).substr(0, cut), options, true));
        ++runs;
      }
      for (int i = 0; i < 4 && !text.empty(); ++i) text[rng() % text.size()] = static_cast<char>(rng() % 256);
      CHECK_NOTHROW(vtc::chat::parse_output(text, options, false));
      CHECK_NOTHROW(stream(text, options, 3));
    }
  }
  CHECK(runs > 100);

  // Nesting far past the parser's depth guard, and tools that are not what
  // the OpenAI schema says.
  ParseOptions o;
  o.format = ChatFormat::Hermes;
  o.tools_json = corpus().at("requests").at("tools").at("tools").dump();
  const std::string deep = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"a\": " + std::string(200000, '[') + "}}";
  ParsedMessage m;
  CHECK_NOTHROW(m = vtc::chat::parse_output(deep, o, false));
  CHECK(m.tool_calls.empty());
  for (const char* tools : {"[{\"type\": 5}]", "[{\"type\": \"function\", \"function\": {\"name\": 3}}]", "{\"a\": 1}",
                            "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"properties\": {\"x\": {\"format\": 7}}, \"required\": [1]}}}]",
                            "not json"}) {
    for (ChatFormat f : {ChatFormat::Hermes, ChatFormat::Qwen3Coder, ChatFormat::Glm45, ChatFormat::GptOss}) {
      o.format = f;
      o.tools_json = tools;
      CHECK_NOTHROW(vtc::chat::parse_output("<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>", o, false));
    }
  }
}

// Streaming re-parses the whole text per feed, as the reference does; a long
// answer fed a few bytes at a time must stay cheap.
TEST_CASE("chat parse: streaming a long answer stays fast", "[chat]") {
  ParseOptions o;
  o.format = ChatFormat::Qwen3;
  o.tools_json = corpus().at("requests").at("tools").at("tools").dump();
  std::string text = "<think>\n";
  while (text.size() < 8000) text += "Reasoning about the weather in Paris. ";
  text += "\n</think>\n\n";
  while (text.size() < 16000) text += "It is sunny in Paris today. ";
  const auto start = std::chrono::steady_clock::now();
  const ParsedMessage m = stream(text, o, 4);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(m.content.size() > 7000);
  INFO("4000 feeds of a 16 KB answer took " << seconds << " s");
  CHECK(seconds < 2.0);  // about 0.1 s here; 1.5 s before until() skipped non-delimiter bytes
  WARN("streaming 16 KB in 4-byte feeds: " << seconds << " s");
}

TEST_CASE("chat parse: ids are the format's own or call_ + 24 alphanumerics, unique per response", "[chat]") {
  ParseOptions o;
  o.format = ChatFormat::Hermes;
  o.tools_json = corpus().at("requests").at("tools").at("tools").dump();
  const std::string two = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"timezone\": \"UTC\"}}\n</tool_call>\n"
                          "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"timezone\": \"CET\"}}\n</tool_call>";
  const ParsedMessage m = vtc::chat::parse_output(two, o, false);
  REQUIRE(m.tool_calls.size() == 2);
  CHECK(m.tool_calls[0].id.rfind("call_", 0) == 0);
  CHECK(m.tool_calls[0].id.size() == 29);
  CHECK(m.tool_calls[0].id != m.tool_calls[1].id);
  o.format = ChatFormat::KimiK2;
  const ParsedMessage k = vtc::chat::parse_output(
      "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:0<|tool_call_argument_begin|>{\"timezone\": "
      "\"UTC\"}<|tool_call_end|><|tool_calls_section_end|>",
      o, false);
  REQUIRE(k.tool_calls.size() == 1);
  CHECK(k.tool_calls[0].id == "functions.get_time:0");
}

TEST_CASE("chat parse: vtc equals the reference's parser on the corpus", "[chat][reference][chat-ref]") {
  const fs::path oracle = VTC_CHAT_REF;
  REQUIRE_FALSE(oracle.empty());  // the vtc-chat-ref target is missing: the reference's source build is absent
  REQUIRE(fs::exists(oracle));
  const fs::path dir = templates_dir();
  REQUIRE(fs::is_directory(dir));

  size_t equal = 0, compared = 0;
  std::vector<std::string> mismatches, rejected;
  for (const auto& family : corpus().at("families")) {
    const std::string template_name = family.at("template");
    const fs::path template_path = dir / template_name;
    const std::string template_text = read_file(template_path);
    const ChatFormat detected = vtc::chat::detect_chat_format(template_text);
    if (vtc::chat::chat_format_name(detected) != family.at("format").get<std::string>()) {
      mismatches.push_back(template_name + ": detected " + std::string(vtc::chat::chat_format_name(detected)) + ", corpus says " +
                           family.at("format").get<std::string>());
    }

    // One oracle run per template: the request, then every output.
    const std::string request_path = vtc::test::unique_temp_path("chat_request.json");
    std::ofstream(request_path) << corpus().at("requests").at(family.at("request").get<std::string>()).dump();
    std::string command = "'" + oracle.string() + "' parse '" + template_path.string() + "' '" + request_path + "'";
    std::vector<std::string> entries, output_paths;
    for (const auto& [entry, text] : family.at("outputs").items()) {
      entries.push_back(entry);
      output_paths.push_back(vtc::test::unique_temp_path("chat_output_" + std::to_string(output_paths.size()) + ".txt"));
      std::ofstream(output_paths.back(), std::ios::binary) << text.get<std::string>();
      command += " '" + output_paths.back() + "'";
    }
    std::istringstream lines(vtc::test::run_capture(command));
    std::remove(request_path.c_str());
    for (const auto& p : output_paths) std::remove(p.c_str());

    std::string line;
    for (size_t i = 0; i < entries.size(); ++i) {
      REQUIRE(std::getline(lines, line));
      const json ref = json::parse(line);
      const std::string text = family.at("outputs").at(entries[i]).get<std::string>();
      ParseOptions options = options_for(family, false);
      options.generation_prompt = ref.at("generation_prompt").get<std::string>();
      if (ref.contains("error")) {
        rejected.push_back(label(family, entries[i]));
        continue;
      }
      ParsedMessage ref_msg;
      ref_msg.content = ref.at("content");
      ref_msg.reasoning_content = ref.at("reasoning_content");
      for (const auto& call : ref.at("tool_calls")) ref_msg.tool_calls.push_back({"", call.at("name"), call.at("arguments")});

      ++compared;
      std::string diff = first_difference(vtc::chat::parse_output(text, options, false), ref_msg, false);
      for (size_t chunk : {1, 3, 7}) {
        if (!diff.empty()) break;
        diff = first_difference(stream(text, options, chunk), ref_msg, false);
        if (!diff.empty()) diff = "streamed in chunks of " + std::to_string(chunk) + ": " + diff;
      }
      if (diff.empty()) {
        ++equal;
      } else {
        mismatches.push_back(label(family, entries[i]) + ": " + diff);
      }
    }
  }
  std::printf("chat parse: %zu/%zu outputs equal the reference (%zu more rejected by the reference)\n", equal, compared,
              rejected.size());
  for (const auto& r : rejected) std::printf("  rejected by the reference: %s\n", r.c_str());
  for (const auto& m : mismatches) std::printf("  MISMATCH %s\n", m.c_str());
  CHECK(mismatches.empty());
  CHECK(equal == compared);
  CHECK(compared > 0);
}

// While a response streams, the server parses each prefix as partial: an
// unfinished marker or call is held back or shown as far as it goes. Every
// prefix (about every third byte, at code point boundaries: the oracle
// takes them as JSON strings) must parse as the
// reference's partial parse does, where the reference's grammar accepts it.
TEST_CASE("chat parse: prefixes parse as the reference's partial parse", "[chat][reference][chat-ref]") {
  const fs::path oracle = VTC_CHAT_REF;
  REQUIRE_FALSE(oracle.empty());
  REQUIRE(fs::exists(oracle));
  const fs::path dir = templates_dir();

  size_t equal = 0, compared = 0, failed_in_reference = 0;
  std::vector<std::string> mismatches;
  for (const auto& family : corpus().at("families")) {
    const std::string request_name = family.at("request");
    if (request_name != "tools" && request_name != "no_think") continue;
    const std::string template_name = family.at("template");
    std::vector<std::string> prefixes, names;
    for (const auto& [entry, text_json] : family.at("outputs").items()) {
      const std::string text = text_json.get<std::string>();
      for (size_t cut = 1; cut < text.size(); cut += 3) {
        while (cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) ++cut;  // whole code points
        prefixes.push_back(text.substr(0, cut));
        names.push_back(entry + "[:" + std::to_string(cut) + "]");
      }
    }
    const std::string request_path = vtc::test::unique_temp_path("chat_prefix_request.json");
    const std::string outputs_path = vtc::test::unique_temp_path("chat_prefixes.json");
    std::ofstream(request_path) << corpus().at("requests").at(request_name).dump();
    std::ofstream(outputs_path, std::ios::binary) << json(prefixes).dump();
    std::istringstream lines(vtc::test::run_capture("'" + oracle.string() + "' parse --partial --outputs-json '" +
                                                    (dir / template_name).string() + "' '" + request_path + "' '" +
                                                    outputs_path + "'"));
    std::remove(request_path.c_str());
    std::remove(outputs_path.c_str());

    std::string line;
    for (size_t i = 0; i < prefixes.size(); ++i) {
      REQUIRE(std::getline(lines, line));
      const json ref = json::parse(line);
      if (ref.value("parse_failed", false) || ref.contains("error")) {
        ++failed_in_reference;
        continue;
      }
      ParseOptions options = options_for(family, false);
      options.generation_prompt = ref.at("generation_prompt").get<std::string>();
      ParsedMessage ref_msg;
      ref_msg.content = ref.at("content");
      ref_msg.reasoning_content = ref.at("reasoning_content");
      for (const auto& call : ref.at("tool_calls")) ref_msg.tool_calls.push_back({"", call.at("name"), call.at("arguments")});
      ++compared;
      const std::string diff = first_difference(vtc::chat::parse_output(prefixes[i], options, true), ref_msg, false);
      if (diff.empty()) {
        ++equal;
      } else {
        mismatches.push_back(template_name + " [" + request_name + "] / " + names[i] + ": " + diff);
      }
    }
  }
  std::printf("chat parse: %zu/%zu partial prefixes equal the reference (%zu more fail the reference's grammar)\n", equal,
              compared, failed_in_reference);
  for (size_t i = 0; i < mismatches.size() && i < 40; ++i) std::printf("  MISMATCH %s\n", mismatches[i].c_str());
  CHECK(mismatches.empty());
  CHECK(compared > 0);
}
