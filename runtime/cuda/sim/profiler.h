// Profile mode of the simulated device (VTC_CUDA_SIM_PROFILE=1): counts what
// a GPU would pay for each launch (profile_abi.h has the records).
//
// Algorithm:
//  - Kernels are compiled twice: as usual, and with checked mode's
//    instrumentation, where every load and store calls back with its
//    address, size and call site (the instrumented instruction's address in
//    the kernel object). Launches inside a profile window run the second;
//    the rest of the program runs at the simulator's usual speed.
//  - Requests. A warp's lanes run one after another as fibers, so a warp
//    instruction is rebuilt from its lanes: each lane's accesses are kept
//    in order until the warp next meets as a whole (a warp collective, a
//    __syncthreads, or the end of the warp); then access i of lane l at
//    site s gets the dynamic count c = its rank among lane l's accesses at
//    s, and the accesses with equal (s, c) form one request, as the lanes
//    of one SIMT instruction would.
//  - Global requests: the distinct 32-byte sectors the lanes' bytes cover
//    (sectors per request, as Nsight Compute reports l1tex's), the bytes
//    asked for, and each sector into the launch's footprint. Load sectors
//    go through a per-block L1 model (VTC_SIM_L1_SECTORS in sets of
//    VTC_SIM_L1_WAYS, least recently used out); its misses are the L2
//    traffic.
//  - Shared requests: lanes are served in phases of 128 bytes (32 lanes of
//    <= 4 bytes, 16 of 8, 8 of 16); a phase takes as many wavefronts as the
//    most distinct 4-byte words any of the 32 banks holds (the same word
//    twice is a broadcast). Ideal: one wavefront per phase.
//  - The L2 model is left to vtc (cost_model.h) and needs only this: per
//    launch, the sectors first touched in the window, and for re-touched
//    ones the reuse distance since their last touch by an earlier launch.
//    Re-touches within a launch are taken as L2 hits.
//  - Blocks run on several host workers: each keeps its own counters and
//    footprint, merged when the launch ends (launches run one at a time).
//  - Sampling (vtcSimProfileBegin(N), or VTC_CUDA_SIM_PROFILE_SAMPLE=N):
//    inside the window only one block in N runs (block index mod N == 0),
//    profiled; the records say how many, and vtc scales the counts and the
//    footprints. A sampled window computes no values: a cost-only run for
//    steps too big to simulate whole (a 512-token prefill).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cuda/sim/profile_abi.h"

namespace vtc::cuda::sim {

bool profile_mode();

// GlobalL2Only: a load cached in L2 only (cp.async.cg), never in the L1 model.
enum class Space : uint8_t { Global, Shared, GlobalL2Only };

// One block's counters on one worker; reset per block, merged per launch.
class BlockProfiler {
 public:
  void start(int warps, bool sampled);
  bool sampled() const { return sampled_; }
  void record(int warp, int lane, uintptr_t site, uintptr_t address, unsigned bytes, bool is_write, Space space);
  void count_local() { ++counters_.local_accesses; }
  void count_work(int cls, unsigned long n);
  void count_warp_collective(int kind);  // 0 barrier, 1 shuffle, 2 vote
  void count_block_barrier(int warps) { counters_.block_barriers += unsigned(warps); }
  // The warp met as a whole: its pending accesses become requests.
  void flush_warp(int warp);
  // The block ended: flushes every warp, then adds its counters and
  // footprint to the launch's.
  void finish_block();

 private:
  struct Access {
    uintptr_t site, address;
    uint32_t lane_rank;  // filled by flush_warp
    uint8_t lane, bytes, is_write;
    Space space;
  };
  void add_request(const Access* first, const Access* last);
  void add_global(const Access* first, const Access* last);
  void add_shared(const Access* first, const Access* last);

  bool sampled_ = false;
  std::vector<std::vector<Access>> pending_;  // per warp
  VtcSimLaunchProfile counters_{};
  std::vector<uint64_t> load_sectors_, store_sectors_;  // this block's footprint (duplicates allowed)
  // A direct-mapped filter of sectors already in the footprint: re-read
  // activations (every warp of a GEMV reads the whole input) are pushed
  // once instead of once per request.
  static constexpr size_t kSeenSlots = 4096;
  std::vector<uint64_t> seen_;
  std::vector<uint64_t> l1_;  // the block's modelled L1: its sets, most recently used first
  bool l1_touch(uint64_t sector);  // true on a hit; the sector is then the set's newest
};

// The launch being run: per-worker block profilers add to it.
void launch_begin(const std::string& entry, const unsigned grid[3], const unsigned block[3], uint64_t shared_bytes);
void launch_end();
// Profile sampling: whether block number `linear` of the launch is
// profiled, and whether the others are skipped (a sampled window).
bool block_sampled(uint64_t linear);
// Whether a profile window is open (launches then run the instrumented
// variant of their kernel).
bool profile_window_open();
bool skip_unsampled_blocks();

// Window-level events the driver reports.
void note_copy(int kind, uint64_t bytes, bool pageable);  // 0 in, 1 out, 2 memset
void note_host_wait();
void note_graph_launch();

}  // namespace vtc::cuda::sim
