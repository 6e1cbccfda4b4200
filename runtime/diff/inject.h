// Test-only fault injection for `vtc diff --inject-bug NAME`.
//
// Compiled in only when VTC_TEST_HOOKS is defined (CMake option
// VTC_TEST_HOOKS, on by default when the tests are built), so a release
// binary cannot be asked to corrupt a run. Each injection wraps the second
// arm; the first stays the reference.
//
//   stale-ids  reproduces the seed failure (DESIGN.md, "Why a compiler";
//              ../shared/context/seed-pr-2550.txt): the arm's decode steps
//              read a stale copy of the token ids, the value @last_ids held
//              after step 0 (zero on a fresh sequence, as the seed's stale
//              host vector was), instead of the sampled token. A correct
//              diff names the value read from @last_ids (the embedding
//              input) at step 1 as the first divergence.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/diff/arm.h"

namespace vtc::diff {

// Empty when the build has no test hooks.
std::vector<std::string> known_injections();

// Throws vtc::Error for an unknown name, or for any name in a build without
// test hooks (saying how to get them).
std::unique_ptr<Arm> inject_bug(const std::string& name, std::unique_ptr<Arm> arm);

}  // namespace vtc::diff
