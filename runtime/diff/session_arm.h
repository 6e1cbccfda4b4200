// The arms of `vtc diff`: each is one Session (runtime/session.h) on one
// backend, observed op by op through Backend::set_observer.
//
//   cpu          the CPU interpreter on the module a session runs (what
//                `vtc run` executes), with the standard CPU pipeline;
//   cpu-unfused  the CPU interpreter on the same frontend module lowered
//                without fusion and without weight layouts (the standard
//                pipeline with optimize off and weight-layout disabled);
//   cuda         the CUDA executor on the module lowered with the standard
//                CUDA pipeline, as `vtc run --target cuda` runs it.
//
// cpu and cpu-unfused run the same kernels on different graphs, so they
// diff clean unless a pass changes what is computed: the GPU-free control
// for the diff machinery and a check on the fusion passes.
//
// Per step:
//   - taps: the backend's observer. On CUDA a step with an observer runs
//     without its CUDA graph and with activation reuse off, so each result
//     is intact when copied (runtime/cuda/executor.h). The tap filter is
//     shared (tap_recorder.h);
//   - states: Session::snapshot reads every declared state of the slot from
//     the backend's storage (device rows on CUDA; no host mirror);
//   - decode: the given token is written into @last_ids, as the sampler
//     writes it on a real decode step.
//
// Creating the cuda arm throws vtc::Error "cuda target unavailable: <reason>"
// when there is no driver, no device or no NVRTC here, so `vtc diff` with
// the default arms (cpu,cuda) says plainly why it cannot run, and
// `--arms cpu,cpu-unfused` exercises every other part of the diff.
#pragma once

#include <memory>

#include "runtime/diff/arm.h"

namespace vtc::diff {

std::unique_ptr<Arm> make_cpu_arm(const ArmConfig& config);
std::unique_ptr<Arm> make_cpu_unfused_arm(const ArmConfig& config);
std::unique_ptr<Arm> make_cuda_arm(const ArmConfig& config);

}  // namespace vtc::diff
