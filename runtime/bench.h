// llama-bench style throughput: pp<N> (one prefill of N tokens) and tg<N>
// (N single-token decode steps from an empty context), repeated, reported
// as medians of tokens per second.
//
// Two more measurements for the CPU speed work (issue 15,
// bench/cpu-vs-llamacpp.sh):
// - the batched decode step: B sequences each hold a short prompt (64
//   tokens by default); the time of one decode step of B rows (one token
//   per sequence, one call) against a step of 1 row. A step whose weights
//   are read once for all rows costs little more than one row; a kernel
//   that is compute-bound per row costs B times as much.
// - DRAM read bandwidth: N threads stream through a buffer far larger than
//   the last-level cache, which bounds tg (each token reads every matmul
//   weight once): roofline tok/s = bandwidth / weight_bytes_per_token.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace vtc::gguf {
class GgufFile;
}

namespace vtc {

class Session;

struct BenchSpec {
  int32_t prompt_tokens = 512;   // pp
  int32_t gen_tokens = 128;      // tg
  int32_t repetitions = 3;
  int32_t batch_rows = 0;        // B of the batched decode step (0: not measured)
  int32_t batch_context = 64;    // prompt tokens each sequence holds before the first step
  int32_t batch_steps = 16;      // steps timed per repetition (the mean is one figure)
};

struct BenchFigures {
  std::vector<double> pp_tokens_per_s;  // one per repetition
  std::vector<double> tg_tokens_per_s;
  std::vector<double> step1_ms;         // ms per 1-row decode step, one per repetition
  std::vector<double> stepn_ms;         // ms per batch_rows-row decode step
  // The batched steps' context: ms to prefill batch_context tokens into
  // each of the batch_rows slots, one prompt after another (once, with no
  // warm-up before it: it includes the first step's set-up, which is lost
  // in the time of a long context, the figure it is for). 0: not measured.
  double context_prefill_ms = 0;
  // Which kernels ran: vtc's CPU ISA level ("avx512vnni"), or the
  // instruction sets of llama.cpp's loaded CPU backend ("AVX2 AVX512 ...").
  std::string kernels;
  double pp_median() const;
  double tg_median() const;
  double step1_median() const;
  double stepn_median() const;
};

// Token ids as llama-bench uses them: arbitrary in-vocabulary values,
// `n` of them starting at index `first`.
std::vector<int32_t> bench_tokens(int64_t n, int64_t first, int64_t n_vocab);

double median(std::vector<double> values);
double spread(const std::vector<double>& values);  // max / min (1 for one value, 0 when empty)

using BenchProgress = std::function<void(const std::string&)>;

// Runs pp/tg on `session` (slot 0), on whatever backend it has. tg decodes
// with the ids sampled greedily on the backend and fed back there
// (Session::decode_sampled), as a generation does. `progress` gets a line
// per run.
BenchFigures bench_session(Session& session, const BenchSpec& spec, const BenchProgress& progress = nullptr);

// The batched decode step on `session`, which needs spec.batch_rows slots
// and a context of batch_step_context(spec). Every slot is first
// prefilled with its own batch_context tokens (once: prefills are costly
// on slow builds); then each repetition (after one warm-up) times
// batch_steps 1-row steps (slot 0) and batch_steps B-row steps (slots
// 0..B-1, each at its own next position), so the context grows by
// 2 * batch_steps per repetition. Fills f.step1_ms, f.stepn_ms and
// f.context_prefill_ms.
// `context_ready`, when given, runs between the prefills and the steps
// (vtc bench --profile starts the op profile there).
void bench_batch_step(Session& session, const BenchSpec& spec, BenchFigures& f,
                      const BenchProgress& progress = nullptr, const std::function<void()>& context_ready = nullptr);
int64_t batch_step_context(const BenchSpec& spec);

// The bytes one decoded token reads from the weights: every tensor but
// token_embd (a token reads one row of it), which counts only when the
// head is tied to it (no output.weight). Matmul weights dominate; the norm
// gains (f32 vectors) are included and are under 0.1% of the total.
uint64_t weight_bytes_per_token(const gguf::GgufFile& file);

struct BandwidthSpec {
  uint64_t bytes = uint64_t{1} << 30;  // buffer size: far beyond any LLC
  int threads = 2;
  int repetitions = 5;
};

// DRAM read bandwidth in GB/s (1e9 bytes/s), one figure per repetition
// after a warm-up pass. Each thread first-touches, then repeatedly sums
// its own contiguous slice with 32-byte loads into four independent
// accumulators (so the loop is bound by memory, not by a dependency
// chain). A repetition's time runs from releasing the threads until the
// last one finishes.
std::vector<double> measure_read_bandwidth(const BandwidthSpec& spec);

}  // namespace vtc
