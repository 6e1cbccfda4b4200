#include "runtime/state/host_states.h"

#include <fmt/format.h>

#include <cstring>

#include "support/error.h"

namespace vtc {

HostStates::HostStates(StateStore& store) : store_(store) {
  for (const StateStore::Layout& l : store.layouts()) {
    Buffer b{&l, {}, l.decl, l.elem, l.elem_bytes, l.row_elems, l.rows_per_slot, l.halves};
    b.data.assign(l.bytes, l.paged() ? 0 : StateStore::empty_byte(*l.decl));
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
    for (int half = 0; half < b.halves; ++half) std::memset(pool_base(b, half) + uint64_t(page) * bytes, 0, bytes);
  }
}

void HostStates::clear_slot(int32_t slot) {
  for (auto& b : buffers_) {
    if (b.layout->paged()) continue;
    auto bytes = slot_bytes(b, slot);
    std::memset(bytes.data(), StateStore::empty_byte(*b.decl), bytes.size());
  }
}

}  // namespace vtc
