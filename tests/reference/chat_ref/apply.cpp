// vtc-chat-ref apply: the llama.cpp reference's chat layer — what
// llama-server turns a chat request into — as an oracle for vtc's
// (serve/chat_prompt: chat_inputs_from_request + PromptTemplate::render).
//
//   vtc-chat-ref apply [--now EPOCH] TEMPLATE.jinja REQUEST.json
//   vtc-chat-ref apply [--now EPOCH] --batch CASES.json
//
// The template is loaded as an explicit --chat-template is
// (common_chat_templates_init with no model; REQUEST may name "bos_token"
// and "eos_token", which stand for the model's). The request, an OpenAI
// chat body, fills common_chat_templates_inputs as the server's
// oaicompat_chat_params_parse does and everything else keeps its default:
// messages, tools, tool_choice (default "auto"), response_format /
// json_schema (the output schema), add_generation_prompt
// (default true), enable_thinking (default true; chat_template_kwargs'
// enable_thinking and reasoning_effort "none" turn it off),
// chat_template_kwargs (each value passed as JSON), reasoning_effort.
// Then common_chat_templates_apply, and its prompt is the answer.
//
// The clock: --now fixes inputs.now and the wall clock, which is what the
// reference's templates see: common_chat_extra_context formats
// system_clock::now() (date_string, datetime) and the Jinja context's
// strftime_now() formats std::time(nullptr), neither inputs.now. So
// clock_gettime(CLOCK_REALTIME) and time() are interposed below. The time
// zone is UTC.
//
// Output: with one request, the prompt exactly on stdout, exit 0; when the
// reference raises, its message on stderr, exit 1. With --batch, CASES is a
// JSON array of {"template": PATH, "request": {...}}, and each case prints
// one line of JSON: {"prompt": P} or {"error": MESSAGE}; templates are
// parsed once per (path, bos, eos). Bad arguments or unreadable files: exit 2.
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <string>

#include "chat.h"
#include "common.h"
#include "json.h"

namespace {

long long g_fixed_now = -1;  // seconds since the epoch; < 0: the real clock

}  // namespace

// The reference reads the wall clock for date_string/datetime; with --now
// this process's CLOCK_REALTIME is that instant (other clocks unchanged).
extern "C" int clock_gettime(clockid_t clock, struct timespec* ts) {
  if (g_fixed_now >= 0 && clock == CLOCK_REALTIME) {
    ts->tv_sec = static_cast<time_t>(g_fixed_now);
    ts->tv_nsec = 0;
    return 0;
  }
  return static_cast<int>(syscall(SYS_clock_gettime, clock, ts));
}

extern "C" time_t time(time_t* out) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (out) *out = ts.tv_sec;
  return ts.tv_sec;
}

namespace {

using chat_ref::read_file;

int usage() {
  std::fprintf(stderr,
               "usage: vtc-chat-ref apply [--now EPOCH] TEMPLATE.jinja REQUEST.json\n"
               "       vtc-chat-ref apply [--now EPOCH] --batch CASES.json\n");
  return 2;
}

std::string string_field(const common_json& o, const char* key, const std::string& fallback) {
  if (o.contains(key) && o.at(key).is_string()) return o.at(key).get<std::string>();
  return fallback;
}

// The request's fields as llama-server's oaicompat_chat_params_parse maps
// them onto common_chat_templates_inputs (server defaults: no
// --chat-template-kwargs, --reasoning-format auto, thinking on).
common_chat_templates_inputs inputs_from_request(const common_json& request) {
  common_chat_templates_inputs inputs;
  inputs.messages = common_chat_msgs_parse_oaicompat(request.at("messages"));
  if (request.contains("tools")) inputs.tools = common_chat_tools_parse_oaicompat(request.at("tools"));
  inputs.tool_choice = common_chat_tool_choice_parse_oaicompat(string_field(request, "tool_choice", "auto"));
  inputs.parallel_tool_calls = request.value("parallel_tool_calls", true);
  // The output schema, as oaicompat_chat_params_parse derives it.
  common_json schema = request.value("json_schema", common_json());
  if (request.contains("response_format")) {
    const common_json rf = request.at("response_format");
    const std::string type = string_field(rf, "type", "");
    if (type == "json_object" && (rf.contains("schema") || schema.is_null()))
      schema = rf.value("schema", common_json::object());
    if (type == "json_schema") schema = rf.value("json_schema", common_json::object()).value("schema", common_json::object());
  }
  if (!schema.is_null()) inputs.json_schema = schema.dump();
  inputs.add_generation_prompt = request.value("add_generation_prompt", true);
  inputs.reasoning_format = COMMON_REASONING_FORMAT_AUTO;
  inputs.enable_thinking = true;
  inputs.use_jinja = true;
  if (g_fixed_now >= 0) inputs.now = std::chrono::system_clock::from_time_t(static_cast<time_t>(g_fixed_now));
  if (request.contains("chat_template_kwargs")) {
    for (const auto& [key, value] : request.at("chat_template_kwargs").items())
      inputs.chat_template_kwargs[key] = value.dump();
  }
  auto kw = inputs.chat_template_kwargs.find("enable_thinking");
  if (kw != inputs.chat_template_kwargs.end()) {
    if (kw->second == "true") inputs.enable_thinking = true;
    if (kw->second == "false") inputs.enable_thinking = false;
  }
  const std::string effort = string_field(request, "reasoning_effort", "");
  if (effort == "none") {
    inputs.enable_thinking = false;
    inputs.chat_template_kwargs.erase("reasoning_effort");
  } else if (!effort.empty()) {
    inputs.chat_template_kwargs["reasoning_effort"] = common_json(effort).dump();
  }
  return inputs;
}

struct Templates {
  std::map<std::string, common_chat_templates_ptr> by_key;

  const common_chat_templates* get(const std::string& path, const std::string& bos, const std::string& eos) {
    const std::string key = path + '\n' + bos + '\n' + eos;
    auto it = by_key.find(key);
    if (it != by_key.end()) return it->second.get();
    std::string text;
    if (!read_file(path.c_str(), text)) throw std::invalid_argument("cannot read " + path);
    auto t = common_chat_templates_init(nullptr, text, bos, eos);
    return by_key.emplace(key, std::move(t)).first->second.get();
  }
};

// The prompt, or throws what the reference throws.
std::string apply_one(Templates& templates, const std::string& template_path, const common_json& request) {
  const common_chat_templates* t = templates.get(template_path, string_field(request, "bos_token", ""),
                                                 string_field(request, "eos_token", ""));
  return common_chat_templates_apply(t, inputs_from_request(request)).prompt;
}

}  // namespace

int cmd_apply(int argc, char** argv) {
  int arg = 0;
  bool batch = false;
  while (arg < argc && argv[arg][0] == '-') {
    if (std::strcmp(argv[arg], "--now") == 0 && arg + 1 < argc) {
      char* end = nullptr;
      g_fixed_now = std::strtoll(argv[arg + 1], &end, 10);
      if (end == argv[arg + 1] || *end != '\0' || g_fixed_now < 0) return usage();
      arg += 2;
    } else if (std::strcmp(argv[arg], "--batch") == 0) {
      batch = true;
      ++arg;
    } else {
      return usage();
    }
  }
  if (argc - arg != (batch ? 1 : 2)) return usage();
  setenv("TZ", "UTC", 1);
  tzset();

  Templates templates;
  if (!batch) {
    std::string request_text;
    if (!read_file(argv[arg + 1], request_text)) {
      std::fprintf(stderr, "vtc-chat-ref apply: cannot read %s\n", argv[arg + 1]);
      return 2;
    }
    std::string prompt;
    try {
      prompt = apply_one(templates, argv[arg], common_json::parse(request_text));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 1;
    }
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 2;
  }

  std::string cases_text;
  if (!read_file(argv[arg], cases_text)) {
    std::fprintf(stderr, "vtc-chat-ref apply: cannot read %s\n", argv[arg]);
    return 2;
  }
  common_json cases;
  try {
    cases = common_json::parse(cases_text);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vtc-chat-ref apply: %s is not JSON: %s\n", argv[arg], e.what());
    return 2;
  }
  if (!cases.is_array()) return usage();
  for (const auto& c : cases) {
    common_json line = common_json::object();
    try {
      line["prompt"] = apply_one(templates, c.at("template").get<std::string>(), c.at("request"));
    } catch (const std::exception& e) {
      line = common_json::object();
      line["error"] = e.what();
    }
    std::printf("%s\n", line.dump_safe().c_str());
  }
  return std::fflush(stdout) == 0 ? 0 : 2;
}
