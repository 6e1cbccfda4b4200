// `vtc inspect FILE.gguf`: architecture, hparams, tokenizer, tensor table,
// totals and the tensor accounting (which tensors the architecture takes,
// which it accepts without applying them, which no engine knows); `--json`
// for machines.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "frontends/gguf/arch/arch.h"
#include "frontends/gguf/model_summary.h"
#include "support/error.h"
#include "tools/vtc/commands.h"

namespace vtc::cli {
namespace {

// The accounting as text: counts, and the names of the tensors that are
// not applied (the first `max_names` of each list, 0 = all).
std::string accounting_text(const arch::FileAccounting& a, size_t max_names) {
  auto names = [&](const std::vector<std::string>& v) {
    if (max_names == 0 || v.size() <= max_names) return fmt::format("{}", fmt::join(v, ", "));
    return fmt::format("{}, ... ({} more; --all-tensors lists them)",
                       fmt::join(v.begin(), v.begin() + long(max_names), ", "), v.size() - max_names);
  };
  std::string out = fmt::format("\ntensor accounting:\n  taken by the builder      {}\n", a.taken.size());
  out += fmt::format("  accepted, not applied     {}{}\n", a.accepted_unused.size(),
                     a.accepted_unused.empty() ? "" : " (llama.cpp loads them and applies none; docs/gguf.md): " +
                                                          names(a.accepted_unused));
  out += fmt::format("  unknown                   {}{}\n", a.unknown.size(),
                     a.unknown.empty() ? "" : " (vtc refuses the file): " + names(a.unknown));
  return out;
}

}  // namespace

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
    std::optional<arch::FileAccounting> accounting;
    std::string accounting_error;
    try {
      accounting = arch::account_file(file);
    } catch (const Error& e) {
      accounting_error = e.what();
    }
    if (opts->json) {
      so.max_tensors = 0;
      auto j = nlohmann::json::parse(gguf::summary_json(file, so));
      if (accounting)
        j["tensor_accounting"] = {{"taken", accounting->taken.size()},
                                  {"accepted_unused", accounting->accepted_unused},
                                  {"unknown", accounting->unknown}};
      else
        j["tensor_accounting"] = {{"error", accounting_error}};
      fmt::print("{}\n", j.dump(1));
    } else {
      fmt::print("{}", gguf::summary_text(file, so));
      if (accounting) fmt::print("{}", accounting_text(*accounting, opts->all_tensors ? 0 : 8));
      else fmt::print("\ntensor accounting: the model cannot be built: {}\n", accounting_error);
    }
    return 0;
  };
}

}  // namespace vtc::cli
