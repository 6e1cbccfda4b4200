// Sampler: greedy, each truncation step, penalties, temperature, seeds.
#include <catch2/catch.hpp>

#include <cmath>
#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "runtime/sampler.h"

using namespace vtc;

namespace {
SamplingParams only_temperature(float t, uint64_t seed = 1) {
  SamplingParams p = SamplingParams::greedy();
  p.temperature = t;
  p.seed = seed;
  return p;
}
std::vector<int32_t> draws(SamplingParams p, const std::vector<float>& logits, int n) {
  Sampler s(p);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(s.sample(logits));
  return out;
}
}  // namespace

TEST_CASE("greedy picks the argmax, lowest id on ties", "[sampler]") {
  Sampler s(SamplingParams::greedy());
  CHECK(s.sample(std::vector<float>{0.1f, 3.0f, -1.0f, 2.9f}) == 1);
  CHECK(s.sample(std::vector<float>{5.0f, 1.0f, 5.0f}) == 0);
  // logprobs: the full softmax, best first.
  auto& c = s.last_candidates();
  REQUIRE(c.size() == 3);
  CHECK(c[0].id == 0);
  CHECK(c[1].id == 2);
  CHECK(c[0].prob + c[1].prob + c[2].prob == Approx(1.0));
}

TEST_CASE("the same seed gives the same draws, and another seed differs", "[sampler]") {
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(std::sin(double(i)));
  auto a = draws(only_temperature(1.0f, 7), logits, 50);
  auto b = draws(only_temperature(1.0f, 7), logits, 50);
  auto c = draws(only_temperature(1.0f, 8), logits, 50);
  CHECK(a == b);
  CHECK(a != c);
}

TEST_CASE("temperature 1 draws follow the softmax", "[sampler]") {
  std::vector<float> logits = {0.0f, std::log(2.0f), std::log(7.0f)};  // p = 0.1, 0.2, 0.7
  std::map<int32_t, int> counts;
  const int n = 20000;
  for (int32_t t : draws(only_temperature(1.0f, 3), logits, n)) counts[t]++;
  CHECK(counts[0] / double(n) == Approx(0.1).margin(0.015));
  CHECK(counts[1] / double(n) == Approx(0.2).margin(0.015));
  CHECK(counts[2] / double(n) == Approx(0.7).margin(0.015));
}

TEST_CASE("top-k, top-p and min-p keep exactly the expected candidates", "[sampler]") {
  // Probabilities 0.4, 0.3, 0.2, 0.1 (ids in that order).
  std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.1f)};
  auto survivors = [&](SamplingParams p) {
    Sampler s(p);
    s.sample(logits);
    std::vector<int32_t> ids;
    for (auto& c : s.last_candidates()) ids.push_back(c.id);
    return ids;
  };
  SamplingParams p = only_temperature(1.0f);
  p.top_k = 2;
  CHECK(survivors(p) == std::vector<int32_t>{0, 1});
  p = only_temperature(1.0f);
  p.top_p = 0.75f;  // 0.4 + 0.3 < 0.75 <= 0.9
  CHECK(survivors(p) == std::vector<int32_t>{0, 1, 2});
  p = only_temperature(1.0f);
  p.min_p = 0.6f;  // keeps p >= 0.24
  CHECK(survivors(p) == std::vector<int32_t>{0, 1});
}

TEST_CASE("penalties follow the reference's formulas", "[sampler]") {
  SamplingParams p = SamplingParams::greedy();
  p.repeat_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  Sampler s(p);
  s.accept(0);
  s.accept(0);
  s.accept(1);
  // id0: 4/2 - 2*0.5 - 0.25 = 0.75; id1: -1*2 - 0.5 - 0.25 = -2.75; id2 untouched 1.0
  CHECK(s.sample(std::vector<float>{4.0f, -1.0f, 1.0f}) == 2);
  std::map<int32_t, float> logit;
  for (auto& c : s.last_candidates()) logit[c.id] = c.logit;
  CHECK(logit[0] == Approx(0.75f));
  CHECK(logit[1] == Approx(-2.75f));
  CHECK(logit[2] == Approx(1.0f));
}

TEST_CASE("the penalty window forgets old tokens", "[sampler]") {
  SamplingParams p = SamplingParams::greedy();
  p.presence_penalty = 10.0f;
  p.penalty_last_n = 2;
  Sampler s(p);
  s.accept(0);
  s.accept(1);
  s.accept(2);  // 0 leaves the window
  CHECK(s.sample(std::vector<float>{1.0f, 1.5f, 1.5f}) == 0);
}

// --- The O(vocab) chain against a naive reference ------------------------------
//
// The reference is the straightforward chain: sort the whole vocabulary,
// truncate (top-k, top-p, min-p on the temperature-1 softmax), divide by the
// temperature, softmax. The sampler must keep exactly its survivors with
// the same probabilities, and draw from them in proportion.

namespace {

struct RefCandidate {
  int32_t id;
  float logit, prob;
};

std::vector<RefCandidate> reference_survivors(const SamplingParams& p, std::vector<float> logits,
                                              const std::vector<int32_t>& history) {
  std::map<int32_t, int> counts;
  for (int32_t t : history) counts[t]++;
  for (auto& [t, n] : counts) {
    float& l = logits[size_t(t)];
    l = l > 0 ? l / p.repeat_penalty : l * p.repeat_penalty;
    l -= float(n) * p.frequency_penalty + p.presence_penalty;
  }
  std::vector<RefCandidate> c;
  for (size_t i = 0; i < logits.size(); ++i) c.push_back({int32_t(i), logits[i], 0});
  std::sort(c.begin(), c.end(), [](auto& a, auto& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); });
  auto softmax = [&] {
    double z = 0;
    for (auto& x : c) z += std::exp(double(x.logit) - c.front().logit);
    for (auto& x : c) x.prob = float(std::exp(double(x.logit) - c.front().logit) / z);
  };
  if (p.top_k > 0 && size_t(p.top_k) < c.size()) c.resize(size_t(p.top_k));
  softmax();
  if (p.top_p < 1) {
    double cum = 0;
    for (size_t i = 0; i < c.size(); ++i)
      if ((cum += c[i].prob) >= p.top_p) {
        c.resize(i + 1);
        break;
      }
  }
  if (p.min_p > 0) {
    const float th = c.front().prob * p.min_p;
    size_t keep = 0;
    while (keep < c.size() && c[keep].prob >= th) ++keep;
    c.resize(std::max<size_t>(keep, 1));
  }
  for (auto& x : c) x.logit /= p.temperature;
  softmax();
  return c;
}

std::vector<float> random_logits(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  v[n / 3] = v[n / 5];  // a tie
  return v;
}

}  // namespace

TEST_CASE("top-k, top-p and min-p survivors equal the full-sort reference", "[sampler]") {
  const std::vector<float> logits = random_logits(5000, 11);
  const std::vector<int32_t> history = {3, 3, 17, 4000, 2500};
  int checked = 0;
  for (int32_t k : {0, 1, 40, 700, 5000, 9000})
    for (float top_p : {1.0f, 0.95f, 0.5f, 0.01f})
      for (float min_p : {0.0f, 0.05f, 0.5f})
        for (float t : {0.5f, 1.0f, 1.7f}) {
          SamplingParams p = only_temperature(t, 5);
          p.top_k = k, p.top_p = top_p, p.min_p = min_p;
          p.repeat_penalty = 1.3f, p.frequency_penalty = 0.2f, p.presence_penalty = 0.1f;
          Sampler s(p);
          for (int32_t h : history) s.accept(h);
          const int32_t drawn = s.sample(logits);
          const auto ref = reference_survivors(p, logits, history);
          const auto& got = s.last_candidates();
          INFO("top_k " << k << " top_p " << top_p << " min_p " << min_p << " T " << t);
          REQUIRE(got.size() == ref.size());
          bool same = true;
          for (size_t i = 0; i < ref.size(); ++i)
            same = same && got[i].id == ref[i].id && got[i].logit == Approx(ref[i].logit) &&
                   got[i].prob == Approx(ref[i].prob).margin(1e-6);
          CHECK(same);
          CHECK(std::any_of(ref.begin(), ref.end(), [&](auto& c) { return c.id == drawn; }));
          ++checked;
        }
  CHECK(checked == 6 * 4 * 3 * 3);
}

TEST_CASE("sampled draws follow the truncated, tempered softmax", "[sampler]") {
  // p at temperature 1: 0.05 0.1 0.15 0.2 0.5 (ids 0..4), 5 near-zero tail ids.
  std::vector<float> logits = {std::log(0.05f), std::log(0.1f), std::log(0.15f), std::log(0.2f), std::log(0.5f),
                               -30, -30, -30, -30, -30};
  auto frequencies = [&](SamplingParams p, int n) {
    std::vector<double> f(logits.size());
    for (int32_t t : draws(p, logits, n)) f[size_t(t)] += 1.0 / n;
    return f;
  };
  const int n = 40000;
  SECTION("temperature 0.8, no truncation (the OpenAI defaults)") {
    std::vector<double> expect(logits.size());
    double z = 0;
    for (size_t i = 0; i < logits.size(); ++i) z += expect[i] = std::exp(logits[i] / 0.8);
    auto f = frequencies(only_temperature(0.8f, 42), n);
    for (size_t i = 0; i < logits.size(); ++i) CHECK(f[i] == Approx(expect[i] / z).margin(0.01));
  }
  SECTION("top-k 3 renormalizes over ids 4, 3, 2") {
    SamplingParams p = only_temperature(1.0f, 43);
    p.top_k = 3;
    auto f = frequencies(p, n);
    CHECK(f[4] == Approx(0.5 / 0.85).margin(0.01));
    CHECK(f[3] == Approx(0.2 / 0.85).margin(0.01));
    CHECK(f[2] == Approx(0.15 / 0.85).margin(0.01));
    CHECK(f[0] + f[1] == 0.0);
  }
  SECTION("top-p 0.6 keeps ids 4 and 3") {
    SamplingParams p = only_temperature(1.0f, 44);
    p.top_p = 0.6f;
    auto f = frequencies(p, n);
    CHECK(f[4] == Approx(0.5 / 0.7).margin(0.01));
    CHECK(f[3] == Approx(0.2 / 0.7).margin(0.01));
  }
}

TEST_CASE("seeds use all 64 bits, below 2^32 as llama.cpp's mt19937, and an explicit 4294967295 is reproducible", "[sampler]") {
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(std::sin(double(i)));
  const auto a = draws(only_temperature(1.0f, 1), logits, 50);
  CHECK(a != draws(only_temperature(1.0f, (uint64_t(1) << 32) + 1), logits, 50));
  CHECK(a != draws(only_temperature(1.0f, (uint64_t(1) << 33) + 1), logits, 50));
  CHECK(draws(only_temperature(1.0f, (uint64_t(1) << 32) + 1), logits, 50) !=
        draws(only_temperature(1.0f, (uint64_t(1) << 33) + 1), logits, 50));
  CHECK(Sampler(only_temperature(1.0f, (uint64_t(1) << 33) + 7)).seed() == (uint64_t(1) << 33) + 7);
  SamplingParams exact = only_temperature(1.0f, SamplingParams::kRandomSeed);
  exact.seed_exact = true;
  CHECK(draws(exact, logits, 50) == draws(exact, logits, 50));
  // Without seed_exact, kRandomSeed (vtc run's convention) picks a random seed.
  const SamplingParams random = only_temperature(1.0f, SamplingParams::kRandomSeed);
  CHECK(draws(random, logits, 50) != draws(random, logits, 50));
}

// --- llama.cpp's draw, written out -------------------------------------------
//
// The reference chain for top-k (k <= 128) and temperature, as
// src/llama-sampler.cpp runs it: the whole vocabulary as llama_token_data
// in id order, std::partial_sort by logit alone (so ties land where
// libstdc++ puts them), logits divided by the temperature, then dist:
// expf(logit - max) in float, summed in double, one uniform double from
// std::mt19937(seed), the first index whose running sum reaches sum * u.
// The sampler replays the partial sort on a k + 1 slot heap; the order
// must be the same, ties included, or the draws differ.

namespace {

struct TokenData {
  int32_t id;
  float logit, p;
};

std::vector<int32_t> reference_top_k_draws(const std::vector<float>& logits, int k, float temp, uint32_t seed, int n) {
  std::mt19937 rng(seed);
  std::vector<int32_t> out;
  for (int t = 0; t < n; ++t) {
    std::vector<TokenData> cur;
    for (size_t i = 0; i < logits.size(); ++i) cur.push_back({int32_t(i), logits[i], 0.0f});
    auto comp = [](const TokenData& a, const TokenData& b) { return a.logit > b.logit; };
    std::partial_sort(cur.begin(), cur.begin() + k, cur.end(), comp);
    cur.resize(size_t(k));
    if (temp <= 0) {
      size_t max_i = 0;
      for (size_t i = 1; i < cur.size(); ++i)
        if (cur[i].logit > cur[max_i].logit) cur[max_i].logit = -INFINITY, max_i = i;
        else cur[i].logit = -INFINITY;
    } else {
      for (auto& c : cur) c.logit /= temp;
    }
    std::uniform_real_distribution<double> u(0.0, 1.0);
    if (cur.size() == 1) {
      u(rng);
      out.push_back(cur[0].id);
      continue;
    }
    double sum = 0;
    for (auto& c : cur) sum += c.p = expf(c.logit - cur[0].logit);
    const double target = sum * u(rng);
    double run = 0;
    size_t pick = cur.size() - 1;
    for (size_t i = 0; i < cur.size(); ++i)
      if ((run += cur[i].p) >= target) {
        pick = i;
        break;
      }
    out.push_back(cur[pick].id);
  }
  return out;
}

}  // namespace

TEST_CASE("top-k draws equal llama.cpp's partial sort and dist, ties included", "[sampler]") {
  // Logits on a coarse grid: most values are shared by many ids.
  std::mt19937 g(5);
  std::vector<float> logits(3000);
  for (auto& x : logits) x = float(int(g() % 9)) * 0.5f;
  for (int k : {1, 2, 7, 40, 128})
    for (float temp : {0.0f, 0.7f, 1.5f}) {
      SamplingParams p = only_temperature(temp, 1234);
      p.top_k = k;
      INFO("top_k " << k << " T " << temp);
      CHECK(draws(p, logits, 200) == reference_top_k_draws(logits, k, temp, 1234, 200));
    }
}

TEST_CASE("greedy keeps the first maximum and still draws once", "[sampler]") {
  // Ties at the maximum: without top-k the lowest id; with top-k the first
  // one partial_sort leaves, which need not be the lowest.
  std::vector<float> logits(500, 0.0f);
  for (int i : {17, 250, 3, 499}) logits[size_t(i)] = 2.0f;
  SamplingParams p = SamplingParams::greedy();
  CHECK(draws(p, logits, 3) == std::vector<int32_t>{3, 3, 3});
  p.top_k = 40;
  CHECK(draws(p, logits, 3) == reference_top_k_draws(logits, 40, 0.0f, uint32_t(p.seed), 3));
}
