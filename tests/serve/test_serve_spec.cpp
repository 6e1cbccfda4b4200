// Speculative decoding in the serving engine (issue 45, acceptance 3): 8
// concurrent requests, some speculating and some not, some greedy and some
// sampled, each give the tokens of its solo run without speculation (a
// kept token is one draw of the request's own sampler, so sampled requests
// repeat too: serve/engine/speculative/verify.h); on an attention model and
// hybrids with recurrent state (their rollback restores a checkpoint), on
// the CPU (sampling on the host, and on the backend) and (5 requests, jamba,
// sampling on the device) the simulated CUDA device, where n-gram requests
// draft on the device, greedy and sampled. A request cancelled between verify
// steps gives every page back. The per-request fields: "speculative":
// false opts out, speculative.n_max bounds the draft.
#include <catch2/catch.hpp>

#include <thread>

#include "serve/engine/engine.h"
#include "serve/engine/output.h"
#include "tests/serve/engine_test_util.h"
#include "tests/serve/serve_fixtures.h"

using namespace vtc;
using namespace std::chrono_literals;
using test::idle_gauges;

namespace {

std::vector<int32_t> tokens_of(const std::shared_ptr<serve::Request>& r) {
  const std::vector<serve::TokenEvent> events = test::drain(*r);
  std::vector<int32_t> ids;
  for (const auto& e : events) ids.push_back(e.id);
  INFO("request error: " << r->error());
  CHECK(r->error().empty());
  return ids;
}

// Request i: a passage said twice (so n-gram lookups have something), greedy
// for even i, seeded sampling for odd i; every fourth opts out.
serve::GenerationParams request(int i, int64_t n_vocab) {
  serve::GenerationParams p;
  for (int rep = 0; rep < 2; ++rep)
    for (int t = 0; t < 12; ++t) p.prompt.push_back(int32_t(1 + (t * 7919 + i * 104729) % (n_vocab - 1)));
  p.max_tokens = 40;
  p.sampling = SamplingParams::greedy();
  if (i % 2 == 1) p.sampling = SamplingParams{}, p.sampling.temperature = 1.0f, p.sampling.seed = uint64_t(100 + i);
  p.speculative.enabled = i % 4 != 3;
  return p;
}

serve::EngineOptions options(const std::string& arch, Target target, int32_t parallel, serve::SpecMode mode,
                             bool device_sampling) {
  serve::EngineOptions o;
  o.model = arch == "gemma2-cycling" ? test::cycling_gemma2() : test::tiny_model_of(arch);
  o.target = target;
  o.threads = target == Target::Cuda ? 1 : 2;
  o.parallel = parallel;
  // 64: prompts chunked across steps. Past 16 requests, every prompt (24
  // tokens) in one step, so that all of them then decode at once.
  o.max_step_tokens = parallel > 16 ? 24 * parallel : 64;
  o.spec.mode = mode;
  if (mode == serve::SpecMode::Draft) o.spec.draft_model = test::tiny_model_of(arch, 43);  // other weights: rejections
  o.spec.adaptive = false;  // verify every draft, so most steps roll back
  o.spec.draft_max = 4;
  o.spec.p_min = 0;
  // Plain requests sample with the host's sampler or with the step's
  // `sample` op on the backend (two different draws for one seed);
  // speculating ones draw their verify rows by the same rule, on the host
  // (DeviceSampling::draw_on_host), so either way they repeat the plain run.
  o.device_sampling = device_sampling;
  return o;
}

// A metric's value in a /metrics rendering (-1 when absent).
double metric(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
}

// `n` requests (8 on the CPU; the simulated device runs fewer, shorter
// ones) with speculation, at once, against each alone without. On CUDA a
// step that verifies drafts holds at most 16 rows (Backend::
// verify_step_rows: past that the executor's decode-form GEMVs read the
// weights once per 8 rows), which the rows histogram shows.
// `greedy_only`: every request greedy and speculating, of different lengths.
void check_concurrent_equals_solo(const std::string& arch, Target target, int n, int32_t max_tokens,
                                  std::vector<serve::SpecMode> modes, bool device_sampling = false,
                                  bool greedy_only = false) {
  INFO(arch << " on " << (target == Target::Cuda ? "cuda (simulated)" : "cpu")
            << (device_sampling ? ", sampling on the backend" : ", sampling on the host"));
  serve::Metrics metrics;
  std::vector<std::vector<int32_t>> solo;
  auto make = [&](int i, int64_t n_vocab) {
    auto p = request(i, n_vocab);
    p.max_tokens = max_tokens;
    if (greedy_only) p.sampling = SamplingParams::greedy(), p.speculative.enabled = true, p.max_tokens -= 5 * (i % 4);
    return p;
  };
  {
    serve::Engine plain(options(arch, target, 1, serve::SpecMode::Off, device_sampling), metrics);
    for (int i = 0; i < n; ++i) solo.push_back(tokens_of(plain.submit(make(i, plain.n_vocab()))));
  }
  for (serve::SpecMode mode : modes) {
    INFO("--spec " << serve::spec_mode_name(mode));
    serve::Metrics spec_metrics;
    serve::Engine engine(options(arch, target, n, mode, device_sampling), spec_metrics);
    std::vector<std::shared_ptr<serve::Request>> reqs;
    for (int i = 0; i < n; ++i) reqs.push_back(engine.submit(make(i, engine.n_vocab())));
    int64_t drafted = 0;
    for (int i = 0; i < n; ++i) {
      INFO("request " << i);
      CHECK(tokens_of(reqs[size_t(i)]) == solo[size_t(i)]);
      if (i % 4 == 3 && !greedy_only) CHECK(reqs[size_t(i)]->draft_tokens() == 0);
      // N-gram requests draft on the device (a recurrent model's rollback
      // too): greedy ones, and with sampling on the device the sampled
      // ones; the others on the host.
      const bool speculating = greedy_only || i % 4 != 3;
      const bool on_device = target == Target::Cuda && mode == serve::SpecMode::Ngram && speculating &&
                             (i % 2 == 0 || greedy_only || device_sampling);
      CHECK(reqs[size_t(i)]->drafted_on_device() == on_device);
      drafted += reqs[size_t(i)]->draft_tokens();
    }
    // The draft model drafts at every step; with other weights it is
    // mostly wrong, so rollback ran.
    if (mode == serve::SpecMode::Draft) {
      CHECK(drafted > 0);
      CHECK(spec_metrics.render(engine.gauges()).find("vtc_spec_verifies_total 0\n") == std::string::npos);
    }
    auto g = idle_gauges(engine);
    CHECK(g.kv_pages_free + g.kv_pages_cached == g.kv_pages_total);
    if (target == Target::Cuda) {
      const std::string text = spec_metrics.render(g);
      const double verify_steps = metric(text, "vtc_spec_step_tokens_count");
      CHECK(verify_steps > 0);
      CHECK(metric(text, "vtc_spec_step_tokens_bucket{le=\"16\"}") == verify_steps);
      // More requests than a step's 16 rows ran in one step.
      if (n > 16) CHECK(metric(text, "vtc_batch_sequences_bucket{le=\"16\"}") < metric(text, "vtc_batch_sequences_count"));
    }
  }
}

}  // namespace

TEST_CASE("speculating and plain requests, greedy and sampled, 8 at once, give their solo tokens", "[serve][reference][spec]") {
  check_concurrent_equals_solo("llama", Target::Cpu, 8, 40, {serve::SpecMode::Draft, serve::SpecMode::Ngram});
  check_concurrent_equals_solo("qwen35", Target::Cpu, 8, 40, {serve::SpecMode::Draft, serve::SpecMode::Ngram});
  // The sampled requests' plain draws by the backend's `sample` op (the
  // default on CUDA), which the CPU interpreter runs too.
  check_concurrent_equals_solo("llama", Target::Cpu, 8, 40, {serve::SpecMode::Draft}, true);
}

TEST_CASE("speculating requests on the simulated cuda device give their solo tokens", "[serve][reference][spec][sim]") {
  ::setenv("VTC_CUDA_DEVICE", "sim", 1);
  // jamba: recurrent states (Mamba) and attention, and a 32k vocabulary
  // (qwen35's 152k makes every simulated step slow).
  // Sampling on the device, its default there.
  // 5 requests, 4 of them drafting up to 4 tokens: 20 rows a step
  // uncapped. The n-gram ones draft on the device, where a rejected draft
  // restores the Mamba states from the device's checkpoint.
  check_concurrent_equals_solo("jamba", Target::Cuda, 5, 16, {serve::SpecMode::Draft, serve::SpecMode::Ngram}, true);
}

TEST_CASE("greedy and sampled n-gram requests on the simulated cuda device draft there, batched, and give their solo tokens",
          "[serve][reference][spec][sim]") {
  ::setenv("VTC_CUDA_DEVICE", "sim", 1);
  // Requests 0, 1, 2, 4 verify on the device in one step (Engine::
  // run_device_verify; 1 samples, drawn on the device), 3 decodes on the
  // device unspeculated.
  check_concurrent_equals_solo("gemma2-cycling", Target::Cuda, 5, 24, {serve::SpecMode::Ngram}, true);
  // Only device verifies to run: their steps are pipelined, the host reading
  // each step's outcomes after it has queued the next; requests end (at 36,
  // 31, 26 and 21 tokens) while a step for them is in flight.
  check_concurrent_equals_solo("gemma2-cycling", Target::Cuda, 4, 36, {serve::SpecMode::Ngram}, true, true);
}

TEST_CASE("more greedy n-gram requests on the simulated cuda device than a step's 16 rows all make progress",
          "[serve][reference][spec][sim]") {
  ::setenv("VTC_CUDA_DEVICE", "sim", 1);
  // 18 at once: while all of them run, each verifies k = 0 (none is left
  // out of the step, which would stall them all), and they draft again as
  // the first ones end.
  check_concurrent_equals_solo("gemma2-cycling", Target::Cuda, 18, 20, {serve::SpecMode::Ngram}, true, true);
}

TEST_CASE("a speculating request cancelled between verify steps gives its pages back", "[serve][reference][spec]") {
  serve::Metrics metrics;
  serve::Engine engine(options("llama", Target::Cpu, 2, serve::SpecMode::Draft, false), metrics);
  const int64_t total = engine.gauges().kv_pages_total;
  auto p = request(0, engine.n_vocab());
  p.max_tokens = 400;
  auto gone = engine.submit(p);
  auto keep = engine.submit(request(2, engine.n_vocab()));
  std::vector<serve::TokenEvent> ev;
  test::poll_progress(*gone, ev, 8);
  engine.cancel(gone);
  tokens_of(gone);
  CHECK(std::string(serve::finish_name(gone->finish_reason().kind)) == "cancelled");
  CHECK(gone->draft_tokens() > 0);
  tokens_of(keep);
  auto g = idle_gauges(engine);
  CHECK(g.kv_pages_free + g.kv_pages_cached == total);
  CHECK(g.running == 0);
}

TEST_CASE("speculative.n_max bounds a request's drafts", "[serve][reference][spec]") {
  serve::Metrics metrics;
  serve::Engine engine(options("llama", Target::Cpu, 1, serve::SpecMode::Draft, false), metrics);
  auto p = request(0, engine.n_vocab());
  p.speculative.n_max = 1;
  auto r = engine.submit(p);
  const auto ids = tokens_of(r);
  CHECK(r->draft_tokens() > 0);
  CHECK(r->draft_tokens() <= int32_t(ids.size()));  // at most one per step
}
