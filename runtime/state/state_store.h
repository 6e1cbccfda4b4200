// The state store: every persistent buffer a module declares, per sequence
// slot.
//
// The store is built from the module's `state` declarations, never from a
// list kept by hand, so fingerprints and diffs can enumerate exactly what
// persists (DESIGN.md, "State is declared").
//
// Layout (host memory, this version):
//   plain / ring  [S, d1, ...]      one row of d1*... elements per slot;
//   paged KV      [2, P, page, rest] each slot owns a contiguous run of
//                 ceil(n_ctx/page) pages for K and the same for V, so the
//                 cache of one sequence is dense: K row p is position p.
// A sequence's KV pages are therefore fixed per slot; sharing pages across
// requests (prefix reuse) replaces this with a page table later.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/module.h"

namespace vtc {

struct StateStoreConfig {
  int32_t n_slots = 1;   // sequences that can be live at once
  int64_t n_ctx = 512;   // KV positions per slot
};

class StateStore {
 public:
  StateStore(const ir::Module& module, const StateStoreConfig& config);
  ~StateStore();

  struct Buffer {
    const ir::StateDecl* decl = nullptr;
    ir::ElemType elem;
    int64_t elem_bytes = 0;
    int64_t row_elems = 0;  // per slot (plain/ring) or per KV position (paged)
    int64_t rows_per_slot = 0;  // 1 for plain/ring; n_ctx for paged
    std::vector<uint8_t> data;  // paged: [2][slot][rows_per_slot][row_elems]
  };

  const StateStoreConfig& config() const { return config_; }
  const std::vector<Buffer>& buffers() const { return buffers_; }
  // Throws vtc::Error for an undeclared name.
  Buffer& buffer(std::string_view name);

  // Plain/ring: the slot's row. Paged: K (half 0) or V (half 1) rows of the
  // slot, rows_per_slot * row_elems elements.
  std::span<uint8_t> slot_bytes(Buffer& b, int32_t slot, int half = 0);

  // Zeroes every state of `slot` (a new sequence starts).
  void reset_slot(int32_t slot);
  void check_slot(int32_t slot) const;
  uint64_t total_bytes() const;

 private:
  StateStoreConfig config_;
  std::vector<Buffer> buffers_;
};

}  // namespace vtc
