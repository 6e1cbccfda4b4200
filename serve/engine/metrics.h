// Server metrics, rendered as Prometheus text (GET /metrics).
//
// Counters only grow; gauges are sampled when rendered. Histograms use
// fixed bucket bounds (le): batch sizes (sequences and tokens per step) and
// request latencies (vLLM's bounds, with finer ones below 10 ms for small
// models). Tokens per second is a rate over a sliding window of the
// last kWindowSeconds of finished steps, so a scrape sees current load
// rather than a lifetime average. Every method is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "serve/engine/request.h"

namespace vtc::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v);
  // Appends `name`_bucket / _sum / _count lines.
  void render(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last: +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// What the engine reports when rendered (gauges).
struct EngineGauges {
  int64_t queue_depth = 0, running = 0;
  int64_t kv_pages_total = 0, kv_pages_free = 0, kv_pages_cached = 0;
  int64_t slots_total = 0;
  // What a page and a position of context take in every paged state
  // (Session::kv_memory): pages x page bytes is the cache's memory.
  int64_t kv_page_bytes = 0, kv_bytes_per_token = 0;
  // Checkpoints of recurrent states the prefix cache holds, and their bytes.
  int64_t checkpoints = 0, checkpoint_bytes = 0;
};

class Metrics {
 public:
  static constexpr double kWindowSeconds = 10.0;
  Metrics();

  void request_done(const std::string& endpoint, int status);
  void prompt_tokens(int64_t n, int64_t cached);
  // One scheduler step: how many sequences and tokens it carried, how many
  // of them were generated tokens (one per decode or first-token row).
  void step(int64_t sequences, int64_t tokens, int64_t generated, double seconds);
  void finished(Finish reason);
  // Request latencies, in seconds, as vLLM names them: arrival to first
  // token, between consecutive tokens of one request, arrival to finish.
  void first_token(double seconds);
  void inter_token(double seconds);
  void request_latency(double seconds);
  // One verify step's share of a sequence: k draft tokens, `accepted` kept.
  void verified(int64_t k, int64_t accepted);
  // A scheduler step that verified drafts, of `tokens` rows in all.
  void verify_step(int64_t tokens);

  int64_t cached_prompt_tokens() const;
  std::string render(const EngineGauges& g) const;

 private:
  using Clock = std::chrono::steady_clock;
  double rate(size_t field) const;  // per-second over the window; field 0: tokens, 1: generated

  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::map<std::string, uint64_t> finish_reasons_;
  uint64_t prompt_tokens_ = 0, cached_tokens_ = 0, generated_tokens_ = 0, steps_ = 0;
  uint64_t draft_tokens_ = 0, draft_accepted_ = 0, verifies_ = 0;
  double step_seconds_ = 0;
  Histogram seqs_per_step_, tokens_per_step_, verify_step_tokens_;
  Histogram time_to_first_token_, inter_token_latency_, e2e_latency_;
  struct Sample {
    Clock::time_point at;
    int64_t tokens, generated;
  };
  mutable std::deque<Sample> window_;
};

}  // namespace vtc::serve
