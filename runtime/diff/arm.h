// An arm: one way of executing a model's steps, as `vtc diff` compares them.
//
// An arm owns a Session on one backend (the CPU interpreter on the module
// the session runs, the same model unfused, or CUDA; session_arm.h) and
// runs one sequence through it step by step. After every step it hands back what a
// diff needs: the op results that match the tap filter, in execution order,
// every declared state of the sequence (Session::snapshot) and
// the logits row that picks the next token. Two arms run in lockstep on the
// same tokens (runtime/diff/runner.h).
//
// Steps: step 0 is the prefill of the prompt on a fresh sequence; step k
// (k >= 1) decodes one token, which the arm first writes to @last_ids, as
// the sampler's output is written on a real decode step.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/tensor.h"
#include "runtime/diff/state_snapshot.h"

namespace vtc::diff {

// One tapped op result.
struct Observed {
  std::string key;                 // matches the same tensor in the other arm (value_index.h)
  std::string name;                // as printed: "%ids"
  std::string op;                  // "state_read @last_ids"
  std::vector<std::string> users;  // "embed"
  HostTensor value;
};

struct StepOutput {
  std::vector<Observed> taps;          // execution order
  std::vector<StateSnapshot> states;   // declaration order, after the step
  std::vector<float> logits;           // the last logits row of the step
};

struct ArmConfig {
  std::string model_path;
  int threads = 0;      // 0: all hardware threads
  int64_t n_ctx = 0;    // KV positions of the sequence; must hold the prompt and every decode step
  // ECMAScript regex, searched in "%NAME OP" (e.g. "%ids state_read
  // @last_ids"); op results that match are tapped. Empty taps nothing.
  std::string tap;
  GgmlType cache_k = GgmlType::F16, cache_v = GgmlType::F16;  // the KV cache's types (--cache-type-k/-v)
};

class Arm {
 public:
  virtual ~Arm() = default;
  virtual const std::string& name() const = 0;
  // One line for the report: which module, which executor.
  virtual std::string describe() const = 0;
  virtual StepOutput prefill(std::span<const int32_t> prompt) = 0;
  virtual StepOutput decode(int32_t token, int32_t position) = 0;
};

struct ArmKind {
  std::string name;
  std::string summary;
  std::unique_ptr<Arm> (*create)(const ArmConfig&);
};
const std::vector<ArmKind>& known_arms();

// Throws vtc::Error naming the known arms for an unknown name, and the
// arm's own reason when it cannot run here ("cuda target unavailable: ...").
std::unique_ptr<Arm> make_arm(const std::string& name, const ArmConfig& config);

}  // namespace vtc::diff
