// Runs a kernel launch's grid on the host with CUDA's execution semantics.
//
// Algorithm:
//  - Blocks are independent: they are handed out from a shared counter to
//    the calling thread and a small pool of host workers (VTC_CUDA_SIM_THREADS,
//    default the number of cores), each running one block at a time.
//  - A block's threads are fibers (fiber.h) on that worker. A scheduler
//    resumes the lowest-numbered runnable fiber after the last one it ran,
//    so a fiber runs until it reaches a barrier or a warp collective or
//    ends. A barrier releases when every live thread of its group (block,
//    or warp) has arrived; the scheduler then continues with the group's
//    first thread, so warp 0 runs ahead of warp 1 as it may on a GPU, and a
//    missing __syncthreads shows up as wrong values instead of being
//    hidden by a lock-step order.
//  - Warp shuffles: every lane writes its value into the warp's slot for
//    the current barrier generation, arrives, then reads the source lane's
//    slot. Slots alternate between two generations, so a lane that runs on
//    to the next collective cannot overwrite a value a slower lane has yet
//    to read.
//  - What a GPU hangs on or leaves undefined is an error naming the kernel
//    and the block: a barrier some threads never reach (deadlock), lanes at
//    different warp collectives, a collective whose mask names a lane that
//    has exited.
//  - Checked mode (VTC_CUDA_SIM_CHECK=1) instruments every load and store
//    of the kernel: an access must fall in a device allocation, the
//    thread's own stack or the kernel object; an access to `__shared__`
//    memory is checked against the last writer of each 4-byte word since
//    the last __syncthreads (another thread's write: a race, unless a warp
//    collective of the same warp came between).
//  - Faults (SIGSEGV/SIGBUS) inside a kernel are caught on an alternate
//    signal stack: the block is abandoned and the launch fails with the
//    kernel, the block and thread, and the allocation and parameter the
//    address belongs to (see memory.h; checked mode puts guard pages
//    around every allocation so an overflow faults).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cuda/sim/kernel_abi.h"

namespace vtc::cuda::sim {

using KernelFn = void (*)(void** params, const VtcSimThread* self);

// Where a kernel object lives, for checked mode's access checks: its loaded
// segments (constants, the runtime table) and its thread-local block (the
// `__shared__` arrays, one copy per host worker).
struct ModuleMemory {
  void* handle = nullptr;
  std::vector<std::pair<uintptr_t, uintptr_t>> segments;  // [begin, end)
  size_t tls_bytes = 0;
};

struct Launch {
  KernelFn fn = nullptr;
  std::string entry;
  const VtcSimParams* param_info = nullptr;
  void** params = nullptr;  // one pointer per parameter, to its bytes
  VtcSimDim3 grid{1, 1, 1}, block{1, 1, 1};
  const ModuleMemory* module = nullptr;
};

// Runs every block of `launch`. Returns "" or what went wrong.
std::string run_grid(const Launch& launch);

// The table kernels call back into (vtc_sim_bind).
const VtcSimRuntime* runtime_table();

}  // namespace vtc::cuda::sim
