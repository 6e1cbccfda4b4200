// Multi-head latent attention in its absorbed form (the reference's MLA
// layout: key_length_mla / value_length_mla and the split attn_k_b /
// attn_v_b), shared by deepseek2 / mistral4 (arch/deepseek2.cpp, where the
// algorithm is described) and kimi-linear's attention layers
// (arch/kimi_linear.cpp, which applies no rope).
#pragma once

#include "frontends/gguf/arch/step_graph.h"

namespace vtc::arch {

struct MlaShape {
  int64_t n_head = 0;
  int64_t dk = 0, dv = 0;  // key_length_mla = nope + rot, value_length_mla
  int64_t kv_lora = 0, rot = 0;
  bool q_lora = false;     // q through attn_q_a, attn_q_a_norm, attn_q_b (else attn_q)
  bool rope = true;        // rope the rot part of q and k_pe (kimi-linear: none)
  ir::RopeOptions rope_options;
  double kq_scale = 1.0;
  int64_t nope() const { return dk - rot; }
};

class MlaAttention {
 public:
  explicit MlaAttention(const MlaShape& s) : s_(s) {}
  // kv.L: the latent c | k_pe, one head, f16 (read as both K and V).
  void declare_state(ir::Module& m, const BuildOptions& o, int64_t l) const;
  // The attention block of layer l on its normed input x [n, n_embd],
  // through attn_output with its scale -> [n, n_embd].
  ir::Value operator()(StepGraph& g, ir::Value x, int64_t l) const;

 private:
  ir::Value per_head(StepGraph& g, ir::Value x, std::string_view name, int64_t n_out, int64_t n_in) const;

  MlaShape s_;
};

}  // namespace vtc::arch
