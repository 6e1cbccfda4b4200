// The CPU arms of `vtc diff`: the interpreter, observed op by op through
// Interpreter::set_observer.
//
//   cpu          the module exactly as cpu::Session builds and runs it, so
//                it follows whatever pipeline `vtc run` executes;
//   cpu-unfused  the module straight from the architecture builder, run
//                through `canonicalize` only (no fusion, no optimization
//                pipeline), on its own interpreter and state store.
//
// The two run the same kernels on different graphs, so they diff clean
// unless a pass changes what is computed: that makes them the GPU-free
// control for the diff machinery and a check on the fusion passes.
#pragma once

#include <memory>

#include "runtime/diff/arm.h"

namespace vtc::diff {

std::unique_ptr<Arm> make_cpu_arm(const ArmConfig& config);
std::unique_ptr<Arm> make_cpu_unfused_arm(const ArmConfig& config);

}  // namespace vtc::diff
