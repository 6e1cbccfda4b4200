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

std::vector<int32_t> PrefixCache::lookup(std::span<const int32_t> tokens) {
  const int64_t page = store_.page_size();
  const int64_t max_pages = tokens.empty() ? 0 : int64_t(tokens.size() - 1) / page;
  std::vector<int32_t> pages;
  uint64_t key = 0;
  for (int64_t i = 0; i < max_pages; ++i) {
    auto block = tokens.subspan(size_t(i * page), size_t(page));
    Entry* e = find(chain(key, block), block);
    if (e == nullptr || e->parent != key) break;
    key = e->key;
    pages.push_back(e->page);
    lru_.splice(lru_.begin(), lru_, e->lru);
  }
  return pages;
}

void PrefixCache::insert(std::span<const int32_t> tokens, const std::vector<int32_t>& page_table) {
  const int64_t page = store_.page_size();
  const int64_t full = std::min<int64_t>(int64_t(tokens.size()) / page, int64_t(page_table.size()));
  uint64_t key = 0;
  for (int64_t i = 0; i < full; ++i) {
    auto block = tokens.subspan(size_t(i * page), size_t(page));
    const uint64_t k = chain(key, block);
    if (Entry* e = find(k, block)) {
      key = k;
      lru_.splice(lru_.begin(), lru_, e->lru);
      continue;
    }
    if (entries_.count(k)) return;  // a colliding key holds other tokens: stop caching this chain
    store_.retain(page_table[size_t(i)]);
    lru_.push_front(k);
    entries_.emplace(k, Entry{k, key, std::vector<int32_t>(block.begin(), block.end()), page_table[size_t(i)], 0, lru_.begin()});
    if (key != 0) ++entries_.at(key).children;
    key = k;
  }
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
  bool progress = true;
  while (freed < n && progress) {
    progress = false;
    for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
      Entry& e = entries_.at(*it);
      if (e.children > 0 || store_.page_refs(e.page) != 1) continue;
      if (e.parent != 0) --entries_.at(e.parent).children;
      store_.release(e.page);
      lru_.erase(std::next(it).base());
      entries_.erase(e.key);
      ++freed;
      progress = true;
      break;
    }
  }
  return freed;
}

}  // namespace vtc::serve
