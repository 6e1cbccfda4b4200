#include "serve/engine/metrics.h"

#include <fmt/format.h>

namespace vtc::serve {

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
}

Metrics::Metrics()
    : seqs_per_step_({1, 2, 4, 8, 16, 32, 64}),
      tokens_per_step_({1, 4, 16, 64, 128, 256, 512, 1024}),
      verify_step_tokens_({2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}),
      time_to_first_token_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                            10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}),
      inter_token_latency_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
                            2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}),
      e2e_latency_({0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                    120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}) {}

void Metrics::first_token(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  time_to_first_token_.observe(seconds);
}

void Metrics::inter_token(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  inter_token_latency_.observe(seconds);
}

void Metrics::request_latency(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  e2e_latency_.observe(seconds);
}

void Metrics::request_done(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{endpoint, status}];
}

void Metrics::prompt_tokens(int64_t n, int64_t cached) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_tokens_ += uint64_t(n);
  cached_tokens_ += uint64_t(cached);
}

void Metrics::step(int64_t sequences, int64_t tokens, int64_t generated, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ++steps_;
  step_seconds_ += seconds;
  generated_tokens_ += uint64_t(generated);
  seqs_per_step_.observe(double(sequences));
  tokens_per_step_.observe(double(tokens));
  window_.push_back({Clock::now(), tokens, generated});
}

void Metrics::verified(int64_t k, int64_t accepted) {
  std::lock_guard<std::mutex> lock(mu_);
  ++verifies_;
  draft_tokens_ += uint64_t(k);
  draft_accepted_ += uint64_t(accepted);
}

void Metrics::verify_step(int64_t tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  verify_step_tokens_.observe(double(tokens));
}

void Metrics::finished(Finish reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++finish_reasons_[std::string(finish_name(reason))];
}

int64_t Metrics::cached_prompt_tokens() const {
  std::lock_guard<std::mutex> lock(mu_);
  return int64_t(cached_tokens_);
}

double Metrics::rate(size_t field) const {
  const auto now = Clock::now();
  while (!window_.empty() && std::chrono::duration<double>(now - window_.front().at).count() > kWindowSeconds)
    window_.pop_front();
  int64_t n = 0;
  for (const Sample& s : window_) n += field == 0 ? s.tokens : s.generated;
  return double(n) / kWindowSeconds;
}

std::string Metrics::render(const EngineGauges& g) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  auto counter = [&](const char* name, const char* help, double v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, v);
  };
  auto gauge = [&](const char* name, const char* help, double v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, help, name, name, v);
  };
  out += "# HELP vtc_requests_total HTTP requests by endpoint and status code.\n# TYPE vtc_requests_total counter\n";
  for (const auto& [key, n] : requests_)
    out += fmt::format("vtc_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, n);
  out += "# HELP vtc_finished_total Generations by finish reason.\n# TYPE vtc_finished_total counter\n";
  for (const auto& [reason, n] : finish_reasons_) out += fmt::format("vtc_finished_total{{reason=\"{}\"}} {}\n", reason, n);
  counter("vtc_prompt_tokens_total", "Prompt tokens of admitted requests (cached ones included).", double(prompt_tokens_));
  counter("vtc_prompt_tokens_cached_total", "Prompt tokens served from the prefix cache (not prefilled).", double(cached_tokens_));
  // The hit rate a prefix-affine load balancer raises (docs/serving.md,
  // "Running more than one replica"); the counters above give it over any window.
  gauge("vtc_prefix_cache_hit_ratio", "Prompt tokens served from the prefix cache / prompt tokens, since start (0 before any).",
        prompt_tokens_ == 0 ? 0.0 : double(cached_tokens_) / double(prompt_tokens_));
  counter("vtc_generated_tokens_total", "Tokens sampled.", double(generated_tokens_));
  counter("vtc_steps_total", "Scheduler steps run.", double(steps_));
  counter("vtc_step_seconds_total", "Time spent in scheduler steps.", step_seconds_);
  // Speculative decoding (docs/speculative.md): per sequence and verify step.
  counter("vtc_spec_verifies_total", "Sequences' verify steps (a draft checked by the target).", double(verifies_));
  counter("vtc_spec_draft_tokens_total", "Draft tokens verified.", double(draft_tokens_));
  counter("vtc_spec_draft_tokens_accepted_total", "Draft tokens the target accepted.", double(draft_accepted_));
  gauge("vtc_spec_acceptance_rate", "Draft tokens accepted / verified, since start (0 before any).",
        draft_tokens_ == 0 ? 0.0 : double(draft_accepted_) / double(draft_tokens_));
  gauge("vtc_spec_accepted_per_verify", "Draft tokens accepted per verify step, since start (0 before any).",
        verifies_ == 0 ? 0.0 : double(draft_accepted_) / double(verifies_));
  gauge("vtc_tokens_per_second", "Tokens processed (prefill + decode) per second over the last 10 s.", rate(0));
  gauge("vtc_generated_tokens_per_second", "Tokens generated per second over the last 10 s.", rate(1));
  gauge("vtc_queue_depth", "Requests waiting for a slot or for KV pages.", double(g.queue_depth));
  gauge("vtc_requests_running", "Requests holding a slot.", double(g.running));
  gauge("vtc_slots_total", "Sequence slots (--parallel).", double(g.slots_total));
  gauge("vtc_kv_pages_total", "KV pages in the pool.", double(g.kv_pages_total));
  gauge("vtc_kv_pages_free", "KV pages on the free list.", double(g.kv_pages_free));
  gauge("vtc_kv_pages_used", "KV pages referenced by requests or the prefix cache.", double(g.kv_pages_total - g.kv_pages_free));
  gauge("vtc_kv_pages_cached", "KV pages held by the prefix cache.", double(g.kv_pages_cached));
  gauge("vtc_kv_page_bytes", "Bytes of one KV page (every layer's K and V, at the cache types).", double(g.kv_page_bytes));
  gauge("vtc_prefix_checkpoints", "Checkpoints of recurrent states held by the prefix cache (recurrent-state models only).",
        double(g.checkpoints));
  gauge("vtc_prefix_checkpoint_bytes", "Bytes those checkpoints hold (device memory on the cuda target).",
        double(g.checkpoint_bytes));
  gauge("vtc_kv_bytes_per_token", "Bytes one position of context takes in the KV cache.", double(g.kv_bytes_per_token));
  seqs_per_step_.render(out, "vtc_batch_sequences", "Sequences per scheduler step.");
  tokens_per_step_.render(out, "vtc_batch_tokens", "Tokens per scheduler step.");
  verify_step_tokens_.render(out, "vtc_spec_step_tokens",
                             "Tokens (rows) of the scheduler steps that verify drafts, all sequences together.");
  time_to_first_token_.render(out, "vtc_time_to_first_token_seconds", "Seconds from a request's arrival to its first token.");
  inter_token_latency_.render(out, "vtc_inter_token_latency_seconds", "Seconds between consecutive tokens of a request.");
  e2e_latency_.render(out, "vtc_e2e_request_latency_seconds", "Seconds from a request's arrival to its end.");
  return out;
}

}  // namespace vtc::serve
