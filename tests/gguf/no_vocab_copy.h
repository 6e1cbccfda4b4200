// Test helper: rewrites a GGUF as a vocabulary-less file, the way llama.cpp's
// tests/test-llama-archs writes its models (docs/tokenizer.md).
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "frontends/gguf/gguf.h"

namespace vtc::test {

// Copies every key but tokenizer.* and every tensor of `src` into `dst`, and
// sets tokenizer.ggml.model = "no_vocab", <arch>.vocab_size = the rows of
// token_embd.weight, and bos/eos ids of 4294967295 (none). Returns n_vocab.
inline int64_t write_no_vocab_copy(const std::string& src, const std::string& dst) {
  const gguf::GgufFile in = gguf::GgufFile::open(src);
  const gguf::TensorInfo* embd = in.find_tensor("token_embd.weight");
  if (!embd || embd->dims.size() != 2) throw std::runtime_error(src + ": no 2-D token_embd.weight to size the vocabulary");
  const std::string arch = in.architecture();
  if (arch.empty()) throw std::runtime_error(src + ": no general.architecture");
  gguf::GgufWriter out;
  for (const auto& kv : in.metadata()) {
    if (kv.key.rfind("tokenizer.", 0) == 0) continue;
    // The writer lays tensors out by its own alignment, so it must hear of it.
    if (kv.key == "general.alignment") out.set_alignment(uint32_t(in.alignment()));
    else out.set(kv.key, kv.value);
  }
  const int64_t n_vocab = int64_t(embd->dims[1]);
  out.set(arch + ".vocab_size", uint32_t(n_vocab));
  out.set("tokenizer.ggml.model", "no_vocab");
  out.set("tokenizer.ggml.bos_token_id", uint32_t{UINT32_MAX});
  out.set("tokenizer.ggml.eos_token_id", uint32_t{UINT32_MAX});
  for (const auto& t : in.tensors()) {
    const uint8_t* data = t.data;
    out.add_tensor(t.name, t.type, t.dims, [data](uint8_t* to, uint64_t n) { std::memcpy(to, data, n); });
  }
  out.write(dst);
  return n_vocab;
}

}  // namespace vtc::test
