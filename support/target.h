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

// A Target that a name converts to, through parse_target(). Only for option
// structs that callers outside runtime/ still fill with a string
// (SessionOptions::target, set from a CLI11 string in tools/vtc/cmd_run.cpp
// and serve/engine.cpp); once they pass a Target, replace it by Target.
class TargetOrName {
 public:
  constexpr TargetOrName(Target t = Target::Cpu) : target_(t) {}  // NOLINT(google-explicit-constructor)
  TargetOrName(const std::string& name) : target_(parse_target(name)) {}  // NOLINT(google-explicit-constructor)
  TargetOrName(const char* name) : target_(parse_target(name)) {}  // NOLINT(google-explicit-constructor)
  constexpr operator Target() const { return target_; }  // NOLINT(google-explicit-constructor)

 private:
  Target target_;
};

}  // namespace vtc
