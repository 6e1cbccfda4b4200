// Device and pinned host memory of the simulated device.
//
// Device memory is host memory that only kernels and copies touch: the
// driver's copies check that both ends lie inside allocations, and a
// launch's pointer parameters must point into one (or be null).
//
// Checked mode (VTC_CUDA_SIM_CHECK=1): every device allocation is its own
// mapping with PROT_NONE guard pages on both sides, its end placed against
// the upper guard (to the 256-byte alignment the driver promises), so a
// kernel reading or writing past its buffer faults and block_runner names
// the kernel, the parameter and the allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace vtc::cuda::sim {

bool checked_mode();
// Whether environment variable `name` is set to something other than "" or "0".
bool env_flag(const char* name);

struct Allocation {
  uintptr_t base = 0;
  size_t size = 0;
  uint64_t serial = 0;  // 1, 2, ... in allocation order, for messages
};

void* device_alloc(size_t bytes);
bool device_free(void* p);
// The allocation that holds all of [p, p + bytes), if any.
std::optional<Allocation> find_allocation(uintptr_t p, size_t bytes);
// "allocation #3 (4096 bytes) at 0x..., 12 bytes past its end", or where
// else the address lies (a guard page, no allocation).
std::string describe_address(uintptr_t address);

void* pinned_alloc(size_t bytes);
bool pinned_free(void* p);
bool is_pinned(const void* p, size_t bytes);

}  // namespace vtc::cuda::sim
