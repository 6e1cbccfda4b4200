// A tokenizer built from a GGUF written in memory, kept together with the
// bytes and the parsed file it reads (tests and the fuzz harness).
#pragma once

#include <cstdint>
#include <vector>

#include "frontends/gguf/gguf.h"
#include "frontends/gguf/tokenizer/tokenizer.h"

namespace vtc::test {

struct HeldTokenizer {
  std::vector<uint8_t> bytes;
  gguf::GgufFile file;
  Tokenizer tok;
  explicit HeldTokenizer(const gguf::GgufWriter& w)
      : bytes(w.to_bytes()), file(gguf::GgufFile::parse(bytes)), tok(Tokenizer::from_gguf(file)) {}
};

}  // namespace vtc::test
