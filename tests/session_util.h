// Tests reach the CPU interpreter behind a Session (plans, profiles,
// repacking statistics): a session on any other backend fails the test.
#pragma once

#include "runtime/cpu/cpu_backend.h"
#include "runtime/session.h"
#include "support/error.h"

namespace vtc::test {

inline cpu::Interpreter& cpu_interpreter(Session& session) {
  auto* cpu = dynamic_cast<cpu::CpuBackend*>(&session.backend());
  if (!cpu) throw Error("test: the session does not run on the CPU interpreter");
  return cpu->interpreter();
}

}  // namespace vtc::test
