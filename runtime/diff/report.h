// The text of a `vtc diff` report (docs/cuda.md, "Reading a vtc diff
// report"): per step a header, a table with one row per compared tensor
// (tensor, op, dtype, shape, both fingerprints, rel-L2, tolerance,
// verdict) and a one-line summary; at the end the first divergence.
#pragma once

#include <cstdio>
#include <string>

#include "runtime/diff/compare.h"

namespace vtc::diff {

struct ReportOptions {
  bool only_divergent = false;  // table rows: only DIVERGED ones
};

void print_step_table(std::FILE* out, const StepComparison& step, const std::string& header,
                      const std::string& arm_a, const std::string& arm_b, const ReportOptions& options);

// "first divergence: step 1, %ids (op state_read @last_ids, read by embed):
// rel-L2 1 > tolerance 0 (i32)".
std::string describe_divergence(int step, const Row& row);

}  // namespace vtc::diff
