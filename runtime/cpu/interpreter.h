// The CPU interpreter: executes a module's step functions on the host.
//
// It knows no architecture. It binds the module's weights to tensors of a
// GGUF file (mmapped, never copied or dequantized whole; a weight the IR
// declares in another layout than its bytes are stored in is rearranged
// once, at construction), its states to host storage (HostStates, laid out
// and paged by the StateStore), and walks the ops of a step, dispatching each through a table
// generated from ir/ops.def (runtime/cpu/op_exec.cpp). Activations live in
// one arena per step, laid out by a liveness plan (passes/buffer_plan.h): values
// whose lifetimes do not overlap share memory (passes/memory_plan.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "frontends/gguf/gguf.h"
#include "ir/module.h"
#include "passes/memory_plan.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/state/host_states.h"
#include "runtime/tensor.h"

namespace vtc::cpu {

struct StepStats {
  uint64_t arena_bytes = 0;       // planned peak of activations
  uint64_t naive_bytes = 0;       // sum of all activation sizes (no reuse)
  bool compiled_plan = false;     // the step ran with a plan given to use_plans()
  bool reused_placement = false;  // its buffers were placed by an earlier step of the same sizes
};

// Time per op mnemonic, accumulated over steps while profiling is on.
struct OpProfile {
  struct Entry {
    uint64_t calls = 0;
    double seconds = 0;
  };
  std::map<std::string, Entry> by_op;
  // A table sorted by time, with shares of the total.
  std::string table() const;
};

class Interpreter {
 public:
  // Binds every weight declaration to its GGUF tensor; throws vtc::Error on
  // a missing tensor or a type/shape mismatch. `file` must outlive this.
  Interpreter(const ir::Module& module, const gguf::GgufFile& file, HostStates& states, ThreadPool& pool);
  ~Interpreter();

  // Runs one step; returns the values of its `return`. Throws vtc::Error on
  // bad inputs (unknown step, missing or mis-shaped arguments, positions
  // beyond the context, ids out of range).
  std::vector<HostTensor> run(const StepRequest& request);

  // Steps run with these memory plans (memory-plan pass, `vtc compile`)
  // instead of planning per step. A step beyond a plan's bounds, or with
  // no plan, is planned for its own sizes by the same planner.
  void use_plans(const std::vector<passes::FunctionPlan>& plans);
  void set_observer(OpObserver observer);
  const StepStats& last_stats() const;
  void set_profiling(bool on);
  // false: run every fused op's body op by op instead of as one kernel
  // (fused_kernels.h), to measure what the fused kernels gain; same bits.
  void set_fused_kernels(bool on);
  const OpProfile& profile() const;
  // Weights rearranged into their declared layout at construction (their
  // tensors were stored in rows), and their bytes; 0 when every weight is
  // read where it is mapped (a packed artifact).
  size_t repacked_weights() const;
  uint64_t repacked_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vtc::cpu
