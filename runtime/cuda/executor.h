// The CUDA executor: runs a lowered module's steps with generated kernels.
//
// At construction: every step's kernels are generated (codegen/cuda),
// compiled by NVRTC to cubin for the device's arch (disk-cached) and loaded;
// every weight is uploaded once; every declared state gets a device buffer
// with the host StateStore's layout (plain rows per slot; paged pools of
// [halves][P][page][row], halves 2 for K/V or 1 for a side cache such as
// indexer_select's); the host StateStore keeps the page bookkeeping.
//
// Per step:
//  1. bind the step symbols (S from the slots, T/R/... from argument sizes,
//     PT_STRIDE = the longest page table of the step's slots);
//  2. plan one activation arena from the kernels' buffer lifetimes
//     (runtime/buffer_plan.h; aliases share their root's storage) and grow
//     it if needed;
//  3. upload the arguments, the slot list and the page tables (async);
//  4. launch the kernels in order on one stream, or, for @decode, replay a
//     CUDA graph captured the first time this shape (S, PT_STRIDE, arena)
//     was seen: arguments and tables live at fixed device addresses, so the
//     graph stays valid while their contents change;
//  5. copy the returned values out.
// decode_sample() additionally samples on the device (greedy or top-k/top-p)
// into state @last_ids, so the next decode reads its ids from device
// memory; only the sampled tokens are copied out, asynchronously into
// pinned memory, and collected by the next call or by wait_tokens().
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
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "frontends/gguf/gguf.h"
#include "ir/module.h"
#include "runtime/cpu/interpreter.h"
#include "runtime/state/state_store.h"

namespace vtc::cuda {

class Device;

struct ExecutorOptions {
  bool graphs = true;   // capture @decode in CUDA graphs
  int device = 0;       // CUDA ordinal
  // Tests: 256 sentinel bytes after every activation buffer, checked after
  // each step; a kernel writing past its output throws, naming the value.
  bool sentinels = false;
};

struct DeviceSampling {
  float temperature = 0.0f;  // <= 0: greedy
  int top_k = 40;            // 1..256 for the device sampler
  float top_p = 0.95f;
  float min_p = 0.05f;
  uint64_t seed = 42;
};

// One observed op: its results copied to the host, parallel to op.results;
// nullopt for a result no kernel materialized (no device buffer).
using OpObserver = std::function<void(const ir::Op& op, const std::vector<std::optional<cpu::HostTensor>>& results)>;

class Executor {
 public:
  // Throws vtc::Error when CUDA is unavailable (the message says why), a
  // kernel does not compile, or a weight does not match the file.
  Executor(const ir::Module& lowered, const gguf::GgufFile& file, StateStore& states, const ExecutorOptions& options = {});
  ~Executor();

  const Device& device() const;
  // Runs one step like cpu::Interpreter::run and returns its outputs.
  std::vector<cpu::HostTensor> run(const cpu::StepRequest& request);
  // One decode step for `slots` at `positions`, then sampling on the device.
  // Returns the tokens sampled by the previous call (empty on the first),
  // so the copy-out overlaps the next step; wait_tokens() returns the last.
  std::vector<int32_t> decode_sample(std::span<const int32_t> slots, std::span<const int32_t> positions,
                                     const DeviceSampling& sampling);
  std::vector<int32_t> wait_tokens();
  // Copies `slot`'s last_ids row in (after a prefill, before decoding).
  void set_last_id(int32_t slot, int32_t token);
  // Device state <-> host StateStore (for diffs and fingerprints).
  void download_states();
  void upload_states();
  // Diffs: see the header comment. Null turns observing (and the
  // graph/reuse exceptions) off again.
  void set_observer(OpObserver observer);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// "" when the cuda target can run here, else the reason it cannot.
std::string cuda_unavailable_reason();

}  // namespace vtc::cuda
