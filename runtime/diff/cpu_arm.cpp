// Both CPU arms share CpuArm (observer, taps, state snapshots) and differ in
// a Stepper: how the module is built and how a step request is made.
// SessionStepper delegates to cpu::Session; ModuleStepper builds its own
// module and issues the step requests of the contract in
// frontends/gguf/arch/arch.h (prefill: ids, pos, seq, rows; decode: pos,
// seq, with the token in @last_ids), reserving KV pages first as the
// session does.
#include "runtime/diff/cpu_arm.h"

#include <fmt/format.h>

#include <cstring>
#include <numeric>

#include "frontends/gguf/arch/arch.h"
#include "frontends/gguf/gguf.h"
#include "ir/verifier.h"
#include "passes/pass_manager.h"
#include "runtime/cpu/session.h"
#include "runtime/diff/tap_recorder.h"
#include "support/error.h"

namespace vtc::diff {
namespace {

constexpr int32_t kSlot = 0;

class Stepper {
 public:
  virtual ~Stepper() = default;
  virtual const ir::Module& module() const = 0;
  virtual StateStore& states() = 0;
  virtual cpu::Interpreter& interpreter() = 0;
  // Logits [R x n_vocab] of the step.
  virtual cpu::HostTensor prefill(std::span<const int32_t> prompt) = 0;
  virtual cpu::HostTensor decode(int32_t token, int32_t position) = 0;
};

class SessionStepper final : public Stepper {
 public:
  explicit SessionStepper(const ArmConfig& c) : session_(c.model_path, {.threads = c.threads, .n_ctx = c.n_ctx, .n_slots = 1}) {}
  const ir::Module& module() const override { return session_.module(); }
  StateStore& states() override { return session_.states(); }
  cpu::Interpreter& interpreter() override { return session_.interpreter(); }
  cpu::HostTensor prefill(std::span<const int32_t> prompt) override {
    session_.reset(kSlot);
    return session_.prefill(kSlot, prompt, 0);
  }
  cpu::HostTensor decode(int32_t token, int32_t position) override {
    return session_.decode(std::vector<int32_t>{kSlot}, std::vector<int32_t>{token}, std::vector<int32_t>{position});
  }

 private:
  cpu::Session session_;
};

ir::Module canonicalized_module(const gguf::GgufFile& file) {
  ir::Module module = arch::build_module(file);
  passes::PassManager manager;
  manager.add_pipeline("canonicalize");
  manager.run(module);  // verifies its input and every changed result
  return module;
}

int64_t default_ctx(const gguf::GgufFile& file) {
  return std::min<int64_t>(file.get_int(file.architecture() + ".context_length").value_or(4096), 4096);
}

class ModuleStepper final : public Stepper {
 public:
  explicit ModuleStepper(const ArmConfig& c)
      : file_(gguf::GgufFile::open(c.model_path)), module_(canonicalized_module(file_)), pool_(c.threads),
        states_(module_, {.n_slots = 1, .n_ctx = c.n_ctx > 0 ? c.n_ctx : default_ctx(file_)}),
        interp_(module_, file_, states_, pool_) {}
  const ir::Module& module() const override { return module_; }
  StateStore& states() override { return states_; }
  cpu::Interpreter& interpreter() override { return interp_; }

  cpu::HostTensor prefill(std::span<const int32_t> prompt) override {
    if (prompt.empty()) throw Error("diff: the prompt is empty");
    states_.reset_slot(kSlot);
    reserve(int64_t(prompt.size()));
    const int32_t n = int32_t(prompt.size());
    std::vector<int32_t> pos(size_t(n), 0), seq(size_t(n), 0);
    std::iota(pos.begin(), pos.end(), 0);
    cpu::StepRequest req{"prefill", {kSlot}, {}};
    req.args["ids"] = cpu::HostTensor::i32(std::vector<int32_t>(prompt.begin(), prompt.end()));
    req.args["pos"] = cpu::HostTensor::i32(pos);
    req.args["seq"] = cpu::HostTensor::i32(seq);
    req.args["rows"] = cpu::HostTensor::i32({n - 1});
    return std::move(interp_.run(req).at(0));
  }

  cpu::HostTensor decode(int32_t token, int32_t position) override {
    reserve(int64_t(position) + 1);
    std::memcpy(states_.slot_bytes(states_.buffer("last_ids"), kSlot).data(), &token, sizeof token);
    cpu::StepRequest req{"decode", {kSlot}, {}};
    req.args["pos"] = cpu::HostTensor::i32({position});
    req.args["seq"] = cpu::HostTensor::i32({0});
    return std::move(interp_.run(req).at(0));
  }

 private:
  void reserve(int64_t positions) {
    if (positions > states_.config().n_ctx)
      throw Error(fmt::format("diff: position {} is outside the context of {}", positions - 1, states_.config().n_ctx));
    if (!states_.reserve(kSlot, positions)) throw Error(fmt::format("diff: the KV pool is out of pages at position {}", positions - 1));
  }

  gguf::GgufFile file_;
  ir::Module module_;
  cpu::ThreadPool pool_;
  StateStore states_;
  cpu::Interpreter interp_;
};

// Taps every op result whose "%NAME OP" matches the filter, through the
// interpreter's observer; snapshots the states after each step.
class CpuArm final : public Arm {
 public:
  CpuArm(std::string name, std::string what, std::unique_ptr<Stepper> stepper, const std::string& tap)
      : name_(std::move(name)), what_(std::move(what)), stepper_(std::move(stepper)), taps_(stepper_->module(), tap) {
    if (taps_.enabled())
      stepper_->interpreter().set_observer([this](const ir::Op& op, const std::vector<cpu::HostTensor>& results) {
        for (size_t r = 0; r < results.size(); ++r) taps_.record(op, r, results[r]);
      });
  }
  ~CpuArm() override { stepper_->interpreter().set_observer(nullptr); }

  const std::string& name() const override { return name_; }
  std::string describe() const override { return what_; }
  StepOutput prefill(std::span<const int32_t> prompt) override {
    return finish(stepper_->prefill(prompt));
  }
  StepOutput decode(int32_t token, int32_t position) override { return finish(stepper_->decode(token, position)); }

 private:
  StepOutput finish(const cpu::HostTensor& logits) {
    StepOutput out;
    out.taps = taps_.take();
    out.states = snapshot_states(stepper_->module(), stepper_->states(), kSlot);
    out.logits = logits.row(logits.shape.at(0) - 1);
    return out;
  }

  std::string name_, what_;
  std::unique_ptr<Stepper> stepper_;
  TapRecorder taps_;
};

}  // namespace

std::unique_ptr<Arm> make_cpu_arm(const ArmConfig& c) {
  return std::make_unique<CpuArm>("cpu", "CPU interpreter, module as cpu::Session runs it",
                                  std::make_unique<SessionStepper>(c), c.tap);
}

std::unique_ptr<Arm> make_cpu_unfused_arm(const ArmConfig& c) {
  return std::make_unique<CpuArm>("cpu-unfused", "CPU interpreter, frontend module + canonicalize only",
                                  std::make_unique<ModuleStepper>(c), c.tap);
}

}  // namespace vtc::diff
