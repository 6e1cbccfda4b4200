#include "serve/engine/speculative/ngram_drafter.h"

namespace vtc::serve {

uint64_t NgramDrafter::hash(size_t end, int n) const {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ uint64_t(n);
  for (size_t i = end - size_t(n); i < end; ++i) h = (h ^ uint32_t(tokens_[i])) * 0x100000001B3ull + (h >> 29);
  return h;
}

bool NgramDrafter::same(size_t end_a, size_t end_b, int n) const {
  for (int i = 1; i <= n; ++i)
    if (tokens_[end_a - size_t(i)] != tokens_[end_b - size_t(i)]) return false;
  return true;
}

void NgramDrafter::append(std::span<const int32_t> tokens) {
  for (int32_t t : tokens) {
    // The n-grams ending before the new token now have a follower.
    const size_t end = tokens_.size();
    for (int n = kMinN; n <= kMaxN; ++n)
      if (end >= size_t(n)) last_end_[n][hash(end, n)] = uint32_t(end);
    tokens_.push_back(t);
  }
}

void NgramDrafter::clear() {
  tokens_.clear();
  for (auto& m : last_end_) m.clear();
}

std::vector<int32_t> NgramDrafter::draft(int32_t max) const {
  std::vector<int32_t> out;
  const size_t len = tokens_.size();
  if (max <= 0) return out;
  for (int n = kMaxN; n >= kMinN; --n) {
    if (len < size_t(n)) continue;
    auto it = last_end_[n].find(hash(len, n));
    if (it == last_end_[n].end() || !same(it->second, len, n)) continue;
    // Copy what followed; past the end, the copy continues from itself.
    const size_t from = it->second;
    for (size_t i = 0; out.size() < size_t(max); ++i) {
      const size_t at = from + i;
      out.push_back(at < len ? tokens_[at] : out[at - len]);
    }
    break;
  }
  return out;
}

}  // namespace vtc::serve
