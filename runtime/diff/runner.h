// The differential runner behind `vtc diff`: two arms, one sequence, in
// lockstep.
//
// Algorithm:
//   1. Create arm A and arm B (an unavailable arm fails here with its
//      reason); wrap B in the requested test injection, if any.
//   2. Step 0: prefill the prompt on both. Steps 1..N: decode one token on
//      both, at positions P, P+1, ... The token of step k+1 is the greedy
//      argmax of arm A's logits at step k, fed to both arms, so B never
//      drifts onto another token sequence and every difference is B's own.
//   3. After each step compare every tap and every declared state
//      (compare.h), print the step's table, and stop after the first step
//      with a divergence (unless keep_going).
//   4. Print the first divergence, or that there was none.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/diff/compare.h"
#include "runtime/diff/report.h"

namespace vtc::diff {

struct DiffOptions {
  std::string model;
  std::vector<int32_t> prompt;
  int steps = 8;                                   // decode steps after the prefill
  std::vector<std::string> arms = {"cpu", "cuda"};
  std::string tap = ".";                           // every op result
  Tolerances tolerances;
  int threads = 0;
  int64_t n_ctx = 0;                               // 0: prompt + steps, rounded up to 16
  GgmlType cache_k = GgmlType::F16, cache_v = GgmlType::F16;  // the KV cache's types
  bool keep_going = false;
  ReportOptions report;
  std::string inject;                              // --inject-bug (test builds only)
};

struct DiffResult {
  bool diverged = false;
  int first_step = -1;             // step of the first divergence
  std::string first_name, first_op;
  std::string first_line;          // "first divergence: ..."
  int steps_run = 0;               // including step 0
  std::vector<int32_t> tokens;     // greedy tokens of arm A fed to steps 1..
};

// Throws vtc::Error on bad options or an arm that cannot run.
DiffResult run_diff(const DiffOptions& options, std::FILE* out);

}  // namespace vtc::diff
