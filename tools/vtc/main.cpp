// vtc: the command-line driver. Parses options and dispatches to library
// code; every subcommand lives in its own cmd_*.cpp file.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <map>

#include "tools/vtc/cache_type_option.h"
#include "tools/vtc/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"vtc: a graph-compiled LLM inference engine (GGUF -> typed IR -> CPU/CUDA)"};
  app.set_version_flag("--version", "vtc " VTC_VERSION_STRING);
  app.require_subcommand(1);
  std::map<CLI::App*, vtc::cli::Runner> runners;
  auto add = [&](vtc::cli::Runner (*register_fn)(CLI::App&)) {
    size_t before = app.get_subcommands({}).size();
    vtc::cli::Runner run = register_fn(app);
    runners[app.get_subcommands({})[before]] = std::move(run);
  };
  add(vtc::cli::add_inspect);
  add(vtc::cli::add_gen_model);
  add(vtc::cli::add_compile);
  add(vtc::cli::add_run);
  add(vtc::cli::add_bench);
  add(vtc::cli::add_opt);
  add(vtc::cli::add_kernels);
  add(vtc::cli::add_diff);
  add(vtc::cli::add_serve);
  add(vtc::cli::add_apply_template);
  vtc::cli::expand_llama_short_options(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& [sub, run] : runners)
      if (sub->parsed()) return run();
  } catch (const std::exception& e) {
    // vtc::Error, and anything else thrown (the standard library, a
    // dependency): one line and exit code 1, never an abort.
    fmt::print(stderr, "vtc: error: {}\n", e.what());
    return 1;
  }
  return 1;
}
