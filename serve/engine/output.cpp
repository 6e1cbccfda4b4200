#include "serve/text_stream.h"

#include <algorithm>
#include <utility>

namespace vtc::serve {

std::string TextStream::release_safe() {
  for (const std::string& s : stop_) {
    if (s.empty()) continue;
    size_t at = pending_.find(s);
    if (at != std::string::npos) {
      stopped_ = true;
      std::string out = pending_.substr(0, at);
      pending_.clear();
      return out;
    }
  }
  // Hold the longest suffix that is a prefix of a stop string.
  size_t hold = 0;
  for (const std::string& s : stop_)
    for (size_t n = std::min(s.size() - (s.empty() ? 0 : 1), pending_.size()); n > hold; --n)
      if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string TextStream::push(int32_t id, bool stops_armed) {
  if (stopped_) return {};
  pending_ += decoder_.push(id);
  if (stops_armed) return release_safe();
  return std::exchange(pending_, std::string());
}

std::string TextStream::finish() {
  if (stopped_) return {};
  pending_ += decoder_.flush();
  std::string out = release_safe();
  if (!stopped_) out += pending_;
  pending_.clear();
  return out;
}

}  // namespace vtc::serve
