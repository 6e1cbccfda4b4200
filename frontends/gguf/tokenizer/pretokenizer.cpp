#include "frontends/gguf/tokenizer/pretokenizer.h"

#include <algorithm>
#include <iterator>

#include "frontends/gguf/tokenizer/unicode_util.h"

namespace vtc::tok::detail {
namespace {

using Piece = std::pair<size_t, size_t>;  // [begin, end) in character indices

// The GPT-2 family of single-regex splits. One config covers
//   gpt-2 : 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//           | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   qwen2 : llama3 with \p{N} instead of \p{N}{1,3}
//   qwen35: qwen2 with [\p{L}\p{M}] for letters and [^\s\p{L}\p{M}\p{N}] for the rest
struct AltConfig {
  bool ci_contractions;   // (?i:...) around the contractions
  bool prefix_any;        // [^\r\n\p{L}\p{N}]? before letters (else " ?")
  bool marks_in_letters;  // letters are [\p{L}\p{M}]
  int number_max;         // \p{N}{1,max}; 0 = unbounded
  bool number_space;      // " ?" before numbers
  bool punct_newlines;    // [\r\n]* after a punctuation run
  bool newline_rule;      // \s*[\r\n]+
};

constexpr AltConfig kGpt2{false, false, false, 0, true, false, false};
constexpr AltConfig kLlama3{true, true, false, 3, false, true, true};
constexpr AltConfig kQwen2{true, true, false, 1, false, true, true};
constexpr AltConfig kQwen35{true, true, true, 1, false, true, true};

using ClassFn = bool (*)(const Char&);

struct Pass {
  enum class Kind { kAlternation, kRun, kTrailingWhitespace };
  Kind kind = Kind::kRun;
  const AltConfig* alt = nullptr;
  ClassFn cls = nullptr;   // kRun: \s?CLASS{min,max}
  bool ws_prefix = false;  // the optional leading \s
  int min = 1;
  int max = 0;             // 0 = unbounded
};

Pass alternation(const AltConfig& c) {
  Pass p;
  p.kind = Pass::Kind::kAlternation;
  p.alt = &c;
  return p;
}
Pass run(ClassFn cls, int min = 1, int max = 0, bool ws_prefix = false) {
  Pass p;
  p.cls = cls;
  p.min = min;
  p.max = max;
  p.ws_prefix = ws_prefix;
  return p;
}
Pass trailing_whitespace() {
  Pass p;
  p.kind = Pass::Kind::kTrailingWhitespace;
  return p;
}

struct Range {
  uint32_t lo, hi;
};
template <size_t N>
bool in_ranges(uint32_t cp, const Range (&ranges)[N]) {
  for (const Range& r : ranges)
    if (cp >= r.lo && cp <= r.hi) return true;
  return false;
}

// deepseek-llm's explicit letter class (cased letters, as listed in the
// reference's pattern).
constexpr Range kDeepseekLetters[] = {
    {0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA},
    {0x1BC, 0x1BF}, {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377},
    {0x37B, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C}, {0x38E, 0x3A1},
    {0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F}, {0x531, 0x556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5},
    {0x13F8, 0x13FD}, {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A},
    {0x1E00, 0x1F15}, {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE},
    {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4},
    {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D},
    {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139},
    {0x213C, 0x213F}, {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B},
    {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B},
    {0xA722, 0xA76F}, {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10C80, 0x10CB2},
    {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943}};
// [!-/:-~！-／：-～‘-‟　-。]
constexpr Range kDeepseekPunct[] = {{0x21, 0x2F}, {0x3A, 0x7E}, {0xFF01, 0xFF0F},
                                    {0xFF1A, 0xFF5E}, {0x2018, 0x201F}, {0x3000, 0x3002}};
// [一-龥ࠀ-一가-퟿]
constexpr Range kDeepseekCjk[] = {{0x4E00, 0x9FA5}, {0x0800, 0x4E00}, {0xAC00, 0xD7FF}};

bool is_crlf(const Char& c) { return c.cp == '\r' || c.cp == '\n'; }
bool is_letter(const Char& c) { return c.flags & kLetter; }
bool is_number(const Char& c) { return c.flags & kNumber; }
bool is_punct(const Char& c) { return c.flags & kPunct; }
bool is_ascii_digit(const Char& c) { return c.cp >= '0' && c.cp <= '9'; }
bool is_ds_letter(const Char& c) { return in_ranges(c.cp, kDeepseekLetters); }
bool is_ds_punct(const Char& c) { return in_ranges(c.cp, kDeepseekPunct); }
bool is_ds_cjk(const Char& c) { return in_ranges(c.cp, kDeepseekCjk); }
// [\p{P}\$\+<=>\^~\|`]
bool is_falcon_punct(const Char& c) {
  switch (c.cp) {
    case '$': case '+': case '<': case '=': case '>': case '^': case '~': case '|': case '`':
      return true;
    default:
      return is_punct(c);
  }
}
// [\p{P}\$\+<=>\^~\|]
bool is_default_punct(const Char& c) { return c.cp != '`' && is_falcon_punct(c); }

struct Scanner {
  const std::vector<Char>& ch;
  size_t lo, hi;
  std::vector<Piece>& out;
  size_t prev;  // end of the last emitted piece

  bool has(size_t i, uint8_t mask) const { return i < hi && (ch[i].flags & mask); }
  bool ws(size_t i) const { return has(i, kWhitespace); }
  uint32_t cp(size_t i) const { return i < hi ? ch[i].cp : 0xFFFFFFFFu; }
  // Emits [prev, end) and returns end.
  size_t emit(size_t end) {
    if (end > prev) out.emplace_back(prev, end);
    prev = end;
    return end;
  }
  void emit_match(size_t begin, size_t end) {
    emit(begin);  // the gap before the match, if any
    emit(end);
  }
};

void scan_alternation(Scanner& s, const AltConfig& cfg) {
  const uint8_t letter = cfg.marks_in_letters ? (kLetter | kMark) : kLetter;
  const uint8_t not_other = kWhitespace | kNumber | letter;
  auto L = [&](size_t i) { return s.has(i, letter); };
  auto N = [&](size_t i) { return s.has(i, kNumber); };
  auto O = [&](size_t i) { return i < s.hi && !(s.ch[i].flags & not_other); };
  auto lower = [&](size_t i) {
    uint32_t c = s.cp(i);
    if (cfg.ci_contractions && c >= 'A' && c <= 'Z') c += 'a' - 'A';
    return c;
  };
  size_t p = s.lo;
  while (p < s.hi) {
    const uint32_t c = s.cp(p);
    // contractions
    if (c == '\'' && p + 1 < s.hi) {
      const uint32_t n1 = lower(p + 1);
      if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') {
        p = s.emit(p + 2);
        continue;
      }
      if (p + 2 < s.hi) {
        const uint32_t n2 = lower(p + 2);
        if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) {
          p = s.emit(p + 3);
          continue;
        }
      }
    }
    // letters, with an optional one-character prefix
    const bool prefix_ok =
        cfg.prefix_any ? (p < s.hi && c != '\r' && c != '\n' && !(s.ch[p].flags & (kLetter | kNumber)))
                       : c == ' ';
    if ((prefix_ok && L(p + 1)) || L(p)) {
      size_t e = p + 1;
      while (L(e)) ++e;
      p = s.emit(e);
      continue;
    }
    // numbers
    if ((cfg.number_space && c == ' ' && N(p + 1)) || N(p)) {
      size_t b = N(p) ? p : p + 1;
      size_t e = b;
      while (N(e) && (cfg.number_max == 0 || e - b < static_cast<size_t>(cfg.number_max))) ++e;
      p = s.emit(e);
      continue;
    }
    // everything else, with an optional leading space
    if ((c == ' ' && O(p + 1)) || O(p)) {
      size_t e = p + 1;
      while (O(e)) ++e;
      if (cfg.punct_newlines)
        while (e < s.hi && (s.cp(e) == '\r' || s.cp(e) == '\n')) ++e;
      p = s.emit(e);
      continue;
    }
    // whitespace
    size_t r = 0;
    while (s.ws(p + r)) ++r;
    if (r == 0) {  // unreachable: every character is in some class
      p = s.emit(p + 1);
      continue;
    }
    if (cfg.newline_rule) {  // \s*[\r\n]+ ends after the run's last \r or \n
      size_t last = 0;
      for (size_t i = p; i < p + r; ++i)
        if (s.cp(i) == '\r' || s.cp(i) == '\n') last = i + 1;
      if (last) {
        p = s.emit(last);
        continue;
      }
    }
    if (p + r < s.hi && r > 1) {  // \s+(?!\S): leave the last space for the next word
      p = s.emit(p + r - 1);
      continue;
    }
    p = s.emit(p + r);  // \s+
  }
}

void scan_run(Scanner& s, const Pass& pass) {
  auto run_len = [&](size_t b) {
    size_t e = b;
    while (e < s.hi && pass.cls(s.ch[e]) && (pass.max == 0 || e - b < static_cast<size_t>(pass.max))) ++e;
    return e - b;
  };
  size_t p = s.lo;
  while (p < s.hi) {
    if (pass.ws_prefix && s.ws(p)) {
      const size_t n = run_len(p + 1);
      if (n >= static_cast<size_t>(pass.min)) {
        s.emit_match(p, p + 1 + n);
        p += 1 + n;
        continue;
      }
    }
    const size_t n = run_len(p);
    if (n > 0 && n >= static_cast<size_t>(pass.min)) {
      s.emit_match(p, p + n);
      p += n;
      continue;
    }
    ++p;
  }
  s.emit(s.hi);  // trailing gap
}

void scan_trailing_whitespace(Scanner& s) {
  size_t b = s.hi;
  while (b > s.lo && (s.ch[b - 1].flags & kWhitespace)) --b;
  s.emit(b);
  s.emit(s.hi);
}

}  // namespace

struct PreTokenizerSpec {
  std::vector<std::string_view> names;
  std::vector<Pass> passes;
  bool ignore_merges = false;
  bool add_bos = false;
};

namespace {
const std::vector<PreTokenizerSpec>& specs() {
  static const std::vector<PreTokenizerSpec> all = {
      {{"llama3", "llama-v3", "llama-bpe", "falcon3"}, {alternation(kLlama3)}, true, true},
      {{"dbrx", "smaug-bpe"}, {alternation(kLlama3)}, false, false},
      {{"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2"}, {alternation(kQwen2)}, false, false},
      {{"qwen35"}, {alternation(kQwen35)}, false, false},
      {{"gpt-2", "phi-2", "mpt", "olmo"}, {alternation(kGpt2)}, false, false},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone"},
       {run(is_number, 1, 1), alternation(kGpt2)}, false, false},
      {{"falcon"}, {run(is_falcon_punct), alternation(kGpt2), run(is_ascii_digit, 3, 3)}, false, false},
      {{"default"},
       {run(is_default_punct), alternation(kGpt2), run(is_number), run(is_ascii_digit, 3, 3)}, false, false},
      {{"deepseek-llm"},
       {run(is_crlf, 1, 1), run(is_ds_letter, 1, 0, true), run(is_ds_punct, 1, 0, true), trailing_whitespace(),
        run(is_ds_cjk), run(is_number)},
       false, false},
      {{"deepseek-coder"},
       {run(is_crlf, 1, 1), run(is_letter, 1, 0, true), run(is_punct, 1, 0, true), run(is_ds_cjk),
        run(is_number, 1, 1)},
       false, false},
  };
  return all;
}
}  // namespace

std::unique_ptr<PreTokenizer> PreTokenizer::create(std::string_view name) {
  for (const auto& spec : specs())
    if (std::find(spec.names.begin(), spec.names.end(), name) != spec.names.end())
      return std::unique_ptr<PreTokenizer>(new PreTokenizer(&spec));
  return nullptr;
}

std::vector<std::string> PreTokenizer::supported_names() {
  std::vector<std::string> names;
  for (const auto& spec : specs())
    for (auto n : spec.names) names.emplace_back(n);
  return names;
}

PreTokenizer::~PreTokenizer() = default;
bool PreTokenizer::ignore_merges() const { return spec_->ignore_merges; }
bool PreTokenizer::default_add_bos() const { return spec_->add_bos; }

std::vector<std::pair<uint32_t, uint32_t>> PreTokenizer::split(std::string_view text) const {
  const std::vector<Char> chars = decode_utf8(text);
  std::vector<Piece> pieces;
  if (!chars.empty()) pieces.emplace_back(0, chars.size());
  std::vector<Piece> next;
  for (const Pass& pass : spec_->passes) {
    next.clear();
    for (const Piece& piece : pieces) {
      Scanner s{chars, piece.first, piece.second, next, piece.first};
      switch (pass.kind) {
        case Pass::Kind::kAlternation: scan_alternation(s, *pass.alt); break;
        case Pass::Kind::kRun: scan_run(s, pass); break;
        case Pass::Kind::kTrailingWhitespace: scan_trailing_whitespace(s); break;
      }
    }
    pieces.swap(next);
  }
  std::vector<std::pair<uint32_t, uint32_t>> bytes;
  bytes.reserve(pieces.size());
  for (const Piece& p : pieces) {
    const Char& last = chars[p.second - 1];
    bytes.emplace_back(chars[p.first].offset, last.offset + last.len);
  }
  return bytes;
}

}  // namespace vtc::tok::detail
