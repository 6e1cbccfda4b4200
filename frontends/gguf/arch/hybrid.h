// The Gated DeltaNet hybrid layers shared by qwen35 / qwen35moe / qwen3next
// (arch/qwen35.cpp, where the algorithm is described) and qwen4exp
// (arch/qwen4exp.cpp, which wraps them in hyper-connections).
#pragma once

#include <string>
#include <vector>

#include "frontends/gguf/arch/step_graph.h"

namespace vtc::arch {

struct DeltaNetHparams {
  int64_t conv_kernel = 0, head_dim = 0, k_heads = 0, v_heads = 0;
  std::vector<bool> recurrent;  // per layer
  std::vector<int64_t> rope_sections;
  bool interleaved = false;     // qwen3next: interleaved head repeat, neox rope, ssm_ba, unscaled DeltaNet projections
  bool sigmoid_output_gate = false;  // qwen4exp: rms_norm(o) * sigmoid(z), not silu(z)
  bool moe = false;
  int64_t n_used = 0;
};

DeltaNetHparams read_deltanet_hparams(const gguf::GgufFile& f, const Hparams& h);

class HybridLayers {
 public:
  HybridLayers(const Hparams& h, const DeltaNetHparams& d) : h_(h), d_(d) {}

  // kv.L on attention layers; gdn_conv.L and gdn_state.L on DeltaNet layers.
  void declare_states(ir::Module& m, const BuildOptions& o) const;
  bool recurrent(int64_t layer) const { return d_.recurrent[size_t(layer)]; }
  // The layer's token mixer on its normalized input h [n, D].
  ir::Value mixer(StepGraph& g, ir::Value h, int64_t l) const;
  ir::Value ffn(StepGraph& g, ir::Value h, int64_t l) const;
  ir::Value delta_net(StepGraph& g, ir::Value h, int64_t l) const;
  // `selected` (optional): the positions each query keeps (indexer_select).
  ir::Value gated_attention(StepGraph& g, ir::Value h, int64_t l, ir::Value selected = {}) const;

  // The attention's rope and the positions it reads ([n, 4] for multi rope).
  struct Rope {
    ir::RopeOptions options;
    ir::Value pos;
  };
  Rope attention_rope(StepGraph& g) const;

 private:
  struct Projections {
    ir::Value qkv, z, beta, alpha;
  };
  Projections project(StepGraph& g, ir::Value h, int64_t l) const;
  ir::Value repeat_heads(StepGraph& g, ir::Value x) const;

  const Hparams& h_;
  const DeltaNetHparams& d_;
};

}  // namespace vtc::arch
