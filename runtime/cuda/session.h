// A model loaded for CUDA execution, in the terms callers think in (like
// cpu::Session): prefill a prompt into a slot, then decode with sampling on
// the device. Also the CUDA arm of `vtc bench --target cuda`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "runtime/bench.h"
#include "runtime/cpu/interpreter.h"
#include "runtime/cuda/executor.h"

namespace vtc::cuda {

struct SessionOptions {
  int64_t n_ctx = 0;     // 0: the model's context length, capped at 4096
  int32_t n_slots = 1;
  bool graphs = true;
};

class Session {
 public:
  // Throws vtc::Error when the cuda target is unavailable (saying why).
  Session(const std::string& gguf_path, const SessionOptions& options);
  ~Session();

  int64_t n_ctx() const;
  int64_t n_vocab() const;
  const ir::Module& module() const;  // lowered for cuda
  Executor& executor();
  StateStore& states();

  // Logits [1 x n_vocab] of the last token; also writes that token's
  // sampled successor nowhere: call start_decode with the first token.
  cpu::HostTensor prefill(int32_t slot, std::span<const int32_t> tokens, int32_t n_past);
  // Seeds @last_ids of `slot` with `token` (the first generated token).
  void start_decode(int32_t slot, int32_t token);
  // One decode step of `slot` at `position`, sampling on the device; the
  // token ids stay on the device. Returns the previous step's token(s).
  std::vector<int32_t> decode(int32_t slot, int32_t position, const DeviceSampling& sampling);
  std::vector<int32_t> finish();  // the last step's tokens
  void reset(int32_t slot);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// pp/tg as bench_session does, on the CUDA session (slot 0, greedy decode
// with ids fed back on the device).
BenchFigures bench_cuda(Session& session, const BenchSpec& spec,
                        const std::function<void(const std::string&)>& progress = nullptr);

}  // namespace vtc::cuda
