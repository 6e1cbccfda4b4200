// The states' bytes in host memory: the storage of the CPU interpreter.
//
// One block of bytes per declared state, in the StateStore's layout (plain:
// [slot][row]; paged: [halves][page][page_size][row]). It attaches itself to
// the store at construction, so a page handed out is zeroed here and a
// reset slot gets its empty bytes here, at the moment the bookkeeping
// changes; nothing else writes a state but the ops of a step.
//
// A paged pool is an anonymous mapping, and a page handed out is zeroed by
// giving its whole OS pages back (madvise MADV_DONTNEED reads as zeros
// afterwards), so the pool sized for every slot's whole context is
// resident only where rows were written since: `vtc serve --ctx-size 32768
// --parallel 4` costs the memory of the tokens it holds, as llama.cpp's one
// shared cache of --ctx-size does, not four contexts up front.
//
// A checkpoint (StateStore's header) is a heap copy of the slot's plain and
// ring rows, one after the other in layout order: the states are host
// memory already, so a memcpy each way is all it takes.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/state/state_store.h"

namespace vtc {

// Zero-filled bytes: an anonymous mapping for a paged pool (pages resident
// once written), the heap for the rest.
class StateBytes {
 public:
  StateBytes() = default;
  StateBytes(uint64_t size, bool mapped);
  StateBytes(StateBytes&& other) noexcept;
  StateBytes& operator=(StateBytes&& other) noexcept;
  ~StateBytes();
  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  // Zeroes [offset, offset + n); a mapping's whole OS pages in the range
  // are released instead of written.
  void zero(uint64_t offset, uint64_t n);

 private:
  void release();
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  bool mapped_ = false;
};

class HostStates final : public StateStorage {
 public:
  struct Buffer {
    const StateStore::Layout* layout = nullptr;
    StateBytes data;
    // The layout's fields, read by the kernels.
    const ir::StateDecl* decl = nullptr;
    ir::ElemType elem;
    int64_t elem_bytes = 0, row_elems = 0, rows_per_slot = 0;
    int halves = 1;
  };

  // Allocates every state (throws std::bad_alloc when memory is short).
  explicit HostStates(StateStore& store);
  ~HostStates() override;
  HostStates(const HostStates&) = delete;
  HostStates& operator=(const HostStates&) = delete;

  StateStore& store() { return store_; }
  // Throws vtc::Error for an undeclared name.
  Buffer& buffer(std::string_view name);
  std::vector<Buffer>& buffers() { return buffers_; }

  // Plain/ring only: the slot's row.
  std::span<uint8_t> slot_bytes(Buffer& b, int32_t slot);
  // Paged only: the bytes of KV row `pos` of `slot`, K (half 0) or V (half
  // 1). Throws when the slot's table has no page for `pos`.
  uint8_t* kv_row(Buffer& b, int32_t slot, int half, int64_t pos);
  // Paged only: the start of the K or V (half 0 or 1) page pool ([P][page_size][row]).
  uint8_t* pool_base(Buffer& b, int half);
  const std::vector<int32_t>& page_table(int32_t slot) const { return store_.page_table(slot); }
  int64_t page_size() const { return store_.page_size(); }

  void zero_page(int32_t page) override;
  void clear_slot(int32_t slot) override;
  std::unique_ptr<SlotCheckpoint> save_slot(int32_t slot, std::unique_ptr<SlotCheckpoint> reuse) override;
  void restore_slot(int32_t slot, const SlotCheckpoint& checkpoint) override;

 private:
  StateStore& store_;
  std::vector<Buffer> buffers_;
};

}  // namespace vtc
