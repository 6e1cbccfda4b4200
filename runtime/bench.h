// llama-bench style throughput: pp<N> (one prefill of N tokens) and tg<N>
// (N single-token decode steps from an empty context), repeated, reported
// as medians of tokens per second.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace vtc::cpu {
class Session;
}

namespace vtc {

struct BenchSpec {
  int32_t prompt_tokens = 512;   // pp
  int32_t gen_tokens = 128;      // tg
  int32_t repetitions = 3;
};

struct BenchFigures {
  std::vector<double> pp_tokens_per_s;  // one per repetition
  std::vector<double> tg_tokens_per_s;
  double pp_median() const;
  double tg_median() const;
};

double median(std::vector<double> values);

// Runs the benchmark on `session` (slot 0). `progress` gets a line per run.
BenchFigures bench_session(cpu::Session& session, const BenchSpec& spec,
                           const std::function<void(const std::string&)>& progress = nullptr);

}  // namespace vtc
