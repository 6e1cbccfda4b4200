// One greedy run of a model, by vtc's CPU session or by the llama.cpp
// reference (vtc-ref), for the differential e2e tests: the logits of every
// prompt position, then kDecode greedy tokens (the first from the prompt's
// last row).
#pragma once

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "runtime/cpu/kernels/kernels.h"
#include "runtime/session.h"
#include "tests/reference_logits.h"
#include "tests/test_process.h"

namespace vtc::test {

constexpr int kDecode = 16;

struct LogitsRun {
  std::vector<std::vector<float>> logits;  // one row per prompt position
  std::vector<int32_t> greedy;             // kDecode tokens
};

inline int32_t argmax_of(const std::vector<float>& row) {
  return int32_t(cpu::argmax(row.data(), int64_t(row.size())));
}

// The reference on the prompt; `extra` are more vtc-ref options (--ubatch,
// --threads). repack=false runs its plain kernels (--no-repack).
inline LogitsRun reference_run(const std::string& model, const std::vector<int32_t>& prompt, bool repack,
                               const std::string& extra = "") {
  ReferenceLogits ref = reference_logits(VTC_REF_TOOL, fmt::format("{} {} --tokens {} --n-predict {}{}", model, extra,
                                                                    fmt::join(prompt, ","), kDecode,
                                                                    repack ? "" : " --no-repack"));
  INFO(model);
  REQUIRE(ref.all_finite);
  LogitsRun r{std::move(ref.logits), std::move(ref.greedy)};
  REQUIRE(r.logits.size() == prompt.size());
  return r;
}

// vtc's CPU session: prefill in the given chunk sizes (summing to the
// prompt; empty = one chunk), then greedy decode.
inline LogitsRun vtc_run(const std::string& model, const std::vector<int32_t>& prompt,
                         std::vector<size_t> chunks = {}) {
  if (chunks.empty()) chunks = {prompt.size()};
  Session s(model, {.threads = 2, .n_ctx = 256});
  LogitsRun r;
  size_t at = 0;
  for (size_t n : chunks) {
    HostTensor logits = s.prefill(0, std::span(prompt).subspan(at, n), int32_t(at), true);
    for (size_t i = 0; i < n; ++i) r.logits.push_back(logits.row(int64_t(i)));
    at += n;
  }
  REQUIRE(at == prompt.size());
  r.greedy.push_back(argmax_of(r.logits.back()));
  for (int i = 1; i < kDecode; ++i) {
    const int32_t pos = int32_t(prompt.size()) + i - 1;
    auto next = s.decode(std::vector<int32_t>{0}, std::vector<int32_t>{r.greedy.back()}, std::vector<int32_t>{pos});
    r.greedy.push_back(argmax_of(next.row(0)));
  }
  return r;
}

}  // namespace vtc::test
