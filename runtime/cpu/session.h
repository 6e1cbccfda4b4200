// A model loaded for CPU execution: the GGUF file (mmapped), its IR module
// from the architecture builder, a state store and the interpreter. It
// exposes the two step kinds in the terms callers think in: feed a prompt to
// a sequence slot, then decode one token per sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "frontends/gguf/gguf.h"
#include "ir/module.h"
#include "runtime/cpu/interpreter.h"

namespace vtc::cpu {

struct SessionOptions {
  int threads = 0;        // 0: all hardware threads
  int64_t n_ctx = 0;      // 0: the model's context length, capped at 4096
  int32_t n_slots = 1;    // concurrent sequences
};

class Session {
 public:
  Session(const std::string& gguf_path, const SessionOptions& options);
  ~Session();

  const gguf::GgufFile& file() const;
  const ir::Module& module() const;
  int64_t n_ctx() const;
  int64_t n_vocab() const;

  // Runs `tokens` of sequence `slot` at positions n_past, n_past+1, ...
  // Returns logits [R x n_vocab] for the last token, or for every token
  // when `all_logits`.
  HostTensor prefill(int32_t slot, std::span<const int32_t> tokens, int32_t n_past, bool all_logits = false);
  // One token per sequence: tokens[i] of slots[i] at positions[i]. The
  // tokens go into state @last_ids (as sampled ids do); returns [S x n_vocab].
  HostTensor decode(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                    std::span<const int32_t> positions);
  // Forgets a sequence: zeroes its states.
  void reset(int32_t slot);

  Interpreter& interpreter();
  StateStore& states();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vtc::cpu
