#include "runtime/diff/tap_recorder.h"

#include <fmt/format.h>

#include <utility>

#include "support/error.h"

namespace vtc::diff {

TapRecorder::TapRecorder(const ir::Module& module, const std::string& tap) {
  if (tap.empty()) return;
  try {
    tap_ = std::regex(tap, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw Error(fmt::format("diff: --tap '{}' is not a valid regular expression: {}", tap, e.what()));
  }
  for (const auto& fn : module.functions) index_.emplace(fn.get(), ValueIndex(*fn));
}

void TapRecorder::record(const ir::Op& op, size_t index, const HostTensor& value) {
  if (!tap_ || index >= op.results.size()) return;
  const ir::ValueData* v = op.results[index].data();
  auto fn = index_.find(v->owner);
  if (fn == index_.end()) return;  // inside a fused body
  const ValueInfo* info = fn->second.find(v);
  if (!info || !std::regex_search(info->name + " " + info->op, *tap_)) return;
  taps_.push_back({info->key, info->name, info->op, info->users, value});
}

std::vector<Observed> TapRecorder::take() { return std::exchange(taps_, {}); }

}  // namespace vtc::diff
