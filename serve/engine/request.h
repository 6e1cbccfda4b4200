// What the engine is asked and what it answers, with no JSON and no HTTP:
// a generation's parameters (GenerationParams), the tokens it produces
// (TokenEvent), how it ended (FinishReason), and the Request an API layer
// polls while the scheduler fills it. The API layers (serve/api) translate
// their bodies into GenerationParams and these results into their shapes;
// `vtc run` fills the same GenerationParams (serve/engine/generate.h).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/sampler.h"
#include "serve/engine/speculative/spec_options.h"

namespace vtc::serve {

// How a generation ended. One vocabulary for every API and `vtc run`; the
// API layers name it in their own words (OpenAI: finish_reason, Anthropic:
// stop_reason, Responses: status), each in one function.
enum class Finish : uint8_t {
  None,       // still running
  Stop,       // an end-of-generation token, a stop id, a stop string, or the grammar ended
  Length,     // max_tokens, or the context is full
  Cancelled,  // the client went away, or the server is shutting down
  Error,      // the request failed (Request::error says why)
};

struct FinishReason {
  FinishReason() = default;
  FinishReason(Finish k) : kind(k) {}  // NOLINT: implicit, so `release(a, Finish::Stop)` reads as it means

  Finish kind = Finish::None;
  // Finish::Stop by a stop string: that string (the text ends before it).
  std::string matched_stop;
  // Finish::Stop by an end-of-generation token; Finish::Length by a full
  // context rather than max_tokens (vtc run reports both).
  bool eog = false, context_full = false;

  bool operator==(Finish k) const { return kind == k; }
};

// "stop" | "length" | "cancelled" | "error" ("" while running): the OpenAI
// spelling, also the metrics label and `vtc run`'s.
std::string_view finish_name(Finish kind);

// Restricts which token may come next: a grammar (serve/constraints) behind
// response_format or a tool call. One per request, used on the scheduler
// thread only.
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets the logit of every token not allowed next to -inf (end-of-
  // generation tokens included, unless the constraint may end here).
  virtual void mask(std::span<float> logits) = 0;
  // Advances past a sampled token; false when it was not allowed.
  virtual bool accept(int32_t token) = 0;
  // Nothing may follow: generation ends with finish_reason "stop".
  virtual bool finished() const = 0;
};

struct GenerationParams {
  std::vector<int32_t> prompt;
  int32_t max_tokens = 16;
  SamplingParams sampling;
  std::vector<std::string> stop;
  int32_t top_logprobs = -1;  // -1: no logprobs; else logprob of each token plus this many alternatives
  // Added to the logits before sampling (OpenAI logit_bias; -100 bans).
  std::vector<std::pair<int32_t, float>> logit_bias;
  // vLLM's fields: generation also stops on these ids (the id's text is not
  // sent); end-of-generation tokens do not stop it; before min_tokens
  // tokens, end-of-generation and stop ids cannot be sampled and stop
  // strings are not looked for.
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int32_t min_tokens = 0;
  std::shared_ptr<TokenConstraint> constraint;
  // Speculative decoding's per-request overrides (the server's --spec
  // decides whether there is any; docs/speculative.md).
  SpecRequest speculative;
  // Keep special tokens in the text (an output parser needs its markers).
  bool keep_special_text = false;
  // Read the prompt for its hidden states (Request::hidden) and generate
  // nothing (max_tokens and sampling are ignored).
  bool embeddings = false;
};

struct TokenEvent {
  int32_t id = 0;
  std::string text;  // released by this token (may be empty: held back or special)
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // alternatives, most likely first
};

// Shared between an HTTP handler (reads) and the scheduler (writes).
class Request {
 public:
  // Waits up to `timeout` for new events; moves them into `out`. Returns
  // true once the request has finished and every event was taken.
  bool poll(std::vector<TokenEvent>& out, std::chrono::milliseconds timeout);
  // Waits up to `timeout` for the finish, leaving the events queued (a
  // caller that only waits for the end). True once finished.
  bool wait_finished(std::chrono::milliseconds timeout);
  // Kind None until the request has finished.
  FinishReason finish_reason() const;
  std::string error() const;
  int32_t prompt_tokens() const { return int32_t(params.prompt.size()); }
  int32_t cached_tokens() const { return cached_.load(); }
  int32_t completion_tokens() const { return generated_.load(); }
  double prompt_ms() const { return prompt_ms_.load(); }
  double generate_ms() const { return generate_ms_.load(); }
  // Speculative decoding: draft tokens verified and accepted (llama-server's
  // timings.draft_n / draft_n_accepted).
  int32_t draft_tokens() const { return draft_n_.load(); }
  int32_t draft_tokens_accepted() const { return draft_accepted_.load(); }
  // Whether its drafts and their acceptance ran on the backend (greedy
  // n-gram speculation on the cuda target: Engine::run_device_verify).
  bool drafted_on_device() const { return drafted_on_device_.load(); }
  // Arrival (submit) time: latencies are measured from it.
  std::chrono::steady_clock::time_point arrived() const { return arrived_; }
  // An embeddings request's hidden states, [prompt tokens x n_embd] row-major,
  // complete once it finished with "stop".
  std::vector<float> hidden() const;

  GenerationParams params;

 private:
  friend class Engine;
  void push(TokenEvent e);
  void finish(FinishReason reason, const std::string& error = {});

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<TokenEvent> events_;
  std::vector<float> hidden_;
  bool finished_ = false;
  FinishReason reason_;
  std::string error_;
  std::atomic<bool> cancelled_{false}, drafted_on_device_{false};
  std::atomic<int32_t> cached_{0}, generated_{0}, draft_n_{0}, draft_accepted_{0};
  std::atomic<double> prompt_ms_{0}, generate_ms_{0};
  std::chrono::steady_clock::time_point arrived_ = std::chrono::steady_clock::now();
};


}  // namespace vtc::serve
