// The CUDA executor: runs a lowered module's steps with generated kernels.
//
// The CUDA backend (runtime/backend.h).
//
// At construction: every step's kernels are generated (codegen/cuda),
// compiled by NVRTC (distinct kernels on up to 8 threads) to cubin for the device's arch (disk-cached) and loaded;
// every weight is uploaded once; every declared state gets a device buffer
// with the StateStore's layout (plain rows per slot; paged pools of
// [halves][P][page][row], halves 2 for K/V or 1 for a side cache such as
// indexer_select's). The states live only on the device: there is no host
// mirror. The executor is the store's StateStorage, so a page the store
// hands out is zeroed on the device and a reset slot gets its empty bytes
// there; snapshots (diffs, fingerprints) read the device rows.
//
// Per step:
//  1. bind the step symbols (S from the slots, T/R/... from argument sizes,
//     PT_STRIDE = the longest page table of the step's slots);
//  2. plan one activation arena from the kernels' buffer lifetimes
//     (passes/buffer_plan.h; aliases share their root's storage) and grow
//     it if needed;
//  3. upload the arguments, the slot list and the page tables (async);
//  4. launch the kernels in order on one stream, or, for @decode, replay a
//     CUDA graph captured the first time this shape (S, PT_STRIDE, arena)
//     was seen: arguments and tables live at fixed device addresses, so the
//     graph stays valid while their contents change;
//  5. copy the returned values out.
// run_sampled() runs @decode, whose `sample` op draws the next ids on the
// device and writes them to state @last_ids (the next decode reads them
// from device memory): only those ids are copied out, asynchronously into
// pinned memory, and collected by the next call or by wait_sampled().
//
// Diffs (`vtc diff`'s cuda arm): with an observer set, every step runs its
// kernels one by one on the stream (no CUDA graph: the copies out cannot
// live inside a replayed graph) and with activation reuse off, as in
// sentinel mode, so each op result keeps its own memory until the step
// ends. After the last kernel, the observer is called once per top-level op
// that computes (everything but weights, aliases and the return), in op
// order, with that op's results copied to the host: the order and the
// values the CPU interpreter's observer reports for the same module.
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
  // A `vtc compile --target cuda` artifact's kernels, by step: every step's
  // generated kernels must equal them (check_stored_kernels), so the
  // artifact runs as stored. Null: a GGUF compiled in memory.
  const std::map<std::string, std::vector<KernelSource>>* stored_kernels = nullptr;
};

class Executor final : public Backend {
 public:
  // Throws vtc::Error when CUDA is unavailable (the message says why), a
  // kernel does not compile, or a weight does not match the file.
  Executor(const BackendInputs& inputs, const ExecutorOptions& options = {});
  ~Executor() override;

  const Device& device() const;
  std::string_view target() const override { return "cuda"; }
  std::string describe() const override;
  std::vector<HostTensor> run(const StepRequest& request) override;
  std::vector<uint8_t> read_slot_row(const StateStore::Layout& state, int32_t slot) override;
  void write_slot_row(const StateStore::Layout& state, int32_t slot, std::span<const uint8_t> bytes) override;
  std::vector<uint8_t> read_page(const StateStore::Layout& state, int half, int32_t page) override;
  // Diffs: see the header comment. Null turns observing (and the
  // graph/reuse exceptions) off again.
  void set_observer(OpObserver observer) override;
  std::vector<int32_t> run_sampled(const StepRequest& request) override;
  std::vector<int32_t> wait_sampled() override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// "" when the cuda target can run here, else the reason it cannot.
std::string cuda_unavailable_reason();

}  // namespace vtc::cuda
