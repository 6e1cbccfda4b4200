#include "runtime/diff/state_snapshot.h"

#include <fmt/format.h>

#include "runtime/diff/fingerprint.h"
#include "support/error.h"

namespace vtc::diff {
std::string format_shape(const std::vector<int64_t>& shape) {
  return shape.empty() ? "scalar" : fmt::format("{}", fmt::join(shape, "x"));
}

void print_state_fingerprints(std::FILE* out, int step, std::string_view step_kind,
                              const std::vector<StateSnapshot>& states) {
  for (const StateSnapshot& s : states)
    fmt::print(out, "fingerprint: step {} ({}) {} {} [{}] {}\n", step, step_kind, s.name, s.value.elem.name(),
               format_shape(s.value.shape), format_fingerprint(fingerprint(widen(s.value))));
}

}  // namespace vtc::diff
