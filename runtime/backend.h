// A backend executes a lowered module's step functions against its states.
//
// Two implement it: the CPU interpreter (runtime/cpu/cpu_backend.h) and the
// CUDA executor (runtime/cuda/executor.h). A backend owns the storage
// of every declared state (the StateStore it is given keeps only the page
// tables and slots, and tells the storage when a page is handed out or a
// slot emptied), the weights it binds and the arena of each step, laid out
// by the memory plan of the module's lowering.
//
// Above it, one Session (runtime/session.h) owns the step contract: which
// arguments a step takes, chunking, slot and page reservation, sampling.
// serve, run, bench and diff all go through that Session; `vtc diff`
// compares two backends.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frontends/gguf/gguf.h"
#include "ir/module.h"
#include "passes/memory_plan.h"
#include "runtime/state/state_store.h"
#include "runtime/sampler.h"
#include "runtime/tensor.h"
#include "support/error.h"
#include "support/target.h"

namespace vtc {

// Sampling on the backend (@decode's `sample` op), one row per sequence:
// the host sampler's settings that the op covers. Its defaults are
// SamplingParams' (runtime/sampler.h), the one set users see; a step that
// only wants the argmax asks for greedy().
struct DeviceSampling {
  float temperature = SamplingParams{}.temperature;  // <= 0: greedy
  int top_k = SamplingParams{}.top_k;  // <= 0 or above the step's bound (arch::kSampleMaxCandidates): the bound
  float top_p = SamplingParams{}.top_p;
  float min_p = SamplingParams{}.min_p;
  uint64_t seed = 42;  // resolved (never SamplingParams::kRandomSeed); with the row's position, fixes the draw

  static DeviceSampling greedy() { return DeviceSampling{.temperature = 0.0f}; }
  // Whether the `sample` op covers every setting of `params` (it applies no
  // penalties): the one answer for vtc run and the server.
  static bool covers(const SamplingParams& params) {
    return params.repeat_penalty == 1.0f && params.frequency_penalty == 0.0f && params.presence_penalty == 0.0f;
  }
  // `params`' settings, drawing from `seed` (the host sampler's resolved one).
  static DeviceSampling of(const SamplingParams& params, uint64_t seed) {
    return DeviceSampling{.temperature = params.temperature, .top_k = params.top_k, .top_p = params.top_p,
                          .min_p = params.min_p, .seed = seed};
  }
  // The `sample` op's per-row settings operand (%sampling, [S x 4] f32), in
  // its order: decode steps pass these, draw_on_host uses them.
  std::array<float, 4> op_params() const { return {temperature, float(top_k), top_p, min_p}; }
  // The token the `sample` op draws from `row` for the input token at
  // position `pos`, computed on the host (the CPU's kernel, whose draw the
  // CUDA kernel's matches). A speculating sequence draws its verify rows
  // this way when plain decoding would sample on the backend, so the same
  // seed gives the same tokens with and without speculation.
  int32_t draw_on_host(std::span<const float> row, int32_t pos) const;
};

// What a verify step drafted on the backend gave (Backend::run_device_verify).
struct DeviceVerifyOutcome {
  int32_t drafted = 0;           // drafts it verified that came from an n-gram match
  std::vector<int32_t> tokens;   // its accepted drafts, then the token drawn after them
  // Rows it spent replaying tokens a rolled-back recurrent state had run
  // (device_drafts.h); a step of replays only has no tokens.
  int32_t replayed = 0;
  // Of the step's `drafts` rows after the first, those that verified a
  // draft: the replaying rows verified nothing.
  int32_t verified(int32_t drafts) const { return drafts - replayed; }
  // Its accepted drafts (the last token is drawn after them); -1 for a step
  // of replays only.
  int32_t accepted() const { return int32_t(tokens.size()) - 1; }
};

// What a backend is built from: the lowered module, its weights' file, the
// state bookkeeping, the memory plans of the lowering (one per step).
struct BackendInputs {
  const ir::Module& module;
  const gguf::GgufFile& file;
  StateStore& states;
  const std::vector<passes::FunctionPlan>& plans;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Target target() const = 0;
  // One line for reports: "CPU interpreter, 2 threads", "CUDA on ... (sm_90)".
  virtual std::string describe() const = 0;
  // The most rows a step may give one sequence for each row to carry the
  // bits plain decoding gives its token, which a speculative verify step
  // needs (docs/speculative.md): the CPU runs up to 63 rows of a sequence
  // as one-token steps in attention (past that, the reference's tiles); the
  // CUDA executor's @prefill runs decode's kernels, at their speed up to 16
  // rows (codegen/cuda/kernel.h).
  virtual int32_t rows_with_decode_bits() const = 0;
  // The most rows, all sequences together, that a step verifying drafts
  // should hold. Past 16 the CUDA executor still runs such a step with
  // decode's kernels (its rows keep their bits), but their GEMVs read the
  // weights once per 8 rows, which costs more than the drafts win; the
  // CPU's cost grows with rows alone.
  virtual int32_t verify_step_rows() const { return std::numeric_limits<int32_t>::max(); }

  // Runs one step; returns the values of its `return`, copied to the host.
  // Throws vtc::Error on bad inputs (unknown step, missing or mis-shaped
  // arguments, positions beyond the context, ids out of range).
  virtual std::vector<HostTensor> run(const StepRequest& request) = 0;

  // A plain or ring state's row of `slot`, and writing it (seeding @last_ids
  // with a given token, restoring a snapshot).
  virtual std::vector<uint8_t> read_slot_row(const StateStore::Layout& state, int32_t slot) = 0;
  virtual void write_slot_row(const StateStore::Layout& state, int32_t slot, std::span<const uint8_t> bytes) = 0;
  // The rows of one page of a paged state's half (K: 0, V: 1).
  virtual std::vector<uint8_t> read_page(const StateStore::Layout& state, int half, int32_t page) = 0;

  // Diffs and taps: called after every computing op; null turns it off.
  virtual void set_observer(OpObserver observer) = 0;

  // Runs a step whose last result is the ids it sampled (the @decode
  // contract: its `sample` op draws them on the backend and writes them to
  // @last_ids). Only the ids are copied out, asynchronously: the call
  // returns the ids of the previous call (empty on the first), and
  // wait_sampled() the last.
  virtual std::vector<int32_t> run_sampled(const StepRequest& request) = 0;
  virtual std::vector<int32_t> wait_sampled() = 0;

  // N-gram speculation kept on the backend (the CUDA executor;
  // docs/speculative.md): a drafting sequence's tokens and drafts live in
  // the backend's memory, a verify step takes its ids and positions from
  // there, accepts and drafts the next step there, and only the accepted
  // tokens are copied out, behind the next step, so the host never waits
  // for a step before queueing the next.
  virtual bool drafts_on_device() const { return false; }
  // Gives `slot` its history: the prompt and the first sampled token
  // (which has not run yet), and drafts from it. Its rows are accepted by
  // `sampling`, the `sample` op's rule: greedy, or the op's draws at each
  // row's input position, the draws plain decoding would make.
  virtual void start_device_drafts(int32_t, std::span<const int32_t>, const DeviceSampling&) { throw Error(drafts_on_host()); }
  // Queues one verify step (`request`: @prefill of drafting slots, each
  // over 1 + k consecutive rows, k <= 15, %seq giving each row's slot
  // index, every row's logits returned; its %ids and %pos are written on
  // the backend) and returns the previous call's outcomes, one per slot
  // in its order (none on the first); wait_device_verify() returns the
  // last call's.
  virtual std::vector<DeviceVerifyOutcome> run_device_verify(const StepRequest&) { throw Error(drafts_on_host()); }
  virtual std::vector<DeviceVerifyOutcome> wait_device_verify() { return {}; }

 private:
  std::string drafts_on_host() const { return "drafting on the device: the " + describe() + " drafts on the host"; }
};

}  // namespace vtc
