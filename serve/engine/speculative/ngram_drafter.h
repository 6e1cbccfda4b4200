// The n-gram drafter (prompt lookup; llama.cpp's ngram-map, vLLM's n-gram
// proposer): the sequence's own tokens, prompt and output, are the model of
// what comes next.
//
// Algorithm. For every n in [kMinN, kMaxN] a hash map takes the n tokens
// ending at position e (exclusive) to the latest such e that has a token
// after it; a position enters the maps one token late, so a lookup never
// finds the suffix itself. A draft looks up the last n tokens, longest n
// first, confirms the match token by token (hashes may collide), and copies
// what followed the earlier occurrence. Where the copy reaches the end of
// the sequence it continues from its own first tokens, so a repeating cycle
// of period p drafts the whole cycle, not only p tokens. Cost: O(kMaxN)
// per appended token and per draft token; memory O(kMaxN) entries per
// token.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace vtc::serve {

class NgramDrafter {
 public:
  // llama-lookup's range (LLAMA_NGRAM_MIN/MAX): a one-token match still
  // drafts; DraftPolicy stops a sequence whose drafts keep failing.
  static constexpr int kMinN = 1, kMaxN = 4;

  // Appends accepted tokens (the prompt, then each generated token).
  void append(std::span<const int32_t> tokens);
  void append(int32_t token) { append({&token, 1}); }
  void clear();
  // Up to `max` tokens to follow the sequence; empty without a match.
  std::vector<int32_t> draft(int32_t max) const;
  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  uint64_t hash(size_t end, int n) const;
  bool same(size_t end_a, size_t end_b, int n) const;

  std::vector<int32_t> tokens_;
  std::unordered_map<uint64_t, uint32_t> last_end_[kMaxN + 1];
};

}  // namespace vtc::serve
