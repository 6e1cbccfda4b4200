#include "runtime/state/state_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "ir/op_attrs.h"
#include "support/error.h"

namespace vtc {
namespace {

// Bytes of `elems` values of the state's type: a quantized type (a KV cache
// type; the verifier allows no other) is stored in whole blocks per row.
int64_t row_bytes_of(const ir::StateDecl& d, int64_t elems) {
  if (!d.type.elem.is_quant()) return elems * d.type.elem.scalar_bytes();
  const auto bytes = ggml_bytes_for(d.type.elem.quant_type(), uint64_t(elems));
  if (d.kind != ir::StateKind::Paged || !bytes)
    throw Error(fmt::format("state store: @{} holds {}, which only a paged KV state of whole blocks may", d.name,
                            d.type.elem.name()));
  return int64_t(*bytes);
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

// The page size of a paged declaration [halves, P, page, ...] (halves: 2
// for K and V, 1 for a side cache); every paged state of a module must
// agree, because they share one page numbering.
int64_t page_size_of(const ir::StateDecl& d) {
  if (d.type.shape.size() < 4 || (d.type.shape[0] != ir::Dim(2) && d.type.shape[0] != ir::Dim(1)))
    throw Error(fmt::format("state store: paged state @{} must be [2, P, page, ...] or [1, P, page, ...]", d.name));
  auto page = d.type.shape[2].constant();
  if (!page || *page < 1) throw Error(fmt::format("state store: paged state @{} needs a constant page size", d.name));
  return *page;
}

}  // namespace

// An integer ring (the n-gram history) starts as -1 everywhere, "no token",
// which ngram_hash reads as a cut context.
uint8_t StateStore::empty_byte(const ir::StateDecl& d) {
  return d.kind == ir::StateKind::Ring && d.type.elem.is_integer() ? 0xFF : 0;
}

StateStore::StateStore(const ir::Module& module, const StateStoreConfig& config) : config_(config) {
  if (config.n_slots < 1 || config.n_ctx < 1) throw Error("state store: need at least one slot and one position");
  bool have_page = false;
  for (const auto& decl : module.states) {
    if (decl.kind != ir::StateKind::Paged) continue;
    const int64_t page = page_size_of(decl);
    if (have_page && page != page_size_)
      throw Error(fmt::format("state store: @{} has pages of {} positions, another paged state {}", decl.name, page, page_size_));
    page_size_ = page, have_page = true;
  }
  int64_t n_pages = config.n_pages > 0 ? config.n_pages : int64_t(config.n_slots) * pages_for(config.n_ctx);
  config_.n_pages = n_pages;
  for (const auto& decl : module.states) {
    Layout b;
    b.decl = &decl;
    b.elem = decl.type.elem;
    b.elem_bytes = decl.type.elem.scalar_bytes();
    if (decl.kind == ir::StateKind::Paged) {
      b.row_elems = constant_tail(decl, 3);
      b.bytes_per_row = row_bytes_of(decl, b.row_elems);
      b.rows_per_slot = config.n_ctx;
      b.halves = int(*decl.type.shape[0].constant());
      b.bytes = uint64_t(b.halves) * uint64_t(n_pages * page_size_) * b.row_bytes();
    } else {
      b.row_elems = constant_tail(decl, 1);
      b.bytes_per_row = row_bytes_of(decl, b.row_elems);
      b.rows_per_slot = 1;
      b.bytes = uint64_t(config.n_slots) * b.row_bytes();
    }
    layouts_.push_back(b);
  }
  for (const auto& fn : module.functions)
    for (const auto& op : fn->ops) {
      const std::string* state = ir::state_symbol(*op);
      const ir::StateDecl* decl = state ? module.find_state(*state) : nullptr;
      if (op->info().effect == ir::Effect::ReadsWritesState && decl && decl->kind == ir::StateKind::Plain)
        recurrent_ = true;
    }
  refs_.assign(size_t(n_pages), 0);
  for (int64_t p = n_pages - 1; p >= 0; --p) free_.push_back(int32_t(p));  // page 0 is taken first
  tables_.resize(size_t(config.n_slots));
}

StateStore::~StateStore() = default;

const StateStore::Layout& StateStore::layout(std::string_view name) const {
  for (const auto& b : layouts_)
    if (b.decl->name == name) return b;
  throw Error(fmt::format("state store: no state @{}", name));
}

void StateStore::check_slot(int32_t slot) const {
  if (slot < 0 || slot >= config_.n_slots)
    throw Error(fmt::format("state store: slot {} out of range [0, {})", slot, config_.n_slots));
}

void StateStore::check_page(int32_t page) const {
  if (page < 0 || page >= n_pages()) throw Error(fmt::format("state store: page {} out of range [0, {})", page, n_pages()));
}

int64_t StateStore::kv_pool_row(int32_t slot, int64_t pos) const {
  check_slot(slot);
  const auto& table = tables_[size_t(slot)];
  if (pos < 0 || pos / page_size_ >= int64_t(table.size()))
    throw Error(fmt::format("state store: slot {} has no KV page for position {} ({} pages mapped)", slot, pos, table.size()));
  return table[size_t(pos / page_size_)] * page_size_ + pos % page_size_;
}

int32_t StateStore::page_refs(int32_t page) const {
  check_page(page);
  return refs_[size_t(page)];
}

const std::vector<int32_t>& StateStore::page_table(int32_t slot) const {
  check_slot(slot);
  return tables_[size_t(slot)];
}

int32_t StateStore::take_free_page() {
  const int32_t page = free_.back();
  free_.pop_back();
  refs_[size_t(page)] = 1;
  if (storage_) storage_->zero_page(page);
  return page;
}

bool StateStore::reserve(int32_t slot, int64_t n_positions) {
  check_slot(slot);
  if (n_positions > config_.n_ctx)
    throw Error(fmt::format("state store: {} positions exceed the context of {}", n_positions, config_.n_ctx));
  auto& table = tables_[size_t(slot)];
  const int64_t need = pages_for(n_positions) - int64_t(table.size());
  if (need <= 0) return true;
  if (need > free_pages()) return false;
  for (int64_t i = 0; i < need; ++i) table.push_back(take_free_page());
  return true;
}

void StateStore::truncate(int32_t slot, int64_t n_positions) {
  check_slot(slot);
  auto& table = tables_[size_t(slot)];
  const size_t keep = size_t(std::max<int64_t>(0, pages_for(n_positions)));
  while (table.size() > keep) {
    release(table.back());
    table.pop_back();
  }
}

void StateStore::share_pages(int32_t slot, std::span<const int32_t> pages) {
  check_slot(slot);
  auto& table = tables_[size_t(slot)];
  if (int64_t(table.size() + pages.size()) * page_size_ > config_.n_ctx + page_size_ - 1)
    throw Error(fmt::format("state store: sharing {} pages overflows the context of {}", pages.size(), config_.n_ctx));
  for (int32_t p : pages) {
    retain(p);
    table.push_back(p);
  }
}

void StateStore::retain(int32_t page) {
  check_page(page);
  if (refs_[size_t(page)] == 0) throw Error(fmt::format("state store: page {} is free; it cannot be shared", page));
  ++refs_[size_t(page)];
}

void StateStore::release(int32_t page) {
  check_page(page);
  if (refs_[size_t(page)] == 0) throw Error(fmt::format("state store: page {} released twice", page));
  if (--refs_[size_t(page)] == 0) free_.push_back(page);
}

void StateStore::reset_slot(int32_t slot) {
  check_slot(slot);
  for (int32_t p : tables_[size_t(slot)]) release(p);
  tables_[size_t(slot)].clear();
  if (storage_) storage_->clear_slot(slot);
}

uint64_t StateStore::slot_state_bytes() const {
  uint64_t n = 0;
  for (const auto& b : layouts_)
    if (!b.paged()) n += b.row_bytes();
  return n;
}

std::unique_ptr<SlotCheckpoint> StateStore::save_checkpoint(int32_t slot, std::unique_ptr<SlotCheckpoint> reuse) {
  check_slot(slot);
  if (!storage_) throw Error("state store: no storage attached to take a checkpoint from");
  return storage_->save_slot(slot, std::move(reuse));
}

void StateStore::restore_checkpoint(int32_t slot, const SlotCheckpoint& checkpoint) {
  check_slot(slot);
  if (!storage_) throw Error("state store: no storage attached to restore a checkpoint into");
  storage_->restore_slot(slot, checkpoint);
}

uint64_t StateStore::total_bytes() const {
  uint64_t n = 0;
  for (const auto& b : layouts_) n += b.bytes;
  return n;
}

}  // namespace vtc
