// Parses the textual IR (docs/ir.md) into a Module.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/module.h"

namespace vtc::ir {

struct ParseOptions {
  // Line number of the first line of `text`; lets a tool that splits a file
  // into cases report lines of the whole file.
  int first_line = 1;
};

// Throws vtc::Error("LINE:COL: error: MESSAGE") on malformed text. Never
// crashes: recursion is bounded and every number is range-checked. The
// result is not verified; call verify() for the semantic rules.
Module parse(std::string_view text, const ParseOptions& options = {});

// Golden-test files hold many cases separated by lines starting with
// "// -----". Splits `text` into them (one case when `split` is false),
// each with the line number its text starts at (for ParseOptions).
struct SourceCase {
  std::string text;
  int first_line = 1;
};
std::vector<SourceCase> split_source_cases(const std::string& text, bool split = true);

}  // namespace vtc::ir
