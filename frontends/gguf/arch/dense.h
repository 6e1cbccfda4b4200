// The dense decoder shared by llama / qwen2 / qwen3 and reused by the MoE
// architectures (arch/qwen3moe.cpp): hparams, weight declarations, and the
// step functions with a pluggable feed-forward block.
#pragma once

#include <functional>
#include <string>

#include "frontends/gguf/arch/arch.h"
#include "ir/builder.h"

namespace vtc::arch {

struct DenseHparams {
  std::string arch;
  int64_t n_vocab = 0, n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0,
          n_ctx = 0, n_rot = 0;
  double eps = 1e-5, rope_base = 10000.0;
  float rope_freq_scale = 1.0f;
  // YaRN (ext_factor 0: off), as the reference derives them from hparams.
  float yarn_ext_factor = 0.0f, yarn_attn_factor = 1.0f;
  int64_t yarn_n_ctx_orig = 0;
  std::string rope_mode;
  bool tied = false, has_bias = false, qk_norm = false, has_rope_freqs = false;
};

// Reads the dense hparams of the file's architecture (throws vtc::Error for
// missing ones).
DenseHparams read_dense_hparams(const gguf::GgufFile& f);
// Throws vtc::Error naming the key when it is absent or not positive.
int64_t require_int(const gguf::GgufFile& f, const std::string& key);

// The feed-forward of layer `layer` on its normalized input h [n, D]; the
// result [n, D] is added to the residual stream.
using FfnFn = std::function<ir::Value(ir::Builder& b, ir::Value h, int64_t layer)>;
// The token mixer (attention) of layer `layer` on its normalized input
// h [n, D], with the step's positions and sequence indices ([n] i32); the
// result [n, D] is added to the residual stream.
using MixerFn = std::function<ir::Value(ir::Builder& b, ir::Value h, ir::Value pos, ir::Value seq,
                                        const ir::Dim& n, int64_t layer)>;

// What an architecture changes in the pre-norm decoder. Unset members keep
// the dense behaviour.
struct DecoderHooks {
  FfnFn ffn;                            // replaces the SwiGLU FFN
  MixerFn mixer;                        // replaces the dense attention block
  std::function<void(ir::Module&)> declare_states;  // replaces the per-layer KV states
  std::string ffn_norm = "ffn_norm";    // the FFN's pre-norm weight (blk.N.<name>)
  // Replaces the embedding and every layer: the residual stream [n, ...]
  // of the step's tokens (the prefill gathers its output rows from it).
  std::function<ir::Value(ir::Builder& b, ir::Value ids, ir::Value pos, ir::Value seq, const ir::Dim& n)> forward;
  // Replaces rms_norm(output_norm): the residual rows to the [rows, D]
  // input of the output matrix.
  std::function<ir::Value(ir::Builder& b, ir::Value x)> final_norm;
};

// Declares the weights and states and builds @prefill and @decode of a
// pre-norm decoder: per layer x += mixer(rms_norm(x, attn_norm)), then
// x += ffn(rms_norm(x, ffn_norm)); the head is rms_norm(output_norm) and
// the output (or tied token_embd) matrix.
ir::Module build_decoder(const gguf::GgufFile& f, const BuildOptions& o, const DenseHparams& h,
                         const DecoderHooks& hooks = {});

// Declares every GGUF tensor as a weight named like the tensor without
// ".weight", with its IR type (GGUF dims reversed: outermost first).
void declare_weights(ir::Module& m, const gguf::GgufFile& f);
// The rope attributes of the dense attention (mode, scaling, YaRN).
ir::RopeOptions rope_options(const DenseHparams& h);
// The SwiGLU FFN (silu(h Wgate) * h Wup) Wdown of blk.<layer>.ffn_{gate,up,down}<suffix>.
ir::Value swiglu_ffn(ir::Builder& b, ir::Value h, int64_t layer, const std::string& suffix = "");
// The routed experts of qwen3moe-style MoE layers (arch/qwen3moe.cpp):
// softmax top-n_used router over blk.<layer>.ffn_gate_inp, renormalized,
// times `scale` when non-zero, over the ffn_{gate,up,down}_exps stacks.
ir::Value routed_experts(ir::Builder& b, ir::Value h, int64_t layer, int64_t n_used, double scale = 0.0);
// Reads and checks expert_count / expert_used_count and the expert tensors
// of layer 0; returns expert_used_count.
int64_t read_expert_hparams(const gguf::GgufFile& f, const std::string& arch);

// Architectures with their own files.
// qwen4exp: hyper-connections, PLE and the QSA indexer around the hybrid layers (arch/qwen4exp.cpp).
ir::Module build_qwen4exp(const gguf::GgufFile& f, const BuildOptions& o);
ir::Module build_qwen3moe(const gguf::GgufFile& f, const BuildOptions& o);
// qwen35, qwen35moe, qwen3next: Gated DeltaNet hybrids (arch/qwen35.cpp).
ir::Module build_qwen35(const gguf::GgufFile& f, const BuildOptions& o);

}  // namespace vtc::arch
