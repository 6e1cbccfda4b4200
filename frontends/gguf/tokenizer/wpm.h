// WordPiece (WPM), the tokenizer of BERT-family models (tokenizer.ggml.model
// = "bert": bge, MiniLM, nomic-embed). Internal to the tokenizer.
//
// The GGUF vocabulary stores BERT's vocab.txt converted: a word-initial
// piece "the" is stored as "\u2581the", a continuation piece "##ing" as
// "ing", and bracketed specials ("[CLS]") unchanged. Encoding then is, as in
// llama.cpp's llm_tokenizer_wpm_session:
//   1. wpm_words: BERT's basic normalization and split (see wpm.cpp);
//   2. wpm_word_pieces: each word gets the U+2581 prefix and is cut into the
//      longest vocabulary pieces from the left; a word with any position
//      that no piece matches becomes the single unknown token.
// Decoding is the SPM piece rule (U+2581 -> ' ') plus wpm_clean_up_spaces.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace vtc::gguf {
class GgufFile;
}

namespace vtc::tok::detail {

// BertNormalizer options (tokenizer.ggml.normalizer.lowercase /
// .strip_accents). Both default to true; strip_accents defaults to the value
// of lowercase when only that key is present.
struct WpmNormalizer {
  bool lowercase = true;
  bool strip_accents = true;
};

// Reads the two keys; a key of another type than bool is a vtc::Error.
WpmNormalizer read_wpm_normalizer(const gguf::GgufFile& file);

// Normalizes `text` and splits it into words: whitespace separates words;
// NUL, U+FFFD and control/format/private-use characters are dropped;
// punctuation, ASCII symbols and CJK ideographs are words of their own.
// With strip_accents each character is replaced by the first code point of
// its NFD decomposition and combining marks are dropped; with lowercase each
// character is lowercased (simple case mapping).
std::vector<std::string> wpm_words(std::string_view text, const WpmNormalizer& opts);

// Vocabulary lookup: the id of a token with exactly this text, or -1.
using TokenLookup = std::function<int32_t(std::string_view)>;

// Appends the pieces of one word (as produced by wpm_words, non-empty).
// max_token_len: the longest token text in bytes. unk < 0 (no unknown
// token) with a word that has no tokenization throws vtc::Error.
void wpm_word_pieces(std::string_view word, size_t max_token_len, int32_t unk, const TokenLookup& lookup,
                     std::vector<int32_t>& out);

// llama.cpp's clean_up_tokenization_spaces for WPM output: drops the space
// before "?", "!", ".", ","; turns " ' " into "'"; drops the space before
// "'s", "'m", "'re", "'ve".
std::string wpm_clean_up_spaces(std::string_view text);

}  // namespace vtc::tok::detail
