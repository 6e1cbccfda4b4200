// TokenTable (matcher.h): the vocabulary's pieces sorted by their bytes,
// laid out as a trie in preorder. Sorting puts every token right after the
// tokens it shares a prefix with, so the trie is built in one pass that
// keeps the current root-to-node path: the longest common prefix with the
// previous piece says how much of the path to keep.
//
// As in llama.cpp's grammar sampler, a piece counts up to its first NUL
// byte, and tokens with an empty piece (and end-of-generation tokens,
// handled apart) are not in the trie, so masking never allows them.
#include <algorithm>
#include <numeric>

#include "frontends/gguf/tokenizer/tokenizer.h"
#include "serve/constraints/grammar/matcher.h"

namespace vtc::grammar {
namespace {

// Complete, well-formed UTF-8 (no overlong forms, surrogates or stray
// continuation bytes): llama.cpp's lenient decoder reads such bytes as
// their true code points.
bool well_formed_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c < 0x80) { ++i; continue; }
    if (c >= 0xC2 && c <= 0xDF) n = 1;
    else if (c >= 0xE0 && c <= 0xEF) { n = 2; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 3; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return false;
    if (i + n >= s.size()) return false;
    auto c1 = static_cast<unsigned char>(s[i + 1]);
    if (c1 < lo || c1 > hi) return false;
    for (size_t k = 2; k <= n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n + 1;
  }
  return true;
}

}  // namespace

TokenTable::TokenTable(std::vector<std::string> pieces, std::span<const int32_t> eog)
    : pieces_(std::move(pieces)), eog_(pieces_.size(), 0) {
  for (int32_t id : eog)
    if (id >= 0 && static_cast<size_t>(id) < eog_.size() && !eog_[static_cast<size_t>(id)]) {
      eog_[static_cast<size_t>(id)] = 1;
      eog_ids_.push_back(id);
    }
  auto grammar_bytes = [&](size_t id) {
    std::string_view p = pieces_[id];
    return p.substr(0, p.find('\0'));
  };
  std::vector<int32_t> order;
  for (size_t id = 0; id < pieces_.size(); ++id) {
    size_t n = grammar_bytes(id).size();
    if (!eog_[id] && n > 0 && n < 65536) order.push_back(static_cast<int32_t>(id));
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return grammar_bytes(static_cast<size_t>(a)) < grammar_bytes(static_cast<size_t>(b)); });

  std::vector<uint32_t> path;  // node index at each depth - 1
  std::string_view prev;
  // Closing a node fixes its subtree's extent and folds its byte summary
  // into its parent's.
  auto close_to = [&](size_t depth) {
    while (path.size() > depth) {
      Node& n = nodes_[path.back()];
      n.subtree_end = static_cast<uint32_t>(nodes_.size());
      n.subtree_tokens_end = static_cast<uint32_t>(node_tokens_.size());
      if (n.byte < 0x80)
        n.subtree_bytes[n.byte >> 6] |= uint64_t{1} << (n.byte & 63);
      else
        n.subtree_wide = true;
      path.pop_back();
      if (!path.empty()) {
        Node& parent = nodes_[path.back()];
        parent.subtree_bytes[0] |= n.subtree_bytes[0];
        parent.subtree_bytes[1] |= n.subtree_bytes[1];
        parent.subtree_wide = parent.subtree_wide || n.subtree_wide;
        parent.subtree_well_formed = parent.subtree_well_formed && n.subtree_well_formed;
      }
    }
  };
  for (int32_t id : order) {
    std::string_view p = grammar_bytes(static_cast<size_t>(id));
    size_t lcp = 0;
    while (lcp < p.size() && lcp < prev.size() && p[lcp] == prev[lcp]) ++lcp;
    close_to(lcp);
    for (size_t d = lcp; d < p.size(); ++d) {
      path.push_back(static_cast<uint32_t>(nodes_.size()));
      auto tok = static_cast<uint32_t>(node_tokens_.size());
      nodes_.push_back({0, tok, tok, tok, {0, 0}, static_cast<uint16_t>(d + 1), static_cast<uint8_t>(p[d]), false, true});
    }
    node_tokens_.push_back(id);
    nodes_[path.back()].tokens_end = static_cast<uint32_t>(node_tokens_.size());
    if (!well_formed_utf8(p)) nodes_[path.back()].subtree_well_formed = false;
    max_depth_ = std::max(max_depth_, p.size());
    prev = p;
  }
  close_to(0);
}

std::shared_ptr<const TokenTable> make_token_table(const Tokenizer& tok) {
  std::vector<std::string> pieces(tok.vocab_size());
  std::vector<int32_t> eog;
  for (size_t id = 0; id < pieces.size(); ++id) {
    auto i = static_cast<int32_t>(id);
    if (tok.has_vocab()) pieces[id] = tok.token_piece(i);
    if (tok.is_eog(i)) eog.push_back(i);
  }
  return std::make_shared<const TokenTable>(std::move(pieces), eog);
}

}  // namespace vtc::grammar
