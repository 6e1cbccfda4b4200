// Allocation registry of the simulated device (see memory.h).
#include "runtime/cuda/sim/memory.h"

#include <sys/mman.h>
#include <unistd.h>


#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

namespace vtc::cuda::sim {
namespace {

constexpr size_t kAlign = 256;  // cuMemAlloc's alignment

struct Region {
  Allocation alloc;
  void* mapping = nullptr;  // checked mode: the whole mapping, guards included
  size_t mapped = 0;
};

struct Registry {
  std::mutex mu;
  std::map<uintptr_t, Region> device;                // by base
  std::map<uintptr_t, size_t> pinned;                // base -> bytes
  uint64_t next_serial = 1;
};

Registry& registry() {
  static Registry* r = new Registry();  // lives through exit: kernels may outlive statics
  return *r;
}

size_t page_size() {
  static const size_t p = size_t(sysconf(_SC_PAGESIZE));
  return p;
}

}  // namespace

bool env_flag(const char* name) {
  const char* e = std::getenv(name);
  return e && *e && std::strcmp(e, "0") != 0;
}

bool checked_mode() {
  static const bool on = env_flag("VTC_CUDA_SIM_CHECK");
  return on;
}

void* device_alloc(size_t bytes) {
  if (bytes == 0) bytes = 1;
  Region r;
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  if (checked_mode()) {
    const size_t page = page_size();
    const size_t body = (rounded + page - 1) / page * page;
    r.mapped = body + 2 * page;
    r.mapping = mmap(nullptr, r.mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r.mapping == MAP_FAILED) return nullptr;
    char* body_start = static_cast<char*>(r.mapping) + page;
    if (mprotect(body_start, body, PROT_READ | PROT_WRITE) != 0) {
      munmap(r.mapping, r.mapped);
      return nullptr;
    }
    r.alloc.base = reinterpret_cast<uintptr_t>(body_start + body - rounded);
  } else {
    void* p = std::aligned_alloc(kAlign, rounded);
    if (!p) return nullptr;
    r.alloc.base = reinterpret_cast<uintptr_t>(p);
  }
  r.alloc.size = bytes;
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  r.alloc.serial = reg.next_serial++;
  reg.device[r.alloc.base] = r;
  return reinterpret_cast<void*>(r.alloc.base);
}

bool device_free(void* p) {
  Registry& reg = registry();
  Region r;
  {
    std::lock_guard<std::mutex> lock(reg.mu);
    auto it = reg.device.find(reinterpret_cast<uintptr_t>(p));
    if (it == reg.device.end()) return false;
    r = it->second;
    reg.device.erase(it);
  }
  if (r.mapping) munmap(r.mapping, r.mapped);
  else std::free(p);
  return true;
}

std::optional<Allocation> find_allocation(uintptr_t p, size_t bytes) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  auto it = reg.device.upper_bound(p);
  if (it == reg.device.begin()) return std::nullopt;
  const Allocation& a = std::prev(it)->second.alloc;
  if (p < a.base || p + bytes > a.base + a.size || p + bytes < p) return std::nullopt;
  return a;
}

std::string describe_address(uintptr_t address) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  char text[256];
  auto above = reg.device.upper_bound(address);
  if (above != reg.device.begin()) {
    const Allocation& a = std::prev(above)->second.alloc;
    if (address < a.base + a.size) {
      std::snprintf(text, sizeof text, "inside allocation #%llu (%zu bytes), %zu bytes from its start",
                    (unsigned long long)a.serial, a.size, size_t(address - a.base));
      return text;
    }
    const size_t past = size_t(address - (a.base + a.size));
    if (past < 1 << 20) {
      std::snprintf(text, sizeof text, "%zu bytes past the end of allocation #%llu (%zu bytes)", past,
                    (unsigned long long)a.serial, a.size);
      return text;
    }
  }
  if (above != reg.device.end() && above->second.alloc.base - address < (1u << 20)) {
    const Allocation& a = above->second.alloc;
    std::snprintf(text, sizeof text, "%zu bytes before the start of allocation #%llu (%zu bytes)",
                  size_t(a.base - address), (unsigned long long)a.serial, a.size);
    return text;
  }
  std::snprintf(text, sizeof text, "an address in no device allocation (0x%llx)", (unsigned long long)address);
  return text;
}

void* pinned_alloc(size_t bytes) {
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!p) return nullptr;
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  reg.pinned[reinterpret_cast<uintptr_t>(p)] = bytes;
  return p;
}

bool pinned_free(void* p) {
  Registry& reg = registry();
  {
    std::lock_guard<std::mutex> lock(reg.mu);
    if (reg.pinned.erase(reinterpret_cast<uintptr_t>(p)) == 0) return false;
  }
  std::free(p);
  return true;
}

bool is_pinned(const void* p, size_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  auto it = reg.pinned.upper_bound(a);
  if (it == reg.pinned.begin()) return false;
  --it;
  return a >= it->first && a + bytes <= it->first + it->second;
}

}  // namespace vtc::cuda::sim
