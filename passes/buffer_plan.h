// Arena offsets for buffers with known lifetimes.
//
// Algorithm (IREE layout_slices style, greedy first fit): visit buffers in
// order of their first op; each takes the lowest aligned offset whose range
// does not overlap any already-placed buffer whose lifetime intersects its
// own. Lifetimes are closed intervals of op indices [def, last_use]. The
// result is valid by construction (no two live buffers overlap); the peak is
// the arena size. Planning is kept apart from freeing: the executor just
// uses the offsets.
#pragma once

#include <cstdint>
#include <vector>

namespace vtc {

struct BufferRequest {
  uint64_t bytes = 0;
  int64_t def = 0;       // index of the op that writes it
  int64_t last_use = 0;  // index of the last op that reads it (>= def)
};

struct BufferPlan {
  std::vector<uint64_t> offsets;  // parallel to the requests
  uint64_t arena_bytes = 0;       // peak
  uint64_t naive_bytes = 0;       // sum of sizes, for comparison
};

BufferPlan plan_buffers(const std::vector<BufferRequest>& requests, uint64_t alignment = 64);

// True if no two buffers with intersecting lifetimes overlap in memory.
bool plan_is_valid(const std::vector<BufferRequest>& requests, const BufferPlan& plan);

}  // namespace vtc
