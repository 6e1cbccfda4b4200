// The CUDA arm: a cuda::Session with graphs off and an observer on its
// executor (see cuda_arm.h).
//
// Device pages: the host StateStore zeroes a KV page when it hands it out,
// the device copy does not. Both arms must agree on the zero rows past the
// last written position, so whenever a reservation adds pages the host
// store (a mirror of the device after every step's download) is uploaded
// before the step.
#include "runtime/diff/cuda_arm.h"

#include <fmt/format.h>

#include "runtime/cuda/driver.h"
#include "runtime/cuda/session.h"
#include "runtime/diff/tap_recorder.h"
#include "support/error.h"

namespace vtc::diff {
namespace {

constexpr int32_t kSlot = 0;

class CudaArm final : public Arm {
 public:
  explicit CudaArm(const ArmConfig& c)
      : session_(c.model_path, {.n_ctx = c.n_ctx, .n_slots = 1, .graphs = false}), taps_(session_.module(), c.tap) {
    const cuda::Device& dev = session_.executor().device();
    what_ = fmt::format("CUDA executor on {} (sm_{}), module lowered with the CUDA pipeline, graphs off", dev.name(),
                        dev.arch());
    if (taps_.enabled())
      session_.executor().set_observer(
          [this](const ir::Op& op, const std::vector<std::optional<cpu::HostTensor>>& results) {
            for (size_t r = 0; r < results.size(); ++r)
              if (results[r]) taps_.record(op, r, *results[r]);
          });
  }
  ~CudaArm() override { session_.executor().set_observer(nullptr); }

  const std::string& name() const override { return name_; }
  std::string describe() const override { return what_; }

  StepOutput prefill(std::span<const int32_t> prompt) override {
    if (prompt.empty()) throw Error("diff: the prompt is empty");
    session_.reset(kSlot);  // host slot cleared, then uploaded to the device
    reserve(int64_t(prompt.size()));
    return finish(session_.prefill(kSlot, prompt, 0));
  }

  StepOutput decode(int32_t token, int32_t position) override {
    reserve(int64_t(position) + 1);
    session_.start_decode(kSlot, token);  // checks the id; writes @last_ids on the device
    cpu::StepRequest req{"decode", {kSlot}, {}};
    req.args["pos"] = cpu::HostTensor::i32({position});
    req.args["seq"] = cpu::HostTensor::i32({0});
    return finish(session_.executor().run(req).at(0));
  }

 private:
  // Reserves KV pages for `positions`; new pages go to the device zeroed.
  void reserve(int64_t positions) {
    StateStore& states = session_.states();
    if (positions > states.config().n_ctx)
      throw Error(fmt::format("diff: position {} is outside the context of {}", positions - 1, states.config().n_ctx));
    const size_t pages = states.page_table(kSlot).size();
    if (!states.reserve(kSlot, positions))
      throw Error(fmt::format("diff: the KV pool is out of pages at position {}", positions - 1));
    if (states.page_table(kSlot).size() != pages) session_.executor().upload_states();
  }

  StepOutput finish(const cpu::HostTensor& logits) {
    StepOutput out;
    out.taps = taps_.take();
    session_.executor().download_states();
    out.states = snapshot_states(session_.module(), session_.states(), kSlot);
    out.logits = logits.row(logits.shape.at(0) - 1);
    return out;
  }

  const std::string name_ = "cuda";
  std::string what_;
  cuda::Session session_;
  TapRecorder taps_;
};

}  // namespace

std::unique_ptr<Arm> make_cuda_arm(const ArmConfig& c) {
  if (std::string why = cuda::cuda_unavailable_reason(); !why.empty())
    throw Error(fmt::format("cuda target unavailable: {}; compare the CPU arms with --arms cpu,cpu-unfused", why));
  return std::make_unique<CudaArm>(c);
}

}  // namespace vtc::diff
