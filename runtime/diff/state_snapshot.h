// Printing snapshots of one sequence's persistent state (Session::snapshot,
// runtime/session.h).
//
// The list of states comes from the module's `state` declarations (the
// StateStore is built from the same list), never from a list kept by hand:
// DESIGN.md, "State is declared". This is what `vtc run --fingerprint`
// prints and what `vtc diff` compares after every step.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/session.h"

namespace vtc::diff {

// "2x32x2x16" ("scalar" for rank 0).
std::string format_shape(const std::vector<int64_t>& shape);

// `vtc run --fingerprint`: one line per state,
//   fingerprint: step N (KIND) @NAME DTYPE [SHAPE] nonfinite=... first=[...]
void print_state_fingerprints(std::FILE* out, int step, std::string_view step_kind,
                              const std::vector<StateSnapshot>& states);

}  // namespace vtc::diff
