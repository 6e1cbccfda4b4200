#include "runtime/state/host_states.h"

#include <fmt/format.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "support/error.h"

namespace vtc {

StateBytes::StateBytes(uint64_t size, bool mapped) : size_(size), mapped_(mapped && size > 0) {
  if (size == 0) return;
  // Without MAP_NORESERVE: the kernel's overcommit check still refuses a
  // pool larger than the machine can ever back, at start-up.
  void* p = mapped_ ? mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                    : std::calloc(size, 1);
  if (p == (mapped_ ? MAP_FAILED : nullptr)) throw std::bad_alloc();
  data_ = static_cast<uint8_t*>(p);
}

StateBytes::StateBytes(StateBytes&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)), mapped_(other.mapped_) {}

StateBytes& StateBytes::operator=(StateBytes&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = other.mapped_;
  }
  return *this;
}

StateBytes::~StateBytes() { release(); }

void StateBytes::release() {
  if (!data_) return;
  if (mapped_) munmap(data_, size_);
  else std::free(data_);
  data_ = nullptr;
}

void StateBytes::zero(uint64_t offset, uint64_t n) {
  uint8_t* begin = data_ + offset;
  uint8_t* end = begin + n;
  if (mapped_) {
    static const uintptr_t os_page = uintptr_t(sysconf(_SC_PAGESIZE));
    auto* inner_begin = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(begin) + os_page - 1) & ~(os_page - 1));
    auto* inner_end = reinterpret_cast<uint8_t*>(reinterpret_cast<uintptr_t>(end) & ~(os_page - 1));
    if (inner_begin < inner_end && madvise(inner_begin, size_t(inner_end - inner_begin), MADV_DONTNEED) == 0) {
      std::memset(begin, 0, size_t(inner_begin - begin));
      std::memset(inner_end, 0, size_t(end - inner_end));
      return;
    }
  }
  std::memset(begin, 0, n);
}

HostStates::HostStates(StateStore& store) : store_(store) {
  for (const StateStore::Layout& l : store.layouts()) {
    Buffer b{&l, StateBytes(l.bytes, l.paged()), l.decl, l.elem, l.elem_bytes, l.row_elems, l.rows_per_slot, l.halves};
    if (!l.paged() && l.bytes > 0) std::memset(b.data.data(), StateStore::empty_byte(*l.decl), l.bytes);
    buffers_.push_back(std::move(b));
  }
  store.attach(this);
}

HostStates::~HostStates() { store_.attach(nullptr); }

HostStates::Buffer& HostStates::buffer(std::string_view name) {
  for (auto& b : buffers_)
    if (b.decl->name == name) return b;
  throw Error(fmt::format("state store: no state @{}", name));
}

std::span<uint8_t> HostStates::slot_bytes(Buffer& b, int32_t slot) {
  store_.check_slot(slot);
  if (b.layout->paged()) throw Error(fmt::format("state store: @{} is paged; address it by position (kv_row)", b.decl->name));
  const uint64_t row = b.layout->row_bytes();
  return {b.data.data() + uint64_t(slot) * row, row};
}

uint8_t* HostStates::pool_base(Buffer& b, int half) {
  if (!b.layout->paged()) throw Error(fmt::format("state store: @{} is not paged", b.decl->name));
  if (half < 0 || half >= b.halves) throw Error(fmt::format("state store: @{} has no half {}", b.decl->name, half));
  return b.data.data() + uint64_t(half) * b.layout->half_bytes();
}

uint8_t* HostStates::kv_row(Buffer& b, int32_t slot, int half, int64_t pos) {
  const int64_t row = store_.kv_pool_row(slot, pos);
  return pool_base(b, half) + uint64_t(row) * b.layout->row_bytes();
}

void HostStates::zero_page(int32_t page) {
  for (auto& b : buffers_) {
    if (!b.layout->paged()) continue;
    const uint64_t bytes = b.layout->page_bytes(store_.page_size());
    for (int half = 0; half < b.halves; ++half) b.data.zero(uint64_t(half) * b.layout->half_bytes() + uint64_t(page) * bytes, bytes);
  }
}

void HostStates::clear_slot(int32_t slot) {
  for (auto& b : buffers_) {
    if (b.layout->paged()) continue;
    auto bytes = slot_bytes(b, slot);
    std::memset(bytes.data(), StateStore::empty_byte(*b.decl), bytes.size());
  }
}

namespace {
struct HostCheckpoint final : SlotCheckpoint {
  const HostStates* owner = nullptr;
  std::vector<uint8_t> bytes;
};
}  // namespace

std::unique_ptr<SlotCheckpoint> HostStates::save_slot(int32_t slot, std::unique_ptr<SlotCheckpoint> reuse) {
  std::unique_ptr<HostCheckpoint> c;
  if (auto* mine = dynamic_cast<HostCheckpoint*>(reuse.get()); mine && mine->owner == this) {
    c.reset(mine);
    reuse.release();
    c->bytes.clear();  // keeps its capacity
  } else {
    c = std::make_unique<HostCheckpoint>();
    c->owner = this;
  }
  c->bytes.reserve(store_.slot_state_bytes());
  for (auto& b : buffers_) {
    if (b.layout->paged()) continue;
    auto row = slot_bytes(b, slot);
    c->bytes.insert(c->bytes.end(), row.begin(), row.end());
  }
  return c;
}

void HostStates::restore_slot(int32_t slot, const SlotCheckpoint& checkpoint) {
  const auto* c = dynamic_cast<const HostCheckpoint*>(&checkpoint);
  if (!c || c->owner != this || c->bytes.size() != store_.slot_state_bytes())
    throw Error("state store: a checkpoint taken by another storage cannot be restored here");
  const uint8_t* from = c->bytes.data();
  for (auto& b : buffers_) {
    if (b.layout->paged()) continue;
    auto row = slot_bytes(b, slot);
    std::memcpy(row.data(), from, row.size());
    from += row.size();
  }
}

}  // namespace vtc
