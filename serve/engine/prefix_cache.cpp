#include "serve/engine/prefix_cache.h"

#include <algorithm>

namespace vtc::serve {

PrefixCache::~PrefixCache() {
  for (auto& [key, e] : entries_) store_.release(e.page);
}

uint64_t PrefixCache::chain(uint64_t parent, std::span<const int32_t> page_tokens) {
  // FNV-1a over the parent key and the token ids; 0 is reserved for "root".
  uint64_t h = 1469598103934665603ull ^ parent;
  for (int32_t t : page_tokens) {
    for (int b = 0; b < 4; ++b) h = (h ^ ((uint32_t(t) >> (8 * b)) & 0xFF)) * 1099511628211ull;
  }
  return h == 0 ? 1 : h;
}

PrefixCache::Entry* PrefixCache::find(uint64_t key, std::span<const int32_t> page_tokens) {
  auto it = entries_.find(key);
  if (it == entries_.end() || !std::equal(page_tokens.begin(), page_tokens.end(), it->second.tokens.begin(),
                                          it->second.tokens.end()))
    return nullptr;
  return &it->second;
}

PrefixCache::Prefix PrefixCache::lookup(std::span<const int32_t> tokens) {
  const int64_t page = store_.page_size();
  const int64_t max_pages = tokens.empty() ? 0 : int64_t(tokens.size() - 1) / page;
  std::vector<Entry*> path;
  uint64_t key = 0;
  for (int64_t i = 0; i < max_pages; ++i) {
    auto block = tokens.subspan(size_t(i * page), size_t(page));
    Entry* e = find(chain(key, block), block);
    if (e == nullptr || e->parent != key) break;
    key = e->key;
    path.push_back(e);
  }
  // A recurrent model resumes only from a checkpoint (see the header).
  if (recurrent_)
    while (!path.empty() && !path.back()->checkpoint) path.pop_back();
  Prefix found;
  for (Entry* e : path) {
    found.pages.push_back(e->page);
    lru_.splice(lru_.begin(), lru_, e->lru);
  }
  if (recurrent_ && !path.empty()) found.checkpoint = path.back()->checkpoint.get();
  return found;
}

void PrefixCache::insert(std::span<const int32_t> tokens, const std::vector<int32_t>& page_table,
                         std::unique_ptr<SlotCheckpoint> checkpoint, int64_t checkpoint_pages) {
  const int64_t page = store_.page_size();
  int64_t full = std::min<int64_t>(int64_t(tokens.size()) / page, int64_t(page_table.size()));
  if (recurrent_) full = std::min(full, checkpoint ? checkpoint_pages : 0);
  uint64_t key = 0;
  for (int64_t i = 0; i < full; ++i) {
    auto block = tokens.subspan(size_t(i * page), size_t(page));
    const uint64_t k = chain(key, block);
    Entry* e = find(k, block);
    if (e) {
      lru_.splice(lru_.begin(), lru_, e->lru);
    } else {
      if (entries_.count(k)) break;  // a colliding key holds other tokens: stop caching this chain
      store_.retain(page_table[size_t(i)]);
      lru_.push_front(k);
      e = &entries_.emplace(k, Entry{k, key, std::vector<int32_t>(block.begin(), block.end()), page_table[size_t(i)], 0,
                                     lru_.begin(), nullptr}).first->second;
      if (key != 0) ++entries_.at(key).children;
    }
    key = k;
    if (i + 1 == checkpoint_pages && checkpoint) attach(*e, std::move(checkpoint));
  }
}

void PrefixCache::attach(Entry& e, std::unique_ptr<SlotCheckpoint> checkpoint) {
  if (e.checkpoint) return;  // an equal one is there already (same tokens, same states)
  e.checkpoint = std::move(checkpoint);
  ++checkpoints_;
  trim_checkpoints();
}

// Over the budget: drops the least recently used checkpoints, and the
// entries they alone justified.
void PrefixCache::trim_checkpoints() {
  while (checkpoint_bytes() > checkpoint_budget_) {
    auto it = std::find_if(lru_.rbegin(), lru_.rend(), [&](uint64_t k) { return entries_.at(k).checkpoint != nullptr; });
    if (it == lru_.rend()) return;
    Entry& e = entries_.at(*it);
    e.checkpoint.reset();
    --checkpoints_;
    prune_from(e.key);
  }
}

// Recurrent models: erases the entry `key` and then its ancestors while
// each is a leaf nobody uses and holds no checkpoint (nothing can resume
// from it or through it).
void PrefixCache::prune_from(uint64_t key) {
  while (key != 0) {
    Entry& e = entries_.at(key);
    if (e.checkpoint || !evictable(e)) return;
    key = e.parent;
    erase(e);
  }
}

void PrefixCache::erase(Entry& e) {
  if (e.parent != 0) --entries_.at(e.parent).children;
  if (e.checkpoint) --checkpoints_;
  store_.release(e.page);
  lru_.erase(e.lru);
  const uint64_t key = e.key;  // not a reference into the node erase() destroys
  entries_.erase(key);
}

int64_t PrefixCache::evictable() const {
  // A page whose only reference is the cache is never under a page some
  // request uses (a request holds the whole chain), so all of them can go
  // by repeated leaf eviction.
  int64_t n = 0;
  for (const auto& [key, e] : entries_) n += store_.page_refs(e.page) == 1;
  return n;
}

int64_t PrefixCache::evict(int64_t n) {
  int64_t freed = 0;
  while (freed < n) {
    auto it = std::find_if(lru_.rbegin(), lru_.rend(), [&](uint64_t k) { return evictable(entries_.at(k)); });
    if (it == lru_.rend()) break;
    erase(entries_.at(*it));
    ++freed;
  }
  return freed;
}

}  // namespace vtc::serve
