// The CPU backend: the interpreter (interpreter.h) on a thread pool, with
// the states in host memory (HostStates). The sampled decode runs @decode
// (whose `sample` op draws the next ids into @last_ids) like any step.
#pragma once

#include <memory>

#include "runtime/backend.h"
#include "runtime/cpu/interpreter.h"

namespace vtc::cpu {

struct CpuBackendOptions {
  int threads = 0;             // 0: all hardware threads
  bool fused_kernels = true;   // Interpreter::set_fused_kernels
};

class CpuBackend final : public Backend {
 public:
  // Throws vtc::Error for a weight that does not match the file, and
  // std::bad_alloc when the states do not fit in memory.
  CpuBackend(const BackendInputs& inputs, const CpuBackendOptions& options);
  ~CpuBackend() override;

  Target target() const override { return Target::Cpu; }
  std::string describe() const override;
  int32_t rows_with_decode_bits() const override;
  std::vector<HostTensor> run(const StepRequest& request) override;
  std::vector<uint8_t> read_slot_row(const StateStore::Layout& state, int32_t slot) override;
  void write_slot_row(const StateStore::Layout& state, int32_t slot, std::span<const uint8_t> bytes) override;
  std::vector<uint8_t> read_page(const StateStore::Layout& state, int half, int32_t page) override;
  void set_observer(OpObserver observer) override;
  std::vector<int32_t> run_sampled(const StepRequest& request) override;
  std::vector<int32_t> wait_sampled() override;

  Interpreter& interpreter();
  HostStates& host_states();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vtc::cpu
