// `vtc inspect FILE.gguf`: architecture, hparams, tokenizer, tensor table
// and totals; `--json` for machines.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "frontends/gguf/model_summary.h"
#include "tools/vtc/commands.h"

namespace vtc::cli {

Runner add_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Summarize a GGUF file: hparams, tokenizer, tensors, totals");
  struct Opts {
    std::string path;
    bool json = false;
    bool all_tensors = false;
  };
  auto opts = std::make_shared<Opts>();
  cmd->add_option("file", opts->path, "GGUF file")->required()->check(CLI::ExistingFile);
  cmd->add_flag("--json", opts->json, "Print JSON instead of text");
  cmd->add_flag("--all-tensors", opts->all_tensors, "List every tensor (default: the first 64)");
  return [opts] {
    auto file = gguf::GgufFile::open(opts->path);
    gguf::SummaryOptions so;
    if (opts->all_tensors) so.max_tensors = 0;
    if (opts->json) {
      so.max_tensors = 0;
      fmt::print("{}\n", gguf::summary_json(file, so));
    } else {
      fmt::print("{}", gguf::summary_text(file, so));
    }
    return 0;
  };
}

}  // namespace vtc::cli
