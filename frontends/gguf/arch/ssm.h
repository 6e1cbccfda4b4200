// The state-space (Mamba) layers shared by the pure SSMs (mamba, mamba2:
// arch/ssm.cpp, where the algorithm is described) and the hybrids that mix
// them with attention.
#pragma once

#include <string>
#include <vector>

#include "frontends/gguf/arch/step_graph.h"

namespace vtc::arch {

// The reference's ssm_* hparams (llama-hparams.h), as each loader reads them.
struct SsmHparams {
  bool mamba2 = true;      // Mamba-2 (heads, groups, one decay per head) or Mamba-1
  int64_t d_conv = 0;      // ssm.conv_kernel
  int64_t d_inner = 0;     // ssm.inner_size
  int64_t d_state = 0;     // ssm.state_size (N)
  int64_t dt_rank = 0;     // ssm.time_step_rank: Mamba-2's head count H, Mamba-1's dt projection rank
  int64_t n_group = 1;     // ssm.group_count (Mamba-2)
  bool bc_norms = false;   // Mamba-1: rms_norm dt, B, C by ssm_{dt,b,c}_norm when a layer has all three (jamba)
  bool conv_bias_optional = false;  // nemotron_h's loader: ssm_conv1d.bias TENSOR_NOT_REQUIRED

  int64_t heads() const { return mamba2 ? dt_rank : d_inner; }
  int64_t head_dim() const { return mamba2 ? d_inner / dt_rank : 1; }
  int64_t groups() const { return mamba2 ? n_group : 1; }
  // The channels the conv runs over: x (and, for Mamba-2, B and C).
  int64_t conv_channels() const { return mamba2 ? d_inner + 2 * n_group * d_state : d_inner; }
};

// Reads and checks the ssm.* keys of the file's architecture.
SsmHparams read_ssm_hparams(const gguf::GgufFile& f, const std::string& arch, bool mamba2);

// The decoder hparams of a model without attention (mamba, mamba2): the
// embedding, layer count, context and norm eps; attention fields stay 0
// (real files write attention.head_count = 0, which read_hparams refuses).
Hparams read_recurrent_hparams(const gguf::GgufFile& f);

// Which layers are recurrent where the reference tells them by their KV
// head count (granitehybrid, nemotron_h, jamba, plamo2: head_count_kv(l) == 0
// in the per-layer array; a scalar means no recurrent layer).
std::vector<bool> layers_without_kv_heads(const gguf::GgufFile& f, const std::string& arch, int64_t n_layer);

// Layer l's recurrent states: @ssm_conv.l (the conv's last d_conv-1
// inputs) and @ssm_state.l (the scan's [H, P, N] state).
void declare_ssm_states(ir::Module& m, const SsmHparams& s, int64_t l);
// A Mamba hybrid's states: those of declare_ssm_states on the recurrent
// layers, a KV state (declare_kv_state) on the others.
void declare_hybrid_states(ir::Module& m, const BuildOptions& o, const Hparams& h, const SsmHparams& s,
                           const std::vector<bool>& recurrent);

// The Mamba layer of layer l on its normalized input h [n, D] -> [n, D]
// (the reference's build_mamba2_layer / build_mamba_layer).
ir::Value mamba_layer(StepGraph& g, const SsmHparams& s, ir::Value h, int64_t l);

}  // namespace vtc::arch
