#include "frontends/gguf/tokenizer/unicode_util.h"

#include <unicode/uchar.h>

#include <array>

namespace vtc::tok::detail {

uint8_t char_flags(uint32_t cp) {
  const auto c = static_cast<UChar32>(cp);
  uint8_t flags = 0;
  switch (u_charType(c)) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      flags |= kLetter;
      break;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      flags |= kNumber;
      break;
    case U_NON_SPACING_MARK:
    case U_ENCLOSING_MARK:
    case U_COMBINING_SPACING_MARK:
      flags |= kMark;
      break;
    case U_CONNECTOR_PUNCTUATION:
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
    case U_OTHER_PUNCTUATION:
      flags |= kPunct;
      break;
    case U_MATH_SYMBOL:
    case U_CURRENCY_SYMBOL:
    case U_MODIFIER_SYMBOL:
    case U_OTHER_SYMBOL:
      flags |= kSymbol;
      break;
    default:
      break;
  }
  if (u_isUWhiteSpace(c)) flags |= kWhitespace;
  return flags;
}

int utf8_sequence_length(std::string_view s, size_t pos) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) return 1;
  int need = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (int i = 1; i < need; ++i) {
    if (pos + i >= s.size()) return -1;
    const auto b = static_cast<uint8_t>(s[pos + i]);
    const uint8_t l = i == 1 ? lo : 0x80;
    const uint8_t h = i == 1 ? hi : 0xBF;
    if (b < l || b > h) return 0;
  }
  return need;
}

static uint32_t decode_at(std::string_view s, size_t pos, int len) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (len == 1) return b0;
  uint32_t cp = b0 & (0xFF >> (len + 1));
  for (int i = 1; i < len; ++i) cp = (cp << 6) | (static_cast<uint8_t>(s[pos + i]) & 0x3F);
  return cp;
}

std::vector<Char> decode_utf8(std::string_view text) {
  std::vector<Char> out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    Char c;
    c.offset = static_cast<uint32_t>(pos);
    const int len = utf8_sequence_length(text, pos);
    if (len > 0) {
      c.cp = decode_at(text, pos, len);
      c.len = static_cast<uint32_t>(len);
    } else {
      c.cp = 0xFFFD;
      c.len = 1;
    }
    c.flags = c.cp < 0x80 ? 0 : char_flags(c.cp);
    if (c.cp < 0x80) {  // fast path, same answers as ICU
      const char ch = static_cast<char>(c.cp);
      if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) c.flags = kLetter;
      else if (ch >= '0' && ch <= '9') c.flags = kNumber;
      else if (ch == ' ' || (ch >= '\t' && ch <= '\r')) c.flags = kWhitespace;
      else c.flags = char_flags(c.cp);
    }
    pos += c.len;
    out.push_back(c);
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

namespace {
// GPT-2's table: printable Latin-1 bytes map to themselves; the other 68
// bytes map, in byte order, to U+0100, U+0101, ...
struct ByteTables {
  std::array<std::string, 256> to_text;
  std::array<uint32_t, 256> to_cp{};
  ByteTables() {
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_cp[b] = printable ? static_cast<uint32_t>(b) : next++;
      append_utf8(to_text[b], to_cp[b]);
    }
  }
};
const ByteTables& tables() {
  static const ByteTables t;
  return t;
}
}  // namespace

const std::string& byte_to_unicode(uint8_t byte) { return tables().to_text[byte]; }

int unicode_to_byte(uint32_t cp) {
  if (cp < 0x100) {
    const bool printable = (cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE);
    return printable ? static_cast<int>(cp) : -1;
  }
  if (cp < 0x100 + 68) {
    const auto& t = tables();
    for (int b = 0; b < 256; ++b)
      if (t.to_cp[b] == cp) return b;
  }
  return -1;
}

}  // namespace vtc::tok::detail
