// Speculative sampling keeps the target's distribution (issue 45,
// acceptance 2). A tiny vocabulary of 8 tokens; the target's logits for a
// position depend on the token before it (a fixed random table), the
// drafter proposes three tokens from a different table (its argmax chain),
// so drafts are often wrong. 20 000 two-token continuations are drawn with
// speculation (verify_rows over the draft's rows, serve/engine/speculative/
// verify.h) and 20 000 without, from independent seeds, for temperature 1,
// top-p 0.9 and min-p 0.05; the two samples' histograms over the 64 token
// pairs must pass a chi-square test of homogeneity at p > 0.01. With
// VTC_MUTATION=spec_accept_every_draft (a sampler that keeps every draft
// token) the test fails: tests/serve/spec_mutation_check.sh.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <random>

#include "runtime/sampler.h"
#include "serve/engine/speculative/verify.h"

using namespace vtc;

namespace {

constexpr int kVocab = 8, kSamples = 20000, kDraft = 3;

struct Tables {
  std::array<std::array<float, kVocab>, kVocab> target{}, drafter{};
  Tables() {
    std::mt19937 rng(5);
    std::normal_distribution<float> n(0.0f, 1.5f);
    for (auto& row : target)
      for (float& v : row) v = n(rng);
    for (auto& row : drafter)
      for (float& v : row) v = n(rng);
  }
  int32_t draft_after(int32_t prev) const {
    const auto& r = drafter[size_t(prev)];
    return int32_t(std::max_element(r.begin(), r.end()) - r.begin());
  }
};

// The first two tokens after token 0, without speculation.
int plain_pair(const Tables& t, const SamplingParams& params) {
  Sampler s(params);
  int32_t prev = 0, pair = 0;
  for (int i = 0; i < 2; ++i) {
    prev = s.sample(t.target[size_t(prev)]);
    s.accept(prev);
    pair = pair * kVocab + prev;
  }
  return pair;
}

// The same with one verify step: rows for the token before the draft and
// for each draft token, sampled in order while they confirm the draft.
int speculative_pair(const Tables& t, const SamplingParams& params) {
  Sampler s(params);
  std::vector<int32_t> draft;
  std::vector<float> rows(t.target[0].begin(), t.target[0].end());
  for (int32_t prev = 0; int(draft.size()) < kDraft;) {
    prev = t.draft_after(prev);
    draft.push_back(prev);
    rows.insert(rows.end(), t.target[size_t(prev)].begin(), t.target[size_t(prev)].end());
  }
  std::vector<int32_t> kept;
  serve::verify_rows(
      draft, rows.data(), kVocab, [&](std::span<const float> row) { return s.sample(row); },
      [&](int32_t id, std::span<const float>) {
        s.accept(id);
        kept.push_back(id);
        return kept.size() < 2;
      });
  // A verify step that stopped short (the first draft token rejected):
  // the next token comes from a plain step after the kept one.
  while (kept.size() < 2) {
    const int32_t id = s.sample(t.target[size_t(kept.back())]);
    s.accept(id);
    kept.push_back(id);
  }
  return kept[0] * kVocab + kept[1];
}

// Chi-square test of homogeneity of two equal-sized samples; the p-value by
// the Wilson-Hilferty normal approximation of the chi-square law.
double homogeneity_p(const std::vector<int>& a, const std::vector<int>& b, double& statistic) {
  statistic = 0;
  int cells = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] + b[i] == 0) continue;
    statistic += double(a[i] - b[i]) * (a[i] - b[i]) / (a[i] + b[i]);
    ++cells;
  }
  const double df = cells - 1;
  const double z = (std::cbrt(statistic / df) - (1 - 2 / (9 * df))) / std::sqrt(2 / (9 * df));
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

void check_distribution(const char* name, SamplingParams params) {
  const Tables t;
  std::vector<int> spec(kVocab * kVocab), plain(kVocab * kVocab);
  for (int i = 0; i < kSamples; ++i) {
    params.seed = uint64_t(i + 1);
    ++spec[size_t(speculative_pair(t, params))];
    params.seed = uint64_t(i + 1 + kSamples);
    ++plain[size_t(plain_pair(t, params))];
  }
  double x2 = 0;
  const double p = homogeneity_p(spec, plain, x2);
  INFO(fmt::format("{}: chi-square {:.1f}, p = {:.3g}", name, x2, p));
  CHECK(p > 0.01);
}

SamplingParams plain_chain() {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f;
  return p;
}

}  // namespace

TEST_CASE("speculative sampling draws from the target's distribution (chi-square, 20k samples each)",
          "[spec][spec-distribution]") {
  check_distribution("temperature 1", plain_chain());
  SamplingParams top_p = plain_chain();
  top_p.top_p = 0.9f;
  check_distribution("top-p 0.9", top_p);
  SamplingParams min_p = plain_chain();
  min_p.min_p = 0.05f;
  check_distribution("min-p 0.05", min_p);
}

TEST_CASE("the chi-square test tells two different distributions apart", "[spec][spec-distribution]") {
  // The test's own power: the same draws with the drafter's table as the
  // target's must fail it.
  const Tables t;
  Tables other;
  other.target = t.drafter;
  std::vector<int> a(kVocab * kVocab), b(kVocab * kVocab);
  SamplingParams p = plain_chain();
  for (int i = 0; i < kSamples; ++i) {
    p.seed = uint64_t(i + 1);
    ++a[size_t(plain_pair(t, p))];
    ++b[size_t(plain_pair(other, p))];
  }
  double x2 = 0;
  CHECK(homogeneity_p(a, b, x2) < 1e-6);
}
