// What the simulated device's profile mode (VTC_CUDA_SIM_PROFILE=1) hands
// to vtc: plain C records, exported from libvtc_cuda_sim.so as
//   int vtcSimProfileBegin(unsigned long long n) clears and opens a window;
//                                                n > 1 runs and profiles one block in n
//   const VtcSimProfile* vtcSimProfileEnd(void)  closes it; valid until the next Begin
// (runtime/cuda/cost_model.h reads them; docs/cuda.md explains each field).
//
// Everything here is counted, not predicted: the GPU tables and the
// roofline live on vtc's side, so one simulated run can be priced for any
// GPU. Counts of the memory system follow Nsight Compute's vocabulary:
// a request is one warp-wide memory instruction, a sector 32 bytes, a
// wavefront one pass of the 32 shared-memory banks.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

// Reuse distances of a re-touched global sector, in quarter octaves of
// bytes from VTC_SIM_REUSE_BASE: bucket b holds distances in
// [base * 2^(b/4), base * 2^((b+1)/4)). The distance of a touch in launch j
// of a sector last touched in launch k < j is the distinct bytes launches
// k+1 .. j-1 touched (their footprints summed: an upper bound).
#define VTC_SIM_REUSE_BUCKETS 96
#define VTC_SIM_REUSE_BASE 4096.0

#define VTC_SIM_WORK_SLOTS 8

// The L1 each block is modelled with: 32 KiB of 32-byte sectors (an SM's
// L1 is 128-256 KiB, shared by its resident blocks and carved with shared
// memory), 16-way set-associative with hashed set indices and
// least-recently-used replacement, as a GPU's L1 is highly associative (a
// direct-mapped model made data a multiple of 32 KiB apart, such as a
// GEMV's activation codes and their scale records, evict each other). An
// estimate: docs/cuda.md, "The cost model".
#define VTC_SIM_L1_SECTORS 1024
#define VTC_SIM_L1_WAYS 16

struct VtcSimLaunchProfile {
  char entry[128];
  unsigned grid[3], block[3];
  unsigned long long shared_bytes;  // static __shared__ bytes of the kernel object
  // Global memory, per warp-wide request.
  unsigned long long load_requests, store_requests;
  unsigned long long load_sectors, store_sectors;  // summed over requests
  // Load sectors that miss the block's modelled L1 (VTC_SIM_L1_SECTORS,
  // VTC_SIM_L1_WAYS-way): what reaches L2. Stores always go to L2.
  unsigned long long l1_miss_sectors;
  unsigned long long load_bytes, store_bytes;      // bytes the lanes asked for
  unsigned long long distinct_sectors;             // compulsory traffic / 32
  // Sectors this launch touches whose first touch in the window it is
  // (loads: DRAM reads; stores: DRAM write-backs, eventually).
  unsigned long long first_load_sectors, first_store_sectors;
  // Sectors this launch loads that an earlier launch of the window touched,
  // by reuse distance (DRAM or L2 depending on the L2 size).
  unsigned long long reuse[VTC_SIM_REUSE_BUCKETS];
  // Shared memory.
  unsigned long long shared_requests, shared_wavefronts, shared_ideal_wavefronts;
  // Work: VTC_SIM_WORK_* per thread (kernel_abi.h), then warp-level events.
  unsigned long long work[VTC_SIM_WORK_SLOTS];
  unsigned long long shuffles, votes, warp_syncs;  // warp instructions
  unsigned long long block_barriers;                // per warp that waits at __syncthreads
  unsigned long long local_accesses;                // thread stack (registers or local memory on a GPU)
  unsigned long long sampled_blocks, total_blocks;  // profiled (and run) / all, in a sampled window
};

struct VtcSimProfile {
  unsigned long long launches;  // == count of `records`
  const struct VtcSimLaunchProfile* records;
  unsigned long long graph_launches;
  unsigned long long copies_in, copies_out, memsets;
  unsigned long long bytes_in, bytes_out, bytes_memset;
  unsigned long long pageable_copies;  // copies from or to pageable host memory
  unsigned long long host_waits;       // cuStreamSynchronize, cuEventSynchronize, copies out to pageable memory
};

#ifdef __cplusplus
}
#endif
