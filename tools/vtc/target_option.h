// `--target cpu|cuda` of the driver's commands: CLI11 keeps the name, and
// the check runs parse_target (support/target.h), the one place a target
// name is validated, so a bad name fails at parse time with its message:
//   --target: unknown target 'tpu' (valid: cpu, cuda)
// The command converts the name with parse_target when it runs.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "support/error.h"
#include "support/target.h"

namespace vtc::cli {

inline CLI::Validator target_check() {
  return CLI::Validator(
      [](std::string& name) {
        try {
          parse_target(name);
          return std::string();
        } catch (const Error& e) {
          return std::string(e.what());
        }
      },
      "TARGET", "target");
}

}  // namespace vtc::cli
