// Comparing one step of two arms: every tapped op result and every declared
// state, each judged by relative L2 against a tolerance for its element type.
//
// Matching: taps by key (value_index.h), states by name. Rows come in the
// order a reader needs to find the first cause: arm A's taps in execution
// order (with arm B's match), then taps only arm B has, then the states
// after the step in declaration order. A tap present in one arm only is
// listed but not judged (a fused arm lacks the intermediates it fused
// away); a state missing from one arm is a divergence, since both arms run
// one model and must declare the same persistent state.
//
// Verdict of a matched pair: diverged if the element counts differ, any
// position disagrees on being non-finite, or rel-L2 > tolerance(dtype).
// Integer tensors (token ids, hashes, positions) have tolerance 0: they
// must match exactly.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/types.h"
#include "runtime/diff/arm.h"
#include "runtime/diff/fingerprint.h"

namespace vtc::diff {

// Relative-L2 tolerance per element type. The float defaults allow for
// reassociation (another summation order or a fused kernel) and for
// rounding-boundary flips where values are stored in 16 bits.
struct Tolerances {
  double f32 = 1e-3;
  double f16 = 2e-3;
  double bf16 = 1e-2;
  double integer = 0;
  double of(ir::ElemType elem) const;
  // "f32=1e-4" (dtype: f32, f16, bf16, int); throws vtc::Error when malformed.
  void set(const std::string& spec);
};

enum class Verdict { Ok, Diverged, OnlyA, OnlyB };
std::string verdict_name(Verdict v);

struct Row {
  bool is_state = false;
  std::string name;  // "%ids" or "@kv.0" (arm A's name where both have it)
  std::string op;    // "state_read @last_ids"; "state" for states
  std::vector<std::string> users;
  std::string dtype, shape;
  std::optional<Fingerprint> a, b;
  double rel_l2 = 0;
  int64_t nonfinite_mismatches = 0;
  double tolerance = 0;
  Verdict verdict = Verdict::Ok;
  std::string why;  // for a divergence: what disagreed
};

struct StepComparison {
  int step = 0;
  std::vector<Row> rows;
  // The first diverged row in row order; null if none.
  const Row* first_divergence() const;
  int count(Verdict v) const;
  double max_rel_l2() const;  // over judged rows with finite rel-L2
};

StepComparison compare_step(int step, const StepOutput& a, const StepOutput& b, const Tolerances& tolerances);

}  // namespace vtc::diff
