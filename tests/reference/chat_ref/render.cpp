// vtc-chat-ref render: the llama.cpp reference's own Jinja engine
// (common/jinja) as an oracle for vtc's (serve/jinja).
//
//   vtc-chat-ref render [--now EPOCH] TEMPLATE.jinja CONTEXT.json
//
// CONTEXT.json is an object; its top-level keys become the template's
// variables, as common_chat_template_direct_apply hands them over
// (jinja::global_from_json, no input marking). Nothing of the chat layer
// runs here: no message normalization, no bos/eos stripping — the caller
// puts exactly what both engines should see into the context.
//
// The reference's strftime_now() formats context::current_time through
// std::localtime. For reproducible dates the time zone is pinned to UTC
// and --now sets current_time (seconds since the epoch); without it the
// clock is used, as in the reference.
//
// Output: the rendering, exactly, on stdout (the string parts of the
// program's results, concatenated as the chat layer does), exit 0. A lexer,
// parser or runtime error (the template's raise_exception included):
// its message on stderr, exit 1. Bad arguments or unreadable files: exit 2.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>

#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "jinja/runtime.h"
#include "jinja/value.h"
#include "json.h"
#include "common.h"

namespace {

using chat_ref::read_file;

int usage() {
  std::fprintf(stderr, "usage: vtc-chat-ref render [--now EPOCH] TEMPLATE.jinja CONTEXT.json\n");
  return 2;
}

// Runs the reference engine over one template and context; throws whatever
// the engine throws.
std::string render_with_reference(const std::string& source, const common_json& context,
                                  const std::time_t* now) {
  jinja::lexer lexer;
  jinja::lexer_result tokens = lexer.tokenize(source);
  jinja::program program = jinja::parse_from_tokens(tokens);

  jinja::context ctx(tokens.source);
  if (now != nullptr) ctx.current_time = *now;
  jinja::global_from_json(ctx, context, /*mark_input=*/false);

  jinja::runtime runtime(ctx);
  const jinja::value results = runtime.execute(program);
  return jinja::runtime::gather_string_parts(results)->as_string().str();
}

}  // namespace

int cmd_render(int argc, char** argv) {
  std::time_t now = 0;
  bool have_now = false;
  int arg = 0;
  if (arg < argc && std::strcmp(argv[arg], "--now") == 0) {
    if (arg + 1 >= argc) return usage();
    char* end = nullptr;
    now = static_cast<std::time_t>(std::strtoll(argv[arg + 1], &end, 10));
    if (end == argv[arg + 1] || *end != '\0') return usage();
    have_now = true;
    arg += 2;
  }
  if (argc - arg != 2) return usage();
  const char* template_path = argv[arg];
  const char* context_path = argv[arg + 1];

  std::string source, context_text;
  if (!read_file(template_path, source)) {
    std::fprintf(stderr, "vtc-chat-ref render: cannot read %s\n", template_path);
    return 2;
  }
  if (!read_file(context_path, context_text)) {
    std::fprintf(stderr, "vtc-chat-ref render: cannot read %s\n", context_path);
    return 2;
  }
  common_json context;
  try {
    context = common_json::parse(context_text);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vtc-chat-ref render: %s is not JSON: %s\n", context_path, e.what());
    return 2;
  }
  if (!context.is_object()) {
    std::fprintf(stderr, "vtc-chat-ref render: %s must hold a JSON object\n", context_path);
    return 2;
  }

  // strftime_now() goes through std::localtime: make that UTC.
  setenv("TZ", "UTC", 1);
  tzset();

  std::string out;
  try {
    out = render_with_reference(source, context, have_now ? &now : nullptr);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 2;
}
