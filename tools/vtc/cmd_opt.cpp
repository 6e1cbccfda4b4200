// `vtc opt FILE.vtcir --passes=a,b{k=v}`: runs a pass pipeline on textual IR
// and prints the result (with the passes' artifacts as `//` comments). The
// driver behind the golden tests in tests/passes; see docs/passes.md.
#include <CLI/CLI.hpp>

#include <iostream>

#include "passes/opt_driver.h"
#include "tools/vtc/commands.h"

namespace vtc::cli {

Runner add_opt(CLI::App& app) {
  auto* cmd = app.add_subcommand("opt", "Run a pass pipeline on a .vtcir file and print the result");
  auto opts = std::make_shared<passes::OptOptions>();
  cmd->add_option("file", opts->input, ".vtcir file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--passes", opts->passes, "Pipeline, e.g. canonicalize,placement{target=cuda},memory-plan{T=512,S=1}");
  cmd->add_flag("--split-input-file", opts->split_input_file, "Treat lines '// -----' as separate cases");
  cmd->add_option("--dump-ir", opts->manager.dump_dir, "Write DIR/<step>/NN-<pass>.vtcir after every pass");
  cmd->add_option("--dump-pass", opts->manager.dump_pass, "Only dump passes whose name matches this regex");
  cmd->add_option("--disable-pass", opts->manager.disabled_passes, "Skip the named pass (repeatable)");
  cmd->add_flag("--print-pass-timing", opts->manager.print_timing, "Print the time of every pass");
  cmd->add_flag("--debug-passes", opts->manager.debug_passes,
                "Log every rewrite-pattern application (canonicalize folds, fusions) to stderr");
  cmd->add_flag("--check-no-change", opts->manager.check_no_change,
                "Catch a pass that reports no change but changed the module (always on in debug builds)");
  return [opts] { return passes::run_opt(*opts, std::cout); };
}

}  // namespace vtc::cli
