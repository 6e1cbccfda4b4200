#include "runtime/diff/inject.h"

#include <fmt/format.h>

#include <cstring>

#include "ir/step_interface.h"
#include "support/error.h"

namespace vtc::diff {
namespace {

#ifdef VTC_TEST_HOOKS
std::string last_ids_ref() { return ir::step_value(ir::StepKind::Decode, ir::step::kLastIds).ref(); }

// Remembers @last_ids after step 0 and feeds it to every decode step.
class StaleIdsArm final : public Arm {
 public:
  explicit StaleIdsArm(std::unique_ptr<Arm> inner) : inner_(std::move(inner)), name_(inner_->name() + "+stale-ids") {}
  const std::string& name() const override { return name_; }
  std::string describe() const override { return inner_->describe() + "; decode reads the step-0 copy of @last_ids"; }

  StepOutput prefill(std::span<const int32_t> prompt) override {
    StepOutput out = inner_->prefill(prompt);
    for (const StateSnapshot& s : out.states) {
      if (s.name != last_ids_ref()) continue;
      if (s.value.elem.kind() != ir::ElemType::I32 || s.value.numel() < 1)
        throw Error("inject stale-ids: @last_ids is not an i32 state");
      std::memcpy(&stale_, s.value.bytes.data(), sizeof stale_);
      return out;
    }
    throw Error("inject stale-ids: the module declares no @last_ids state");
  }
  StepOutput decode(int32_t, int32_t position) override { return inner_->decode(stale_, position); }

 private:
  std::unique_ptr<Arm> inner_;
  std::string name_;
  int32_t stale_ = 0;
};
#endif

}  // namespace

std::vector<std::string> known_injections() {
#ifdef VTC_TEST_HOOKS
  return {"stale-ids"};
#else
  return {};
#endif
}

std::unique_ptr<Arm> inject_bug(const std::string& name, std::unique_ptr<Arm> arm) {
#ifdef VTC_TEST_HOOKS
  if (name == "stale-ids") return std::make_unique<StaleIdsArm>(std::move(arm));
  throw Error(fmt::format("diff: unknown --inject-bug '{}' (known: {})", name, fmt::join(known_injections(), ", ")));
#else
  (void)arm;
  throw Error(fmt::format(
      "diff: --inject-bug {} is a test switch and this build has no test hooks "
      "(configure with -DVTC_TEST_HOOKS=ON, the default when tests are built)",
      name));
#endif
}

}  // namespace vtc::diff
