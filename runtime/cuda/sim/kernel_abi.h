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
  // shared-memory race, naming the kernel. `site` is the instrumented
  // instruction's address in the kernel object: profile mode groups a warp's
  // accesses into memory requests by it (runtime/cuda/sim/profiler.h).
  void (*access)(const VtcSimThread* self, const void* address, unsigned long bytes, int is_write, const void* site);
  // Profile mode: `n` operations of work class `cls` (VTC_SIM_WORK_*) by
  // this thread, counted at the helper that performs them.
  void (*count)(const VtcSimThread* self, int cls, unsigned long n);
  // Warp-wide matrix instructions (mma.sync, ldmatrix): every lane of a
  // whole warp posts `bytes` (<= 32) of `in`; `out` receives all 32 lanes'
  // posts, lane by lane (32 * bytes). Each lane then computes its own
  // result registers from them, as the tensor core hands them out.
  void (*gather)(const VtcSimThread* self, const void* in, unsigned bytes, void* out);
  // cp.async (op VTC_SIM_CP_*): ISSUE queues a copy of `bytes` (4, 8 or 16)
  // from `src` to `dst` (src null: zero-fill, cp.async's src-size 0),
  // performed later, as on a GPU, so a read before the wait sees the old
  // bytes; COMMIT closes the thread's open group; WAIT completes every
  // committed group but the newest `bytes` of them (cp.async.wait_group).
  void (*cp_async)(const VtcSimThread* self, int op, void* dst, const void* src, unsigned bytes);
};

enum { VTC_SIM_CP_ISSUE = 0, VTC_SIM_CP_COMMIT = 1, VTC_SIM_CP_WAIT = 2 };

// Work classes the cost model counts at run time (per thread; a warp
// instruction is 32 of them). FP32/integer arithmetic is not among them:
// the host compiler's instructions say nothing of the GPU's, so the model
// takes it from the IR (docs/cuda.md, "The cost model").
enum {
  VTC_SIM_WORK_SFU = 0,          // special functions: exp2, log2, sin, cos, rsqrt, tanh (MUFU)
  VTC_SIM_WORK_DP4A = 1,         // __dp4a: a 4-way int8 dot into int32
  VTC_SIM_WORK_MMA_F16 = 2,      // mma.sync m16n8k16 with f16 inputs, per warp-wide instruction
  VTC_SIM_WORK_MMA_BF16 = 3,     // mma.sync m16n8k16 with bf16 inputs
  VTC_SIM_WORK_MMA_S8 = 4,       // mma.sync m16n8k32 with s8 inputs
  VTC_SIM_WORK_MMA_S8_K16 = 5,   // mma.sync m16n8k16 with s8 inputs (half an m16n8k32)
  VTC_SIM_WORK_CLASSES = 6
};

struct VtcSimParams {
  unsigned count;
  const unsigned* sizes;     // bytes of each parameter
  const int* is_pointer;     // 1 for a pointer parameter (checked against allocations)
  const char* const* names;  // as declared in the kernel
};
