// The helper library every architecture builder is written in, after the
// reference's llm_graph_context (src/llama-graph.cpp: build_norm,
// build_lora_mm, build_qkv, build_ffn, build_moe_ffn, build_attn). Each
// helper takes the tensors the reference takes, with the optional bias and
// scale it applies, in its order, so an architecture file reads top to
// bottom like the reference's src/models/<arch>.cpp.
//
// Tensor accounting. A weight is declared in the module when a helper takes
// it, never up front. After both steps are built, every tensor of the file
// that no helper took must be in the architecture's table of tensors the
// reference loads and never applies (tensor_accounting.cpp); any other is
// an error that lists it by name, as the reference's loader refuses a file
// with a tensor it did not take (done_getting_tensors).
//
// Projections, by the order in which the reference applies bias and scale:
//   linear(x, w)          x W * w.scale               (build_lora_mm)
//   linear_bias(x, w)     x W * w.scale + w.bias      (build_qkv, build_attn's wo)
//   ffn_linear(x, w)      (x W + w.bias) * w.scale    (build_ffn)
//   linear_plain(x, w)    x W                          (call sites that pass no scale)
// A bias or scale is taken when the file has it; which call a block uses is
// the architecture's choice, as in the reference.
#pragma once

#include <set>
#include <string>
#include <string_view>

#include "frontends/gguf/arch/arch.h"
#include "frontends/gguf/arch/hparams.h"
#include "ir/builder.h"

namespace vtc::arch {

// "blk.<layer>.<name>"
std::string blk(int64_t layer, std::string_view name);

// Which optional tensors a SwiGLU FFN applies (StepGraph::swiglu_ffn).
struct FfnTensors {
  bool biases = false;
  bool scales = true;
};

// Whether the reference's loader takes a tensor: required (a clear error
// when the file lacks it), optional (taken when present) or never (a file
// with it is refused by the tensor accounting).
enum class Need { kNever, kOptional, kRequired };

// build_moe_ffn's variations that StepGraph::moe_ffn follows: the router
// (the moe_route op's options: top-k, gating, renormalization, weight
// scale, selection bias, expert groups), whether the merged
// ffn_gate_up_exps may stand for ffn_gate_exps + ffn_up_exps (where the
// reference's loader takes it), and whether the graph passes the per-expert
// ffn_{gate,up,down}_exps.scale tensors (many pass none).
struct MoeFfnOptions {
  ir::MoeRouteOptions route;
  bool merged_allowed = false;
  bool expert_scales = true;
};

// One step function under construction (@prefill or @decode), with the
// step's token count n, ids, positions and sequence indices ([n] i32).
class StepGraph {
 public:
  StepGraph(ir::Module& m, const gguf::GgufFile& f, const Hparams& h, ir::Builder& b, ir::Dim n, ir::Value ids,
            ir::Value pos, ir::Value seq);

  ir::Builder& b;
  const Hparams& h;
  const ir::Dim n;
  const ir::Value ids, pos, seq;

  // Tensors, by the GGUF tensor name minus ".weight" ("blk.0.attn_q",
  // "blk.0.attn_q.bias"): has() asks the file; weight() takes a tensor the
  // model needs (a clear error when the file lacks it); optional() takes
  // it when present and returns Value() otherwise.
  bool has(std::string_view name) const;
  ir::Value weight(std::string_view name);
  ir::Value optional(std::string_view name);

  // rms_norm(x) * gain, with the hparams' eps.
  ir::Value norm(ir::Value x, std::string_view gain);
  // build_norm with LLM_NORM: layer_norm(x) * gain + <gain>.bias, the bias
  // taken as `bias` says, with the architecture's eps (its
  // attention.layer_norm_epsilon).
  ir::Value layer_norm(ir::Value x, std::string_view gain, double eps, Need bias = Need::kRequired);
  // rms_norm(x) over the last dim with no gain (ggml_rms_norm alone). The
  // IR's rms_norm takes a gain, so it gets ones: exp(0 * r) of one row r
  // of x, exactly 1 for any finite x, and a product by 1 is exact.
  ir::Value unit_norm(ir::Value x);
  ir::Value linear(ir::Value x, std::string_view w);
  ir::Value linear_bias(ir::Value x, std::string_view w);
  ir::Value ffn_linear(ir::Value x, std::string_view w);
  ir::Value linear_plain(ir::Value x, std::string_view w);

  // Q, K, V [n, heads, head_dim] of layer l (its own head counts,
  // Hparams::heads / kv_heads) from a merged blk.l.attn_qkv or split
  // attn_q/k/v, each with its optional scale and bias (build_qkv), then
  // clamped to [-clamp_kqv, clamp_kqv] when clamp_kqv > 0 (the reference's
  // f_clamp_kqv, which the architectures that read attention.clamp_kqv set).
  struct Qkv {
    ir::Value q, k, v;
  };
  Qkv qkv(ir::Value x, int64_t l, double clamp_kqv = 0.0);
  // silu(x Wgate) * (x Wup) then Wdown over blk.l.ffn_{gate,up,down}<suffix>
  // (build_ffn with LLM_FFN_SILU, LLM_FFN_PAR). Each projection adds its
  // bias when `biases` (the architectures whose loader takes FFN biases),
  // then multiplies by its scale when `scales` (the graph passes them).
  ir::Value swiglu_ffn(ir::Value x, int64_t l, std::string_view suffix = "", FfnTensors tensors = {});
  // build_ffn with LLM_FFN_SWIGLU and no gate tensor: blk.l.ffn_up [2F, D]
  // yields the gate (its first F outputs) and the up (the last F);
  // silu(gate) * up then Wdown, no biases or scales (phi3, chatglm, glm4).
  ir::Value fused_swiglu_ffn(ir::Value x, int64_t l);
  // gelu(x Wup) then Wdown over blk.l.ffn_{up,down} (build_ffn with
  // LLM_FFN_GELU, LLM_FFN_SEQ: no gate), with `tensors` as above.
  ir::Value gelu_ffn(ir::Value x, int64_t l, FfnTensors tensors = {});
  // build_moe_ffn: the router blk.l.ffn_gate_inp (no bias, no scale) with
  // o.route, then the experts ffn_gate_exps + ffn_up_exps (or, when
  // o.merged_allowed and the file has it, ffn_gate_up_exps) and
  // ffn_down_exps, with their per-expert scales when o.expert_scales.
  ir::Value moe_ffn(ir::Value x, int64_t l, const MoeFfnOptions& o);
  // The positions [n, 4] of M-RoPE (rope modes multi and imulti) for text
  // tokens, as the reference fills them (llm_graph_input_pos::set_input):
  // the token's position in the first three components, 0 in the fourth
  // (which drives the pairs no other section claims).
  ir::Value text_mrope_positions();
  // Causal attention of layer l over its KV state @kv.l, scale 1/sqrt(head_dim).
  ir::Value attention(ir::Value q, ir::Value k, ir::Value v, int64_t l, ir::Value selected = {});
  // The output matrix (token_embd when tied) with its optional scale and,
  // when `bias`, output.bias: the logits of the rows x [R, D].
  ir::Value output(ir::Value x, bool bias = false);

 private:
  // Layer l's expert stacks (ffn_{gate,up,down}_exps, or the merged
  // gate_up when allowed and present) with their per-expert scales when
  // `expert_scales` (all three or none, else a deferred error).
  ir::MoeExperts experts(int64_t l, bool merged_allowed, bool expert_scales);
  // One build_ffn projection x W (+ bias) (* scale), as `tensors` says.
  ir::Value ffn_projection(ir::Value x, const std::string& w, FfnTensors tensors);
  ir::Value scaled(ir::Value y, std::string_view w);
  ir::Value biased(ir::Value y, std::string_view w);

  ir::Module& m_;
  const gguf::GgufFile& f_;

 public:
  // Problems found while building that only matter once the tensor
  // accounting has passed (an unknown tensor explains them better).
  std::vector<std::string> deferred_errors;
};

// An architecture, as the reference's llama_model_<arch>::graph: its
// hparams and states, then one straight-line function for the embedding
// and every layer (the residual stream [n, ...] of the step's tokens) and
// one for the head (the residual rows [rows, ...] to logits [rows, n_vocab]).
class Architecture {
 public:
  explicit Architecture(const gguf::GgufFile& f) : h(read_hparams(f)) {}
  // An architecture whose hparams read_hparams does not describe (no attention).
  explicit Architecture(Hparams hparams) : h(std::move(hparams)) {}
  virtual ~Architecture() = default;
  virtual void declare_states(ir::Module& m) const = 0;
  virtual ir::Value forward(StepGraph& g) const = 0;
  virtual ir::Value head(StepGraph& g, ir::Value rows) const = 0;
  // The hidden state the reference returns as a token's embedding (its
  // t_embd) from the residual stream [n, ...]: for a decoder, the final
  // norm the head starts with. Throws for an architecture not wired yet.
  virtual ir::Value embedding(StepGraph& g, ir::Value x) const;
  // false for an encoder (bert): the module has only @embed, always built,
  // and no @prefill, @decode or @last_ids; head() is never called.
  virtual bool generates_text() const { return true; }

  const Hparams h;
};

// Builds @prefill (the logits of the rows %rows lists), @decode (ids
// from @last_ids, one row per sequence) and, with o.embeddings, @embed of
// `arch`, declares @last_ids (an encoder: @embed only),
// then checks the tensor accounting (throws listing unknown tensors).
ir::Module build_architecture(const gguf::GgufFile& f, const Architecture& arch, const BuildOptions& o);

// The module of architecture A, constructed from the file and the options.
template <class A>
ir::Module build(const gguf::GgufFile& f, const BuildOptions& o) {
  const A arch(f, o);
  return build_architecture(f, arch, o);
}

// The base of the decoder-only transformers (14 builders, dense and MoE:
// llama, qwen2, qwen3, gemma, phi3, granite, olmoe, deepseek2, ...): it
// declares a KV state @kv.l per layer, and its head is
// rms_norm(output_norm) then the output matrix (token_embd when tied) with
// its scale. A builder overrides what its reference graph does otherwise.
class Transformer : public Architecture {
 public:
  Transformer(const gguf::GgufFile& f, const BuildOptions& o) : Architecture(f), o_(o) {}
  void declare_states(ir::Module& m) const override;
  ir::Value head(StepGraph& g, ir::Value rows) const override;
  // rms_norm(x) * output_norm, which head() starts with.
  ir::Value embedding(StepGraph& g, ir::Value x) const override;

 protected:
  const BuildOptions& o_;
};

// The KV state @kv.l of a full-attention layer (Hparams::kv_heads(l) heads).
void declare_kv_state(ir::Module& m, const BuildOptions& o, const Hparams& h, int64_t l);

// Tensor accounting (tensor_accounting.cpp): the GGUF tensor names the IR
// uses, those in the reference-loads-never-applies table, and the others
// (the file is refused).
using TensorAccounting = FileAccounting;
TensorAccounting account_tensors(const gguf::GgufFile& f, const ir::Module& m);
// Throws vtc::Error listing the unknown tensors by name.
void require_full_accounting(const gguf::GgufFile& f, const TensorAccounting& a);

// The table of tensors the reference loads for an architecture and never
// applies, for docs and `vtc inspect`: pattern ('*' matches any text) and why.
struct AcceptedUnused {
  std::string_view architectures;  // comma-separated, "*" for all
  std::string_view pattern;
  std::string_view why;
};
const std::vector<AcceptedUnused>& accepted_unused_tensors();

}  // namespace vtc::arch
