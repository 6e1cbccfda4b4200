// Hparams shared by every architecture (the decoder's attention and FFN
// sizes, rope). Each architecture is one class in its own file over the
// helper library (arch/step_graph.h), registered in architectures.def.
#pragma once

#include <string>

#include "frontends/gguf/arch/arch.h"
#include "ir/builder.h"

namespace vtc::arch {

struct Hparams {
  std::string arch;
  int64_t n_vocab = 0, n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0,
          n_ctx = 0, n_rot = 0;
  double eps = 1e-5, rope_base = 10000.0;
  float rope_freq_scale = 1.0f;
  // YaRN (ext_factor 0: off), as the reference derives them from hparams.
  float yarn_ext_factor = 0.0f, yarn_attn_factor = 1.0f;
  int64_t yarn_n_ctx_orig = 0;
  ir::RopeMode rope_mode = ir::RopeMode::Normal;
};

// Reads the hparams of the file's architecture (throws vtc::Error for
// missing ones).
Hparams read_hparams(const gguf::GgufFile& f);
// Throws vtc::Error naming the key when it is absent or not positive.
int64_t require_int(const gguf::GgufFile& f, const std::string& key);
// The rope attributes of the dense attention (mode, scaling, YaRN).
ir::RopeOptions rope_options(const Hparams& h);

// expert_count and expert_used_count, checked; returns expert_used_count.
int64_t read_expert_hparams(const gguf::GgufFile& f, const std::string& arch);
// expert_gating_func (llama_expert_gating_func_type) as moe_route's gating;
// 0 (`none`) is the architecture's default `none_means`. Throws for the
// functions moe_route does not implement.
ir::MoeGating expert_gating(const gguf::GgufFile& f, int64_t func, ir::MoeGating none_means);

}  // namespace vtc::arch
