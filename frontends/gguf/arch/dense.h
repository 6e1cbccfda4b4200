// Hparams shared by every architecture (the dense decoder's), and the
// architecture entry points. Each architecture is one class in its own file
// over the helper library (arch/step_graph.h).
#pragma once

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
  ir::RopeMode rope_mode = ir::RopeMode::Normal;
};

// Reads the dense hparams of the file's architecture (throws vtc::Error for
// missing ones).
DenseHparams read_dense_hparams(const gguf::GgufFile& f);
// Throws vtc::Error naming the key when it is absent or not positive.
int64_t require_int(const gguf::GgufFile& f, const std::string& key);
// The rope attributes of the dense attention (mode, scaling, YaRN).
ir::RopeOptions rope_options(const DenseHparams& h);

// expert_count and expert_used_count, checked; returns expert_used_count.
int64_t read_expert_hparams(const gguf::GgufFile& f, const std::string& arch);

// The architectures, each in its own file.
ir::Module build_llama(const gguf::GgufFile& f, const BuildOptions& o);   // llama, with or without experts
ir::Module build_qwen2(const gguf::GgufFile& f, const BuildOptions& o);   // arch/qwen2.cpp
ir::Module build_qwen3(const gguf::GgufFile& f, const BuildOptions& o);   // arch/qwen3.cpp: qwen3, qwen3moe
// qwen35, qwen35moe, qwen3next: Gated DeltaNet hybrids (arch/qwen35.cpp).
ir::Module build_qwen35(const gguf::GgufFile& f, const BuildOptions& o);
// qwen4exp: hyper-connections, PLE and the QSA indexer around the hybrid layers (arch/qwen4exp.cpp).
ir::Module build_qwen4exp(const gguf::GgufFile& f, const BuildOptions& o);
ir::Module build_gpt_oss(const gguf::GgufFile& f, const BuildOptions& o);  // arch/gpt_oss.cpp
ir::Module build_gemma(const gguf::GgufFile& f, const BuildOptions& o);   // arch/gemma.cpp: gemma2, gemma3
ir::Module build_phi3(const gguf::GgufFile& f, const BuildOptions& o);  // arch/phi3.cpp
ir::Module build_qwen2moe(const gguf::GgufFile& f, const BuildOptions& o);  // arch/qwen2moe.cpp
ir::Module build_olmoe(const gguf::GgufFile& f, const BuildOptions& o);  // arch/olmoe.cpp
ir::Module build_granite(const gguf::GgufFile& f, const BuildOptions& o);  // arch/granite.cpp
ir::Module build_smollm3(const gguf::GgufFile& f, const BuildOptions& o);  // arch/smollm3.cpp
ir::Module build_command_r(const gguf::GgufFile& f, const BuildOptions& o);  // arch/command_r.cpp
ir::Module build_mistral3(const gguf::GgufFile& f, const BuildOptions& o);  // arch/mistral3.cpp
ir::Module build_deepseek2(const gguf::GgufFile& f, const BuildOptions& o);  // arch/deepseek2.cpp: MLA, shared experts
ir::Module build_glm4moe(const gguf::GgufFile& f, const BuildOptions& o);    // arch/glm4moe.cpp
ir::Module build_llama4(const gguf::GgufFile& f, const BuildOptions& o);  // arch/llama4.cpp: chunked attention, interleaved MoE
ir::Module build_bert(const gguf::GgufFile& f, const BuildOptions& o);  // arch/bert.cpp: an encoder, @embed only
// ARCH-DECLS (one line per architecture below)

}  // namespace vtc::arch
