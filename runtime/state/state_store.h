// The state store: every persistent buffer a module declares, per sequence
// slot, with paged KV behind a per-slot page table.
//
// The store is built from the module's `state` declarations, never from a
// list kept by hand, so fingerprints and diffs can enumerate exactly what
// persists (DESIGN.md, "State is declared").
//
// One owner per state: the store keeps the bookkeeping (the layouts, the
// page tables and reference counts, the slots), never the bytes. The bytes
// belong to the backend that executes the steps (HostStates for the CPU
// interpreter, device buffers for CUDA): it attaches a StateStorage, and
// the store tells it when a page is handed out (zero it) and when a slot is
// emptied, so the storage can never disagree with the bookkeeping.
//
// Layout, the same in every storage:
//   plain / ring  [S, d1, ...]        one row of d1*... elements per slot;
//   paged KV      [2, P, page, rest]  a pool of P pages per paged state, K
//                 pages first, then V pages; a page holds `page` positions
//                 (16 in the frontends) of `rest` elements each.
// Paging: every paged state shares one page numbering. A slot's page table
// lists the pages that hold its positions: position p lives in page
// table[p / page] at row p % page, in every layer. Pages carry reference
// counts, so one page can sit in several tables (prefix reuse) and in a
// cache that holds it for later requests; a page returns to the free list
// when its last reference goes. The store only counts: which pages to share
// and when to evict cached ones is the caller's policy (serve/).
//
// Checkpoints: KV pages alone cannot resume a sequence whose plain states
// (conv rings, scan and delta-rule matrices, n-gram history) summarize its
// whole prefix. A checkpoint is a copy of one slot's plain and ring rows,
// taken right after a known position was reached and copied back into a
// slot that shares the KV pages up to that position (the prefix cache's
// policy, serve/engine/prefix_cache.h). It lives where the storage keeps
// the states (host memory for HostStates, device memory for CUDA: see each
// storage's header), so taking and restoring one is a copy on that side,
// never a round trip through the other.
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
  int64_t n_ctx = 512;   // KV positions per slot (the longest sequence)
  int64_t n_pages = 0;   // KV pages in the pool; 0: n_slots * ceil(n_ctx / page)
};

// One slot's plain and ring rows, in layout order (see the header comment),
// held by the storage that took it. It must not outlive that storage.
class SlotCheckpoint {
 public:
  virtual ~SlotCheckpoint() = default;
};

// Where a backend keeps the states' bytes (see the header comment).
class StateStorage {
 public:
  virtual ~StateStorage() = default;
  // `page` was just handed out: zero its rows in every paged state, so a
  // fingerprint of the pool does not show a previous owner.
  virtual void zero_page(int32_t page) = 0;
  // A new sequence starts in `slot`: every plain and ring state's row gets
  // its empty bytes (StateStore::empty_byte).
  virtual void clear_slot(int32_t slot) = 0;
  // Copies `slot`'s plain and ring rows into a checkpoint, ordered after
  // every step already issued: into `reuse` when this storage took it (no
  // allocation; on a device, no wait for work still reading it, since the
  // copy is queued after that work), else into a new one.
  virtual std::unique_ptr<SlotCheckpoint> save_slot(int32_t slot, std::unique_ptr<SlotCheckpoint> reuse) = 0;
  // Copies a checkpoint this storage took back into `slot`'s rows, ordered
  // before the next step.
  virtual void restore_slot(int32_t slot, const SlotCheckpoint& checkpoint) = 0;
};

class StateStore {
 public:
  StateStore(const ir::Module& module, const StateStoreConfig& config);
  ~StateStore();

  // One declared state's layout; its bytes live in the attached storage.
  struct Layout {
    const ir::StateDecl* decl = nullptr;
    ir::ElemType elem;
    int64_t elem_bytes = 0;  // 0 for a quantized KV cache type (whole blocks per row: row_bytes)
    int64_t row_elems = 0;  // per slot (plain/ring) or per KV position (paged)
    int64_t bytes_per_row = 0;
    int64_t rows_per_slot = 0;  // 1 for plain/ring; n_ctx (the positions a slot may use) for paged
    int halves = 1;             // paged: 2 (K and V) or 1 (a side cache)
    uint64_t bytes = 0;         // plain: [slot][row]; paged: [halves][page][page_size][row_elems]
    uint64_t row_bytes() const { return uint64_t(bytes_per_row); }
    uint64_t half_bytes() const { return bytes / uint64_t(halves); }     // paged: one pool
    uint64_t page_bytes(int64_t page_size) const { return uint64_t(page_size) * row_bytes(); }
    bool paged() const { return decl->kind == ir::StateKind::Paged; }
  };

  // Attaches the backend's storage (one at a time; null detaches). The
  // storage is told about every later page and slot change.
  void attach(StateStorage* storage) { storage_ = storage; }

  const StateStoreConfig& config() const { return config_; }
  // True when an op reads and writes a plain state (a conv ring, a
  // delta-rule matrix): such a state summarizes the whole sequence so far,
  // so a sequence cannot resume from shared KV pages alone (no prefix reuse).
  bool carries_recurrent_state() const { return recurrent_; }
  const std::vector<Layout>& layouts() const { return layouts_; }
  // Throws vtc::Error for an undeclared name.
  const Layout& layout(std::string_view name) const;
  // The byte a fresh slot of `decl` holds: 0, except integer rings (the
  // n-gram history), which start as -1 ("no token"): a zero would read as
  // token 0.
  static uint8_t empty_byte(const ir::StateDecl& decl);
  // The row of KV position `pos` of `slot` in its pool (page * page_size +
  // pos % page_size). Throws when the slot's table has no page for `pos`.
  int64_t kv_pool_row(int32_t slot, int64_t pos) const;

  // --- pages ----------------------------------------------------------------
  int64_t page_size() const { return page_size_; }
  int64_t n_pages() const { return int64_t(refs_.size()); }
  int64_t free_pages() const { return int64_t(free_.size()); }
  int32_t page_refs(int32_t page) const;
  const std::vector<int32_t>& page_table(int32_t slot) const;
  // Pages needed to hold `n_positions` positions.
  int64_t pages_for(int64_t n_positions) const { return (n_positions + page_size_ - 1) / page_size_; }
  // Grows the slot's table with fresh (zeroed) pages until it covers
  // `n_positions`. Returns false and changes nothing when the pool lacks
  // pages. Throws past n_ctx.
  bool reserve(int32_t slot, int64_t n_positions);
  // Drops the slot's references to pages wholly past `n_positions`.
  void truncate(int32_t slot, int64_t n_positions);
  // Appends pages that already hold this slot's next positions (a shared
  // prefix), taking a reference on each.
  void share_pages(int32_t slot, std::span<const int32_t> pages);
  // References held outside the slots (a prefix cache).
  void retain(int32_t page);
  void release(int32_t page);

  // --- checkpoints (see the header comment; throw without a storage) -------
  // Bytes of one checkpoint: every plain and ring row of one slot.
  uint64_t slot_state_bytes() const;
  // `reuse`: a checkpoint to overwrite (one per verify step would
  // otherwise allocate, and free, device memory every step).
  std::unique_ptr<SlotCheckpoint> save_checkpoint(int32_t slot, std::unique_ptr<SlotCheckpoint> reuse = nullptr);
  void restore_checkpoint(int32_t slot, const SlotCheckpoint& checkpoint);

  // Drops the slot's page references and empties its plain and ring
  // states in the storage (a new sequence starts): zeros, except integer
  // rings, which hold -1 ("no token").
  void reset_slot(int32_t slot);
  void check_slot(int32_t slot) const;
  uint64_t total_bytes() const;  // of every layout: what a storage holds

 private:
  int32_t take_free_page();
  void check_page(int32_t page) const;

  StateStoreConfig config_;
  bool recurrent_ = false;
  std::vector<Layout> layouts_;
  StateStorage* storage_ = nullptr;
  int64_t page_size_ = 16;
  std::vector<int32_t> refs_;   // per page
  std::vector<int32_t> free_;   // free pages, taken from the back
  std::vector<std::vector<int32_t>> tables_;  // per slot
};

}  // namespace vtc
