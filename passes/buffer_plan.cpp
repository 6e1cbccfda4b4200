#include "passes/buffer_plan.h"

#include <algorithm>
#include <numeric>

namespace vtc {
namespace {
bool lifetimes_meet(const BufferRequest& a, const BufferRequest& b) {
  return a.def <= b.last_use && b.def <= a.last_use;
}
uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
}  // namespace

BufferPlan plan_buffers(const std::vector<BufferRequest>& requests, uint64_t alignment) {
  BufferPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return requests[a].def < requests[b].def; });
  std::vector<size_t> placed;
  for (size_t i : order) {
    const BufferRequest& r = requests[i];
    plan.naive_bytes += r.bytes;
    // Occupied ranges of live neighbours, sorted by offset.
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (size_t j : placed)
      if (lifetimes_meet(r, requests[j])) busy.push_back({plan.offsets[j], plan.offsets[j] + requests[j].bytes});
    std::sort(busy.begin(), busy.end());
    uint64_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (offset + r.bytes <= begin) break;
      offset = std::max(offset, align_up(end, alignment));
    }
    plan.offsets[i] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + r.bytes);
    placed.push_back(i);
  }
  plan.arena_bytes = align_up(plan.arena_bytes, alignment);
  return plan;
}

bool plan_is_valid(const std::vector<BufferRequest>& requests, const BufferPlan& plan) {
  for (size_t i = 0; i < requests.size(); ++i)
    for (size_t j = i + 1; j < requests.size(); ++j) {
      if (!lifetimes_meet(requests[i], requests[j]) || !requests[i].bytes || !requests[j].bytes) continue;
      uint64_t a0 = plan.offsets[i], a1 = a0 + requests[i].bytes;
      uint64_t b0 = plan.offsets[j], b1 = b0 + requests[j].bytes;
      if (a0 < b1 && b0 < a1) return false;
    }
  return true;
}

}  // namespace vtc
