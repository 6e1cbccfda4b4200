// The execution target: one enum, parsed once at the edge (a CLI flag, an
// artifact header, a pass option such as `fuse{target=cuda}`), carried as
// the enum by every internal API. parse_target() is the only place a name
// is validated.
#pragma once

#include <string>
#include <string_view>

namespace vtc {

enum class Target { Cpu, Cuda };

// "cpu" -> Target::Cpu, "cuda" -> Target::Cuda. Throws vtc::Error naming the
// bad value and the valid ones: "unknown target 'tpu' (valid: cpu, cuda)".
Target parse_target(std::string_view name);
// "cpu" | "cuda": the name parse_target() takes back.
std::string_view target_name(Target target);
// "cpu, cuda": the valid names, for help text and errors.
std::string_view target_names();

}  // namespace vtc
