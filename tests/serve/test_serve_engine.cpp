// The serving engine in-process: prefix cache bookkeeping, stop strings,
// batched-vs-solo greedy equality, prefix reuse (with checkpoints of the
// recurrent states on state space and hybrid models), cancellation, page
// exhaustion (queueing) and seeded sampling.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <thread>

#include "serve/engine/engine.h"
#include "serve/engine/prefix_cache.h"
#include "serve/engine/output.h"
#include "tests/serve/engine_test_util.h"
#include "tests/serve/serve_fixtures.h"

using namespace vtc;
using namespace std::chrono_literals;
using test::idle_gauges;

namespace {

struct Outcome {
  std::vector<int32_t> ids;
  std::string reason;
};

Outcome collect(const std::shared_ptr<serve::Request>& r) {
  Outcome o;
  for (const auto& e : test::drain(*r)) o.ids.push_back(e.id);
  o.reason = std::string(vtc::serve::finish_name(r->finish_reason().kind));
  return o;
}

serve::GenerationParams greedy(std::vector<int32_t> prompt, int32_t n) {
  serve::GenerationParams p;
  p.prompt = std::move(prompt);
  p.max_tokens = n;
  p.sampling = SamplingParams::greedy();
  return p;
}

std::vector<int32_t> prompt_of(int32_t len, int32_t salt) {
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (int32_t i = 0; i < len; ++i) p[size_t(i)] = 100 + (i * 37 + salt * 101) % 20000;
  p[0] = 1;  // BOS
  return p;
}

serve::EngineOptions options(int32_t parallel, int64_t kv_pages = 0) {
  serve::EngineOptions o;
  o.model = test::tiny_model();
  o.threads = 2;
  o.parallel = parallel;
  o.kv_pages = kv_pages;
  o.max_step_tokens = 64;  // small, so long prompts take several chunked steps
  return o;
}

}  // namespace

TEST_CASE("the prefix cache shares full pages, counts references and evicts LRU leaves", "[serve]") {
  ir::Module m;
  m.add_state("kv.0", ir::StateKind::Paged, {ir::ElemType::F16, {2, ir::Dim::symbol("P"), 16, 1, 4}, ir::Placement::Host});
  StateStore store(m, {2, 64, 8});
  serve::PrefixCache cache(store);
  std::vector<int32_t> tokens(40);
  std::iota(tokens.begin(), tokens.end(), 0);
  REQUIRE(store.reserve(0, 40));  // 3 pages
  cache.insert(tokens, store.page_table(0));
  CHECK(cache.cached_pages() == 2);  // only the 2 full pages
  CHECK(store.page_refs(store.page_table(0)[0]) == 2);
  // 33 tokens: at most (33-1)/16 = 2 pages; 32 tokens: only 1 (the last token is always computed).
  CHECK(cache.lookup(std::span(tokens).first(33)).pages.size() == 2);
  CHECK(cache.lookup(std::span(tokens).first(32)).pages.size() == 1);
  auto other = tokens;
  other[20] = 999;
  CHECK(cache.lookup(other).pages.size() == 1);
  CHECK(cache.evictable() == 0);  // slot 0 still uses them
  store.reset_slot(0);
  CHECK(store.free_pages() == 8 - 2);
  CHECK(cache.evictable() == 2);
  CHECK(cache.evict(1) == 1);  // the leaf goes first
  CHECK(cache.lookup(tokens).pages.size() == 1);
  CHECK(cache.evict(5) == 1);
  CHECK(store.free_pages() == 8);
}

TEST_CASE("stop strings are cut out and text that may start one is held back", "[serve][reference]") {
  serve::EngineOptions o = options(1);
  serve::Metrics metrics;
  serve::Engine engine(o, metrics);
  const Tokenizer& tok = engine.tokenizer();
  auto ids = tok.encode("hello world, stop here", false, false);
  serve::TextStream ts(tok, {"stop"});
  std::string out;
  for (int32_t id : ids) out += ts.push(id);
  out += ts.finish();
  CHECK(ts.stopped());
  // The stream continues a prompt, so the SPM space prefix of the first
  // piece stays (llama-server sends token_to_piece's text).
  CHECK(out == " hello world, ");
  serve::TextStream plain(tok, {"zzz"});
  std::string all;
  for (int32_t id : ids) all += plain.push(id);
  all += plain.finish();
  CHECK(all == " hello world, stop here");
}

TEST_CASE("8 concurrent greedy requests give the same tokens as each alone", "[serve][reference]") {
  serve::Metrics metrics;
  std::vector<std::vector<int32_t>> solo;
  {
    serve::Engine engine(options(1), metrics);
    for (int i = 0; i < 8; ++i) solo.push_back(collect(engine.submit(greedy(prompt_of(20 + 13 * i, i), 12))).ids);
  }
  serve::Engine engine(options(8), metrics);
  std::vector<std::shared_ptr<serve::Request>> reqs;
  for (int i = 0; i < 8; ++i) reqs.push_back(engine.submit(greedy(prompt_of(20 + 13 * i, i), 12)));
  for (int i = 0; i < 8; ++i) {
    INFO("request " << i);
    Outcome o = collect(reqs[size_t(i)]);
    CHECK(o.ids == solo[size_t(i)]);
    CHECK(o.reason == "length");
  }
  auto g = idle_gauges(engine);
  CHECK(g.kv_pages_free + g.kv_pages_cached == g.kv_pages_total);
}

TEST_CASE("a shared prefix is reused from the cache and gives the same tokens", "[serve][reference]") {
  serve::Metrics metrics;
  serve::Engine engine(options(2), metrics);
  auto a = prompt_of(230, 1), b = a;
  b.resize(200);
  for (int32_t i = 0; i < 25; ++i) b.push_back(5000 + i);
  Outcome first = collect(engine.submit(greedy(b, 8)));
  auto r = engine.submit(greedy(a, 8));
  collect(r);
  CHECK(r->cached_tokens() == 192);  // 12 full pages of the 200 shared tokens
  // Same prompt again: everything but the last partial page comes from the cache.
  auto again = engine.submit(greedy(b, 8));
  CHECK(collect(again).ids == first.ids);
  CHECK(again->cached_tokens() == 224);
  CHECK(metrics.cached_prompt_tokens() == 192 + 224);
}

namespace {

// Greedy tokens with the logprobs of each and of its 4 best alternatives:
// what the logits say, compared across engines.
struct Scored {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  int32_t cached = 0;
};

Scored scored(serve::Engine& engine, std::vector<int32_t> prompt) {
  auto p = greedy(std::move(prompt), 10);
  p.top_logprobs = 4;
  auto r = engine.submit(p);
  Scored s;
  for (const auto& e : test::drain(*r)) {
    s.ids.push_back(e.id);
    s.logprobs.push_back(e.logprob);
    for (const auto& [id, lp] : e.top) s.logprobs.push_back(lp);
  }
  s.cached = r->cached_tokens();
  return s;
}

void check_same(const Scored& got, const Scored& want) {
  CHECK(got.ids == want.ids);
  REQUIRE(got.logprobs.size() == want.logprobs.size());
  float worst = 0;
  for (size_t i = 0; i < got.logprobs.size(); ++i) worst = std::max(worst, std::abs(got.logprobs[i] - want.logprobs[i]));
  INFO("worst logprob difference " << worst);
  CHECK(worst <= 1e-4f);
}

// Prompt ids of `len` tokens within the model's vocabulary: each prefix of
// a longer one is the shorter one.
std::vector<int32_t> vocab_prompt(int64_t n_vocab, int32_t len) {
  auto p = prompt_of(len, 1);
  for (size_t i = 1; i < p.size(); ++i) p[i] = 100 + (p[i] - 100) % int32_t(n_vocab - 100);
  return p;
}

// A recurrent model's prefix reuse (engine.h, prefix_cache.h): a prompt of
// 70 tokens is checkpointed at 64; the same prompt again and a longer one
// that extends it resume from there (64 tokens reused) and give the tokens
// and logprobs of an engine that keeps no checkpoints (and so reuses
// nothing). The fresh engine chunks the long prompt at 64 as well (the
// step bound), so the two compute the same sums.
void check_checkpoint_reuse(const std::string& arch, Target target) {
  INFO(arch << " on " << (target == Target::Cuda ? "cuda (simulated)" : "cpu"));
  serve::EngineOptions o = options(2);
  o.model = test::tiny_model_of(arch);
  o.target = target;
  serve::Metrics metrics;
  serve::EngineOptions fresh_options = o;
  fresh_options.checkpoint_bytes = 0;
  Scored fresh_short, fresh_long;
  {
    serve::Engine fresh(fresh_options, metrics);
    fresh_short = scored(fresh, vocab_prompt(fresh.n_vocab(), 70));
    fresh_long = scored(fresh, vocab_prompt(fresh.n_vocab(), 100));
    CHECK(fresh_long.cached == 0);
    CHECK(fresh.gauges().checkpoints == 0);
  }
  serve::Engine engine(o, metrics);
  const Scored first = scored(engine, vocab_prompt(engine.n_vocab(), 70));
  CHECK(first.cached == 0);
  check_same(first, fresh_short);
  const Scored again = scored(engine, vocab_prompt(engine.n_vocab(), 70));
  CHECK(again.cached == 64);
  check_same(again, fresh_short);
  const Scored longer = scored(engine, vocab_prompt(engine.n_vocab(), 100));
  CHECK(longer.cached == 64);
  check_same(longer, fresh_long);
  auto g = idle_gauges(engine);
  CHECK(g.checkpoints == 2);  // at 64 (the 70-token prompt) and at 96 (the 100-token one)
  CHECK(g.checkpoint_bytes > 0);
  CHECK(g.kv_pages_free + g.kv_pages_cached == g.kv_pages_total);
}

}  // namespace

TEST_CASE("a recurrent model resumes a cached prefix from its checkpoint with a fresh engine's tokens",
          "[serve][reference]") {
  for (const char* arch : {"mamba2", "qwen35", "lfm2"}) check_checkpoint_reuse(arch, Target::Cpu);
}

// The checkpoint budget (prefix_cache.h): with room for one checkpoint, a
// second prompt's checkpoint drops the first one's, and with it the pages
// only it made usable; the first prompt then reuses nothing, the second
// all but its tail.
TEST_CASE("past the checkpoint budget the least recently used checkpoint goes with its pages", "[serve][reference]") {
  serve::EngineOptions o = options(1);
  o.model = test::tiny_model_of("mamba2");
  serve::Metrics metrics;
  uint64_t one = 0;
  {
    serve::Engine probe(o, metrics);
    collect(probe.submit(greedy(vocab_prompt(probe.n_vocab(), 70), 2)));
    one = uint64_t(idle_gauges(probe).checkpoint_bytes);
  }
  REQUIRE(one > 0);
  o.checkpoint_bytes = one;
  serve::Engine engine(o, metrics);
  auto a = vocab_prompt(engine.n_vocab(), 70), b = a;
  b[1] = b[1] == 100 ? 101 : 100;  // shares no page with a
  collect(engine.submit(greedy(a, 2)));
  collect(engine.submit(greedy(b, 2)));
  auto g = idle_gauges(engine);
  CHECK(g.checkpoints == 1);
  CHECK(uint64_t(g.checkpoint_bytes) == one);
  CHECK(g.kv_pages_cached == 4);  // b's pages up to its checkpoint at 64; a's went with its checkpoint
  auto again_b = engine.submit(greedy(b, 2)), again_a = engine.submit(greedy(a, 2));
  collect(again_b), collect(again_a);
  CHECK(again_b->cached_tokens() == 64);
  CHECK(again_a->cached_tokens() == 0);
}

TEST_CASE("a recurrent model's checkpoints live on the simulated cuda device and resume the same way",
          "[serve][reference][sim]") {
  ::setenv("VTC_CUDA_DEVICE", "sim", 1);
  check_checkpoint_reuse("mamba2", Target::Cuda);
}

TEST_CASE("a cancelled request gives its pages back and others finish", "[serve][reference]") {
  serve::Metrics metrics;
  serve::Engine engine(options(2), metrics);
  const int64_t total = engine.gauges().kv_pages_total;
  auto keep = engine.submit(greedy(prompt_of(40, 3), 30));
  auto gone = engine.submit(greedy(prompt_of(50, 4), 400));
  std::vector<serve::TokenEvent> ev;
  test::poll_progress(*gone, ev, 1);
  engine.cancel(gone);
  CHECK(collect(gone).reason == "cancelled");
  CHECK(collect(keep).reason == "length");
  // Pages not in the prefix cache are all free again.
  auto g = idle_gauges(engine);
  CHECK(g.kv_pages_free + g.kv_pages_cached == total);
  CHECK(g.running == 0);
}

TEST_CASE("when KV pages run out new requests wait and running ones are untouched", "[serve][reference]") {
  serve::Metrics metrics;
  std::vector<int32_t> alone_a, alone_b;
  {
    serve::Engine engine(options(1), metrics);
    alone_a = collect(engine.submit(greedy(prompt_of(30, 7), 300))).ids;
    alone_b = collect(engine.submit(greedy(prompt_of(30, 8), 40))).ids;
  }
  // 22 pages of 16 positions: a needs 21 (330 positions), so b (5) waits
  // although a slot is free.
  serve::Engine engine(options(3, 22), metrics);
  auto a = engine.submit(greedy(prompt_of(30, 7), 300));
  std::vector<serve::TokenEvent> first;
  test::poll_progress(*a, first, 1);
  auto b = engine.submit(greedy(prompt_of(30, 8), 40));
  std::this_thread::sleep_for(50ms);
  CHECK(engine.gauges().queue_depth == 1);
  CHECK(b->completion_tokens() == 0);
  Outcome oa = collect(a);
  // The first poll may have returned several tokens already.
  std::vector<int32_t> head;
  for (const auto& e : first) head.push_back(e.id);
  oa.ids.insert(oa.ids.begin(), head.begin(), head.end());
  CHECK(oa.ids == alone_a);
  CHECK(collect(b).ids == alone_b);
}

TEST_CASE("sampling with a seed is reproducible", "[serve][reference]") {
  serve::Metrics metrics;
  serve::Engine engine(options(2), metrics);
  auto p = greedy(prompt_of(24, 9), 16);
  p.sampling = SamplingParams{};
  p.sampling.temperature = 1.0f;
  p.sampling.top_k = 0, p.sampling.top_p = 1.0f, p.sampling.min_p = 0.0f;
  p.sampling.seed = 1234;
  auto x = engine.submit(p), y = engine.submit(p);
  auto ox = collect(x), oy = collect(y);
  CHECK(ox.ids == oy.ids);
  p.sampling.seed = 99;
  CHECK(collect(engine.submit(p)).ids != ox.ids);
}

// Device sampling (the @decode step's own `sample` op, ids fed back through
// @last_ids on the backend) exercised on the CPU backend: greedy gives the
// host sampler's tokens, alone or 8 at a time; seeded draws repeat, and a
// request with penalties falls back to host sampling.
TEST_CASE("decode rows sampled on the backend give the host sampler's greedy tokens, batched or alone",
          "[serve][reference]") {
  serve::Metrics metrics;
  std::vector<std::vector<int32_t>> host;
  {
    serve::Engine engine(options(8), metrics);
    for (int i = 0; i < 8; ++i) host.push_back(collect(engine.submit(greedy(prompt_of(20 + 13 * i, i), 12))).ids);
  }
  serve::EngineOptions o = options(8);
  o.device_sampling = true;
  serve::Engine engine(o, metrics);
  CHECK(collect(engine.submit(greedy(prompt_of(20, 0), 12))).ids == host[0]);
  std::vector<std::shared_ptr<serve::Request>> reqs;
  for (int i = 0; i < 8; ++i) reqs.push_back(engine.submit(greedy(prompt_of(20 + 13 * i, i), 12)));
  for (int i = 0; i < 8; ++i) {
    INFO("request " << i);
    Outcome out = collect(reqs[size_t(i)]);
    CHECK(out.ids == host[size_t(i)]);
    CHECK(out.reason == "length");
  }
  auto p = greedy(prompt_of(24, 9), 16);
  p.sampling = SamplingParams{};
  p.sampling.temperature = 1.0f;
  p.sampling.top_k = 0, p.sampling.top_p = 1.0f, p.sampling.min_p = 0.0f;
  p.sampling.seed = 1234, p.sampling.seed_exact = true;
  auto x = engine.submit(p), y = engine.submit(p);
  const auto ox = collect(x), oy = collect(y);
  CHECK(ox.ids.size() == 16);
  CHECK(ox.ids == oy.ids);
  p.sampling.seed = 99;
  CHECK(collect(engine.submit(p)).ids != ox.ids);
  // Penalties need the logits on the host: the same request sampled there.
  auto penalized = greedy(prompt_of(30, 5), 12);
  penalized.sampling.repeat_penalty = 1.3f;
  serve::Engine host_engine(options(2), metrics);
  CHECK(collect(engine.submit(penalized)).ids == collect(host_engine.submit(penalized)).ids);
  auto g = idle_gauges(engine);
  CHECK(g.kv_pages_free + g.kv_pages_cached == g.kv_pages_total);
}

TEST_CASE("the tests' poll helper fails a request that sends nothing instead of waiting forever", "[serve]") {
  serve::Request never_scheduled;  // no engine: no event will ever come
  std::vector<serve::TokenEvent> events;
  REQUIRE_THROWS_WITH(test::poll_progress(never_scheduled, events, SIZE_MAX, 1s),
                      Catch::Contains("stalled: no token for 1 s after 0 tokens"));
}
