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

// Declares the weights and states and builds @prefill and @decode of a
// pre-norm decoder; `ffn` replaces the dense SwiGLU FFN when set.
ir::Module build_decoder(const gguf::GgufFile& f, const BuildOptions& o, const DenseHparams& h,
                         const FfnFn& ffn = nullptr);

// Architectures with their own files.
ir::Module build_qwen3moe(const gguf::GgufFile& f, const BuildOptions& o);

}  // namespace vtc::arch
