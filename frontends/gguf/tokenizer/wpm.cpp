#include "frontends/gguf/tokenizer/wpm.h"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/utf16.h>

#include <algorithm>

#include <fmt/format.h>

#include "frontends/gguf/gguf.h"
#include "frontends/gguf/tokenizer/unicode_util.h"
#include "support/error.h"

namespace vtc::tok::detail {

namespace {

constexpr std::string_view kWordPrefix = "\xE2\x96\x81";  // U+2581, the phantom space of word-initial pieces

// Cc, Cf, Co, Cs: characters BERT's basic tokenizer drops.
bool is_control(uint32_t cp) {
  switch (u_charType(static_cast<UChar32>(cp))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_PRIVATE_USE_CHAR:
    case U_SURROGATE:
      return true;
    default:
      return false;
  }
}

// The CJK blocks that BERT splits into one-character words. The reference
// (after Hugging Face's tokenizers) starts one block at U+2B920 where the
// Unicode block starts at U+2B820; kept so that ids match.
bool is_cjk_ideograph(uint32_t cp) {
  static constexpr std::pair<uint32_t, uint32_t> kBlocks[] = {
      {0x4E00, 0x9FFF},   {0x3400, 0x4DBF},   {0x20000, 0x2A6DF}, {0x2A700, 0x2B73F},
      {0x2B740, 0x2B81F}, {0x2B920, 0x2CEAF}, {0xF900, 0xFAFF},   {0x2F800, 0x2FA1F},
  };
  return std::any_of(std::begin(kBlocks), std::end(kBlocks),
                     [cp](const auto& b) { return cp >= b.first && cp <= b.second; });
}

// The reference strips accents with a one-to-one table: each code point maps
// to the FIRST code point of its full canonical decomposition (so U+00E9 é
// -> e, and a Hangul syllable -> its leading jamo only). ICU gives the full
// decomposition; we keep its first code point to give the same answers.
uint32_t nfd_first(uint32_t cp) {
  UErrorCode err = U_ZERO_ERROR;
  static const UNormalizer2* nfd = unorm2_getNFDInstance(&err);
  if (!nfd) return cp;
  UChar buf[32];
  err = U_ZERO_ERROR;
  const int32_t n = unorm2_getDecomposition(nfd, static_cast<UChar32>(cp), buf, 32, &err);
  if (n <= 0 || U_FAILURE(err)) return cp;  // no decomposition
  UChar32 first = 0;
  int32_t i = 0;
  U16_NEXT(buf, i, n, first);
  return static_cast<uint32_t>(first);
}

}  // namespace

WpmNormalizer read_wpm_normalizer(const gguf::GgufFile& file) {
  auto read = [&](std::string_view key, bool& flag) {
    const gguf::Value* v = file.find(key);
    if (!v) return;
    const auto b = v->as_bool();
    if (!b) throw Error(fmt::format("tokenizer: {} must be a bool, got {}", key, gguf::value_type_name(v->type())));
    flag = *b;
  };
  WpmNormalizer opts;
  read("tokenizer.ggml.normalizer.lowercase", opts.lowercase);
  opts.strip_accents = opts.lowercase;
  read("tokenizer.ggml.normalizer.strip_accents", opts.strip_accents);
  return opts;
}

std::vector<std::string> wpm_words(std::string_view text, const WpmNormalizer& opts) {
  std::vector<std::string> words(1);
  auto end_word = [&] {
    if (!words.back().empty()) words.emplace_back();
  };
  for (const Char& ch : decode_utf8(text)) {
    const uint32_t cp = opts.strip_accents ? nfd_first(ch.cp) : ch.cp;
    const uint8_t flags = char_flags(cp);
    if (flags & kWhitespace) {
      end_word();
      continue;
    }
    if (cp == 0 || cp == 0xFFFD || is_control(cp)) continue;
    if (opts.strip_accents && (flags & kMark)) continue;
    const uint32_t out_cp = opts.lowercase ? static_cast<uint32_t>(u_tolower(static_cast<UChar32>(cp))) : cp;
    if ((flags & kPunct) || (cp < 0x7F && (flags & kSymbol)) || is_cjk_ideograph(cp)) {
      end_word();
      append_utf8(words.back(), out_cp);
      words.emplace_back();
    } else {
      append_utf8(words.back(), out_cp);
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

void wpm_word_pieces(std::string_view word, size_t max_token_len, int32_t unk, const TokenLookup& lookup,
                     std::vector<int32_t>& out) {
  std::string prefixed(kWordPrefix);
  prefixed += word;
  const std::string_view w = prefixed;
  const size_t first = out.size();
  // Greedy longest match from the left, in bytes as the reference does.
  for (size_t pos = 0; pos < w.size();) {
    int32_t id = -1;
    size_t len = std::min(w.size() - pos, max_token_len);
    for (; len > 0; --len)
      if ((id = lookup(w.substr(pos, len))) >= 0) break;
    if (id < 0) {  // a position no piece matches: the whole word is unknown
      out.resize(first);
      break;
    }
    out.push_back(id);
    pos += len;
  }
  if (out.size() > first) return;
  if (unk < 0)
    throw Error(fmt::format("tokenizer: the word '{}' has no WordPiece tokenization and the model has no unknown "
                            "token (tokenizer.ggml.unknown_token_id)",
                            word));
  out.push_back(unk);
}

std::string wpm_clean_up_spaces(std::string_view text) {
  // 1. " ?", " !", " .", " ," lose the space.
  std::string a;
  a.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == ' ' && i + 1 < text.size() && std::string_view("?!.,").find(text[i + 1]) != std::string_view::npos)
      continue;
    a += text[i];
  }
  // 2. " ' " becomes "'". A space taken as the right side of one is gone, so
  //    it cannot be the left side of the next.
  std::string b;
  b.reserve(a.size());
  size_t taken = std::string::npos;  // index in `a` of the last space taken
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == '\'' && i >= 1 && i + 1 < a.size() && a[i - 1] == ' ' && i - 1 != taken && a[i + 1] == ' ') {
      b.back() = '\'';  // replaces the space before
      taken = ++i;
      continue;
    }
    b += a[i];
  }
  // 3. The space before "'s", "'m", "'re", "'ve" goes ("'t", "'d", "'ll" keep it).
  std::string c;
  c.reserve(b.size());
  for (size_t i = 0; i < b.size(); ++i) {
    if (b[i] == ' ' && i + 2 < b.size() && b[i + 1] == '\'') {
      const char x1 = b[i + 2];
      const bool two = i + 3 < b.size();
      if (x1 == 's' || x1 == 'm' || (two && (x1 == 'r' || x1 == 'v') && b[i + 3] == 'e')) continue;
    }
    c += b[i];
  }
  return c;
}

}  // namespace vtc::tok::detail
