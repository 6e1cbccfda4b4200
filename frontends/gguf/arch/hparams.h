// Hparams shared by every architecture (the decoder's attention and FFN
// sizes, rope). Each architecture is one class in its own file over the
// helper library (arch/step_graph.h), registered in architectures.def.
#pragma once

#include <string>
#include <vector>

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
  // Per-layer head counts and FFN sizes where the file gives arrays
  // (attention.head_count, head_count_kv, feed_forward_length: OpenELM,
  // Deci); empty otherwise. n_head, n_head_kv and n_ff then hold layer 0's.
  std::vector<int64_t> layer_n_head, layer_n_head_kv, layer_n_ff;
  int64_t heads(int64_t l) const { return layer_n_head.empty() ? n_head : layer_n_head[size_t(l)]; }
  int64_t kv_heads(int64_t l) const { return layer_n_head_kv.empty() ? n_head_kv : layer_n_head_kv[size_t(l)]; }
  int64_t ff(int64_t l) const { return layer_n_ff.empty() ? n_ff : layer_n_ff[size_t(l)]; }
};

// Reads the hparams of the file's architecture (throws vtc::Error for
// missing ones).
Hparams read_hparams(const gguf::GgufFile& f);
// Throws vtc::Error naming the key when it is absent or not positive.
int64_t require_int(const gguf::GgufFile& f, const std::string& key);
// The rope attributes of the dense attention (mode, scaling, YaRN).
ir::RopeOptions rope_options(const Hparams& h);

// The integers of an array (or single integer) key; empty when absent.
std::vector<int64_t> int_array(const gguf::GgufFile& f, const std::string& key);
// rope.dimension_sections (M-RoPE), 4 entries, zeros when absent.
std::vector<int64_t> rope_sections(const gguf::GgufFile& f, const Hparams& h);

// The LongRoPE factor tensor the reference applies (get_rope_factors):
// "rope_factors_long" when the context exceeds
// rope.scaling.original_context_length, else "rope_factors_short". A vtc
// module has no context of its own, so the file's context_length decides.
std::string longrope_factors(const gguf::GgufFile& f, const Hparams& h);

// expert_count and expert_used_count, checked; returns expert_used_count.
int64_t read_expert_hparams(const gguf::GgufFile& f, const std::string& arch);
// expert_gating_func (llama_expert_gating_func_type) as moe_route's gating;
// 0 (`none`) is the architecture's default `none_means`. Throws for the
// functions moe_route does not implement.
ir::MoeGating expert_gating(const gguf::GgufFile& f, int64_t func, ir::MoeGating none_means);

}  // namespace vtc::arch
