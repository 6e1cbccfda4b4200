// Builder: the API frontends and tests use to write a step function so it
// reads like the model's math:
//
//   Builder b(module, "decode");
//   Value x = b.arg("ids", ...);
//   Value h = b.rms_norm(x, b.weight("blk.0.attn_norm"), 1e-6);
//   Value q = b.matmul(h, b.weight("blk.0.attn_q"));
//
// Every op's result types come from its shape function (ir/shape_infer.h);
// a shape error throws vtc::Error naming the op, and nothing is appended.
// Results are placed where the op's first operand lives, unless
// set_placement() forces a place (that is how a test builds a misplaced op).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/module.h"
#include "ir/op_attrs.h"

namespace vtc::ir {

// rope's attributes as declared in ir/op_attrs.def, with their defaults
// (YaRN is off unless ext_factor is set; sections: 4 entries for multi and
// imulti).
using RopeOptions = RopeAttrs;

struct AttentionOptions {
  std::string state;  // the KV state it appends to and reads
  double scale = 1.0;
  bool causal = true;
  std::optional<int64_t> window = std::nullopt;  // sliding window, in tokens
  std::optional<double> softcap = std::nullopt;  // logit soft cap
  // Chunked attention (llama4): key positions outside the query's chunk
  // [floor(pos / chunk) * chunk, pos] are masked too.
  std::optional<int64_t> chunk = std::nullopt;
  // ALiBi (bloom, mpt, ...): the reference's f_max_alibi_bias; each score
  // gains -|pos_q - pos_k| times its query head's slope (docs/ir.md).
  std::optional<double> alibi_max_bias = std::nullopt;
  ir::Value sinks{};  // per-head sink logits [H] f32 (gpt-oss), joining each softmax's denominator
  // K and V of different element types: `state` holds K ([1, P, ...]) and
  // this state V; empty: `state` holds both ([2, P, ...]).
  std::string v_state{};
};

// The QSA lightning indexer (docs/ir.md: indexer_select).
struct IndexerOptions {
  std::string state;   // the side cache of raw keys, paged [1, P, page, D]
  int64_t ratio = 4;   // tokens per pooled block
  int64_t top_k = 0;   // selection budget in tokens (whole blocks)
  double eps = 1e-6;   // of the pooled keys' rms_norm
  RopeOptions rope;    // applied to each pooled key at its block's start (no YaRN)
};

struct NgramHashOptions {
  int64_t n = 3;                // longest n-gram
  int64_t heads_per_gram = 1;
  int64_t eos = 0;
  std::vector<int64_t> mult = {};    // n multipliers (64-bit patterns)
  std::vector<int64_t> vocab = {};   // (n-1)*heads_per_gram sizes
  std::vector<int64_t> offset = {};  // (n-1)*heads_per_gram row offsets
};

// The expert operands of moe_ffn (docs/ir.md: moe_ffn). Give either gate
// and up ([E, F, D] each) or gate_up ([E, 2F, D]: expert e's gate rows, then
// its up rows), and down ([E, D, F]). Scales are per-expert f32 [E] factors
// applied right after each matmul; Value() means none. The split form takes
// all three scales or none (the op has no slot for a lone one, and a file
// that has only some must say so to its builder); the merged form takes
// only down_scale, as the reference scales no gate_up result.
struct MoeExperts {
  Value gate{}, up{}, gate_up{}, down{};
  Value gate_scale{}, up_scale{}, down_scale{};
  // Per-expert biases (ggml_add_id after each matmul): [E, F] for gate and
  // up, [E, 2F] for gate_up, [E, D] for down. All of a form's or none.
  Value gate_bias{}, up_bias{}, gate_up_bias{}, down_bias{};

  bool merged() const { return bool(gate_up); }
  bool scaled() const { return bool(down_scale); }
  bool biased() const { return bool(down_bias); }

  struct Slot {
    Value value;
    const char* role;  // e.g. "gate_up experts [E, 2F, D]", for messages
    bool scale = false;  // an f32 [E] scale, not an expert stack
    bool bias = false;   // an f32 [E, rows] bias, not an expert stack
  };
  // The given expert operands in op order (they follow x, weights, ids):
  // gate, up, down[, gate_scale, up_scale, down_scale][, gate_bias, up_bias, down_bias]
  // or gate_up, down[, down_scale][, gate_up_bias, down_bias].
  std::vector<Slot> slots() const;
  // The inverse: the experts of a moe_ffn op, from its operand count and
  // its `scaled` and `biased` attributes. Throws vtc::Error naming the accepted forms
  // when the count fits none of them.
  static MoeExperts of(const Op& op);
};

// The gated activation of moe_ffn's experts: silu(gate) * up, or gpt-oss's
// clamped variant: g = min(gate, limit), u = clamp(up, -limit, limit),
// g * sigmoid(alpha g) * (u + 1).
struct MoeActivation {
  MoeActivationKind kind = MoeActivationKind::Silu;
  double alpha = MoeFfnAttrs{}.alpha, limit = MoeFfnAttrs{}.limit;  // the declared defaults
  // llama4 (the reference's weight_before_ffn): each slot's input row is
  // multiplied by its routing weight, and the slot outputs are summed
  // unweighted.
  bool weight_input = false;
};

// moe_route's attributes and its optional selection bias.
struct MoeRouteOptions {
  int64_t k = 1;
  MoeGating gating = MoeGating::Softmax;
  bool norm = true;
  double scale = 0.0;               // 0 or 1: none
  Value selection_bias{};           // [E] f32, added for the pick only
  int64_t groups = 0, groups_used = 0;  // grouped routing when groups > 1
};

class Builder {
 public:
  Builder(Module& module, Function& function) : m_(module), f_(function) {}
  // Starts a new function for step `step` (prefill, decode).
  Builder(Module& module, std::string step) : m_(module), f_(module.add_function(std::move(step))) {}

  Function& function() { return f_; }
  void set_placement(std::optional<Placement> p) { forced_ = p; }

  Value arg(std::string name, TensorType type) { return f_.add_arg(std::move(name), std::move(type)); }
  static Value named(Value v, std::string name);

  Value weight(std::string_view name);
  Value state_read(std::string_view state);
  void state_write(std::string_view state, Value v);
  Value to_host(Value v) { return one(OpKind::ToHost, {v}); }
  Value to_device(Value v) { return one(OpKind::ToDevice, {v}); }

  Value embed(Value table, Value ids) { return one(OpKind::Embed, {table, ids}); }
  Value matmul(Value x, Value w) { return one(OpKind::Matmul, {x, w}); }
  Value add(Value a, Value b) { return one(OpKind::Add, {a, b}); }
  Value mul(Value a, Value b) { return one(OpKind::Mul, {a, b}); }
  Value div(Value a, Value b) { return one(OpKind::Div, {a, b}); }
  Value silu(Value x) { return one(OpKind::Silu, {x}); }
  Value gelu(Value x) { return one(OpKind::Gelu, {x}); }
  Value tanh(Value x) { return one(OpKind::Tanh, {x}); }
  Value sigmoid(Value x) { return one(OpKind::Sigmoid, {x}); }
  Value softplus(Value x) { return one(OpKind::Softplus, {x}); }
  Value exp(Value x) { return one(OpKind::Exp, {x}); }
  Value neg(Value x) { return one(OpKind::Neg, {x}); }
  Value abs(Value x) { return one(OpKind::Abs, {x}); }
  Value sign(Value x) { return one(OpKind::Sign, {x}); }
  Value sqrt(Value x) { return one(OpKind::Sqrt, {x}); }
  Value scale(Value x, double factor);
  // max may be infinity (no upper bound).
  Value clamp(Value x, double min, double max);
  Value cast(Value x, ElemType to);
  Value rms_norm(Value x, Value w, double eps);
  // freq_factors (optional): llama3's rope_freqs, [n_rot/2] f32.
  Value rope(Value x, Value pos, const RopeOptions& options, Value freq_factors = {});
  // selected (optional): [T, W] i32 positions each query may attend to (-1: none), from indexer_select.
  Value attention(Value q, Value k, Value v, Value pos, Value seq, const AttentionOptions& options,
                  Value selected = {});
  // Pools the side cache into blocks and returns the [T, top_k + ratio - 1] positions each query keeps.
  Value indexer_select(Value q, Value k, Value k_norm, Value pos, Value seq, const IndexerOptions& options);
  // Per-token attention temperature factors [T] f32 of positions [T] i32
  // (docs/ir.md: attn_temp).
  Value attn_temp(Value pos, int64_t floor_scale, double scale, double offset);
  // (x - mean) / sqrt(var + eps) over the last dim, * gain + bias when given.
  Value layer_norm(Value x, Value gain, Value bias, double eps);
  Value l2_norm(Value x, double eps) { return one(OpKind::L2Norm, {x}, {{"eps", Attr::of_float(eps)}}); }
  // Each `block` values of x's rows times the orthonormal Walsh-Hadamard
  // matrix (docs/ir.md: hadamard).
  Value hadamard(Value x, int64_t block) { return one(OpKind::Hadamard, {x}, {{"block", Attr::of_int(block)}}); }
  // Linear attention: `state` names the per-sequence recurrent state.
  Value causal_conv1d(Value x, Value kernel, Value seq, std::string_view state,
                      int64_t dilation = CausalConv1dAttrs{}.dilation);
  Value delta_rule(Value q, Value k, Value v, Value g, Value beta, Value seq, std::string_view state, double scale);
  // The selective scan of Mamba-1/2 (docs/ir.md: ssm_scan): x [T, H, P],
  // raw dt [T, H] (softplus inside), A [H, 1] or [H, N], B, C [T, G, N].
  Value ssm_scan(Value x, Value dt, Value a, Value b, Value c, Value seq, std::string_view state);
  // Mixture of experts: the SwiGLU experts selected by moe_route's weights and ids.
  Value moe_ffn(Value x, Value weights, Value ids, const MoeExperts& experts, const MoeActivation& act = {});
  // Expert routing (docs/ir.md: moe_route): weights and ids [T, k] of router logits [T, E].
  std::pair<Value, Value> moe_route(Value logits, const MoeRouteOptions& options);
  Value softmax(Value x) { return one(OpKind::Softmax, {x}); }
  Value sum(Value x) { return one(OpKind::Sum, {x}); }  // [..., N] -> [..., 1]
  Value argmax(Value x) { return one(OpKind::Argmax, {x}); }
  std::pair<Value, Value> top_k(Value x, int64_t k);
  // The sampled token per row (docs/ir.md "### sample"): logits [S, V] f32,
  // params [S, 4] f32 (temperature, top_k, top_p, min_p), seed [S, 2] i32
  // (low, high 32 bits), pos [S] i32; max_k in [1, 256] bounds the candidates.
  Value sample(Value logits, Value params, Value seed, Value pos, int64_t max_k) {
    return one(OpKind::Sample, {logits, params, seed, pos}, {{"max_k", Attr::of_int(max_k)}});
  }
  Value reshape(Value x, Shape shape);
  Value view(Value x, Shape shape, Dim offset);
  Value transpose(Value x, std::vector<int64_t> perm);
  Value concat(std::vector<Value> parts, int64_t axis);
  Value slice(Value x, int64_t axis, Dim start, Dim size);
  Value gather(Value x, Value indices, int64_t axis);
  Value scatter(Value x, Value indices, Value updates, int64_t axis);
  Value ngram_hash(Value ids, Value seq, Value history, const NgramHashOptions& options);
  Value ngram_roll(Value history, Value ids, Value seq, int64_t eos);
  void ret(std::vector<Value> outputs);

  // Any table op: infers result types and appends it.
  Op& create(OpKind kind, std::vector<Value> operands, std::vector<NamedAttr> attrs = {});

 private:
  Value one(OpKind kind, std::vector<Value> operands, std::vector<NamedAttr> attrs = {}) {
    return create(kind, std::move(operands), std::move(attrs)).results[0];
  }

  Module& m_;
  Function& f_;
  std::optional<Placement> forced_;
};

}  // namespace vtc::ir
