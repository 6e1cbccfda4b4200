#include "runtime/diff/arm.h"

#include <fmt/format.h>

#include "runtime/diff/session_arm.h"
#include "support/error.h"

namespace vtc::diff {

const std::vector<ArmKind>& known_arms() {
  static const std::vector<ArmKind> arms = {
      {"cpu", "the CPU interpreter on the module a session runs (what `vtc run` executes)", make_cpu_arm},
      {"cpu-unfused", "the CPU interpreter on the frontend module lowered without fusion or weight layouts",
       make_cpu_unfused_arm},
      {"cuda", "the CUDA executor", make_cuda_arm},
  };
  return arms;
}

std::unique_ptr<Arm> make_arm(const std::string& name, const ArmConfig& config) {
  std::vector<std::string> names;
  for (const ArmKind& kind : known_arms()) {
    if (kind.name == name) return kind.create(config);
    names.push_back(kind.name);
  }
  throw Error(fmt::format("diff: unknown arm '{}' (known: {})", name, fmt::join(names, ", ")));
}

}  // namespace vtc::diff
