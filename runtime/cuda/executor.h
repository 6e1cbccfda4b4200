// The CUDA executor: runs a lowered module's steps with generated kernels.
//
// The CUDA backend (runtime/backend.h).
//
// At construction: every step's kernels come from the compile pipeline
// (compile_model's StepKernels, or a `vtc compile --target cuda` artifact's
// stored kernels and launches: nothing is generated at load); the distinct
// ones are compiled by NVRTC (on up to 8 threads) to cubin for the device's
// arch and loaded; every weight is uploaded once; every declared state
// gets a device buffer with the StateStore's layout (plain rows per slot;
// paged pools of [halves][P][page][row], halves 2 for K/V or 1 for a side
// cache such as indexer_select's) plus one padding row per plain state and
// one padding page per pool (below). The states live only on the device:
// there is no host mirror. The executor is the store's StateStorage, so a
// page the store hands out is zeroed on the device and a reset slot gets
// its empty bytes there; snapshots (diffs, fingerprints) read the device
// rows. A slot checkpoint (runtime/state/state_store.h) is a device
// buffer too, filled and read back by device-to-device copies on the
// stream: a recurrent model's states can be tens of MB per slot, which
// stay off the bus and need no host wait, at the price of device memory
// (the prefix cache's checkpoint budget bounds it). Freeing one waits for
// the stream, since a restore may still be queued.
//
// A step is prepared once per (step, shape bucket) and replayed:
//  - the bucket: every step symbol's value, PT_STRIDE excluded (it is fixed
//    at the most pages a slot can hold, ceil(n_ctx / page), so nothing in it
//    changes as a sequence grows). For @decode with graphs on, S is rounded
//    up to a power of two (1, 2, 4, 8, ...; at most n_slots): the extra rows
//    are padding, whose slot is the padding row and whose page table lists
//    only the padding page, with position 0, zero sampling settings
//    (greedy) and their own row as `seq`, so they write only padding state
//    and no kernel mixes rows; only the real rows' results are returned;
//  - preparing it: the buffers the kernels touch (aliases share their
//    root's storage), their lifetimes in launch order, one arena planned
//    for them (passes/buffer_plan.h) and allocated with the bucket's
//    scratch, slot list and page table; every launch's parameter words and
//    grid evaluated once. @decode's launches are captured into a CUDA graph
//    the first time the bucket runs, and so are those of @prefill's buckets
//    of at most 16 rows (its decode form, codegen/cuda/kernel.h: a verify
//    step is as launch-bound as a decode step), up to 32 such buckets, each
//    owning its arena;
//  - a step then only stages its arguments (padded), slot list and page
//    table in pinned memory, uploads them asynchronously to the bucket's
//    fixed addresses, and launches the graph (or the launches in order).
// Staging and the sampled ids are double-buffered: run_sampled() launches
// step N+1, then collects step N's ids (copied out asynchronously into
// pinned memory behind an event), so in steady decode the host never
// synchronizes the stream and the device always has the next step queued.
// Every wait the executor does is counted in stats(): `host_waits` (stream
// synchronizations and waits on the newest work, after which the device is
// idle) and `collect_waits` (waits for step N's ids while step N+1 is
// queued; the host is then ahead of the device, as it should be).
//
// Drafting on the device (n-gram speculation; Backend::drafts_on_device,
// codegen/cuda/device_drafts.h): a drafting slot owns a device record (its
// history, the next drafts, the last outcome). A verify step is spec_rows
// (writes the bucket's %ids and %pos from the record), on a recurrent
// model a copy of the slot's states into the slot's checkpoint, the
// @prefill bucket (a graph, as any few-row @prefill), for a sampled slot
// the `sample` op's kernels over its rows, then spec_accept (accepts,
// appends, drafts the next step) and on a recurrent model spec_restore
// (the checkpoint back if a draft was rejected); the outcome's words are
// copied out into the stage's pinned memory as sampled ids are, and read
// after the next step is queued. The outcome is collected by the next
// verify call, so a steady run of them waits only in collect_waits.
//
// Diffs (`vtc diff`'s cuda arm): with an observer set, every step runs its
// kernels one by one on the stream (no CUDA graph: the copies out cannot
// live inside a replayed graph), with exact shapes and with activation
// reuse off, as in sentinel mode, so each op result keeps its own memory
// until the step ends. After the last kernel, the observer is called once
// per top-level op that computes (everything but weights, aliases and the
// return), in op order, with that op's results copied to the host: the
// order and the values the CPU interpreter's observer reports for the same
// module.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "codegen/cuda/kernel.h"
#include "runtime/backend.h"

namespace vtc::cuda {

class Device;

struct ExecutorOptions {
  bool graphs = true;   // capture @decode in CUDA graphs
  int device = 0;       // CUDA ordinal
  // Tests: 256 sentinel bytes after every activation buffer, checked after
  // each step; a kernel writing past its output throws, naming the value.
  bool sentinels = false;
  // The compile pipeline's kernels, one StepKernels per step function
  // (CompiledModel::cuda_steps): the executor runs them as they are and
  // generates none. Null: generate them at load (tests that build a
  // module by hand), counted in ExecutorStats::kernels_generated_at_load.
  const std::vector<StepKernels>* kernels = nullptr;
  // Without `kernels`: a `vtc compile --target cuda` artifact's kernel
  // sources, by step, which the generated ones must equal
  // (check_stored_kernels).
  const std::map<std::string, std::vector<KernelSource>>* stored_kernels = nullptr;
};

// What the executor did, for tests and reports. Counts since construction.
struct ExecutorStats {
  uint64_t steps = 0;            // run() and run_sampled() calls
  uint64_t buckets_prepared = 0; // (step, shape bucket) preparations
  uint64_t plans_built = 0;      // buffer plans made (one per preparation)
  uint64_t graphs_captured = 0;
  uint64_t host_waits = 0;       // stream syncs and waits after which the device is idle
  uint64_t collect_waits = 0;    // blocking waits for step N's ids with step N+1 queued
  uint64_t kernels_generated_at_load = 0;  // distinct kernels codegen made at construction
  uint64_t host_ns = 0;          // the calling thread's CPU time in run()/run_sampled(), waits excluded
  uint64_t checkpoints_allocated = 0;  // device buffers for slot checkpoints (a reused one is not counted)
};

class Executor final : public Backend {
 public:
  // Throws vtc::Error when CUDA is unavailable (the message says why), a
  // kernel does not compile, or a weight does not match the file.
  Executor(const BackendInputs& inputs, const ExecutorOptions& options = {});
  ~Executor() override;

  const Device& device() const;
  Target target() const override { return Target::Cuda; }
  std::string describe() const override;
  int32_t rows_with_decode_bits() const override { return int32_t(kDecodeFormRows); }
  int32_t verify_step_rows() const override { return int32_t(kDecodeFormRows); }
  std::vector<HostTensor> run(const StepRequest& request) override;
  std::vector<uint8_t> read_slot_row(const StateStore::Layout& state, int32_t slot) override;
  void write_slot_row(const StateStore::Layout& state, int32_t slot, std::span<const uint8_t> bytes) override;
  std::vector<uint8_t> read_page(const StateStore::Layout& state, int half, int32_t page) override;
  // Diffs: see the header comment. Null turns observing (and the
  // graph/reuse exceptions) off again.
  void set_observer(OpObserver observer) override;
  std::vector<int32_t> run_sampled(const StepRequest& request) override;
  std::vector<int32_t> wait_sampled() override;
  // Drafting on the device: see the header comment.
  bool drafts_on_device() const override { return true; }
  void start_device_drafts(int32_t slot, std::span<const int32_t> tokens, const DeviceSampling& sampling) override;
  std::vector<DeviceVerifyOutcome> run_device_verify(const StepRequest& request) override;
  std::vector<DeviceVerifyOutcome> wait_device_verify() override;
  const ExecutorStats& stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// "" when the cuda target can run here, else the reason it cannot.
std::string cuda_unavailable_reason();

}  // namespace vtc::cuda
