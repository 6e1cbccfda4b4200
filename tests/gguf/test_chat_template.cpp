// Built-in chat templates produce exactly the reference's prompt text, for
// each supported template, from names and from real Jinja sources.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "frontends/gguf/chat_template.h"
#include "frontends/gguf/gguf.h"
#include "support/error.h"
#include "tests/test_process.h"

using namespace vtc;

namespace {

const std::vector<std::vector<ChatMessage>>& conversations() {
  static const std::vector<std::vector<ChatMessage>> convs = {
      {{"user", "Hello"}},
      {{"system", "You are terse."}, {"user", "Hi there"}, {"assistant", "  Hello!  "}, {"user", "Bye\n"}},
      {{"user", "one"}, {"assistant", "two"}, {"user", "three"}, {"assistant", "four"}},
  };
  return convs;
}

std::string reference_format(const std::string& tmpl, const std::vector<ChatMessage>& msgs, bool add_assistant) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& m : msgs) j.push_back({{"role", m.role}, {"content", m.content}});
  auto path = test::unique_temp_path("chat_msgs.json");
  std::ofstream(path) << j.dump();
  auto tmpl_path = test::unique_temp_path("chat_tmpl.txt");
  std::ofstream(tmpl_path) << tmpl;
  return test::run_capture(fmt::format("{} chat-template \"$(cat {})\" {} < {}", VTC_REF_TOOL, tmpl_path,
                                       add_assistant ? "" : "--no-add-assistant", path));
}

}  // namespace

TEST_CASE("every built-in template matches the reference", "[chat][reference]") {
  for (auto name : chat_template_names()) {
    ChatTemplate kind = detect_chat_template(name);
    for (const auto& conv : conversations()) {
      for (bool add_assistant : {true, false}) {
        INFO("template " << name << ", " << conv.size() << " messages, add_assistant " << add_assistant);
        CHECK(apply_chat_template(kind, conv, add_assistant) ==
              reference_format(std::string(name), conv, add_assistant));
      }
    }
  }
}

TEST_CASE("the Jinja template of a real vocab is recognised", "[chat][reference]") {
  auto f = gguf::GgufFile::open(std::string(VTC_REFERENCE_MODELS_DIR) + "/ggml-vocab-qwen2.gguf");
  auto tmpl = f.get_string("tokenizer.chat_template");
  REQUIRE(tmpl);
  CHECK(detect_chat_template(*tmpl) == ChatTemplate::ChatML);
  CHECK(apply_chat_template(ChatTemplate::ChatML, conversations()[1], true) ==
        reference_format(*tmpl, conversations()[1], true));
}

TEST_CASE("Jinja sources are recognised by their markers", "[chat]") {
  CHECK(detect_chat_template("{% for m in messages %}<|im_start|>{{m.role}}") == ChatTemplate::ChatML);
  CHECK(detect_chat_template("<|start_header_id|>{{ role }}<|end_header_id|>") == ChatTemplate::Llama3);
  CHECK(detect_chat_template("{{ '[SYSTEM_PROMPT]' }}[INST]") == ChatTemplate::MistralV7);
  CHECK(detect_chat_template("{{ bos }}' [INST] ' + system_message") == ChatTemplate::MistralV1);
}

TEST_CASE("an unknown template is a clear error", "[chat]") {
  CHECK_THROWS_WITH(detect_chat_template("{{ something else }}"),
                    Catch::Contains("unsupported chat template") && Catch::Contains("chatml, llama3"));
}
