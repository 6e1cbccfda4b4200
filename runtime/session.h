// A model loaded for execution on one backend, in the terms callers think
// in: feed a prompt to a sequence slot, decode one token per sequence, run
// one mixed batch (prefill chunks and decode rows of several sequences in
// one @prefill call, for a continuous-batching scheduler), or decode with
// the next ids sampled on the backend.
//
// There is one Session for every target. It owns what a backend must not
// decide: the step contract (the arguments of @prefill and @decode, written
// only here; frontends/gguf/arch/arch.h), chunking of long prompts into
// steps of at most max_step_tokens tokens (the compiled step functions have
// a bound on T), slot and KV page reservation in the state store (pages
// are taken as positions are written; reset() gives them back), and the
// checks on ids and positions. The backend (runtime/backend.h) executes.
//
// Loading: a GGUF is compiled in memory with the standard pipeline of the
// target (runtime/compile/compile.h); a .vtc artifact comes compiled, and
// its target must be the session's.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "frontends/gguf/gguf.h"
#include "ir/module.h"
#include "passes/pass_manager.h"
#include "runtime/backend.h"
#include "support/target.h"

namespace vtc {

struct SessionOptions {
  // A Target; a name (std::string, const char*) converts through
  // parse_target, for callers that still hold a CLI string.
  Target target = Target::Cpu;
  int threads = 0;        // cpu: 0 is all hardware threads
  int64_t n_ctx = 0;      // 0: the model's context length, capped at 4096
  int32_t n_slots = 1;    // concurrent sequences
  int64_t n_pages = 0;    // KV pages in the pool; 0: enough for every slot's full context
  int32_t max_step_tokens = 512;  // tokens per step call (long prefills are chunked)
  bool optimize = true;            // false: no fusion passes
  bool fused_kernels = true;       // cpu: false runs fused ops' bodies op by op (Interpreter::set_fused_kernels)
  std::string weight_layout_types = "reference";  // CompileOptions::weight_layout_types
  std::optional<passes::PassManagerOptions> passes = std::nullopt;  // dumps, disabled passes (default: none)
  bool cuda_graphs = true;         // cuda: capture @decode in CUDA graphs
  bool embeddings = false;         // also build @embed, for embed() (a GGUF only)
  // The KV cache's element types (a GGUF only: an artifact keeps those it
  // was compiled with); f16 as llama.cpp's default.
  GgmlType cache_type_k = GgmlType::F16, cache_type_v = GgmlType::F16;
};

// One sequence's part of a batched step: `tokens` at positions n_past, ...
// A decode row is a 1-token chunk; a speculative verify chunk is the
// accepted tokens not yet run and the draft after them, with the logits of
// the last accepted token's row and every draft row
// (serve/engine/speculative/verify.h).
struct SeqChunk {
  int32_t slot = 0;
  std::span<const int32_t> tokens;
  int32_t n_past = 0;
  // How many of the chunk's last rows return logits: 1 (a prompt's end, a
  // decode row), 0 (a prompt chunk that ends nowhere), up to tokens.size().
  // More than 1 makes the step a verify step: every row of it is computed
  // with the bits its one-token step would have (StepRequest::rows_as_decode).
  int32_t logit_rows = 1;
  // The same for a chunk that returns fewer rows: a speculating sequence's
  // accepted tokens run again after a recurrent rollback, whose states must
  // be the ones decoding them one by one gives.
  bool rows_as_decode = false;
};

// One declared state of one sequence, as `vtc run --fingerprint` prints it
// and `vtc diff` compares it:
//   plain / ring  the slot's row, shaped as the declaration without its
//                 leading S dim ([1] for a declaration of shape [S]);
//   paged KV      [halves, N, rest...]: K then V rows of every position the
//                 slot's page table maps (N = pages x page size), in
//                 position order. Rows past the last written position are
//                 zero (pages are zeroed when taken), so backends agree.
struct StateSnapshot {
  std::string name;  // "@kv.0"
  HostTensor value;
};

// What the KV cache costs (Session::kv_memory): its element types (those of
// the first attention op's states; f16 for a model without attention), the
// bytes one position of context takes in every paged state (K and V of
// every layer, and side caches), and the bytes the page pool reserves.
struct KvMemory {
  GgmlType k_type = GgmlType::F16, v_type = GgmlType::F16;
  uint64_t bytes_per_token = 0;
  uint64_t reserved_bytes = 0;
  int64_t pages = 0, page_size = 0;
};
// The cache types of a module's first attention op (f16, f16 without one).
std::pair<GgmlType, GgmlType> kv_cache_types_of(const ir::Module& module);
// "KV cache: K q8_0, V f16; 73728 bytes per token; 1.12 GiB reserved (2048
// pages of 16 positions)", as `vtc run` and `vtc serve` print it at start.
std::string describe_kv_memory(const KvMemory& m);

class Session {
 public:
  // Throws vtc::Error for a file that does not load, a target that is not
  // available here (saying what is missing) or bounds the model cannot meet.
  Session(const std::string& path, const SessionOptions& options);
  ~Session();

  const gguf::GgufFile& file() const;
  const ir::Module& module() const;  // lowered for the target
  Target target() const;
  int64_t n_ctx() const;
  KvMemory kv_memory() const;
  int64_t n_vocab() const;
  int32_t max_step_tokens() const;
  // false for an encoder's module (@embed only: bert).
  bool generates_text() const;
  // Throws vtc::Error for an encoder, saying that `command` generates text
  // and the model is served with `vtc serve --embeddings`.
  void require_text_generation(std::string_view command) const;
  // true when a step's attention is not causal (an encoder): embed() then
  // takes each sequence whole, from position 0, in one call.
  bool reads_whole_sequences() const;

  // Runs `tokens` of sequence `slot` at positions n_past, n_past+1, ...
  // Returns logits [R x n_vocab] for the last token, or for every token
  // when `all_logits`.
  HostTensor prefill(int32_t slot, std::span<const int32_t> tokens, int32_t n_past, bool all_logits = false);
  // One token per sequence: tokens[i] of slots[i] at positions[i]. The
  // tokens go into state @last_ids (as sampled ids do); returns [S x n_vocab].
  HostTensor decode(std::span<const int32_t> slots, std::span<const int32_t> tokens, std::span<const int32_t> positions);
  // One @prefill call over several sequences (distinct slots); at most
  // max_step_tokens tokens in all. Returns the logits rows the chunks ask
  // for (SeqChunk::logit_rows), in chunk and row order ([R x n_vocab]). Throws vtc::Error when the
  // KV pool has no page left for a chunk (nothing is run then).
  HostTensor step(std::span<const SeqChunk> chunks);
  // One @embed call over several sequences, checked as step() (the chunks'
  // `logits` flags are ignored): every token's hidden state, [T x n_embd]
  // in chunk order (SessionOptions::embeddings; frontends/gguf/arch/arch.h).
  HostTensor embed(std::span<const SeqChunk> chunks);

  // Seeds @last_ids of `slot` with `token` (the first generated token,
  // before the sampled decodes of a sequence).
  void set_last_id(int32_t slot, int32_t token);
  // One @decode step of `slots` at `positions` that reads its ids from
  // @last_ids and samples the next ones into it, on the backend (`sample`
  // in the IR), with `sampling` for every row (one entry) or per row.
  // Only the ids leave the backend. Returns the ids sampled by the previous
  // call (the copy-out overlaps the next step); finish_sampled() returns
  // the last call's.
  std::vector<int32_t> decode_sampled(std::span<const int32_t> slots, std::span<const int32_t> positions,
                                      std::span<const DeviceSampling> sampling);
  std::vector<int32_t> finish_sampled();

  // N-gram speculation kept on the backend (Backend::drafts_on_device;
  // docs/speculative.md). start_device_drafts gives `slot` its history
  // (the prompt and the first sampled token, not run yet) and the `sample`
  // op's settings its rows are accepted by (greedy, or the draws decode_
  // sampled would make with them). verify_on_device queues one verify step of the sequences
  // `rows`, each over 1 + `drafts` rows (drafts <= 15) whose ids and
  // positions the backend holds, with pages reserved for its first
  // `n_positions` positions (the most the steps queued so far can reach),
  // and returns the previous call's outcomes (one per sequence, in order;
  // none on the first call); finish_device_verify() the last call's. The
  // caller gives back pages past the final length (truncate).
  struct DeviceVerifyRows {
    int32_t slot = 0, drafts = 0;
    int64_t n_positions = 0;
  };
  void start_device_drafts(int32_t slot, std::span<const int32_t> tokens,
                           const DeviceSampling& sampling = DeviceSampling::greedy());
  std::vector<DeviceVerifyOutcome> verify_on_device(std::span<const DeviceVerifyRows> rows);
  std::vector<DeviceVerifyOutcome> finish_device_verify();

  // Forgets a sequence: gives its KV pages back and empties its states.
  void reset(int32_t slot);
  // Forgets the positions of `slot` from n_positions on (rejected draft
  // rows): gives back the pages wholly past them. Rows left in the last
  // kept page are overwritten before any step reads them (attention is
  // causal). Recurrent states are the caller's (StateStore checkpoints).
  void truncate(int32_t slot, int64_t n_positions);
  // Every declared state of `slot`, in declaration order (read from the
  // backend's storage).
  std::vector<StateSnapshot> snapshot(int32_t slot);

  Backend& backend();
  StateStore& states();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vtc
