#include "frontends/gguf/tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "frontends/gguf/gguf.h"
#include "frontends/gguf/tokenizer/pretokenizer.h"
#include "frontends/gguf/tokenizer/unicode_util.h"
#include "frontends/gguf/tokenizer/wpm.h"
#include "support/error.h"

namespace vtc {

namespace {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space
constexpr char kMergeSep = '\xFF';                    // never in valid UTF-8

// Texts that end a generation turn in common chat models.
// The reference's list (llama-vocab.cpp): any token with one of these texts
// ends generation and is a control token.
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~[",
};

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = {"gpt2", "llama", "bert", "no_vocab", "none"};
  return names;
}

// What a special-token key holds when the model has no such token: -1,
// often written as a u32, so 4294967295.
bool is_none_id(int64_t id) { return id == -1 || id == int64_t(UINT32_MAX); }

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

size_t utf8_lead_len(char c) {
  const auto b = static_cast<uint8_t>(c);
  if (b < 0xC0) return 1;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  return 4;
}

// A symbol of the merge loops: a byte range of the word, in a linked list.
struct Symbol {
  uint32_t start;
  uint32_t n;
  int32_t prev;
  int32_t next;
};

// Merges symbol `left` with the symbol after it (both BPE and SPM merge
// this way; they differ in which pair they merge first).
void merge_with_next(std::vector<Symbol>& syms, int32_t left) {
  Symbol& a = syms[size_t(left)];
  Symbol& b = syms[size_t(a.next)];
  a.n += b.n;
  b.n = 0;
  a.next = b.next;
  if (b.next >= 0) syms[size_t(b.next)].prev = left;
}

std::vector<Symbol> split_chars(std::string_view word) {
  std::vector<Symbol> syms;
  syms.reserve(word.size());
  uint32_t off = 0;
  while (off < word.size()) {
    const auto n = static_cast<uint32_t>(std::min(utf8_lead_len(word[off]), word.size() - off));
    const auto idx = static_cast<int32_t>(syms.size());
    syms.push_back({off, n, idx - 1, off + n == word.size() ? -1 : idx + 1});
    off += n;
  }
  return syms;
}

}  // namespace

struct Tokenizer::Impl {
  Kind kind = Kind::kBpe;
  std::string model;
  std::string pre;
  std::vector<std::string> text;
  std::vector<float> score;
  std::vector<TokenType> type;
  std::vector<std::string> piece;
  StringMap<int32_t> to_id;
  StringMap<int32_t> ranks;
  std::unique_ptr<tok::detail::PreTokenizer> pre_tok;
  std::vector<int32_t> specials;  // control / user-defined / unknown, longest first
  std::unordered_set<int32_t> eog;
  std::array<int32_t, 256> byte_token{};
  int32_t bos = -1, eos = -1, unk = -1, eot = -1, eom = -1, sep = -1;
  bool add_bos = false, add_eos = false, add_space_prefix = false, ignore_merges = false;
  // WPM only (see wpm.h).
  tok::detail::WpmNormalizer wpm_normalizer;
  size_t max_token_len = 0;
  uint32_t token_type_count = 0;

  int32_t lookup(std::string_view s) const {
    auto it = to_id.find(s);
    return it == to_id.end() ? -1 : it->second;
  }
  int rank(std::string_view a, std::string_view b, std::string& key) const {
    key.assign(a);
    key += kMergeSep;
    key += b;
    auto it = ranks.find(std::string_view(key));
    return it == ranks.end() ? -1 : it->second;
  }
  bool is_special_type(int32_t id) const {
    return type[id] == TokenType::kControl || type[id] == TokenType::kUnknown;
  }
  void check_id(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= text.size())
      throw Error(fmt::format("tokenizer: token id {} is outside the vocabulary (size {})", id, text.size()));
  }

  void bpe_word(std::string_view word, std::vector<int32_t>& out) const;
  void spm_fragment(std::string_view frag, bool space_prefix, std::vector<int32_t>& out) const;
  void wpm_fragment(std::string_view frag, std::vector<int32_t>& out) const {
    const auto find = [this](std::string_view s) { return lookup(s); };
    for (const std::string& word : tok::detail::wpm_words(frag, wpm_normalizer))
      tok::detail::wpm_word_pieces(word, max_token_len, unk, find, out);
  }
  // A special token that WPM's add_special needs (the reference asserts).
  int32_t required_special(int32_t id, std::string_view key) const {
    if (id < 0) throw Error(fmt::format("tokenizer: adding special tokens needs {}, which this model lacks", key));
    return id;
  }
  std::string make_piece(int32_t id) const;
};

// ---------------------------------------------------------------------------
// BPE

void Tokenizer::Impl::bpe_word(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges) {
    if (int32_t id = lookup(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<Symbol> syms = split_chars(word);
  struct Bigram {
    int rank;
    int32_t left, right;
    uint32_t left_n, right_n;
  };
  auto worse = [](const Bigram& a, const Bigram& b) {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(worse)> queue(worse);
  std::string key;
  auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const Symbol& a = syms[l];
    const Symbol& b = syms[r];
    const int rk = rank(word.substr(a.start, a.n), word.substr(b.start, b.n), key);
    if (rk >= 0) queue.push({rk, l, r, a.n, b.n});
  };
  for (size_t i = 1; i < syms.size(); ++i) try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Symbol& a = syms[bg.left];
    Symbol& b = syms[bg.right];
    if (a.n != bg.left_n || b.n != bg.right_n || b.n == 0) continue;  // stale
    merge_with_next(syms, bg.left);
    try_add(a.prev, bg.left);
    try_add(bg.left, a.next);
  }
  for (int32_t i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
    const std::string_view s = word.substr(syms[i].start, syms[i].n);
    if (int32_t id = lookup(s); id >= 0) {
      out.push_back(id);
      continue;
    }
    // Not a token: emit its characters one by one (each is one byte's stand-in).
    for (size_t off = 0; off < s.size();) {
      const size_t n = std::min(utf8_lead_len(s[off]), s.size() - off);
      const int32_t id = lookup(s.substr(off, n));
      if (id >= 0) out.push_back(id);
      else if (unk >= 0) out.push_back(unk);
      off += n;
    }
  }
}

// ---------------------------------------------------------------------------
// SPM

void Tokenizer::Impl::spm_fragment(std::string_view frag, bool space_prefix, std::vector<int32_t>& out) const {
  std::string text;
  text.reserve(frag.size() + 8);
  if (space_prefix) text += kSpace;
  for (char c : frag) {
    if (c == ' ') text += kSpace;
    else text += c;
  }
  const std::string_view word = text;
  std::vector<Symbol> syms = split_chars(word);
  struct Bigram {
    float score;
    int32_t left, right;
    uint32_t size;
  };
  auto worse = [](const Bigram& a, const Bigram& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(worse)> queue(worse);
  auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const uint32_t size = syms[l].n + syms[r].n;
    const int32_t id = lookup(word.substr(syms[l].start, size));
    if (id >= 0) queue.push({score[id], l, r, size});
  };
  for (size_t i = 1; i < syms.size(); ++i) try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Symbol& a = syms[bg.left];
    Symbol& b = syms[bg.right];
    if (a.n == 0 || b.n == 0 || a.n + b.n != bg.size) continue;  // stale
    merge_with_next(syms, bg.left);
    try_add(a.prev, bg.left);
    try_add(bg.left, a.next);
  }
  for (int32_t i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
    const std::string_view s = word.substr(syms[i].start, syms[i].n);
    if (int32_t id = lookup(s); id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : s) {  // byte fallback
      const int32_t id = byte_token[static_cast<uint8_t>(c)];
      if (id >= 0) out.push_back(id);
      else if (unk >= 0) out.push_back(unk);
    }
  }
}

// ---------------------------------------------------------------------------
// Decoding

std::string Tokenizer::Impl::make_piece(int32_t id) const {
  if (kind == Kind::kNone) return {};
  const std::string& t = text[id];
  switch (type[id]) {
    case TokenType::kControl:
    case TokenType::kUnknown:
    case TokenType::kUserDefined:
      return t;
    case TokenType::kByte:
      if (t.size() == 6 && t.starts_with("<0x") && t.back() == '>')
        return std::string(1, static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16)));
      return t;
    case TokenType::kNormal:
      break;
    default:  // unused / undefined decode to nothing
      return {};
  }
  std::string out;
  if (kind == Kind::kSpm || kind == Kind::kWpm) {  // U+2581 stands for a space
    for (size_t i = 0; i < t.size();) {
      if (std::string_view(t).substr(i, 3) == kSpace) {
        out += ' ';
        i += 3;
      } else {
        out += t[i++];
      }
    }
    return out;
  }
  for (const auto& c : tok::detail::decode_utf8(t)) {
    const int b = tok::detail::unicode_to_byte(c.cp);
    if (b >= 0) out += static_cast<char>(b);
    else out.append(t, c.offset, c.len);  // not a byte stand-in: keep as is
  }
  return out;
}

// ---------------------------------------------------------------------------
// Loading

namespace {

const gguf::ValueArray* find_array(const gguf::GgufFile& f, std::string_view key, bool required) {
  const gguf::Value* v = f.find(key);
  if (!v) {
    if (required) throw Error(fmt::format("tokenizer: missing metadata key {}", key));
    return nullptr;
  }
  const gguf::ValueArray* arr = v->as_array();
  if (!arr)
    throw Error(fmt::format("tokenizer: metadata key {} must be an array, got {}", key,
                            gguf::value_type_name(v->type())));
  return arr;
}

void expect_elem(const gguf::ValueArray& arr, std::string_view key, std::initializer_list<gguf::ValueType> ok) {
  if (std::find(ok.begin(), ok.end(), arr.elem_type) == ok.end())
    throw Error(fmt::format("tokenizer: metadata key {} has elements of type {}", key,
                            gguf::value_type_name(arr.elem_type)));
}

// The vocabulary size of a file without a vocabulary, as llama.cpp reads it:
// <arch>.vocab_size (it adds that many dummy tokens). Without the key, the
// rows of token_embd.weight, so the model's own ids still decode.
size_t vocab_size_without_vocab(const gguf::GgufFile& f) {
  const std::string arch = f.architecture();
  if (!arch.empty()) {
    const std::string key = arch + ".vocab_size";
    if (const gguf::Value* v = f.find(key)) {
      const auto n = v->as_int();
      if (!n || *n < 0 || *n > INT32_MAX)
        throw Error(fmt::format("tokenizer: {} = {} is not a vocabulary size", key, v->to_display()));
      return static_cast<size_t>(*n);
    }
  }
  if (const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight"); embd && embd->dims.size() >= 2)
    return std::min<uint64_t>(embd->dims[1], INT32_MAX);
  return 0;
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const gguf::GgufFile& f) {
  auto impl = std::make_unique<Impl>();
  Impl& t = *impl;

  const gguf::Value* model_v = f.find("tokenizer.ggml.model");
  if (!model_v) throw Error("tokenizer: missing metadata key tokenizer.ggml.model");
  if (!model_v->as_string())
    throw Error(fmt::format("tokenizer: tokenizer.ggml.model must be a string, got {}",
                            gguf::value_type_name(model_v->type())));
  t.model = *model_v->as_string();
  if (t.model == "gpt2") t.kind = Kind::kBpe;
  else if (t.model == "llama") t.kind = Kind::kSpm;
  else if (t.model == "bert") t.kind = Kind::kWpm;
  else if (t.model == "no_vocab" || t.model == "none") t.kind = Kind::kNone;
  else
    throw Error(fmt::format("tokenizer: unsupported tokenizer.ggml.model '{}' (supported: {})", t.model,
                            join(model_names())));
  // BERT's number of token-type (segment) embeddings; the reference reads it
  // for every vocabulary.
  if (const gguf::Value* v = f.find("tokenizer.ggml.token_type_count")) {
    const auto x = v->as_int();
    if (!x || *x < 0 || *x > INT32_MAX)
      throw Error(fmt::format("tokenizer: tokenizer.ggml.token_type_count = {} is not a count", v->to_display()));
    t.token_type_count = static_cast<uint32_t>(*x);
  }
  if (t.kind == Kind::kNone) {
    // As llama.cpp: no special tokens and no flags; the other tokenizer.*
    // keys are not read. Each id is a dummy token with no text, so decoding
    // stays total over the model's ids.
    const size_t n = vocab_size_without_vocab(f);
    t.text.assign(n, std::string());
    t.piece.assign(n, std::string());
    t.score.assign(n, 0.0f);
    t.type.assign(n, TokenType::kUndefined);
    t.byte_token.fill(-1);
    return Tokenizer(std::move(impl));
  }
  if (const gguf::Value* v = f.find("tokenizer.ggml.pre")) {
    if (!v->as_string()) throw Error("tokenizer: tokenizer.ggml.pre must be a string");
    t.pre = *v->as_string();
  }

  // Vocabulary.
  const gguf::ValueArray* tokens = find_array(f, "tokenizer.ggml.tokens", true);
  expect_elem(*tokens, "tokenizer.ggml.tokens", {gguf::ValueType::STRING});
  const size_t n = tokens->items.size();
  if (n == 0) throw Error("tokenizer: tokenizer.ggml.tokens is empty");
  if (n > static_cast<size_t>(INT32_MAX)) throw Error("tokenizer: vocabulary too large");
  t.text.resize(n);
  t.score.assign(n, 0.0f);
  t.type.assign(n, TokenType::kNormal);
  t.to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    t.text[i] = *tokens->items[i].as_string();
    if (!t.text[i].empty()) t.to_id[t.text[i]] = static_cast<int32_t>(i);
  }
  if (const auto* scores = find_array(f, "tokenizer.ggml.scores", false)) {
    expect_elem(*scores, "tokenizer.ggml.scores", {gguf::ValueType::F32, gguf::ValueType::I32});
    if (scores->items.size() < n)
      throw Error(fmt::format("tokenizer: tokenizer.ggml.scores has {} entries for {} tokens",
                              scores->items.size(), n));
    for (size_t i = 0; i < n; ++i) t.score[i] = static_cast<float>(*scores->items[i].as_float());
  }
  if (const auto* types = find_array(f, "tokenizer.ggml.token_type", false)) {
    expect_elem(*types, "tokenizer.ggml.token_type", {gguf::ValueType::I32});
    if (types->items.size() < n)
      throw Error(fmt::format("tokenizer: tokenizer.ggml.token_type has {} entries for {} tokens",
                              types->items.size(), n));
    for (size_t i = 0; i < n; ++i) {
      const int64_t v = *types->items[i].as_int();
      t.type[i] = (v >= 0 && v <= 6) ? static_cast<TokenType>(v) : TokenType::kUndefined;
    }
  }

  // Model-specific parts.
  if (t.kind == Kind::kBpe) {
    if (t.pre.empty())
      throw Error(fmt::format("tokenizer: BPE model without tokenizer.ggml.pre (supported: {})",
                              join(supported_pre_tokenizers())));
    t.pre_tok = tok::detail::PreTokenizer::create(t.pre);
    if (!t.pre_tok)
      throw Error(fmt::format("tokenizer: unsupported tokenizer.ggml.pre '{}' (supported: {})", t.pre,
                              join(supported_pre_tokenizers())));
    t.ignore_merges = t.pre_tok->ignore_merges();
    t.add_bos = t.pre_tok->default_add_bos();
    const gguf::ValueArray* merges = find_array(f, "tokenizer.ggml.merges", true);
    expect_elem(*merges, "tokenizer.ggml.merges", {gguf::ValueType::STRING});
    t.ranks.reserve(merges->items.size());
    for (size_t i = 0; i < merges->items.size(); ++i) {
      const std::string& m = *merges->items[i].as_string();
      const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
      if (sp == std::string::npos)
        throw Error(fmt::format("tokenizer: tokenizer.ggml.merges[{}] = '{}' is not two space-separated parts", i, m));
      std::string key = m.substr(0, sp);
      key += kMergeSep;
      key += m.substr(sp + 1);
      t.ranks.try_emplace(std::move(key), static_cast<int>(i));
    }
    for (int b = 0; b < 256; ++b) t.byte_token[b] = t.lookup(tok::detail::byte_to_unicode(static_cast<uint8_t>(b)));
  } else if (t.kind == Kind::kWpm) {
    // The reference's defaults: [CLS] 101 (as BOS), [UNK] 100, [SEP] 102.
    t.add_bos = true;
    t.bos = 101;
    t.unk = 100;
    t.sep = 102;
    for (const std::string& s : t.text) t.max_token_len = std::max(t.max_token_len, s.size());
    t.wpm_normalizer = tok::detail::read_wpm_normalizer(f);
  } else {
    t.add_bos = true;
    t.add_space_prefix = true;
    t.bos = 1;
    t.eos = 2;
    t.unk = 0;
    for (int b = 0; b < 256; ++b) {
      int32_t id = t.lookup(fmt::format("<0x{:02X}>", b));
      if (id < 0) id = t.lookup(std::string(1, static_cast<char>(b)));
      t.byte_token[b] = id;
    }
  }

  // Special ids and flags.
  auto read_id = [&](std::string_view key, int32_t& id) {
    if (id >= static_cast<int64_t>(n)) id = -1;  // a default that does not fit
    const gguf::Value* v = f.find(key);
    if (!v) return;
    const auto x = v->as_int();
    if (x && is_none_id(*x)) {
      id = -1;
      return;
    }
    if (!x || *x < 0 || *x >= static_cast<int64_t>(n))
      throw Error(fmt::format("tokenizer: {} = {} is not a token id (vocabulary size {})", key,
                              v->to_display(), n));
    id = static_cast<int32_t>(*x);
  };
  read_id("tokenizer.ggml.bos_token_id", t.bos);
  read_id("tokenizer.ggml.eos_token_id", t.eos);
  read_id("tokenizer.ggml.unknown_token_id", t.unk);
  read_id("tokenizer.ggml.eot_token_id", t.eot);
  read_id("tokenizer.ggml.eom_token_id", t.eom);
  if (t.kind == Kind::kWpm) read_id("tokenizer.ggml.seperator_token_id", t.sep);  // sic: the reference's key
  // Returns whether the file sets the flag (else it keeps its default).
  auto read_flag = [&](std::string_view key, bool& flag) {
    const gguf::Value* v = f.find(key);
    if (!v) return false;
    const auto b = v->as_bool();
    if (!b) throw Error(fmt::format("tokenizer: {} must be a bool, got {}", key, gguf::value_type_name(v->type())));
    flag = *b;
    return true;
  };
  const bool add_bos_from_file = read_flag("tokenizer.ggml.add_bos_token", t.add_bos);
  const bool add_eos_from_file = read_flag("tokenizer.ggml.add_eos_token", t.add_eos);
  if (t.kind != Kind::kBpe) read_flag("tokenizer.ggml.add_space_prefix", t.add_space_prefix);
  // A default flag (SPM and some pre-tokenizers add BOS) gives way to a
  // model that has no such token; only a flag the file sets is an error.
  if (!add_bos_from_file && t.bos < 0) t.add_bos = false;
  if (!add_eos_from_file && t.eos < 0) t.add_eos = false;
  if (t.add_bos && t.bos < 0)
    throw Error("tokenizer: the model asks for a BOS token (add_bos_token) but has no tokenizer.ggml.bos_token_id");
  if (t.add_eos && t.eos < 0)
    throw Error("tokenizer: the model asks for an EOS token (add_eos_token) but has no tokenizer.ggml.eos_token_id");

  // End-of-generation set; end-of-turn texts are control tokens.
  for (int32_t id : {t.eos, t.eot, t.eom})
    if (id >= 0) t.eog.insert(id);
  for (std::string_view s : kEogTexts) {
    const int32_t id = t.lookup(s);
    if (id < 0) continue;
    t.eog.insert(id);
    if (t.type[id] == TokenType::kNormal || t.type[id] == TokenType::kUndefined) t.type[id] = TokenType::kControl;
  }
  // The reference's two exceptions: harmony-style vocabularies (<|return|>
  // and <|call|>, or <|calls|> and <|flush|>) continue after <|end|>, and
  // gemma4's (<|tool_response>) after </s>; those tokens turn user-defined
  // and normal again.
  auto has = [&](std::string_view s) { return t.lookup(s) >= 0 && t.eog.count(t.lookup(s)); };
  auto keep_generating_on = [&](std::string_view s, TokenType type) {
    const int32_t id = t.lookup(s);
    if (id < 0 || !t.eog.erase(id)) return;
    t.type[id] = type;
  };
  if (has("<|end|>") && ((has("<|return|>") && has("<|call|>")) || (has("<|calls|>") && has("<|flush|>"))))
    keep_generating_on("<|end|>", TokenType::kUserDefined);
  if (has("<|tool_response>")) keep_generating_on("</s>", TokenType::kNormal);

  // Special-token partition order: longest text first, then lowest id.
  for (size_t i = 0; i < n; ++i) {
    const TokenType ty = t.type[i];
    if ((ty == TokenType::kControl || ty == TokenType::kUserDefined || ty == TokenType::kUnknown) &&
        !t.text[i].empty())
      t.specials.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(t.specials.begin(), t.specials.end(),
                   [&](int32_t a, int32_t b) { return t.text[a].size() > t.text[b].size(); });

  t.piece.resize(n);
  for (size_t i = 0; i < n; ++i) t.piece[i] = t.make_piece(static_cast<int32_t>(i));
  return Tokenizer(std::move(impl));
}

// ---------------------------------------------------------------------------
// Public API

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const Impl& t = *impl_;
  if (t.kind == Kind::kNone)
    throw Error(fmt::format("this model has no vocabulary (tokenizer.ggml.model = '{}'): a text prompt cannot be "
                            "tokenized; pass token ids (vtc run --tokens 1,2,3; a token-id array as the prompt of "
                            "vtc serve's /v1/completions)",
                            t.model));
  struct Frag {
    int32_t id;  // -1: raw text [b, e)
    size_t b, e;
  };
  std::vector<Frag> frags, next;
  if (!text.empty()) frags.push_back({-1, 0, text.size()});
  for (int32_t sid : t.specials) {
    if (!parse_special && t.is_special_type(sid)) continue;
    const std::string& st = t.text[sid];
    bool any = false;
    for (const Frag& fr : frags)
      if (fr.id < 0 && text.substr(0, fr.e).find(st, fr.b) != std::string_view::npos) any = true;
    if (!any) continue;
    next.clear();
    for (const Frag& fr : frags) {
      if (fr.id >= 0) {
        next.push_back(fr);
        continue;
      }
      const std::string_view hay = text.substr(0, fr.e);
      size_t pos = fr.b;
      for (size_t m; (m = hay.find(st, pos)) != std::string_view::npos; pos = m + st.size()) {
        if (m > pos) next.push_back({-1, pos, m});
        next.push_back({sid, m, m + st.size()});
      }
      if (pos < fr.e) next.push_back({-1, pos, fr.e});
    }
    frags.swap(next);
  }

  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  const bool wpm = t.kind == Kind::kWpm;  // the reference adds [CLS] ... [SEP] whatever the flags say
  if (add_special && wpm) out.push_back(t.required_special(t.bos, "tokenizer.ggml.bos_token_id ([CLS])"));
  else if (add_special && t.add_bos) out.push_back(t.bos);
  bool prev_special = true;  // SPM: a leading space at the start and after specials
  std::string word;
  for (const Frag& fr : frags) {
    if (fr.id >= 0) {
      out.push_back(fr.id);
      prev_special = true;
      continue;
    }
    const std::string_view frag = text.substr(fr.b, fr.e - fr.b);
    if (t.kind == Kind::kSpm) {
      t.spm_fragment(frag, t.add_space_prefix && prev_special, out);
    } else if (wpm) {
      t.wpm_fragment(frag, out);
    } else {
      for (const auto& [b, e] : t.pre_tok->split(frag)) {
        word.clear();
        for (size_t i = b; i < e; ++i) word += tok::detail::byte_to_unicode(static_cast<uint8_t>(frag[i]));
        t.bpe_word(word, out);
      }
    }
    prev_special = false;
  }
  if (add_special && wpm) out.push_back(t.required_special(t.sep, "tokenizer.ggml.seperator_token_id ([SEP])"));
  else if (add_special && t.add_eos) out.push_back(t.eos);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  const Impl& t = *impl_;
  std::string out;
  bool strip = t.add_space_prefix;
  for (int32_t id : ids) {
    t.check_id(id);
    if (skip_special && t.is_special_type(id)) continue;
    const std::string& p = t.piece[id];
    out.append(p, strip && !p.empty() && p[0] == ' ' ? 1 : 0);
    strip = false;
  }
  if (t.kind == Kind::kWpm) return tok::detail::wpm_clean_up_spaces(out);  // the reference's clean_spaces
  return out;
}

std::string Tokenizer::token_text(int32_t id) const {
  impl_->check_id(id);
  return impl_->text[id];
}
std::string Tokenizer::token_piece(int32_t id) const {
  impl_->check_id(id);
  return impl_->piece[id];
}
int32_t Tokenizer::find_token(std::string_view text) const { return impl_->lookup(text); }
Tokenizer::TokenType Tokenizer::token_type(int32_t id) const {
  impl_->check_id(id);
  return impl_->type[id];
}
int32_t Tokenizer::bos() const { return impl_->bos; }
int32_t Tokenizer::eos() const { return impl_->eos; }
int32_t Tokenizer::sep() const { return impl_->sep; }
uint32_t Tokenizer::token_type_count() const { return impl_->token_type_count; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }
bool Tokenizer::add_eos() const { return impl_->add_eos; }
bool Tokenizer::is_eog(int32_t id) const { return impl_->eog.count(id) > 0; }
bool Tokenizer::is_control(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->type.size() && impl_->type[id] == TokenType::kControl;
}
size_t Tokenizer::vocab_size() const { return impl_->text.size(); }
Tokenizer::Kind Tokenizer::kind() const { return impl_->kind; }
bool Tokenizer::has_vocab() const { return impl_->kind != Kind::kNone; }
std::string Tokenizer::model_name() const { return impl_->model; }
std::string Tokenizer::pre_name() const { return impl_->pre; }
std::vector<std::string> Tokenizer::supported_models() { return model_names(); }
std::vector<std::string> Tokenizer::supported_pre_tokenizers() {
  return tok::detail::PreTokenizer::supported_names();
}

// ---------------------------------------------------------------------------
// Streaming

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, bool skip_special, bool continuation)
    : tok_(&tokenizer), skip_special_(skip_special), continuation_(continuation) {}

namespace {
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
}

std::string StreamingDecoder::push(int32_t id) {
  const auto& t = tok_->impl();
  t.check_id(id);
  if (skip_special_ && t.is_special_type(id)) return {};
  const std::string& p = t.piece[id];
  pending_.append(p, at_start_ && !continuation_ && t.add_space_prefix && !p.empty() && p[0] == ' ' ? 1 : 0);
  at_start_ = false;
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const int n = tok::detail::utf8_sequence_length(pending_, i);
    if (n < 0) break;  // a character's first bytes: wait for the rest
    if (n == 0) {
      out += kReplacement;
      ++i;
    } else {
      out.append(pending_, i, static_cast<size_t>(n));
      i += static_cast<size_t>(n);
    }
  }
  pending_.erase(0, i);
  return out;
}

std::string StreamingDecoder::flush() {
  std::string out;
  if (!pending_.empty()) out = kReplacement;  // only ever an incomplete character
  pending_.clear();
  at_start_ = true;
  return out;
}

}  // namespace vtc
