// Internal: the BPE pre-tokenizers, i.e. the regex splits named by
// tokenizer.ggml.pre, written as hand-made scanners over code points.
//
// A pre-tokenizer is a list of passes. Each pass splits every current piece
// into the regex's matches and the gaps between them (HF's Split with the
// "Isolated" behaviour); a gap is kept as its own piece. Within a pass the
// scan is the regex's: leftmost match, first alternative that matches, greedy
// quantifiers with the backtracking the pattern needs (for `\s+(?!\S)` and
// `\s*[\r\n]+`). See docs/tokenizer.md for the patterns.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vtc::tok::detail {

struct PreTokenizerSpec;

class PreTokenizer {
 public:
  // Null when `name` is not a known pre-tokenizer.
  static std::unique_ptr<PreTokenizer> create(std::string_view name);
  static std::vector<std::string> supported_names();

  ~PreTokenizer();
  // Splits `text` into pieces, returned as [begin, end) byte ranges that
  // cover the text in order.
  std::vector<std::pair<uint32_t, uint32_t>> split(std::string_view text) const;

  bool ignore_merges() const;   // a piece that is a whole token skips merging
  bool default_add_bos() const;

 private:
  explicit PreTokenizer(const PreTokenizerSpec* spec) : spec_(spec) {}
  const PreTokenizerSpec* spec_;
};

}  // namespace vtc::tok::detail
