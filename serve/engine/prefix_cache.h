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
// Reference counts live in the StateStore: the cache holds one reference
// per cached page, each request that shares it holds one more. Eviction is
// LRU over leaves (entries no other cached entry extends) whose page nobody
// but the cache references; evicting a leaf may turn its parent into one.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "runtime/state/state_store.h"

namespace vtc::serve {

class PrefixCache {
 public:
  explicit PrefixCache(StateStore& store) : store_(store) {}
  ~PrefixCache();

  // Pages holding the longest cached prefix of `tokens` (see above), marked
  // as recently used. The caller shares them into its slot.
  std::vector<int32_t> lookup(std::span<const int32_t> tokens);
  // Records the full pages of `tokens` (a prompt whose KV is now written)
  // from the slot's page table; pages already cached are skipped.
  void insert(std::span<const int32_t> tokens, const std::vector<int32_t>& page_table);
  // Pages that eviction could free now.
  int64_t evictable() const;
  // Frees up to `n` pages, least recently used first; returns how many.
  int64_t evict(int64_t n);
  int64_t cached_pages() const { return int64_t(entries_.size()); }

 private:
  struct Entry {
    uint64_t key, parent;  // parent 0: the first page
    std::vector<int32_t> tokens;  // this page's tokens
    int32_t page;
    int32_t children = 0;
    std::list<uint64_t>::iterator lru;  // position in lru_ (front: newest)
  };
  static uint64_t chain(uint64_t parent, std::span<const int32_t> page_tokens);
  Entry* find(uint64_t key, std::span<const int32_t> page_tokens);

  StateStore& store_;
  std::unordered_map<uint64_t, Entry> entries_;
  std::list<uint64_t> lru_;
};

}  // namespace vtc::serve
