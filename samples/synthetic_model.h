// Synthetic GGUF models with random weights and a real tokenizer.
//
// The generator writes complete, reference-loadable models for the dense
// architectures (llama, qwen2, qwen3, and gemma2 and gemma3 with their
// sliding-window layers), the MoE qwen3moe and gpt-oss (biased experts,
// attention sinks, sliding window), and the hybrid
// Gated-DeltaNet architectures qwen35 (dense FFN), qwen35moe, qwen3next
// (MoE with a gated shared expert) and qwen4exp (qwen35moe plus
// hyper-connections, PLE n-gram embeddings and QSA sparse attention), and
// the llama-like families phi3 (fused qkv and gate|up, LongRoPE factors),
// deepseek2 (MLA with q/kv low-rank projections, a leading dense block,
// grouped sigmoid routing with a selection bias, a shared expert),
// glm4moe (partial rotary, q/k/v biases, QK-norm, the same MoE with one
// group), granite (its four multipliers; MoE with a shared expert under
// `moe`), smollm3 (a no-rope layer every 4th), command-r (layer norms,
// parallel block, logit scale), olmoe (full-width QK-norm, experts),
// qwen2moe (experts plus a sigmoid-gated shared expert), mistral3 (yarn
// rope) and llama4 (chunked attention, no-rope layers, interleaved top-1
// MoE with a shared expert), and the encoder bert (bidirectional
// attention, token-type and position embeddings, biased layer norms, a GELU
// FFN; bge's WordPiece vocabulary), so
// every test and benchmark runs on a model the project makes itself. Weights are *sensitive* on purpose (see
// DESIGN.md, "Correctness references"): norm gains are near 1 and matrices
// have a standard deviation of 1/sqrt(fan_in), so each layer moves the
// logits and a broken layer cannot hide under a tolerance.
//
// Determinism: each tensor's values come from its own stream seeded by
// (seed, tensor name), so output depends only on the options, not on the
// order in which tensors are produced.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "support/ggml_type.h"

namespace vtc::synth {

struct ModelShape {
  uint32_t n_embd = 0;
  uint32_t n_ff = 0;
  uint32_t n_layer = 0;
  uint32_t n_head = 0;
  uint32_t n_head_kv = 0;
  uint32_t head_dim = 0;
  uint32_t n_ctx = 0;
};

struct Options {
  // llama | qwen2 | qwen3 | qwen3moe (8 experts, 2 used) | qwen35 | qwen35moe | qwen3next
  // | qwen4exp (hybrid: DeltaNet layers with every full_attention_interval-th
  // layer full attention) | gemma2 | gemma3 (tied head; sliding window
  // n_ctx / 4 on the local layers) | gpt-oss (8 experts, 2 used; sliding
  // window n_ctx / 4 on every other layer; yarn rope keys unless
  // rope_scaling says otherwise) | phi3 | deepseek2 | glm4moe | granite |
  // smollm3 | command-r | olmoe | qwen2moe | mistral3 (yarn unless
  // rope_scaling says otherwise) | llama4 (see the header comment; each
  // family's MoE has 8 experts, 2 used, llama4's 1) | bert (an encoder:
  // embeddings only, CLS pooling in the file).
  std::string arch = "llama";
  bool moe = false;             // granite: Granite MoE (experts and a shared expert)
  std::string size = "tiny";    // tiny | small | 125m | 0.5b | 0.56b | 1b
  uint64_t seed = 42;
  std::string vocab_path;       // a GGUF whose tokenizer.* keys are copied
  GgmlType weight_type = GgmlType::F32;  // f32 | f16 | bf16 for matrices
  bool tied_embeddings = false; // no output.weight; the head reuses token_embd
  bool rope_freqs = false;      // llama3-style rope_freqs.weight (llama, qwen2, qwen3, qwen3moe, granite, mistral3, llama4)
  std::string rope_scaling;     // "" (no keys), linear or yarn
  float rope_factor = 4.0f;     // with rope_scaling; yarn's original context is n_ctx / factor
  // Zero blk.<N>.attn_output.weight, or ssm_out.weight on a DeltaNet layer
  // (for sensitivity tests); -1 = none.
  int zero_attn_output_layer = -1;
  // qwen3next: write the current converter's attn_qkv + attn_gate instead
  // of the older fused ssm_in (the reference reads either).
  bool split_qkvz = false;
  // The layout of llama.cpp's tests/test-llama-archs instead of a model's,
  // for gemma3 (which it writes no file for) and a 6-layer gemma2 whose
  // attention soft cap (5) bites at that layout's scale: no vocabulary
  // (kLlamaArchsVocab dummy ids), every optional tensor the reference loads
  // (q/k/v biases, output.weight, each projection's .scale and
  // .input_scale), all F32 with values of std 0.01 around 0, which
  // tests/e2e/llama_archs.h rescales by role. The shape is fixed
  // (llama_archs_shape; `size` is ignored) with sliding_window 32.
  bool llama_archs_layout = false;
};

inline constexpr uint32_t kLlamaArchsVocab = 128;

// Sizes known to the generator, smallest first.
const std::vector<std::string>& known_sizes();
const std::vector<std::string>& known_archs();
ModelShape shape_for(const std::string& size);  // throws vtc::Error for unknown
// The shape a file of `o` gets: the size's (or llama_archs_shape()), with 4
// layers at least for smollm3 and llama4 (a no-rope layer), as many KV heads
// as query heads for olmoe, one (the latent) for deepseek2.
ModelShape model_shape(const Options& o);

// deepseek2's multi-head latent attention geometry.
struct MlaShape {
  uint32_t q_lora_rank = 0;   // attention.q_lora_rank
  uint32_t kv_lora_rank = 0;  // attention.kv_lora_rank: the cached latent
  uint32_t nope_dim = 0;      // each key's non-rotary part
  uint32_t rope_dim = 0;      // rope.dimension_count: each key's rotary part
  uint32_t v_dim = 0;         // attention.value_length_mla
  uint32_t k_dim() const { return nope_dim + rope_dim; }  // attention.key_length_mla
};
MlaShape mla_shape(const ModelShape& shape);
// The llama_archs_layout shape: n_embd 256, 6 layers (gemma3's pattern of 5
// local then 1 global), 4 query and 2 KV heads of 64, n_ff 512, n_ctx 256.
ModelShape llama_archs_shape();
// The sliding window the file gets (0: the architecture has none): n_ctx / 4,
// or 32 in the llama_archs_layout.
uint32_t sliding_window(const Options& options, const ModelShape& shape);

// Gated DeltaNet geometry of the hybrid archs, derived from the size's
// attention shape: key heads = n_head_kv and value heads = n_head (so each
// key head serves several value heads), and keys and values use the
// attention head dim. Matrix widths stay multiples of 256 from "small" up.
struct DeltaNetShape {
  uint32_t conv_kernel = 0;              // ssm.conv_kernel
  uint32_t head_dim = 0;                 // ssm.state_size (head_k_dim = head_v_dim)
  uint32_t n_k_heads = 0;                // ssm.group_count
  uint32_t n_v_heads = 0;                // ssm.time_step_rank
  uint32_t full_attention_interval = 0;  // layer l is full attention iff (l + 1) % interval == 0
  uint32_t inner_size() const { return head_dim * n_v_heads; }  // ssm.inner_size
  uint32_t key_dim() const { return head_dim * n_k_heads; }
  uint32_t conv_dim() const { return 2 * key_dim() + inner_size(); }  // q, k, v channels
  bool is_linear(uint32_t layer) const { return (layer + 1) % full_attention_interval != 0; }
};
bool is_hybrid_arch(const std::string& arch);
DeltaNetShape delta_net_shape(const ModelShape& shape);

// What qwen4exp adds to the qwen35moe hybrid (the reference's
// src/models/qwen4exp.cpp), derived from the size's shape:
// - hyper-connections: the residual is hc_count parallel copies of the
//   hidden state; a mixer (grouped RMSNorm, low-rank sigmoid gate, mean over
//   the streams) replaces every RMSNorm, and inject weights scatter each
//   block's output back into the streams;
// - PLE on one DeltaNet layer: each token gathers ple_n_heads rows of
//   per_layer_token_embd, picked by a hash of the token and its
//   predecessors (n-grams of 2..ple_ngram_size, reset at EOS), gated into the
//   residual and passed through a causal conv dilated by ple_ngram_size;
// - QSA on the full-attention layers: an indexer scores mean-pooled blocks
//   of compress_ratio cached keys, and each query attends to the best
//   indexer_top_k tokens' worth of whole blocks plus its own unfinished block.
struct Qwen4ExpShape {
  uint32_t hc_count = 0;             // hyper_connection.count
  uint32_t hc_low_rank = 0;          // hyper_connection.low_rank
  uint32_t indexer_heads = 0;        // attention.indexer.head_count
  uint32_t indexer_key_length = 0;   // attention.indexer.key_length; keys are roped, so >= rope dims
  uint32_t indexer_top_k = 0;        // attention.indexer.top_k, in tokens (a multiple of the ratio)
  uint32_t compress_ratio = 0;       // attention.compress_ratios on full attention (0 on DeltaNet)
  uint32_t ple_layer = 0;            // ple.layers: the one PLE layer, a DeltaNet layer
  uint32_t ple_ngram_size = 0;       // ple.ngram_size
  uint32_t ple_heads_per_ngram = 0;  // ple.heads_per_ngram
  uint32_t ple_conv_kernel = 0;      // ple.conv_kernel
  std::vector<uint64_t> ple_head_vocab_sizes;  // ple.head_vocab_sizes (primes, one per head)
  uint32_t ple_n_heads() const { return (ple_ngram_size - 1) * ple_heads_per_ngram; }
  // ple.head_offsets: the heads' ranges laid end to end in per_layer_token_embd.
  std::vector<uint64_t> ple_head_offsets() const;
  uint64_t ple_rows() const;         // per_layer_token_embd rows: the sum of the vocab sizes
};
Qwen4ExpShape qwen4exp_shape(const ModelShape& shape);

// Default vocabulary file name (in the reference's models/ folder) per arch.
std::string default_vocab_name(const std::string& arch);

struct Progress {
  size_t index;       // 1-based tensor number
  size_t total;
  std::string tensor;
  uint64_t bytes_done;
  uint64_t bytes_total;
};
using ProgressFn = std::function<void(const Progress&)>;

struct Summary {
  uint64_t parameters = 0;
  uint64_t file_bytes = 0;
  uint32_t vocab_size = 0;
  ModelShape shape;
};

// Writes the model to `out_path`. Throws vtc::Error on bad options or I/O.
Summary write_model(const Options& options, const std::string& out_path,
                    const ProgressFn& progress = nullptr);

}  // namespace vtc::synth

namespace vtc::synth {
// Finds the default vocab GGUF for `arch` in the llama.cpp reference cache:
// $VTC_REF_CACHE (or ~/.cache/vtc/llama-ref) /llama.cpp/models/. Throws
// vtc::Error saying how to fetch the reference when it is missing.
std::string find_default_vocab(const std::string& arch);
}  // namespace vtc::synth
