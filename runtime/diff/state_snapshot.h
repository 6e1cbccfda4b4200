// Snapshots of one sequence's persistent state, enumerated from the module.
//
// The list of states comes from the module's `state` declarations (the
// StateStore is built from the same list), never from a list kept by hand:
// DESIGN.md, "State is declared". This is what `vtc run --fingerprint`
// prints and what `vtc diff` compares after every step.
//
// Per declaration kind, the snapshot of slot `s` is:
//   plain / ring  the slot's row, shaped as the declaration without its
//                 leading S dim ([1] for a declaration of shape [S]);
//   paged KV      [2, N, rest...]: K then V rows of every position the slot's
//                 page table maps (N = pages x page size), in position order.
//                 Rows past the last written position are zero (pages are
//                 zeroed when taken), so both arms agree on them.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "ir/module.h"
#include "runtime/cpu/interpreter.h"
#include "runtime/state/state_store.h"

namespace vtc::diff {

struct StateSnapshot {
  std::string name;  // "@kv.0"
  cpu::HostTensor value;
};

// One snapshot per state declaration of `module`, in declaration order.
std::vector<StateSnapshot> snapshot_states(const ir::Module& module, StateStore& store, int32_t slot);

// "2x32x2x16" ("scalar" for rank 0).
std::string format_shape(const std::vector<int64_t>& shape);

// `vtc run --fingerprint`: one line per state,
//   fingerprint: step N (KIND) @NAME DTYPE [SHAPE] nonfinite=... first=[...]
void print_state_fingerprints(std::FILE* out, int step, std::string_view step_kind,
                              const std::vector<StateSnapshot>& states);

}  // namespace vtc::diff
