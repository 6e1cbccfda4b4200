// The tokenizer of a GGUF model: byte-level BPE (tokenizer.ggml.model =
// "gpt2") with the pre-tokenizer named by tokenizer.ggml.pre, and
// SentencePiece-style BPE (tokenizer.ggml.model = "llama") with <0xXX> byte
// fallback, and WordPiece (tokenizer.ggml.model = "bert", BERT-family
// embedding models; see wpm.h). Special tokens, add-BOS/EOS flags and an
// incremental UTF-8-safe detokenizer are included. See docs/tokenizer.md.
//
// A file may also have no vocabulary at all (tokenizer.ggml.model =
// "no_vocab" or "none", as llama.cpp's generated test models do): then the
// model only takes and produces token ids. encode() throws, every in-range
// id decodes to "", and there are no special tokens.
//
// Encoding follows llama.cpp's tokenizer on the reference test vectors:
//   1. special-token partition: the text is cut at every occurrence of a
//      special token's text, longest token first. User-defined tokens are
//      always cut out; control and unknown tokens only with parse_special;
//   2. each remaining text fragment is pre-tokenized (BPE) or space-escaped
//      (SPM: " " -> U+2581, plus a leading space after BOS/specials);
//   3. BPE merges pairs by merge rank (lowest first, then leftmost); SPM
//      merges pairs whose concatenation is a token by score (highest first,
//      then leftmost); SPM pieces that are not tokens fall back to bytes.
// All methods are const and thread-safe after construction.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace vtc::gguf {
class GgufFile;
}

namespace vtc {

class Tokenizer {
 public:
  // kNone: no vocabulary (tokenizer.ggml.model "no_vocab" or "none").
  // kWpm: WordPiece ("bert").
  enum class Kind { kBpe, kSpm, kWpm, kNone };
  // llama.cpp's token types (tokenizer.ggml.token_type values).
  enum class TokenType : int32_t {
    kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
  };

  // Reads tokenizer.ggml.* metadata. Throws vtc::Error on missing or
  // malformed keys and on an unknown model or pre-tokenizer name (the
  // message lists the supported ones). A special-token id of -1 or
  // 4294967295 (UINT32_MAX) means the model has no such token.
  static Tokenizer from_gguf(const gguf::GgufFile& file);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // add_special: prepend BOS / append EOS as the model's add_bos/add_eos
  // flags say; WordPiece always adds [CLS] (bos) and [SEP] (sep), as the
  // reference does. parse_special: turn the text of control tokens (e.g.
  // "<|im_start|>") into those tokens instead of tokenizing it as text.
  // Throws vtc::Error when the model has no vocabulary (!has_vocab()).
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // Concatenated token bytes. skip_special drops control and unknown
  // tokens. With SPM's add_space_prefix, the leading space of the first
  // (non-skipped) token is removed, so decode(encode(x)) == x. No
  // "clean up tokenization spaces" pass is applied. The result may hold
  // invalid UTF-8 when the ids split a character; see StreamingDecoder.
  // WordPiece: each word-initial piece starts with a space, and the
  // reference's clean-up of spaces before punctuation and contractions is
  // applied (StreamingDecoder does not apply it).
  // Throws vtc::Error on an id outside the vocabulary. Without a
  // vocabulary every in-range id decodes to "".
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // The vocabulary entry as stored (e.g. "Ġhello", "▁hello", "<0x0A>").
  std::string token_text(int32_t id) const;
  // The bytes the token stands for when decoded in the middle of a text.
  std::string token_piece(int32_t id) const;
  // Id of a vocabulary entry with exactly this text, or -1.
  int32_t find_token(std::string_view text) const;
  TokenType token_type(int32_t id) const;

  int32_t bos() const;  // -1 when the model has none
  int32_t eos() const;
  int32_t sep() const;  // WordPiece's [SEP]; -1 for other models
  bool add_bos() const;
  bool add_eos() const;
  // End of generation: eos, eot, eom and the usual end-of-turn tokens.
  bool is_eog(int32_t id) const;
  bool is_control(int32_t id) const;
  // Without a vocabulary: <general.architecture>.vocab_size, else the rows
  // of token_embd.weight, else 0.
  size_t vocab_size() const;
  // tokenizer.ggml.token_type_count (BERT's segment embeddings), 0 if absent.
  uint32_t token_type_count() const;
  Kind kind() const;
  // False for "no_vocab" / "none" files: ids only, no text.
  bool has_vocab() const;
  // tokenizer.ggml.model and tokenizer.ggml.pre as read ("" if absent).
  std::string model_name() const;
  std::string pre_name() const;

  static std::vector<std::string> supported_models();
  static std::vector<std::string> supported_pre_tokenizers();

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Turns generated ids into text incrementally. push() returns only complete
// UTF-8 characters; bytes of a character split across tokens are held until
// it is complete. Bytes that can never form a valid character are replaced
// by U+FFFD, so every returned string is valid UTF-8. For ids whose decode()
// is valid UTF-8, the concatenation of all push() results and flush() equals
// decode(ids, skip_special).
class StreamingDecoder {
 public:
  // continuation: the tokens continue text already written (a generation
  // after its prompt), so the first piece keeps its leading space, as
  // llama.cpp's token_to_piece gives it to llama-server; otherwise the
  // tokens are a whole sequence and an SPM space prefix is dropped, as
  // decode() does.
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool skip_special = false, bool continuation = false);
  std::string push(int32_t id);
  // Returns what is held (an incomplete character becomes U+FFFD) and resets
  // the decoder to the start of a new sequence.
  std::string flush();
  // Bytes held back, waiting for the rest of a character.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  bool continuation_;
  bool at_start_ = true;
  std::string pending_;
};

}  // namespace vtc
