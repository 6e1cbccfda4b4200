// Prefix cache: full KV pages of earlier prompts, found again by their
// tokens, so a request that starts with the same tokens skips their prefill.
//
// Algorithm: a page of `page` positions is keyed by the chain of all tokens
// up to its end: key(i) = hash(key(i-1), tokens of page i). A lookup walks
// the new prompt page by page from the start and stops at the first page
// whose key is missing (tokens are compared too, so a hash collision is a
// miss, never wrong KV). Only full pages are cached, and a lookup returns at
// most floor((n - 1) / page) pages, so the last prompt token is always
// computed (its logits start generation) and a request never writes into a
// shared page: no copy-on-write is needed.
//
// Models with recurrent state (StateStore::carries_recurrent_state: conv
// rings, scan and delta-rule matrices summarize the whole prefix, and no
// page holds them) resume only where a checkpoint of those states was
// taken, as llama.cpp's server does with its context checkpoints. The
// engine takes one per prompt, right after prefilling to P = floor((n - 1)
// / page) * page, the deepest prefix a later lookup of the same prompt may
// share, and insert() attaches it to the entry of the page ending at P
// (and caches no page past P: without a checkpoint there, nothing could
// resume from it). For such a model a lookup walks as above, then backs up
// to the deepest entry on its path that holds a checkpoint; the caller
// restores it into the slot and shares the pages up to it. Checkpoints
// have a byte budget: past it, the least recently used one is dropped, and
// then the leaves that no checkpoint justifies any more (an entry nobody
// but the cache uses, with no child and no checkpoint) go with it, up the
// chain.
//
// Reference counts live in the StateStore: the cache holds one reference
// per cached page, each request that shares it holds one more. Eviction is
// LRU over leaves (entries no other cached entry extends) whose page nobody
// but the cache references; evicting a leaf may turn its parent into one.
// An evicted entry's checkpoint goes with it.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "runtime/state/state_store.h"

namespace vtc::serve {

class PrefixCache {
 public:
  // `checkpoint_budget`: bytes the checkpoints may hold together (see above).
  explicit PrefixCache(StateStore& store, uint64_t checkpoint_budget = 0)
      : store_(store), recurrent_(store.carries_recurrent_state()), checkpoint_budget_(checkpoint_budget) {}
  ~PrefixCache();

  // What a lookup found: the pages of the prefix to share and, for a
  // recurrent model, the checkpoint to restore (taken after the last page).
  struct Prefix {
    std::vector<int32_t> pages;
    const SlotCheckpoint* checkpoint = nullptr;
  };
  // The longest cached prefix of `tokens` a request can resume from (see
  // above), marked as recently used. The caller shares its pages into its
  // slot and restores its checkpoint, if any, before any eviction.
  Prefix lookup(std::span<const int32_t> tokens);
  // Records the full pages of `tokens` (a prompt whose KV is now written)
  // from the slot's page table; pages already cached are skipped. A
  // recurrent model caches only the first `checkpoint_pages` pages and
  // attaches `checkpoint` (its states after them) to the last one.
  void insert(std::span<const int32_t> tokens, const std::vector<int32_t>& page_table,
              std::unique_ptr<SlotCheckpoint> checkpoint = {}, int64_t checkpoint_pages = 0);
  // Pages that eviction could free now.
  int64_t evictable() const;
  // Frees up to `n` pages, least recently used first; returns how many.
  int64_t evict(int64_t n);
  int64_t cached_pages() const { return int64_t(entries_.size()); }
  int64_t checkpoints() const { return checkpoints_; }
  uint64_t checkpoint_bytes() const { return checkpoints_ * store_.slot_state_bytes(); }
  // Whether a checkpoint fits the budget at all (else the engine takes none).
  bool keeps_checkpoints() const { return recurrent_ && checkpoint_budget_ >= store_.slot_state_bytes(); }

 private:
  struct Entry {
    uint64_t key, parent;  // parent 0: the first page
    std::vector<int32_t> tokens;  // this page's tokens
    int32_t page;
    int32_t children = 0;
    std::list<uint64_t>::iterator lru;  // position in lru_ (front: newest)
    std::unique_ptr<SlotCheckpoint> checkpoint;  // recurrent models: the states after this page
  };
  static uint64_t chain(uint64_t parent, std::span<const int32_t> page_tokens);
  Entry* find(uint64_t key, std::span<const int32_t> page_tokens);
  bool evictable(const Entry& e) const { return e.children == 0 && store_.page_refs(e.page) == 1; }
  void erase(Entry& e);
  void attach(Entry& e, std::unique_ptr<SlotCheckpoint> checkpoint);
  void trim_checkpoints();
  void prune_from(uint64_t key);

  StateStore& store_;
  bool recurrent_;
  uint64_t checkpoint_budget_;
  int64_t checkpoints_ = 0;
  std::unordered_map<uint64_t, Entry> entries_;
  std::list<uint64_t> lru_;
};

}  // namespace vtc::serve
