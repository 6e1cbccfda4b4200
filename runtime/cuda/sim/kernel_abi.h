// The ABI between the simulated CUDA device (libvtc_cuda_sim) and the
// kernels its NVRTC substitute compiles into host shared objects.
//
// Included by both sides: by the simulator as a C++ header, and by every
// kernel through kernel_host.h. A kernel object exports, per entry E,
//   vtc_sim_run_E(void** params, const VtcSimThread*)   runs one CUDA thread
//   vtc_sim_params_E                                    parameter sizes/names
// and one vtc_sim_bind(const VtcSimRuntime*) that the simulator calls once
// at load, so the kernel reaches barriers and warp collectives through a
// table instead of symbols (kernel objects and the simulator are both
// dlopen'ed RTLD_LOCAL and cannot see each other's symbols).
#pragma once

struct VtcSimDim3 {
  unsigned x, y, z;
};

// One CUDA thread: its coordinates and the simulator's handle for it.
struct VtcSimThread {
  VtcSimDim3 thread_idx, block_idx, block_dim, grid_dim;
  void* fiber;  // the simulator's; opaque to kernels
};

// Warp exchange source-lane modes (__shfl_sync, _up, _down, _xor).
enum { VTC_SIM_SHFL_IDX = 0, VTC_SIM_SHFL_UP = 1, VTC_SIM_SHFL_DOWN = 2, VTC_SIM_SHFL_XOR = 3 };

struct VtcSimRuntime {
  // __syncthreads(): every live thread of the block arrives before any leaves.
  void (*sync_block)(const VtcSimThread* self);
  // __syncwarp(mask).
  void (*sync_warp)(const VtcSimThread* self, unsigned mask);
  // The __shfl_*_sync family: `bytes` (<= 8) of `in` from every lane; `out`
  // gets the source lane's value (mode and arg as above, width a power of 2).
  void (*exchange)(const VtcSimThread* self, unsigned mask, const void* in, void* out, unsigned bytes, int mode,
                   int arg, int width);
  // __ballot_sync: bit i set when lane i's predicate is non-zero.
  unsigned (*ballot)(const VtcSimThread* self, unsigned mask, int predicate);
  // Checked mode: every load and store of the kernel (GCC's kernel-address
  // instrumentation calls __asan_{load,store}N_noabort, which kernel_host.h
  // forwards here). Reports an access outside the launch's memory or a
  // shared-memory race, naming the kernel.
  void (*access)(const VtcSimThread* self, const void* address, unsigned long bytes, int is_write);
};

struct VtcSimParams {
  unsigned count;
  const unsigned* sizes;     // bytes of each parameter
  const int* is_pointer;     // 1 for a pointer parameter (checked against allocations)
  const char* const* names;  // as declared in the kernel
};
