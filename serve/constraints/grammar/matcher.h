// Grammar-constrained sampling: which tokens may come next, and advancing
// over the one that was picked.
//
// State: the set of pushdown stacks the text so far can be in (a stack is
// a list of element positions; its top is always a character set), plus
// the UTF-8 bytes of a character that a token left unfinished. Advancing
// over one code point replaces every stack whose top matches it by the
// stacks of what may follow (rule references expanded until a character
// set is on top). The grammar can end where the set holds an empty stack.
// This is the llama.cpp grammar sampler's semantics, down to its UTF-8
// decoding and partial-character checks, so the same tokens are allowed.
//
// Speed: stacks and stack sets are interned (ids), and the transition
// (set, code point) -> set is computed once and cached (a dense table for
// ASCII, a hash map above), per matcher. Masking walks the vocabulary as a
// trie in preorder (TokenTable): the state after a prefix is shared by
// every token with that prefix, and a dead prefix skips its whole subtree.
// Each step of the walk is a table lookup once the cache is warm. And
// where every ASCII byte of a subtree leads from the current set back to
// itself (the inside of a JSON string), the whole subtree is allowed at
// once, without visiting it. Non-ASCII code points are stepped as one
// class wherever every stack top treats all of them alike (the usual case:
// a string's characters, or none at all), so a vocabulary full of CJK
// pieces costs one transition, not one per character.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "serve/constraints/grammar/grammar.h"

namespace vtc {
class Tokenizer;
}

namespace vtc::grammar {

// The vocabulary as a byte trie in preorder, built once per model.
class TokenTable {
 public:
  // pieces[id]: the bytes token `id` emits; eog: end-of-generation ids.
  TokenTable(std::vector<std::string> pieces, std::span<const int32_t> eog);

  size_t size() const { return pieces_.size(); }
  const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }
  bool is_eog(int32_t id) const { return eog_[static_cast<size_t>(id)] != 0; }

  // Trie nodes in preorder (the root is implicit, depth 0).
  struct Node {
    uint32_t subtree_end;  // first node after this node's subtree
    uint32_t tokens_begin, tokens_end;  // into token_ids(): tokens whose piece ends here
    uint32_t subtree_tokens_end;        // token_ids()[tokens_begin, this): the whole subtree's
    uint64_t subtree_bytes[2];          // ASCII bytes used in the subtree (this node's included)
    uint16_t depth;        // bytes from the root
    uint8_t byte;
    bool subtree_wide;         // some byte >= 0x80 in the subtree
    bool subtree_well_formed;  // every token in the subtree is complete, well-formed UTF-8
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& token_ids() const { return node_tokens_; }
  size_t max_depth() const { return max_depth_; }
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }

 private:
  std::vector<std::string> pieces_;
  std::vector<uint8_t> eog_;
  std::vector<int32_t> eog_ids_;
  std::vector<Node> nodes_;
  std::vector<int32_t> node_tokens_;
  size_t max_depth_ = 0;
};

std::shared_ptr<const TokenTable> make_token_table(const Tokenizer& tok);

// One per request; not thread-safe (its caches change under const calls).
// mask_logits, allows and accept throw GrammarError only for a grammar so
// ambiguous that one step would track more than 65536 parser stacks.
class GrammarMatcher {
 public:
  GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTable> tokens);
  ~GrammarMatcher();
  GrammarMatcher(GrammarMatcher&&) noexcept;
  GrammarMatcher& operator=(GrammarMatcher&&) noexcept;

  // Sets -inf on every token the grammar does not allow next (ids at or
  // past the table's size too). End-of-generation tokens stay only where
  // the grammar can end.
  void mask_logits(float* logits, size_t n_vocab) const;
  // The allowed flags themselves (size() of the table), for tests.
  std::vector<uint8_t> allowed_tokens() const;
  // Whether `token` may come next (one token's check; same answer as the
  // mask, without walking the vocabulary).
  bool allows(int32_t token) const;
  // Advances over `token`; false, with the state unchanged, when the token
  // is not allowed. An end-of-generation token is accepted where the
  // grammar can end, and finishes the match.
  bool accept(int32_t token);
  // Advances over raw bytes (tests, forced text); false leaves the state.
  bool accept_bytes(std::string_view bytes);
  bool can_end() const;
  bool finished() const;  // nothing more can follow

 private:
  struct Engine;
  std::unique_ptr<Engine> engine_;
};

}  // namespace vtc::grammar
