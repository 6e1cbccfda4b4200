// The serving engine: continuous batching over one Session (runtime/session.h),
// on the CPU or CUDA backend.
//
// One scheduler thread owns the session. Each iteration:
//   1. drops cancelled requests (client gone): their slot's pages go back;
//   2. admits queued requests in arrival order while a slot is free and the
//      KV pool can hold the whole request (prompt + max_tokens) after
//      reusing its cached prefix and evicting unused cached pages; the
//      first request that does not fit stops admission (FIFO, no
//      starvation), so a running request never runs out of pages;
//   3. builds one step under the token bound: a decode row (1 token) for
//      every request that is generating, then prefill chunks of requests
//      still reading their prompt, oldest first, with the tokens left;
//   4. runs it through Session::step (one @prefill call) and, for every
//      row that ends a prompt or is a decode row, samples a token, appends
//      it to the request's event queue and finishes the request on an
//      end-of-generation token, max_tokens, a stop string or the context.
// With device sampling (EngineOptions::device_sampling; the default on the
// cuda target), the decode rows of requests whose sampling the IR's
// `sample` op covers (temperature, top-k, top-p, min-p, seed; no penalties,
// no logprobs) run instead as one @decode call (Session::decode_sampled):
// the ids are drawn on the backend and fed back through @last_ids there,
// and only the drawn ids come back to the host. A request's first token
// (from its prompt's logits) is sampled on the host and seeded into
// @last_ids.
// A request's tokens depend only on its own rows (the kernels compute each
// row independently of the batch), so greedy output is the same alone or
// batched. One exception, shared with llama.cpp: Q4_K weights in the x8
// layout sum full groups of 4 rows in the reference's gemm order
// (runtime/cpu/kernels/internal.h), so a row's last bits can depend on how
// many rows share its step; except in a step that holds a verify chunk,
// whose rows all take the one-row order (StepRequest::rows_as_decode), so
// speculation keeps decode's bits. When a prompt has been prefilled, its
// full pages enter the prefix cache.
//
// Prefix reuse on a model with recurrent state (serve/engine/prefix_cache.h):
// a prompt of n tokens is prefilled in chunks of which one ends exactly at
// P = floor((n - 1) / page) * page, when P lies beyond the reused prefix,
// and the slot's recurrent states are checkpointed after that step; the
// checkpoint enters the cache with the prompt's pages. A request that
// reuses a prefix restores its checkpoint into its (reset) slot at
// admission, before its first step.
//
// Speculative decoding (EngineOptions::spec; docs/speculative.md): a
// generating request that speculates (not opted out, no grammar) decodes
// through a SpecSequence (speculative/verify.h) instead of a decode row:
// its chunk is its pending tokens and a draft, from the n-gram drafter over
// its own tokens or from the draft model (one batched draft run for all
// such requests before the step), of the length DraftPolicy picks for the
// step's load; its k + 1 logits rows are sampled in order while they
// confirm the draft. Such requests sample on the host, except greedy
// n-gram ones on a backend that drafts on the device (a model without
// recurrent state, on CUDA): those keep their history, drafts and
// acceptance there and share one verify step of their own each iteration
// (run_device_verify), the host reading only their accepted tokens, one
// step late while nothing else runs (pipelined).
// A step that verifies holds at most Backend::verify_step_rows rows.
//
// Embeddings (EngineOptions::embeddings, GenerationParams::embeddings): a
// request that only reads its prompt. Its chunks run in their own @embed
// call each iteration (Session::embed), beside the generation step, so the
// inputs of one HTTP request, submitted together, share steps; every
// token's hidden state is kept (Request::hidden) and the request finishes
// with "stop" when its prompt is read. It neither reads nor fills the
// prefix cache: a cached prefix would have no hidden states.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "frontends/gguf/tokenizer/tokenizer.h"
#include "runtime/session.h"
#include "support/target.h"
#include "runtime/sampler.h"
#include "serve/engine/metrics.h"
#include "serve/engine/request.h"
#include "serve/engine/speculative/draft_policy.h"
#include "serve/engine/speculative/spec_options.h"

namespace vtc::grammar {
class TokenTable;
}

namespace vtc::serve {

struct EngineOptions {
  std::string model;
  Target target = Target::Cpu;  // the session's backend
  int threads = 0;
  int64_t n_ctx = 0;        // 0: the model's, at most 4096
  int32_t parallel = 4;     // slots
  int64_t kv_pages = 0;     // 0: parallel * ceil(n_ctx / page)
  int32_t max_step_tokens = 512;
  // How a GGUF is compiled and run (ignored for weights of a .vtc
  // artifact, which come compiled): SessionOptions.
  std::string weight_layout_types = "reference";
  bool weight_layout = true;   // false: no weight-layout pass (rows layout)
  bool fused_kernels = true;   // false: fused regions op by op
  // Decode rows sampled on the backend (see the header comment); unset: on
  // for the cuda target, off for the cpu (whose host sampler draws with
  // std::mt19937, as `vtc run` does).
  std::optional<bool> device_sampling;
  // Also build the @embed step, for embeddings requests (serve/api/embeddings/embeddings.h),
  // with their pooling ("" : the model's) and normalisation (-1 none, 0
  // max-abs int16, 1 taxicab, 2 euclidean, p > 2 p-norm).
  bool embeddings = false;
  std::string pooling;
  int embd_normalize = 2;
  // Bytes the prefix cache's checkpoints of recurrent states may hold
  // (prefix_cache.h); unset: kDefaultCheckpointBytes, raised to one
  // checkpoint per slot; 0: none (no prefix reuse for such a model).
  std::optional<uint64_t> checkpoint_bytes;
  static constexpr uint64_t kDefaultCheckpointBytes = uint64_t(256) << 20;
  // The KV cache's element types (SessionOptions; a GGUF only).
  GgmlType cache_type_k = GgmlType::F16, cache_type_v = GgmlType::F16;
  // Speculative decoding (off by default); Draft loads spec.draft_model.
  SpecOptions spec;
};

class ModelDrafter;

class Engine {
 public:
  // Loads the model (slow) and starts the scheduler thread.
  Engine(const EngineOptions& options, Metrics& metrics);
  ~Engine();

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const EngineOptions& options() const { return options_; }
  // The vocabulary as a byte trie for grammar masks, built on first use.
  std::shared_ptr<const grammar::TokenTable> token_table() const;
  const gguf::GgufFile& file() const { return session_->file(); }
  int64_t n_ctx() const { return session_->n_ctx(); }
  int64_t n_vocab() const { return session_->n_vocab(); }
  std::string backend_description() const { return session_->backend().describe(); }
  KvMemory kv_memory() const { return session_->kv_memory(); }
  // A model with recurrent state: the bytes of one prefix checkpoint and
  // the budget for all (the header comment); none for an attention model.
  struct CheckpointMemory {
    uint64_t each = 0, budget = 0;
  };
  std::optional<CheckpointMemory> checkpoints() const;
  // false for an encoder (bert): the module has only @embed, and the server
  // answers embeddings only.
  bool generates_text() const { return session_->generates_text(); }
  // An encoder's embeddings read each input whole in one step of at most
  // max_step_tokens() tokens (Session::reads_whole_sequences).
  bool reads_whole_sequences() const { return session_->reads_whole_sequences(); }
  int32_t max_step_tokens() const { return session_->max_step_tokens(); }
  // Pages a request of `n_positions` needs, and whether the pool could ever
  // hold it.
  bool fits_pool(int64_t n_positions) const;

  // Queues a request (validated by the caller: prompt in the vocabulary,
  // prompt + max_tokens within the context).
  std::shared_ptr<Request> submit(GenerationParams params);
  // The client is gone: the scheduler drops the request and frees its pages.
  void cancel(const std::shared_ptr<Request>& r);
  // Stops admitting; waits up to `grace` for running and queued requests,
  // cancels what is left, and joins the scheduler thread.
  void shutdown(std::chrono::milliseconds grace);

  EngineGauges gauges() const;

 private:
  struct Active;
  void loop();
  void admit();
  bool run_step();
  bool run_embed_step();
  void run_device_decode(std::vector<Active*>& rows);
  void run_device_verify(std::vector<Active*>& seqs, bool steady);
  void consume_device_verify(std::vector<DeviceVerifyOutcome> outcomes);
  void start_speculating(Active& a);
  // Speculation: the drafts of this step, and the verify rows' sampling.
  void plan_drafts(int64_t budget, int32_t step_rows, int32_t step_outputs);
  void verify_chunk(Active& a, const float* logits);
  void account_verify(Active& a, int32_t k, int32_t accepted);
  void sample_row(Active& a, const float* logits);
  void deliver(Active& a, int32_t id, std::span<const float> row);
  void release(Active& a, FinishReason reason, const std::string& error = {});
  void prompt_advanced(Active& a);
  static uint64_t checkpoint_budget(const EngineOptions& o, const StateStore& st);

  EngineOptions options_;
  bool device_sampling_ = false;
  bool device_drafting_ = false;  // greedy n-gram requests draft on the backend
  // The device verify step queued and not read yet (run_device_verify):
  // each request's drafts, by request (it may end before the step is read).
  struct DeviceFlight {
    struct Seq {
      std::shared_ptr<Request> req;
      int32_t drafts;
    };
    std::vector<Seq> seqs;
    std::chrono::steady_clock::time_point queued;
    int64_t rows_of(const Request* r) const {
      for (const Seq& s : seqs)
        if (s.req.get() == r) return s.drafts + 1;
      return 0;
    }
  };
  std::optional<DeviceFlight> device_flight_;
  Metrics& metrics_;
  std::unique_ptr<Session> session_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ModelDrafter> drafter_;
  DraftPolicy draft_policy_;
  mutable std::once_flag token_table_once_;
  mutable std::shared_ptr<const grammar::TokenTable> token_table_;
  struct CacheHolder;
  std::unique_ptr<CacheHolder> cache_;

  mutable std::mutex mu_;  // guards queue_, stopping_, and the gauges' copies
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Request>> queue_;
  bool stopping_ = false, cancel_all_ = false;
  std::vector<std::unique_ptr<Active>> active_;  // scheduler thread only
  std::vector<int32_t> free_slots_;              // scheduler thread only
  EngineGauges gauges_;                          // copied under mu_ after each step
  std::thread thread_;
};

}  // namespace vtc::serve
