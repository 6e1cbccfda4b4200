// The CUDA arm of `vtc diff`: the CUDA executor (runtime/cuda) on the module
// lowered with the CUDA pipeline, as `vtc bench --target cuda` runs it.
//
// Creating it throws vtc::Error "cuda target unavailable: <reason>" when
// there is no driver, no device or no NVRTC here, so `vtc diff` with the
// default arms (cpu,cuda) says plainly why it cannot run, and
// `--arms cpu,cpu-unfused` exercises every other part of the diff.
//
// Per step (runtime/diff/cuda_arm.cpp):
//   - taps: the executor's observer (runtime/cuda/executor.h) copies every
//     computing op's results to the host after the step; the step runs
//     without its CUDA graph and with activation reuse off, so each result
//     is intact when copied. The tap filter is the CPU arm's (tap_recorder.h);
//   - states: the device copy of every declared state is downloaded into the
//     host StateStore (same layout), then snapshotted through the host page
//     table exactly as the CPU arm does (state_snapshot.h);
//   - decode: the given token is written into @last_ids on the device before
//     the step, as the device sampler writes it on a real decode step.
#pragma once

#include <memory>

#include "runtime/diff/arm.h"

namespace vtc::diff {

std::unique_ptr<Arm> make_cuda_arm(const ArmConfig& config);

}  // namespace vtc::diff
