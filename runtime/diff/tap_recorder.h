// The tap filter of an arm: which op results a diff records, and the
// record of one step.
//
// Every arm observes the op results of the module it runs (the CPU
// interpreter's observer, the CUDA executor's). For each one the recorder
// looks the value up in a ValueIndex of its function (printer name,
// matching key, op label, users); values inside fused bodies are not in the
// index and are skipped, as are results whose "%NAME OP" does not match the
// --tap regex. What passes is appended, in execution order, to the step's
// taps, which take() hands over at the end of the step.
#pragma once

#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "ir/module.h"
#include "runtime/diff/arm.h"
#include "runtime/diff/value_index.h"

namespace vtc::diff {

class TapRecorder {
 public:
  // An empty `tap` records nothing (and enabled() is false). Throws
  // vtc::Error naming the regex when it does not compile.
  TapRecorder(const ir::Module& module, const std::string& tap);
  bool enabled() const { return tap_.has_value(); }
  // Result `index` of `op` has the value `value`.
  void record(const ir::Op& op, size_t index, const HostTensor& value);
  std::vector<Observed> take();

 private:
  std::optional<std::regex> tap_;
  std::map<const ir::Function*, ValueIndex> index_;
  std::vector<Observed> taps_;
};

}  // namespace vtc::diff
