// Internal Unicode helpers for the tokenizer: UTF-8 decoding that never
// throws, general-category flags from ICU, and the GPT-2 byte-level mapping
// (each byte 0..255 <-> one printable code point).
//
// Decoding keeps byte offsets, so pre-tokenizers split the original bytes and
// never re-encode text: an invalid byte is one "character" whose code point is
// U+FFFD for classification, but its bytes pass through unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vtc::tok::detail {

enum CharFlag : uint8_t {
  kLetter = 1 << 0,       // \p{L}
  kNumber = 1 << 1,       // \p{N}
  kMark = 1 << 2,         // \p{M}
  kPunct = 1 << 3,        // \p{P}
  kSymbol = 1 << 4,       // \p{S}
  kWhitespace = 1 << 5,   // \s (Unicode White_Space)
};

struct Char {
  uint32_t cp = 0;      // code point (U+FFFD for an invalid byte)
  uint32_t offset = 0;  // byte offset in the source text
  uint32_t len = 0;     // bytes in the source text
  uint8_t flags = 0;    // CharFlag bits
};

// Flags of one code point (ICU general category + White_Space).
uint8_t char_flags(uint32_t cp);

// Decodes `text` into characters with flags. Invalid or truncated sequences
// become one U+FFFD character per offending byte.
std::vector<Char> decode_utf8(std::string_view text);

// Length of a complete, valid UTF-8 sequence starting at text[pos]; 0 if the
// bytes there are not a valid sequence, and -1 if they are a valid but
// truncated prefix (more bytes could complete it).
int utf8_sequence_length(std::string_view text, size_t pos);

void append_utf8(std::string& out, uint32_t cp);

// GPT-2 byte-level encoding: byte -> UTF-8 text of its stand-in code point.
const std::string& byte_to_unicode(uint8_t byte);
// Inverse: code point -> byte, or -1 when `cp` is not a stand-in.
int unicode_to_byte(uint32_t cp);

}  // namespace vtc::tok::detail
