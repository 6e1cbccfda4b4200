#include "serve/engine/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>
#include <numeric>

#include "serve/constraints/grammar/matcher.h"
#include "serve/engine/generate.h"
#include "serve/engine/prefix_cache.h"
#include "serve/engine/output.h"
#include "serve/engine/speculative/model_drafter.h"
#include "serve/engine/speculative/ngram_drafter.h"
#include "serve/engine/speculative/verify.h"
#include "support/error.h"

namespace vtc::serve {

using Clock = std::chrono::steady_clock;

// --- Request ------------------------------------------------------------------
bool Request::poll(std::vector<TokenEvent>& out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return finished_ || !events_.empty(); });
  while (!events_.empty()) {
    out.push_back(std::move(events_.front()));
    events_.pop_front();
  }
  return finished_;
}

bool Request::wait_finished(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return finished_; });
  return finished_;
}

FinishReason Request::finish_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reason_;
}

std::vector<float> Request::hidden() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hidden_;
}

std::string Request::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void Request::push(TokenEvent e) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(e));
  cv_.notify_all();
}

void Request::finish(FinishReason reason, const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  reason_ = std::move(reason);
  error_ = error;
  cv_.notify_all();
}

// --- scheduler state per running request --------------------------------------
struct Engine::CacheHolder {
  PrefixCache cache;
  CacheHolder(StateStore& store, uint64_t checkpoint_budget) : cache(store, checkpoint_budget) {}
};

struct Engine::Active {
  std::shared_ptr<Request> req;
  int32_t slot;
  size_t prefilled;  // prompt tokens whose KV is written
  // A recurrent model's checkpoint: the prompt position a chunk ends at
  // (0: none to take) and the states taken there (engine.h's header).
  size_t checkpoint_at = 0;
  std::unique_ptr<SlotCheckpoint> checkpoint;
  int32_t last = -1;  // the token to feed next (decode phase)
  int32_t n_past = 0;
  Generation gen;  // sampling, penalty window, stops, logprobs, finish (serve/engine/output.h)
  // Decoded by the backend's sampler: its settings, the seed resolved once,
  // and whether @last_ids already holds `last` (after a device step).
  bool device = false, ids_on_device = false;
  DeviceSampling device_params;
  // A speculating request the backend would otherwise sample: its verify
  // rows are drawn by the `sample` op's rule on the host, so its tokens do
  // not depend on speculating (DeviceSampling::draw_on_host).
  std::optional<DeviceSampling> verify_rule;
  Clock::time_point started, first_token, last_token;
  bool done = false;
  // Speculative decoding (engine.h): the verify state once the first token
  // is drawn, the n-gram index over prompt and output (whose tokens are
  // also the draft model's input), the acceptance record, this step's
  // draft, and the positions reserved at admission (a verify chunk stays
  // within them).
  bool speculates = false, spec_started = false;
  SpecSequence spec;
  NgramDrafter ngram;
  DraftPolicy::Sequence record;
  std::vector<int32_t> draft;
  int64_t reserved = 0;
  // Greedy n-gram speculation kept on the backend (Engine::
  // run_device_verify): the history, drafts and acceptance live in device
  // memory, and the host reads only each step's accepted tokens.
  bool drafts_on_device = false;
  bool verifies_on_device() const { return drafts_on_device && spec_started; }

  Active(std::shared_ptr<Request> r, int32_t s, size_t cached, const Tokenizer& tok)
      : req(std::move(r)), slot(s), prefilled(cached), n_past(int32_t(cached)), gen(req->params, tok),
        started(Clock::now()) {}
  bool decoding() const { return prefilled == req->params.prompt.size(); }
};

// --- Engine ---------------------------------------------------------------------
Engine::Engine(const EngineOptions& o, Metrics& metrics) : options_(o), metrics_(metrics) {
  if (o.parallel < 1) throw Error(fmt::format("serve: --parallel must be at least 1 (got {})", o.parallel));
  o.spec.check();
  if (o.parallel > o.max_step_tokens)
    throw Error(fmt::format("serve: --parallel {} exceeds the step bound of {} tokens", o.parallel, o.max_step_tokens));
  SessionOptions so{.target = o.target, .threads = o.threads, .n_ctx = o.n_ctx, .n_slots = o.parallel, .n_pages = o.kv_pages,
                        .max_step_tokens = o.max_step_tokens};
  so.embeddings = o.embeddings;
  so.cache_type_k = o.cache_type_k;
  so.cache_type_v = o.cache_type_v;
  so.weight_layout_types = o.weight_layout_types;
  so.fused_kernels = o.fused_kernels;
  if (!o.weight_layout) {
    passes::PassManagerOptions pm;
    pm.disabled_passes = {"weight-layout"};
    so.passes = pm;
  }
  session_ = std::make_unique<Session>(o.model, so);
  if (!o.embeddings) session_->require_text_generation("vtc serve without --embeddings");
  device_sampling_ = o.device_sampling.value_or(o.target == Target::Cuda);
  const std::string host_drafts_because = why_model_drafts_on_host(*session_, o.spec.mode);
  device_drafting_ = o.spec.draft_on != DraftOn::Host && host_drafts_because.empty();
  if (o.spec.draft_on == DraftOn::Device && !device_drafting_) throw Error("--draft-on device: " + host_drafts_because);
  tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_gguf(session_->file()));
  if (o.spec.mode == SpecMode::Draft) {
    SessionOptions draft = so;
    draft.embeddings = false;
    draft.passes = std::nullopt;
    drafter_ = std::make_unique<ModelDrafter>(o.spec.draft_model, draft, *session_, *tokenizer_);
  }
  cache_ = std::make_unique<CacheHolder>(session_->states(), checkpoint_budget(o, session_->states()));
  for (int32_t s = o.parallel - 1; s >= 0; --s) free_slots_.push_back(s);
  const StateStore& st = session_->states();
  const KvMemory kv = session_->kv_memory();
  gauges_ = {0, 0, st.n_pages(), st.free_pages(), 0, o.parallel, int64_t(kv.bytes_per_token) * kv.page_size,
             int64_t(kv.bytes_per_token)};
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() { shutdown(std::chrono::milliseconds(0)); }

uint64_t Engine::checkpoint_budget(const EngineOptions& o, const StateStore& st) {
  if (o.checkpoint_bytes) return *o.checkpoint_bytes;
  return std::max(EngineOptions::kDefaultCheckpointBytes, uint64_t(o.parallel) * st.slot_state_bytes());
}

std::optional<Engine::CheckpointMemory> Engine::checkpoints() const {
  const StateStore& st = session_->states();
  if (!st.carries_recurrent_state()) return std::nullopt;
  return CheckpointMemory{st.slot_state_bytes(), checkpoint_budget(options_, st)};
}

std::shared_ptr<const grammar::TokenTable> Engine::token_table() const {
  std::call_once(token_table_once_, [this] { token_table_ = grammar::make_token_table(*tokenizer_); });
  return token_table_;
}

bool Engine::fits_pool(int64_t n_positions) const {
  return session_->states().pages_for(n_positions) <= session_->states().n_pages();
}

std::shared_ptr<Request> Engine::submit(GenerationParams params) {
  auto r = std::make_shared<Request>();
  r->params = std::move(params);
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) {
    r->finish({Finish::Cancelled}, "the server is shutting down");
    return r;
  }
  queue_.push_back(r);
  gauges_.queue_depth = int64_t(queue_.size());
  cv_.notify_all();
  return r;
}

void Engine::cancel(const std::shared_ptr<Request>& r) {
  r->cancelled_ = true;
  std::lock_guard<std::mutex> lock(mu_);
  cv_.notify_all();
}

void Engine::shutdown(std::chrono::milliseconds grace) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!thread_.joinable()) return;
    stopping_ = true;
    cv_.notify_all();
    // The scheduler keeps running what it has; after the grace period it
    // cancels everything still there.
    cv_.wait_for(lock, grace, [&] { return queue_.empty() && gauges_.running == 0; });
    cancel_all_ = true;
    cv_.notify_all();
  }
  thread_.join();
}

EngineGauges Engine::gauges() const {
  std::lock_guard<std::mutex> lock(mu_);
  return gauges_;
}

void Engine::release(Active& a, FinishReason reason, const std::string& error) {
  session_->reset(a.slot);
  if (drafter_) drafter_->forget(a.slot);
  free_slots_.push_back(a.slot);
  a.done = true;
  if (a.req->generated_ > 0)
    a.req->generate_ms_ = std::chrono::duration<double, std::milli>(Clock::now() - a.first_token).count();
  metrics_.finished(reason.kind);
  metrics_.request_latency(std::chrono::duration<double>(Clock::now() - a.req->arrived()).count());
  a.req->finish(std::move(reason), error);
}

namespace {
// Where a recurrent model's prompt of n tokens is checkpointed: the deepest
// page boundary a lookup may share (prefix_cache.h), if past the reused
// prefix; 0 for none.
size_t checkpoint_position(size_t n, size_t reused, int64_t page) {
  if (n == 0) return 0;
  const size_t deepest = (n - 1) / size_t(page) * size_t(page);
  return deepest > reused ? deepest : 0;
}

// The backend's sampler covers these settings (the `sample` op); penalties
// and logprobs need the logits on the host.
// `seed`: the host sampler's resolved seed, so both samplers of a request
// draw from the seed it asked for.
std::optional<DeviceSampling> device_settings(const GenerationParams& p, uint64_t seed) {
  const SamplingParams& s = p.sampling;
  if (p.top_logprobs >= 0 || !DeviceSampling::covers(s)) return std::nullopt;
  if (!p.logit_bias.empty() || p.constraint || p.min_tokens > 0) return std::nullopt;
  return DeviceSampling::of(s, seed);
}
}  // namespace

void Engine::admit() {
  StateStore& st = session_->states();
  PrefixCache& cache = cache_->cache;
  while (!free_slots_.empty()) {
    std::shared_ptr<Request> r;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty()) return;
      r = queue_.front();
      if (r->cancelled_ || cancel_all_) {
        queue_.pop_front();
        metrics_.finished(Finish::Cancelled);
        r->finish({Finish::Cancelled});
        continue;
      }
    }
    const auto& prompt = r->params.prompt;
    const bool embed = r->params.embeddings;
    const int32_t slot = free_slots_.back();
    const int64_t total = std::min<int64_t>(int64_t(prompt.size()) + (embed ? 0 : r->params.max_tokens), session_->n_ctx());
    PrefixCache::Prefix hit;
    if (!embed) hit = cache.lookup(prompt);
    const std::vector<int32_t>& shared = hit.pages;
    st.share_pages(slot, shared);
    const int64_t need = st.pages_for(total) - int64_t(shared.size());
    if (need > st.free_pages()) cache.evict(need - st.free_pages());
    if (need > st.free_pages()) {
      st.reset_slot(slot);  // not enough pages: wait until a request finishes
      return;
    }
    if (!st.reserve(slot, total)) throw Error("serve: page reservation failed after the check");
    if (hit.checkpoint) st.restore_checkpoint(slot, *hit.checkpoint);
    free_slots_.pop_back();
    {
      // Published with the pop, so shutdown() never sees the request in
      // neither the queue nor the running count.
      std::lock_guard<std::mutex> lock(mu_);
      queue_.pop_front();
      gauges_.queue_depth = int64_t(queue_.size());
      gauges_.running = int64_t(active_.size()) + 1;
    }
    const size_t cached = shared.size() * size_t(st.page_size());
    r->cached_ = int32_t(cached);
    metrics_.prompt_tokens(int64_t(prompt.size()), int64_t(cached));
    active_.push_back(std::make_unique<Active>(r, slot, cached, *tokenizer_));
    Active& added = *active_.back();
    if (!embed && cache.keeps_checkpoints()) added.checkpoint_at = checkpoint_position(prompt.size(), cached, st.page_size());
    added.reserved = total;
    added.speculates = options_.spec.mode != SpecMode::Off && !embed && r->params.speculative.enabled &&
                       !r->params.constraint && r->params.max_tokens > 1;
    // Requests the backend's sampler covers draft there, where it can: the
    // greedy ones, and with device sampling the sampled ones (the device
    // draws their verify rows as their plain decode steps would).
    const std::optional<DeviceSampling> d = embed ? std::nullopt : device_settings(r->params, added.gen.seed());
    added.drafts_on_device = added.speculates && device_drafting_ && d &&
                             (r->params.sampling.temperature <= 0.0f || device_sampling_);
    if (added.drafts_on_device) added.device_params = *d;
    if (device_sampling_ && d && !added.drafts_on_device) {
      if (added.speculates) added.verify_rule = *d;
      else added.device = true, added.device_params = *d;
    }
  }
}


void Engine::sample_row(Active& a, const float* logits) {
  const std::span<const float> row(logits, size_t(session_->n_vocab()));
  int32_t id;
  // A grammar that blows up (too many parser stacks) fails its own request.
  try {
    id = a.gen.draw(row);
    if (!a.gen.accept(id)) {
      release(a, {Finish::Error}, fmt::format("token {} was sampled outside the request's grammar", id));
      return;
    }
  } catch (const Error& e) {
    release(a, {Finish::Error}, e.what());
    return;
  }
  a.ids_on_device = false;
  deliver(a, id, row);
}

// Streams a sampled token and finishes the request when it ends it.
void Engine::deliver(Active& a, int32_t id, std::span<const float> row) {
  const int32_t n = ++a.req->generated_;
  const Clock::time_point now = Clock::now();
  if (n == 1) {
    a.first_token = now;
    a.req->prompt_ms_ = std::chrono::duration<double, std::milli>(a.first_token - a.started).count();
    metrics_.first_token(std::chrono::duration<double>(now - a.req->arrived()).count());
  } else {
    metrics_.inter_token(std::chrono::duration<double>(now - a.last_token).count());
  }
  a.last_token = now;
  FinishReason finish;
  TokenEvent ev = a.gen.emit(id, row, a.n_past, session_->n_ctx(), finish);
  a.last = id;
  a.req->push(std::move(ev));
  if (finish.kind != Finish::None) release(a, std::move(finish));
}

bool Engine::run_step() {
  std::vector<SeqChunk> chunks;
  // The request behind each chunk's logits rows: one row for a decode row or
  // a prompt's end, k + 1 for a speculating request's verify chunk.
  struct Rows {
    Active* a;
    bool verify;
  };
  std::vector<Rows> outputs;
  int64_t budget = session_->max_step_tokens(), generated = 0;
  std::vector<Active*> device_rows, device_verifies;
  for (auto& a : active_)
    if (a->decoding() && !a->done) {
      if (a->device) device_rows.push_back(a.get());
      if (a->verifies_on_device()) device_verifies.push_back(a.get());
    }
  // Only device verifies to run: their steps are pipelined (run_device_verify).
  const bool steady = device_rows.empty() && std::all_of(active_.begin(), active_.end(), [](const auto& a) {
    return a->done || a->verifies_on_device();
  });
  if (!device_verifies.empty() || device_flight_) run_device_verify(device_verifies, steady);
  if (!device_rows.empty()) run_device_decode(device_rows);
  int32_t decoding = 0;
  int64_t prompt_left = 0;
  for (auto& a : active_) {
    if (a->done || a->device || a->verifies_on_device() || a->req->params.embeddings) continue;
    if (a->decoding()) ++decoding;
    else prompt_left += int64_t(a->req->params.prompt.size() - a->prefilled);
  }
  // Drafts leave one token per sequence spare: a recurrent model's
  // rollback makes the next chunk up to one token longer than this one
  // (speculative/verify.h), and the next step must still fit the bound.
  if (options_.spec.mode != SpecMode::Off)
    plan_drafts(budget - 2 * decoding, decoding + int32_t(std::min<int64_t>(prompt_left, budget - decoding)), decoding);
  for (auto& a : active_)
    if (a->decoding() && !a->device && !a->verifies_on_device() && !a->done && !a->req->params.embeddings) {
      if (a->spec_started) {
        chunks.push_back(a->spec.chunk(a->slot, a->draft, session_->states()));
        budget -= int64_t(chunks.back().tokens.size());
      } else {
        chunks.push_back({a->slot, {&a->last, 1}, a->n_past, 1});
        --budget;
      }
      outputs.push_back({a.get(), a->spec_started});
    }
  for (auto& a : active_) {
    if (a->decoding() || budget <= 0 || a->req->params.embeddings) continue;
    const auto& prompt = a->req->params.prompt;
    // A chunk stops at the checkpoint position, so the states after the
    // step are the ones to keep there.
    const size_t until = a->checkpoint_at > a->prefilled ? a->checkpoint_at : prompt.size();
    const size_t n = std::min<size_t>(size_t(budget), until - a->prefilled);
    const bool ends = a->prefilled + n == prompt.size();
    chunks.push_back({a->slot, std::span<const int32_t>(prompt).subspan(a->prefilled, n), int32_t(a->prefilled), ends});
    if (ends) outputs.push_back({a.get(), false});
    budget -= int64_t(n);
  }
  if (chunks.empty()) return !device_rows.empty() || !device_verifies.empty();
  const auto t0 = Clock::now();
  HostTensor logits = session_->step(chunks);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  // Advance positions, then sample: a prefill that just ended samples its
  // first token and decodes from the next step on. A verify chunk's
  // positions move with its acceptance (verify_chunk).
  for (const auto& c : chunks) {
    for (auto& a : active_)
      if (a->slot == c.slot) {
        if (a->spec_started) continue;
        if (a->decoding()) {
          a->n_past += 1;
        } else {
          a->prefilled += c.tokens.size();
          a->n_past = int32_t(a->prefilled);
          prompt_advanced(*a);
        }
      }
  }
  const int64_t V = session_->n_vocab();
  const float* row = logits.f32();
  for (const Rows& o : outputs) {
    Active& a = *o.a;
    if (o.verify) {
      const size_t k = a.draft.size();
      verify_chunk(a, row);
      row += int64_t(k + 1) * V;
      continue;
    }
    sample_row(a, row);
    row += V;
    ++generated;
    if (a.speculates && !a.done && !a.spec_started) start_speculating(a);
  }
  int64_t tokens = 0;
  for (const auto& c : chunks) tokens += int64_t(c.tokens.size());
  draft_policy_.step_timed(int32_t(tokens), seconds);
  metrics_.step(int64_t(chunks.size()), tokens, generated, seconds);
  if (std::any_of(chunks.begin(), chunks.end(), [](const SeqChunk& c) { return c.logit_rows > 1; }))
    metrics_.verify_step(tokens);
  return true;
}

// Each speculating request's draft for this step (Active::draft): as long
// as its reservation, its remaining output, the step's token budget, the
// rows whose bits are decode's (Backend::rows_with_decode_bits: a verify of
// at most 16 rows on CUDA) and the rows a verifying step should hold in all
// (Backend::verify_step_rows: 16 on CUDA, so a step still busy with
// prompts drafts nothing there) allow, and as DraftPolicy finds worth the
// step's time; the draft model runs once for all of them.
void Engine::plan_drafts(int64_t budget, int32_t step_rows, int32_t step_outputs) {
  const SpecOptions& o = options_.spec;
  const int64_t exact_rows = session_->backend().rows_with_decode_bits();
  int64_t step_room = int64_t(session_->backend().verify_step_rows()) - step_rows;
  for (const auto& a : active_)  // accepted tokens that run again (verify.h)
    if (a->spec_started && !a->verifies_on_device() && !a->done) step_room -= int64_t(a->spec.pending().size()) - 1;
  std::vector<ModelDrafter::Job> jobs;
  std::vector<Active*> owners;
  std::vector<DraftPolicy::Sequence*> records;
  for (auto& ap : active_) {
    Active& a = *ap;
    a.draft.clear();
    if (!a.spec_started || a.verifies_on_device() || a.done) continue;
    const SpecRequest& r = a.req->params.speculative;
    const int32_t n_max = r.n_max.value_or(o.draft_max), n_min = r.n_min.value_or(o.draft_min);
    const int64_t pending = int64_t(a.spec.pending().size());
    int64_t room = std::min<int64_t>({int64_t(n_max), a.reserved - a.spec.positions_after(0), budget - pending + 1,
                                      int64_t(a.req->params.max_tokens) - a.req->generated_ - 1,
                                      exact_rows - pending, step_room});
    budget -= pending - 1;  // the decode row's own token was counted by the caller
    if (room <= 0 || a.record.plain_left > 0 || !a.spec.may_draft()) continue;
    if (o.mode == SpecMode::Ngram) {
      a.draft = a.ngram.draft(int32_t(room));
    } else {
      // The model drafts what the policy would verify, no more.
      if (o.adaptive) room = draft_policy_.length(a.record, int32_t(room), n_min, n_max, step_rows, step_outputs);
      if (room > 0) {
        jobs.push_back({a.slot, a.ngram.tokens(), int32_t(room), r.p_min.value_or(o.p_min), n_min, {}});
        owners.push_back(&a);
        records.push_back(&a.record);
        budget -= room;
        step_room -= room;
        step_rows += int32_t(room);
      }
      continue;
    }
    int32_t k = int32_t(a.draft.size()) >= std::max(n_min, 1) ? int32_t(a.draft.size()) : 0;
    if (o.adaptive && k > 0) k = draft_policy_.length(a.record, k, n_min, n_max, step_rows, step_outputs);
    a.draft.resize(size_t(k));
    budget -= k;
    step_room -= k;
    step_rows += k;
  }
  draft_and_account(*drafter_, draft_policy_, jobs, records);
  for (size_t i = 0; i < jobs.size(); ++i) owners[i]->draft = std::move(jobs[i].draft);
}

// Samples a verify chunk's rows in order while they confirm the draft
// (speculative/verify.h), then rolls back what the target rejected.
void Engine::verify_chunk(Active& a, const float* logits) {
  const int32_t k = int32_t(a.draft.size());
  int32_t row_index = 0;
  size_t drawn = 0;
  const auto [accepted, next] = verify_rows(
      a.draft, logits, session_->n_vocab(),
      [&](std::span<const float> row) {
        return a.verify_rule ? a.verify_rule->draw_on_host(row, a.spec.row_position(drawn++)) : a.gen.draw(row);
      },
      [&](int32_t id, std::span<const float> row) {
        a.gen.accept(id);  // no grammar on speculating requests
        a.ngram.append(id);
        a.n_past = a.spec.positions_after(size_t(row_index++));
        deliver(a, id, row);
        return !a.done;
      });
  account_verify(a, k, int32_t(accepted));
  if (!a.done) a.spec.verified(a.slot, accepted, next, session_->states());
}

// A verify step's k drafts of `a`, `accepted` kept: the request's counts,
// the metrics and the draft policy's record (k = 0: a plain decode row).
void Engine::account_verify(Active& a, int32_t k, int32_t accepted) {
  if (k > 0) {
    metrics_.verified(k, int64_t(accepted));
    a.req->draft_n_ += k;
    a.req->draft_accepted_ += accepted;
    draft_policy_.verified(a.record, k, accepted);
  } else {
    draft_policy_.decoded_plainly(a.record);
  }
}

// After a prefill chunk: takes the checkpoint where one is due, and caches
// the prompt's pages (with it) once the prompt is read.
void Engine::prompt_advanced(Active& a) {
  StateStore& st = session_->states();
  if (a.checkpoint_at != 0 && a.prefilled == a.checkpoint_at) {
    // Memory for a checkpoint (device memory on cuda) may run out: that
    // costs this prompt's later reuse, not the request.
    try {
      a.checkpoint = st.save_checkpoint(a.slot);
    } catch (const std::bad_alloc&) {
    } catch (const Error&) {
    }
  }
  if (!a.decoding()) return;
  const int64_t checkpoint_pages = int64_t(a.checkpoint_at) / st.page_size();
  cache_->cache.insert(a.req->params.prompt, st.page_table(a.slot), std::move(a.checkpoint), checkpoint_pages);
}

// One @embed call over the embeddings requests still reading their prompt,
// oldest first, under the token bound; each keeps its tokens' hidden states
// and finishes when its prompt is read.
bool Engine::run_embed_step() {
  std::vector<SeqChunk> chunks;
  std::vector<Active*> owners;
  int64_t budget = session_->max_step_tokens();
  for (auto& a : active_)
    if (a->req->params.embeddings && !a->done && a->decoding()) release(*a, {Finish::Stop});  // an empty prompt
  // An encoder (bidirectional attention) reads each input whole in one
  // step: one that does not fit waits for the next (embedding_inputs
  // refuses inputs longer than the bound).
  const bool whole = session_->reads_whole_sequences();
  for (auto& a : active_) {
    if (!a->req->params.embeddings || a->done || budget <= 0) continue;
    const auto& prompt = a->req->params.prompt;
    if (whole && int64_t(prompt.size()) > budget) continue;
    const size_t n = std::min<size_t>(size_t(budget), prompt.size() - a->prefilled);
    chunks.push_back({a->slot, std::span<const int32_t>(prompt).subspan(a->prefilled, n), int32_t(a->prefilled), false});
    owners.push_back(a.get());
    budget -= int64_t(n);
  }
  if (chunks.empty()) return false;
  const auto t0 = Clock::now();
  const HostTensor embd = session_->embed(chunks);
  const int64_t width = embd.shape.at(1);
  const float* row = embd.f32();
  int64_t tokens = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    Active& a = *owners[i];
    const size_t n = chunks[i].tokens.size();
    {
      std::lock_guard<std::mutex> lock(a.req->mu_);
      a.req->hidden_.insert(a.req->hidden_.end(), row, row + int64_t(n) * width);
    }
    row += int64_t(n) * width;
    tokens += int64_t(n);
    a.prefilled += n;
    a.n_past = int32_t(a.prefilled);
    if (a.decoding()) {
      a.req->prompt_ms_ = std::chrono::duration<double, std::milli>(Clock::now() - a.started).count();
      release(a, {Finish::Stop});
    }
  }
  metrics_.step(int64_t(chunks.size()), tokens, 0, std::chrono::duration<double>(Clock::now() - t0).count());
  return true;
}

// One @decode call for the rows sampled on the backend. A row whose last
// token came from the host (its prompt's logits) seeds @last_ids first.
void Engine::run_device_decode(std::vector<Active*>& rows) {
  const auto t0 = Clock::now();
  std::vector<int32_t> slots, positions;
  std::vector<DeviceSampling> sampling;
  for (Active* a : rows) {
    if (!a->ids_on_device) session_->set_last_id(a->slot, a->last);
    slots.push_back(a->slot);
    positions.push_back(a->n_past);
    sampling.push_back(a->device_params);
  }
  session_->decode_sampled(slots, positions, sampling);
  const std::vector<int32_t> ids = session_->finish_sampled();
  if (ids.size() != rows.size()) throw Error(fmt::format("serve: {} sampled ids for {} rows", ids.size(), rows.size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    Active& a = *rows[i];
    a.n_past += 1;
    a.gen.accept(ids[i]);  // no grammar on device rows (device_settings)
    a.ids_on_device = true;
    deliver(a, ids[i], {});
  }
  metrics_.step(int64_t(rows.size()), int64_t(rows.size()), int64_t(rows.size()),
                std::chrono::duration<double>(Clock::now() - t0).count());
}

// After a speculating request's first token: its history goes to the
// backend's drafter, or the host's verify state and n-gram index start.
void Engine::start_speculating(Active& a) {
  a.spec_started = true;
  if (a.drafts_on_device) {
    std::vector<int32_t> history(a.req->params.prompt.begin(), a.req->params.prompt.end());
    history.push_back(a.last);
    session_->start_device_drafts(a.slot, history, a.device_params);
    a.req->drafted_on_device_ = true;
    return;
  }
  a.spec.start(a.n_past, a.last);
  a.ngram.append(a.req->params.prompt);
  a.ngram.append(a.last);
}

// The verify steps of the requests drafting on the backend
// (codegen/cuda/device_drafts.h): one step a iteration for all of them,
// each verifying the k drafts its record holds, k as the request's
// limits, the step's 16 rows (Backend::verify_step_rows) and DraftPolicy
// allow; the backend accepts greedily and drafts the next step, and the
// host reads only the accepted tokens.
//
// Pipelining, as `vtc run`'s loop (speculative/generate_spec_device.cpp):
// while these requests are all the engine has to run (`steady`), the host
// queues the next step before it reads the previous one's outcomes, so it
// never waits for the device between steps. It plans from what it has read:
// pages for the most the step in flight can reach plus the new step's
// rows, no step for a request that the step in flight may finish, and a
// step's outcome for a request that ended meanwhile is dropped (its rows
// only wrote positions past it). Any other work (a prompt, rows sampled by
// the host or the `sample` op) reads its own results, so the step in
// flight is read first and the iteration runs its steps one by one.
void Engine::run_device_verify(std::vector<Active*>& seqs, bool steady) {
  if (device_flight_ && !steady) consume_device_verify(session_->finish_device_verify());
  const SpecOptions& o = options_.spec;
  const int32_t n = int32_t(seqs.size());
  int64_t step_room = int64_t(session_->backend().verify_step_rows()) - n;
  DeviceFlight next;
  std::vector<Session::DeviceVerifyRows> jobs;
  for (Active* a : seqs) {
    const int64_t flying = device_flight_ ? device_flight_->rows_of(a->req.get()) : 0;
    const SpecRequest& r = a->req->params.speculative;
    const int32_t n_max = r.n_max.value_or(o.draft_max), n_min = std::max(r.n_min.value_or(o.draft_min), 1);
    const int64_t least_output = a->req->generated_ + (flying > 0 ? 1 : 0);
    const int64_t left = std::min<int64_t>(a->reserved - a->n_past - flying - 1,
                                           int64_t(a->req->params.max_tokens) - least_output - 1);
    if (left < 0) continue;  // the step in flight may end it (never without one)
    const int64_t room =
        std::min<int64_t>({int64_t(n_max), session_->backend().rows_with_decode_bits() - 1, left, step_room});
    int32_t k = room < n_min ? 0 : int32_t(room);
    if (k > 0 && o.adaptive) k = a->record.plain_left > 0 ? 0 : draft_policy_.length(a->record, k, n_min, n_max, n, n);
    if (k < n_min) k = 0;
    step_room -= k;
    jobs.push_back({a->slot, k, int64_t(a->n_past) + flying + 1 + k});
    next.seqs.push_back({a->req, k});
  }
  if (jobs.empty() && !device_flight_) return;
  next.queued = Clock::now();
  std::vector<DeviceVerifyOutcome> previous =
      jobs.empty() ? session_->finish_device_verify() : session_->verify_on_device(jobs);
  if (device_flight_) consume_device_verify(std::move(previous));
  if (!jobs.empty()) device_flight_ = std::move(next);
  if (!steady && device_flight_) consume_device_verify(session_->finish_device_verify());
}

// The outcomes of the step in flight, for its requests still running: counts,
// the policy, and their tokens streamed.
void Engine::consume_device_verify(std::vector<DeviceVerifyOutcome> outcomes) {
  const DeviceFlight flight = std::move(*device_flight_);
  device_flight_.reset();
  if (outcomes.size() != flight.seqs.size())
    throw Error(fmt::format("serve: {} verify outcomes for {} sequences", outcomes.size(), flight.seqs.size()));
  const double seconds = std::chrono::duration<double>(Clock::now() - flight.queued).count();
  int64_t rows = 0, generated = 0;
  for (size_t i = 0; i < flight.seqs.size(); ++i) {
    const int32_t k = outcomes[i].verified(flight.seqs[i].drafts), accepted = outcomes[i].accepted();
    rows += flight.seqs[i].drafts + 1;
    auto it = std::find_if(active_.begin(), active_.end(), [&](const auto& a) { return a->req == flight.seqs[i].req; });
    if (it == active_.end() || (*it)->done) continue;  // ended while the step ran: its rows are past it
    Active& a = **it;
    if (!outcomes[i].tokens.empty()) account_verify(a, k, accepted);
    for (const int32_t id : outcomes[i].tokens) {
      if (a.done) break;
      a.n_past += 1;
      a.gen.accept(id);  // no grammar on speculating requests
      ++generated;
      deliver(a, id, {});
    }
  }
  draft_policy_.step_timed(int32_t(rows), seconds);
  metrics_.step(int64_t(flight.seqs.size()), rows, generated, seconds);
  if (rows > int64_t(flight.seqs.size())) metrics_.verify_step(rows);
}

void Engine::loop() {
  for (;;) {
    bool cancel_all;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        bool cancelled = std::any_of(active_.begin(), active_.end(), [](const auto& a) { return a->req->cancelled_.load(); });
        return cancel_all_ || !active_.empty() || cancelled || (!queue_.empty() && !free_slots_.empty());
      });
      cancel_all = cancel_all_;
    }
    for (auto& a : active_)
      if (a->req->cancelled_ || cancel_all) release(*a, {Finish::Cancelled});
    std::erase_if(active_, [](const auto& a) { return a->done; });
    if (!cancel_all) admit();
    try {
      run_step();
      run_embed_step();
    } catch (const std::exception& e) {
      // A failed step must not take the server down: fail the requests in
      // it (their slots are reset, so no state leaks into later requests).
      for (auto& a : active_) release(*a, {Finish::Error}, e.what());
      device_flight_.reset();  // its outcome, if the backend still has it, is never read
    }
    std::erase_if(active_, [](const auto& a) { return a->done; });
    std::lock_guard<std::mutex> lock(mu_);
    const StateStore& st = session_->states();
    gauges_.queue_depth = int64_t(queue_.size());
    gauges_.running = int64_t(active_.size());
    gauges_.kv_pages_free = st.free_pages();
    gauges_.kv_pages_cached = cache_->cache.cached_pages();
    gauges_.checkpoints = cache_->cache.checkpoints();
    gauges_.checkpoint_bytes = int64_t(cache_->cache.checkpoint_bytes());
    cv_.notify_all();
    if (cancel_all && active_.empty()) {
      for (auto& r : queue_) r->finish({Finish::Cancelled});
      queue_.clear();
      return;
    }
  }
}

}  // namespace vtc::serve
