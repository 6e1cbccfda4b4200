// The `vtc opt` driver: parse a .vtcir file (optionally split into cases at
// lines "// -----"), run a pipeline on each case, print the result with its
// artifacts (remarks and timing go to stderr). Errors (parse, verify, pass)
// are printed as "error: ..." on the
// output stream so golden tests can CHECK them; the case separator is echoed
// between outputs.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "passes/pass_manager.h"

namespace vtc::passes {

struct OptOptions {
  std::string input;   // path
  std::string passes;  // pipeline text; empty runs nothing (verify + print)
  bool split_input_file = false;
  PassManagerOptions manager;
};

// Returns the exit status: 0 if every case ran, 1 if any case failed (or the
// file cannot be read). With split_input_file, failures are printed and the
// status stays 0, as the case output is what the test checks.
int run_opt(const OptOptions& options, std::ostream& out);

}  // namespace vtc::passes
