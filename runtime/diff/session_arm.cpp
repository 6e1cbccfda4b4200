// One Arm over a Session, whatever its backend (see session_arm.h).
#include "runtime/diff/session_arm.h"

#include <fmt/format.h>

#include "runtime/cuda/executor.h"
#include "runtime/diff/tap_recorder.h"
#include "runtime/session.h"
#include "support/error.h"

namespace vtc::diff {
namespace {

constexpr int32_t kSlot = 0;

class SessionArm final : public Arm {
 public:
  SessionArm(std::string name, std::string module_kind, const ArmConfig& c, SessionOptions o)
      : name_(std::move(name)), session_(c.model_path, with_config(std::move(o), c)), taps_(session_.module(), c.tap) {
    what_ = fmt::format("{}, {}", session_.backend().describe(), module_kind);
    if (taps_.enabled())
      session_.backend().set_observer([this](const ir::Op& op, const std::vector<std::optional<HostTensor>>& results) {
        for (size_t r = 0; r < results.size(); ++r)
          if (results[r]) taps_.record(op, r, *results[r]);
      });
  }
  ~SessionArm() override { session_.backend().set_observer(nullptr); }

  const std::string& name() const override { return name_; }
  std::string describe() const override { return what_; }

  StepOutput prefill(std::span<const int32_t> prompt) override {
    if (prompt.empty()) throw Error("diff: the prompt is empty");
    session_.reset(kSlot);
    return finish(session_.prefill(kSlot, prompt, 0));
  }

  StepOutput decode(int32_t token, int32_t position) override {
    if (position >= session_.n_ctx())
      throw Error(fmt::format("diff: position {} is outside the context of {}", position, session_.n_ctx()));
    return finish(session_.decode(std::vector<int32_t>{kSlot}, std::vector<int32_t>{token}, std::vector<int32_t>{position}));
  }

 private:
  static SessionOptions with_config(SessionOptions o, const ArmConfig& c) {
    o.threads = c.threads;
    o.n_ctx = c.n_ctx;
    o.n_slots = 1;
    o.cache_type_k = c.cache_k;
    o.cache_type_v = c.cache_v;
    return o;
  }

  StepOutput finish(const HostTensor& logits) {
    StepOutput out;
    out.taps = taps_.take();
    out.states = session_.snapshot(kSlot);
    out.logits = logits.row(logits.shape.at(0) - 1);
    return out;
  }

  std::string name_, what_;
  Session session_;
  TapRecorder taps_;
};

}  // namespace

std::unique_ptr<Arm> make_cpu_arm(const ArmConfig& c) {
  return std::make_unique<SessionArm>("cpu", "module as `vtc run` lowers it", c, SessionOptions{});
}

std::unique_ptr<Arm> make_cpu_unfused_arm(const ArmConfig& c) {
  SessionOptions o{.optimize = false};
  o.passes = passes::PassManagerOptions{};
  o.passes->disabled_passes = {"weight-layout"};
  return std::make_unique<SessionArm>("cpu-unfused", "frontend module lowered without fusion or weight layouts", c, o);
}

std::unique_ptr<Arm> make_cuda_arm(const ArmConfig& c) {
  if (std::string why = cuda::cuda_unavailable_reason(); !why.empty())
    throw Error(fmt::format("cuda target unavailable: {}; compare the CPU arms with --arms cpu,cpu-unfused", why));
  return std::make_unique<SessionArm>("cuda", "module lowered with the standard CUDA pipeline", c,
                                      SessionOptions{.target = Target::Cuda, .cuda_graphs = false});
}

}  // namespace vtc::diff
