// The CUDA cost model: what a step's kernels would cost on a named GPU,
// predicted from what the simulated device counted while running them
// (profile mode, runtime/cuda/sim/profiler.h). docs/cuda.md ("The cost
// model") says what is counted, what is estimated and what cannot be known.
//
// Algorithm, per launch (one profile record):
//  1. Scale the counts of a sampled launch by blocks / profiled blocks.
//  2. Memory: L1 traffic is every sector of every request; L2 traffic the
//     load sectors that miss the block's modelled L1, and stores; DRAM is
//     the sectors first touched in the profile window plus the re-touched
//     ones whose reuse distance (bytes touched by the launches between) is
//     at least the GPU's L2 size.
//  3. Work: special functions, dp4a and mma as counted; FP32 arithmetic
//     from the IR op the kernel implements (2 per multiply-add of a
//     matmul or attention, one per output element otherwise), because the
//     host compiler's instructions say nothing of the GPU's.
//  4. Occupancy: blocks per SM from the block size and static shared
//     memory against the SM's limits, waves = blocks / (that x SMs); a grid
//     of fewer blocks than SMs uses that fraction of the machine.
//  5. Time = max(DRAM bytes / HBM bandwidth, L2 bytes / L2 bandwidth,
//     L1 sectors / (4 per clock per SM),
//     shared wavefronts / their rate, each work class / its peak rate),
//     divided by the fraction of the machine used, plus a launch cost.
// Per step: the sum over launches, the copies over PCIe, and the step's
// floor, weight bytes over HBM bandwidth.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/cuda/kernel.h"
#include "runtime/cuda/sim/profile_abi.h"

namespace vtc::cuda {

// A GPU's data-sheet figures (gpu_specs.cpp cites each source).
struct GpuSpec {
  std::string name, title;
  double hbm_bytes_per_s = 0;       // DRAM bandwidth
  double l2_bytes = 0;              // L2 capacity
  double l2_bytes_per_s = 0;        // L2 bandwidth (microbenchmark estimate)
  int sms = 0;
  double clock_hz = 0;              // boost clock
  double fp32_flops = 0;            // FMA = 2 flops
  double f16_mma_flops = 0;         // dense tensor-core f16/bf16 with f32 accumulate
  double s8_mma_ops = 0;            // dense tensor-core int8
  double dp4a_per_clk_sm = 0;       // __dp4a per clock per SM
  double sfu_per_clk_sm = 16;       // MUFU results per clock per SM
  double shuffles_per_clk_sm = 1;   // warp shuffles (32 lanes) per clock per SM
  double pcie_bytes_per_s = 0;      // host <-> device copies
  int max_threads_sm = 2048, max_blocks_sm = 32;
  double shared_bytes_sm = 0;       // shared memory per SM usable by blocks
  double launch_s = 2.0e-6;         // per kernel launched on a stream (estimate)
  double graph_launch_s = 1.0e-6;   // per kernel inside a CUDA graph (estimate)
  std::string sources;              // where the figures come from
};

const std::vector<GpuSpec>& gpu_specs();
// Throws vtc::Error naming the known GPUs.
const GpuSpec& find_gpu(std::string_view name);

// A kernel's family: its entry without the source hash ("gemv" for
// gemv_0123456789abcdef).
std::string kernel_family(const std::string& entry);

// One launch, priced.
struct KernelCost {
  std::string entry, family;   // family: the op mnemonic (entry without its hash)
  const Kernel* kernel = nullptr;  // the generated kernel, when matched (valid while the StepKernels live)
  std::string what;                // its op, for the JSON report
  bool in_layers = false;      // between the first and last launch that reads a blk.N weight
  uint64_t blocks = 0, sampled_blocks = 0, threads_per_block = 0;
  int blocks_per_sm = 0;
  double waves = 0;
  double requests = 0, sectors = 0, bytes_requested = 0;
  double dram_bytes = 0, l2_bytes = 0, compulsory_bytes = 0;
  double shared_requests = 0, shared_wavefronts = 0, shared_conflicts = 0;
  double fp32_flops = 0, sfu = 0, dp4a = 0, mma_f16 = 0, mma_s8 = 0, shuffles = 0, barriers = 0;
  double seconds = 0;  // predicted, launch cost included
  std::string bound;   // what bounds it: dram, l2, l1, shared, fp32, sfu, dp4a, mma, shuffle, launch
};

struct StepCost {
  std::string step;  // "decode, 1 row", ...
  std::vector<KernelCost> kernels;
  VtcSimProfile summary{};  // copies, waits, graph launches (records not kept)
  double kernel_seconds = 0, copy_seconds = 0, seconds = 0;
  double weight_bytes = 0, roofline_seconds = 0;  // weights over HBM bandwidth
  double layer_scale = 1;  // --scale-layers: per-layer launches counted this many times
};

// Symbols for the IR's FLOP count: T, S, R and the mean keys each query
// attends to ("KEYS").
using StepShape = std::map<std::string, int64_t>;

// Prices `profile` (one step) on `gpu`. `step_kernels` are the kernels the
// step launches, in order (a step that runs its list several times, as a
// chunked prefill does, matches cyclically); a launch that does not match
// has no IR work.
StepCost predict_step(std::string step, const VtcSimProfile& profile, const StepKernels* step_kernels,
                      const StepShape& shape, const GpuSpec& gpu, double weight_bytes, double layer_scale = 1);

// The report: one row per kernel family, then the step's totals. Every
// time is labelled predicted.
std::string format_step(const StepCost& step, const GpuSpec& gpu);
// The same as JSON text (every launch and every family).
std::string step_json(const StepCost& step, const GpuSpec& gpu);

// Profile windows on the simulated device (VTC_CUDA_SIM_PROFILE=1). begin()
// throws vtc::Error when the simulated device is not loaded or not in
// profile mode; end() returns the window's records, valid until the next
// begin(). `sample_every` > 1 runs and profiles one block in that many
// (a cost-only window: the step's values are not computed).
void sim_profile_begin(uint64_t sample_every = 1);
const VtcSimProfile& sim_profile_end();

}  // namespace vtc::cuda
