#include "support/target.h"

#include <fmt/format.h>

#include "support/error.h"

namespace vtc {

Target parse_target(std::string_view name) {
  if (name == "cpu") return Target::Cpu;
  if (name == "cuda") return Target::Cuda;
  throw Error(fmt::format("unknown target '{}' (valid: {})", name, target_names()));
}

std::string_view target_name(Target target) {
  switch (target) {
    case Target::Cpu: return "cpu";
    case Target::Cuda: return "cuda";
  }
  return "?";
}

std::string_view target_names() { return "cpu, cuda"; }

}  // namespace vtc
