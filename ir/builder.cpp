#include "ir/builder.h"

#include <fmt/format.h>

#include "ir/shape_infer.h"
#include "support/error.h"

namespace vtc::ir {

Value Builder::named(Value v, std::string name) {
  v->name = std::move(name);
  return v;
}

// Appends the op with untyped results, infers their types, and removes it
// again if inference fails, so a caught error leaves the function intact.
Op& Builder::create(OpKind kind, std::vector<Value> operands, std::vector<NamedAttr> attrs) {
  const OpInfo& info = op_info(kind);
  for (auto& a : attrs)
    if (const AttrSpec* spec = info.find_attr(a.name)) coerce_attr(a.value, spec->kind);
  int n = static_cast<int>(operands.size());
  if (n < info.min_operands || (info.max_operands >= 0 && n > info.max_operands))
    throw Error("builder: " + std::string(info.mnemonic) + " got " + std::to_string(n) + " operands");
  for (const auto& v : operands)
    if (!v) throw Error("builder: " + std::string(info.mnemonic) + " got a null operand");
  if (info.num_results < 0) throw Error("builder: " + std::string(info.mnemonic) + " ops are built by the fusion passes");
  Op& op = f_.append(kind, std::move(operands), std::vector<TensorType>(static_cast<size_t>(info.num_results)),
                     std::move(attrs));
  std::vector<TensorType> types;
  try {
    types = infer_result_types(m_, op);
  } catch (const Error& e) {
    f_.ops.pop_back();
    throw Error("builder: " + std::string(info.mnemonic) + ": " + e.what());
  }
  bool movable = info.effect != Effect::Transfer && info.min_operands > 0;
  for (size_t i = 0; i < types.size(); ++i) {
    if (forced_ && movable) types[i].placement = *forced_;
    op.results[i]->type = std::move(types[i]);
  }
  return op;
}

Value Builder::weight(std::string_view name) {
  return one(OpKind::Weight, {}, {{"name", Attr::of_symbol(std::string(name))}});
}

Value Builder::state_read(std::string_view state) {
  return one(OpKind::StateRead, {}, {{"state", Attr::of_symbol(std::string(state))}});
}

void Builder::state_write(std::string_view state, Value v) {
  create(OpKind::StateWrite, {v}, {{"state", Attr::of_symbol(std::string(state))}});
}

Value Builder::scale(Value x, double factor) { return one(OpKind::Scale, {x}, {{"factor", Attr::of_float(factor)}}); }

Value Builder::clamp(Value x, double min, double max) {
  return one(OpKind::Clamp, {x}, {{"min", Attr::of_float(min)}, {"max", Attr::of_float(max)}});
}

Value Builder::cast(Value x, ElemType to) { return one(OpKind::Cast, {x}, {{"to", Attr::of_type(to.name())}}); }

Value Builder::rms_norm(Value x, Value w, double eps) {
  return one(OpKind::RmsNorm, {x, w}, {{"eps", Attr::of_float(eps)}});
}

Value Builder::rope(Value x, Value pos, const RopeOptions& o, Value freq_factors) {
  std::vector<Value> operands = {x, pos};
  if (freq_factors) operands.push_back(freq_factors);
  return one(OpKind::Rope, std::move(operands), o.to_attrs());
}

Value Builder::attention(Value q, Value k, Value v, Value pos, Value seq, const AttentionOptions& o,
                         Value selected) {
  std::vector<NamedAttr> attrs = {{"state", Attr::of_symbol(o.state)},
                                  {"scale", Attr::of_float(o.scale)},
                                  {"causal", Attr::of_bool(o.causal)}};
  if (o.window) attrs.push_back({"window", Attr::of_int(*o.window)});
  if (o.softcap) attrs.push_back({"softcap", Attr::of_float(*o.softcap)});
  if (o.chunk) attrs.push_back({"chunk", Attr::of_int(*o.chunk)});
  if (o.alibi_max_bias) attrs.push_back({"alibi_max_bias", Attr::of_float(*o.alibi_max_bias)});
  if (!o.v_state.empty()) attrs.push_back({"v_state", Attr::of_symbol(o.v_state)});
  std::vector<Value> operands = {q, k, v, pos, seq};
  if (selected) operands.push_back(selected);
  if (o.sinks) {
    attrs.push_back({"sinks", Attr::of_bool(true)});
    operands.push_back(o.sinks);
  }
  return one(OpKind::Attention, std::move(operands), std::move(attrs));
}

Value Builder::attn_temp(Value pos, int64_t floor_scale, double scale, double offset) {
  return one(OpKind::AttnTemp, {pos},
             {{"floor_scale", Attr::of_int(floor_scale)}, {"scale", Attr::of_float(scale)}, {"offset", Attr::of_float(offset)}});
}

Value Builder::layer_norm(Value x, Value gain, Value bias, double eps) {
  if (bias && !gain) throw Error("builder: layer_norm takes a bias only after a gain");
  std::vector<Value> operands = {x};
  if (gain) operands.push_back(gain);
  if (bias) operands.push_back(bias);
  return one(OpKind::LayerNorm, std::move(operands), {{"eps", Attr::of_float(eps)}});
}

Value Builder::indexer_select(Value q, Value k, Value k_norm, Value pos, Value seq, const IndexerOptions& o) {
  const IndexerSelectAttrs attrs{.state = o.state, .ratio = o.ratio, .top_k = o.top_k, .eps = o.eps,
                                 .mode = o.rope.mode, .n_rot = o.rope.n_rot, .base = o.rope.base,
                                 .freq_scale = o.rope.freq_scale, .sections = o.rope.sections};
  return one(OpKind::IndexerSelect, {q, k, k_norm, pos, seq}, attrs.to_attrs());
}

Value Builder::causal_conv1d(Value x, Value kernel, Value seq, std::string_view state, int64_t dilation) {
  const CausalConv1dAttrs attrs{.state = std::string(state), .dilation = dilation};
  return one(OpKind::CausalConv1d, {x, kernel, seq}, attrs.to_attrs());
}

Value Builder::delta_rule(Value q, Value k, Value v, Value g, Value beta, Value seq, std::string_view state,
                          double scale) {
  return one(OpKind::DeltaRule, {q, k, v, g, beta, seq},
             {{"state", Attr::of_symbol(std::string(state))}, {"scale", Attr::of_float(scale)}});
}

Value Builder::ssm_scan(Value x, Value dt, Value a, Value b, Value c, Value seq, std::string_view state) {
  const SsmScanAttrs attrs{.state = std::string(state)};
  return one(OpKind::SsmScan, {x, dt, a, b, c, seq}, attrs.to_attrs());
}

std::vector<MoeExperts::Slot> MoeExperts::slots() const {
  std::vector<Slot> s;
  if (merged()) {
    s = {{gate_up, "gate_up experts [E, 2F, D]"}, {down, "down experts [E, D, F]"}};
  } else {
    s = {{gate, "gate experts [E, F, D]"}, {up, "up experts [E, F, D]"}, {down, "down experts [E, D, F]"}};
    if (gate_scale) s.push_back({gate_scale, "gate scale [E]", true});
    if (up_scale) s.push_back({up_scale, "up scale [E]", true});
  }
  if (down_scale) s.push_back({down_scale, "down scale [E]", true});
  if (merged()) {
    if (gate_up_bias) s.push_back({gate_up_bias, "gate_up bias [E, 2F]", false, true});
  } else {
    if (gate_bias) s.push_back({gate_bias, "gate bias [E, F]", false, true});
    if (up_bias) s.push_back({up_bias, "up bias [E, F]", false, true});
  }
  if (down_bias) s.push_back({down_bias, "down bias [E, D]", false, true});
  return s;
}

// The operand count fixes the form once `scaled` and `biased` are known:
// split stacks take 3 + 3 scales + 3 biases, a merged one 2 + 1 + 2.
MoeExperts MoeExperts::of(const Op& op) {
  const MoeFfnAttrs attrs = MoeFfnAttrs::of(op);
  const bool scaled = attrs.scaled, biased = attrs.biased;
  const auto& v = op.operands;
  const size_t split = 6 + (scaled ? 3 : 0) + (biased ? 3 : 0), merged = 5 + (scaled ? 1 : 0) + (biased ? 2 : 0);
  MoeExperts e;
  size_t i = 3;
  if (v.size() == merged) {
    e.gate_up = v[i++], e.down = v[i++];
    if (scaled) e.down_scale = v[i++];
    if (biased) e.gate_up_bias = v[i++], e.down_bias = v[i++];
  } else if (v.size() == split) {
    e.gate = v[i++], e.up = v[i++], e.down = v[i++];
    if (scaled) e.gate_scale = v[i++], e.up_scale = v[i++], e.down_scale = v[i++];
    if (biased) e.gate_bias = v[i++], e.up_bias = v[i++], e.down_bias = v[i++];
  } else {
    throw Error(fmt::format("moe_ffn{}{} takes {} operands (x, weights, ids, gate_up, down{}{}) or {} (x, weights, ids, "
                            "gate, up, down{}{}), got {}{}",
                            scaled ? " with scaled = true" : "", biased ? (scaled ? " and biased = true" : " with biased = true") : "",
                            merged, scaled ? ", down_scale" : "", biased ? ", gate_up_bias, down_bias" : "", split,
                            scaled ? ", gate_scale, up_scale, down_scale" : "",
                            biased ? ", gate_bias, up_bias, down_bias" : "", v.size(),
                            !scaled && !biased && v.size() > 6 ? " (per-expert scales need scaled = true, biases biased = true)" : ""));
  }
  return e;
}

// All-or-none split scales keep the op to four forms; the checks here are
// about which operands were given, the shapes are the shape function's.
Value Builder::moe_ffn(Value x, Value weights, Value ids, const MoeExperts& e, const MoeActivation& act) {
  if (e.merged() && (e.gate || e.up)) throw Error("builder: moe_ffn takes gate_up or gate and up, not both");
  if (e.merged() && (e.gate_scale || e.up_scale))
    throw Error("builder: moe_ffn with a merged gate_up stack takes only a down scale (the reference scales no gate_up result)");
  if (!e.merged() && (!e.gate || !e.up)) throw Error("builder: moe_ffn needs gate and up experts, or gate_up");
  const int split_scales = int(bool(e.gate_scale)) + int(bool(e.up_scale)) + int(bool(e.down_scale));
  if (!e.merged() && split_scales != 0 && split_scales != 3)
    throw Error("builder: moe_ffn with split gate and up takes all three scales or none, got " +
                std::to_string(split_scales));
  const int biases = e.merged() ? int(bool(e.gate_up_bias)) + int(bool(e.down_bias))
                                : int(bool(e.gate_bias)) + int(bool(e.up_bias)) + int(bool(e.down_bias));
  if (biases != 0 && biases != (e.merged() ? 2 : 3))
    throw Error("builder: moe_ffn takes a bias for every expert stack or none, got " + std::to_string(biases));
  std::vector<Value> operands = {x, weights, ids};
  for (const auto& s : e.slots()) operands.push_back(s.value);
  const MoeFfnAttrs attrs{.scaled = e.scaled(), .biased = e.biased(), .activation = act.kind, .alpha = act.alpha,
                          .limit = act.limit, .weight_input = act.weight_input};
  return one(OpKind::MoeFfn, std::move(operands), attrs.to_attrs());
}

std::pair<Value, Value> Builder::moe_route(Value logits, const MoeRouteOptions& o) {
  // A scale of 1 is none too; groups apply only when there are several.
  const bool grouped = o.groups > 1;
  const MoeRouteAttrs attrs{.k = o.k, .gating = o.gating, .norm = o.norm, .scale = o.scale == 1.0 ? 0.0 : o.scale,
                            .groups = grouped ? o.groups : 0, .groups_used = grouped ? o.groups_used : 0};
  std::vector<Value> operands = {logits};
  if (o.selection_bias) operands.push_back(o.selection_bias);
  Op& op = create(OpKind::MoeRoute, std::move(operands), attrs.to_attrs());
  return {op.results[0], op.results[1]};
}

std::pair<Value, Value> Builder::top_k(Value x, int64_t k) {
  Op& op = create(OpKind::TopK, {x}, {{"k", Attr::of_int(k)}});
  return {op.results[0], op.results[1]};
}

Value Builder::reshape(Value x, Shape shape) {
  return one(OpKind::Reshape, {x}, {{"shape", Attr::of_dims(std::move(shape))}});
}

Value Builder::view(Value x, Shape shape, Dim offset) {
  return one(OpKind::View, {x}, {{"shape", Attr::of_dims(std::move(shape))}, {"offset", Attr::of_dim(std::move(offset))}});
}

Value Builder::transpose(Value x, std::vector<int64_t> perm) {
  return one(OpKind::Transpose, {x}, {{"perm", Attr::of_ints(std::move(perm))}});
}

Value Builder::concat(std::vector<Value> parts, int64_t axis) {
  return one(OpKind::Concat, std::move(parts), {{"axis", Attr::of_int(axis)}});
}

Value Builder::slice(Value x, int64_t axis, Dim start, Dim size) {
  return one(OpKind::Slice, {x},
             {{"axis", Attr::of_int(axis)}, {"start", Attr::of_dim(std::move(start))}, {"size", Attr::of_dim(std::move(size))}});
}

Value Builder::gather(Value x, Value indices, int64_t axis) {
  return one(OpKind::Gather, {x, indices}, {{"axis", Attr::of_int(axis)}});
}

Value Builder::scatter(Value x, Value indices, Value updates, int64_t axis) {
  return one(OpKind::Scatter, {x, indices, updates}, {{"axis", Attr::of_int(axis)}});
}

Value Builder::ngram_hash(Value ids, Value seq, Value history, const NgramHashOptions& o) {
  return one(OpKind::NgramHash, {ids, seq, history},
             {{"n", Attr::of_int(o.n)},
              {"heads_per_gram", Attr::of_int(o.heads_per_gram)},
              {"eos", Attr::of_int(o.eos)},
              {"mult", Attr::of_ints(o.mult)},
              {"vocab", Attr::of_ints(o.vocab)},
              {"offset", Attr::of_ints(o.offset)}});
}

Value Builder::ngram_roll(Value history, Value ids, Value seq, int64_t eos) {
  return one(OpKind::NgramRoll, {history, ids, seq}, {{"eos", Attr::of_int(eos)}});
}

void Builder::ret(std::vector<Value> outputs) { create(OpKind::Return, std::move(outputs)); }

}  // namespace vtc::ir
