// Sampler: greedy, each truncation step, penalties, temperature, seeds.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>

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

TEST_CASE("the same seed gives the same draws; another seed differs", "[sampler]") {
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
