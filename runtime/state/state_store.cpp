#include "runtime/state/state_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "support/error.h"

namespace vtc {
namespace {

int64_t elem_bytes_of(const ir::ElemType& e) {
  if (e.is_quant()) throw Error("state store: states cannot hold quantized types");
  return e.scalar_bytes();
}

// Product of the constant dims after the leading symbolic ones: a plain
// state [S, 2] has rows of 2; a paged state [2, P, 16, 8, 128] has rows of
// 8*128 per position (the page dim is folded into positions).
int64_t constant_tail(const ir::StateDecl& d, size_t first) {
  int64_t n = 1;
  for (size_t i = first; i < d.type.shape.size(); ++i) {
    auto c = d.type.shape[i].constant();
    if (!c) throw Error(fmt::format("state store: @{} dim {} ({}) must be a constant", d.name, i, d.type.shape[i].str()));
    n *= *c;
  }
  return n;
}

}  // namespace

StateStore::StateStore(const ir::Module& module, const StateStoreConfig& config) : config_(config) {
  if (config.n_slots < 1 || config.n_ctx < 1) throw Error("state store: need at least one slot and one position");
  for (const auto& decl : module.states) {
    Buffer b;
    b.decl = &decl;
    b.elem = decl.type.elem;
    b.elem_bytes = elem_bytes_of(decl.type.elem);
    uint64_t halves = 1;
    if (decl.kind == ir::StateKind::Paged) {
      if (decl.type.shape.size() < 4 || decl.type.shape[0] != ir::Dim(2))
        throw Error(fmt::format("state store: paged state @{} must be [2, P, page, ...]", decl.name));
      b.row_elems = constant_tail(decl, 3);
      b.rows_per_slot = config.n_ctx;
      halves = 2;
    } else {
      b.row_elems = constant_tail(decl, 1);
      b.rows_per_slot = 1;
    }
    b.data.assign(halves * uint64_t(config.n_slots) * uint64_t(b.rows_per_slot * b.row_elems * b.elem_bytes), 0);
    buffers_.push_back(std::move(b));
  }
}

StateStore::~StateStore() = default;

StateStore::Buffer& StateStore::buffer(std::string_view name) {
  for (auto& b : buffers_)
    if (b.decl->name == name) return b;
  throw Error(fmt::format("state store: no state @{}", name));
}

void StateStore::check_slot(int32_t slot) const {
  if (slot < 0 || slot >= config_.n_slots)
    throw Error(fmt::format("state store: slot {} out of range [0, {})", slot, config_.n_slots));
}

std::span<uint8_t> StateStore::slot_bytes(Buffer& b, int32_t slot, int half) {
  check_slot(slot);
  const uint64_t slot_bytes = uint64_t(b.rows_per_slot * b.row_elems * b.elem_bytes);
  const uint64_t base = (uint64_t(half) * uint64_t(config_.n_slots) + uint64_t(slot)) * slot_bytes;
  return {b.data.data() + base, slot_bytes};
}

void StateStore::reset_slot(int32_t slot) {
  check_slot(slot);
  for (auto& b : buffers_) {
    int halves = b.decl->kind == ir::StateKind::Paged ? 2 : 1;
    for (int h = 0; h < halves; ++h) {
      auto bytes = slot_bytes(b, slot, h);
      std::memset(bytes.data(), 0, bytes.size());
    }
  }
}

uint64_t StateStore::total_bytes() const {
  uint64_t n = 0;
  for (const auto& b : buffers_) n += b.data.size();
  return n;
}

}  // namespace vtc
