// A model loaded for CPU execution: the GGUF file (mmapped), its IR module
// from the architecture builder, a state store and the interpreter. It
// exposes the step kinds in the terms callers think in: feed a prompt to a
// sequence slot, decode one token per sequence, or run one mixed batch
// (prefill chunks and decode rows of several sequences in one @prefill call,
// for a continuous-batching scheduler). KV pages are taken from the state
// store's pool as positions are written; reset() gives them back.
//
// Long prompts are cut into steps of at most max_step_tokens tokens: the
// compiled step functions have a bound on T.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "frontends/gguf/gguf.h"
#include "ir/module.h"
#include "passes/pass_manager.h"
#include "runtime/cpu/interpreter.h"

namespace vtc::cpu {

struct SessionOptions {
  int threads = 0;        // 0: all hardware threads
  int64_t n_ctx = 0;      // 0: the model's context length, capped at 4096
  int32_t n_slots = 1;    // concurrent sequences
  int64_t n_pages = 0;    // KV pages in the pool; 0: enough for every slot's full context
  int32_t max_step_tokens = 512;  // tokens per step call (long prefills are chunked)
  // GGUF models are compiled in memory with the standard pipeline
  // (runtime/compile/compile.h); .vtc artifacts come compiled.
  bool optimize = true;            // false: no fusion passes
  bool fused_kernels = true;       // false: fused ops run their bodies op by op (Interpreter::set_fused_kernels)
  std::string weight_layout_types = "reference";  // CompileOptions::weight_layout_types
  std::optional<passes::PassManagerOptions> passes = std::nullopt;  // dumps, disabled passes (default: none)
};

// One sequence's part of a batched step: `tokens` at positions n_past, ...
// A decode row is a 1-token chunk.
struct SeqChunk {
  int32_t slot = 0;
  std::span<const int32_t> tokens;
  int32_t n_past = 0;
  bool logits = true;  // return the logits row of the chunk's last token
};

class Session {
 public:
  Session(const std::string& path, const SessionOptions& options);
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
  // One @prefill call over several sequences (distinct slots); at most
  // max_step_tokens tokens in all. Returns one logits row per chunk that
  // asks for it, in chunk order ([R x n_vocab]). Throws vtc::Error when the
  // KV pool has no page left for a chunk (nothing is run then).
  HostTensor step(std::span<const SeqChunk> chunks);
  int32_t max_step_tokens() const;
  // Forgets a sequence: gives its KV pages back and zeroes its states.
  void reset(int32_t slot);

  Interpreter& interpreter();
  StateStore& states();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vtc::cpu
