// The architecture helper library (step_graph.h): taking tensors, the
// projection family, attention, FFN and MoE blocks, and the step skeleton
// that turns an Architecture into @prefill and @decode.
#include "frontends/gguf/arch/step_graph.h"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include <cmath>

#include "ir/step_interface.h"
#include "support/error.h"

namespace vtc::arch {

using ir::Builder;
using ir::Dim;
using ir::ElemType;
using ir::TensorType;
using ir::Value;

std::string blk(int64_t layer, std::string_view name) { return fmt::format("blk.{}.{}", layer, name); }

StepGraph::StepGraph(ir::Module& m, const gguf::GgufFile& f, const Hparams& hp, Builder& builder, Dim tokens,
                     Value token_ids, Value positions, Value sequences)
    : b(builder), h(hp), n(std::move(tokens)), ids(token_ids), pos(positions), seq(sequences), m_(m), f_(f) {}

namespace {

// The GGUF tensor behind IR weight `name`: "<name>.weight", or `name` itself
// for tensors stored without a suffix (blk.N.ssm_a, "*.bias", "*.scale").
const gguf::TensorInfo* find_source(const gguf::GgufFile& f, std::string_view name) {
  if (const auto* t = f.find_tensor(std::string(name) + ".weight")) return t;
  return f.find_tensor(name);
}

}  // namespace

bool StepGraph::has(std::string_view name) const { return find_source(f_, name) != nullptr; }

Value StepGraph::weight(std::string_view name) {
  const gguf::TensorInfo* t = find_source(f_, name);
  if (!t)
    throw Error(fmt::format("{}: missing tensor '{}.weight', which {} requires", f_.path(), name,
                            h.arch.empty() ? "the architecture" : h.arch));
  if (!m_.find_weight(name)) {
    ir::Shape shape(t->dims.rbegin(), t->dims.rend());
    m_.add_weight(std::string(name), {elem_type_of(t->type), shape, ir::Placement::Device}, t->name);
  }
  return b.weight(name);
}

Value StepGraph::optional(std::string_view name) { return has(name) ? weight(name) : Value(); }

Value StepGraph::norm(Value x, std::string_view gain) { return b.rms_norm(x, weight(gain), h.eps); }

Value StepGraph::layer_norm(Value x, std::string_view gain, double eps, Need bias) {
  const std::string bias_name = fmt::format("{}.bias", gain);
  Value b_value = bias == Need::kRequired ? weight(bias_name) : bias == Need::kOptional ? optional(bias_name) : Value();
  return b.layer_norm(x, weight(gain), b_value, eps);
}

Value StepGraph::unit_norm(Value x) {
  const ir::Shape shape = x.type().shape;
  Value row = x;
  for (size_t axis = 0; axis + 1 < shape.size(); ++axis) row = b.slice(row, int64_t(axis), 0, 1);
  row = b.reshape(row, {shape.back()});
  return b.rms_norm(x, b.exp(b.scale(row, 0.0)), h.eps);
}

Value StepGraph::scaled(Value y, std::string_view w) {
  Value s = optional(fmt::format("{}.scale", w));
  return s ? b.mul(y, s) : y;
}

Value StepGraph::biased(Value y, std::string_view w) {
  Value bias = optional(fmt::format("{}.bias", w));
  return bias ? b.add(y, bias) : y;
}

Value StepGraph::linear_plain(Value x, std::string_view w) { return b.matmul(x, weight(w)); }
Value StepGraph::linear(Value x, std::string_view w) { return scaled(linear_plain(x, w), w); }
Value StepGraph::linear_bias(Value x, std::string_view w) { return biased(linear(x, w), w); }
Value StepGraph::ffn_linear(Value x, std::string_view w) { return scaled(biased(linear_plain(x, w), w), w); }

StepGraph::Qkv StepGraph::qkv(Value x, int64_t l, double clamp_kqv) {
  const int64_t hd = h.head_dim, n_head = h.heads(l), n_head_kv = h.kv_heads(l);
  const int64_t q_width = n_head * hd, kv_width = n_head_kv * hd;
  auto project = [&](const std::string& w) {
    Value y = linear_bias(x, w);
    return clamp_kqv > 0.0 ? b.clamp(y, -clamp_kqv, clamp_kqv) : y;
  };
  auto heads = [&](Value y, int64_t count) { return b.reshape(y, {n, count, hd}); };
  if (has(blk(l, "attn_qkv"))) {
    Value qkv = project(blk(l, "attn_qkv"));
    return {heads(b.slice(qkv, 1, 0, q_width), n_head), heads(b.slice(qkv, 1, q_width, kv_width), n_head_kv),
            heads(b.slice(qkv, 1, q_width + kv_width, kv_width), n_head_kv)};
  }
  return {heads(project(blk(l, "attn_q")), n_head), heads(project(blk(l, "attn_k")), n_head_kv),
          heads(project(blk(l, "attn_v")), n_head_kv)};
}

Value StepGraph::ffn_projection(Value x, const std::string& w, FfnTensors tensors) {
  Value y = linear_plain(x, w);
  if (tensors.biases) y = biased(y, w);
  return tensors.scales ? scaled(y, w) : y;
}

Value StepGraph::swiglu_ffn(Value x, int64_t l, std::string_view suffix, FfnTensors tensors) {
  auto project = [&](Value in, const char* part) {
    return ffn_projection(in, blk(l, fmt::format("{}{}", part, suffix)), tensors);
  };
  Value gate = b.silu(project(x, "ffn_gate"));
  Value up = project(x, "ffn_up");
  return project(b.mul(gate, up), "ffn_down");
}

Value StepGraph::fused_swiglu_ffn(Value x, int64_t l) {
  Value up = linear_plain(x, blk(l, "ffn_up"));
  const int64_t f = h.n_ff;
  Value act = b.mul(b.silu(b.slice(up, 1, 0, f)), b.slice(up, 1, f, f));
  return linear_plain(act, blk(l, "ffn_down"));
}

Value StepGraph::gelu_ffn(Value x, int64_t l, FfnTensors tensors) {
  return ffn_projection(b.gelu(ffn_projection(x, blk(l, "ffn_up"), tensors)), blk(l, "ffn_down"), tensors);
}

ir::MoeExperts StepGraph::experts(int64_t l, bool merged_allowed, bool expert_scales) {
  ir::MoeExperts e;
  e.down = weight(blk(l, "ffn_down_exps"));
  if (expert_scales) e.down_scale = optional(blk(l, "ffn_down_exps.scale"));
  if (merged_allowed && has(blk(l, "ffn_gate_up_exps"))) {
    // The reference scales no gate_up result; a gate_up scale is unknown to it.
    e.gate_up = weight(blk(l, "ffn_gate_up_exps"));
    return e;
  }
  e.gate = weight(blk(l, "ffn_gate_exps"));
  e.up = weight(blk(l, "ffn_up_exps"));
  if (!expert_scales) return e;
  e.gate_scale = optional(blk(l, "ffn_gate_exps.scale"));
  e.up_scale = optional(blk(l, "ffn_up_exps.scale"));
  const int scales = bool(e.gate_scale) + bool(e.up_scale) + bool(e.down_scale);
  if (scales != 0 && scales != 3) {
    // Reported after the accounting: a misspelt scale is the likelier cause.
    deferred_errors.push_back(fmt::format("layer {} has per-expert scales for only some of ffn_gate_exps, "
                                          "ffn_up_exps and ffn_down_exps; vtc supports all three or none",
                                          l));
    e.gate_scale = e.up_scale = e.down_scale = Value();
  }
  return e;
}

Value StepGraph::moe_ffn(Value x, int64_t l, const MoeFfnOptions& o) {
  // The router takes no scale or bias in build_moe_ffn.
  auto [weights, ids] = b.moe_route(linear_plain(x, blk(l, "ffn_gate_inp")), o.route);
  return b.moe_ffn(x, weights, ids, experts(l, o.merged_allowed, o.expert_scales));
}

Value StepGraph::text_mrope_positions() {
  Value column = b.reshape(pos, {n, 1});
  Value zero = b.cast(b.scale(b.cast(column, ElemType::F32), 0.0), ElemType::I32);
  return b.concat({column, column, column, zero}, 1);
}

Value StepGraph::attention(Value q, Value k, Value v, int64_t l, Value selected) {
  ir::AttentionOptions attn{.state = fmt::format("kv.{}", l), .scale = 1.0 / std::sqrt(double(h.head_dim))};
  return b.attention(q, k, v, pos, seq, attn, selected);
}

Value StepGraph::output(Value x, bool bias) {
  if (!has("output")) return b.matmul(x, weight("token_embd"));  // tied
  Value logits = linear(x, "output");
  return bias ? biased(logits, "output") : logits;
}

void declare_kv_state(ir::Module& m, const BuildOptions& o, const Hparams& h, int64_t l) {
  m.add_state(fmt::format("kv.{}", l), ir::StateKind::Paged,
              {ir::ElemType::F16, {2, Dim::symbol("P"), o.kv_page_tokens, h.kv_heads(l), h.head_dim}, ir::Placement::Device});
}

namespace {

using ir::StepKind;
namespace step = ir::step;

// A step function's arguments, declared from the step interface
// (ir/step_interface.h), in its order: the builder names no argument itself.
class StepArgs {
 public:
  StepArgs(Builder& b, StepKind kind) {
    for (const ir::StepValue* v : ir::step_args(kind)) args_.emplace_back(v->name, b.arg(std::string(v->name), v->type()));
  }
  Value operator[](std::string_view name) const {
    for (const auto& [n, v] : args_)
      if (n == name) return v;
    throw Error(fmt::format("step builder: the step interface gives this step no argument %{}", name));
  }

 private:
  std::vector<std::pair<std::string_view, Value>> args_;
};

Builder step_builder(ir::Module& m, StepKind kind) { return Builder(m, std::string(ir::step_name(kind))); }

void build_text_steps(ir::Module& m, const gguf::GgufFile& f, const Architecture& arch,
                      std::vector<std::string>& deferred);

}  // namespace

void Transformer::declare_states(ir::Module& m) const {
  for (int64_t l = 0; l < h.n_layer; ++l) declare_kv_state(m, o_, h, l);
}

Value Transformer::head(StepGraph& g, Value rows) const { return g.output(g.norm(rows, "output_norm")); }
Value Transformer::embedding(StepGraph& g, Value x) const { return g.norm(x, "output_norm"); }

Value Architecture::embedding(StepGraph&, Value) const {
  throw Error(fmt::format("embeddings are not supported for architecture '{}' yet", h.arch));
}

ir::Module build_architecture(const gguf::GgufFile& f, const Architecture& arch, const BuildOptions& o) {
  ir::Module m;
  std::vector<std::string> deferred;
  arch.declare_states(m);
  if (arch.generates_text()) {
    const ir::StepValue& last_ids = ir::step_value(StepKind::Decode, step::kLastIds);
    m.add_state(std::string(last_ids.name), ir::StateKind::Plain, last_ids.type());
    build_text_steps(m, f, arch, deferred);
  }
  if (o.embeddings || !arch.generates_text()) {
    Builder b = step_builder(m, StepKind::Embed);
    const StepArgs a(b, StepKind::Embed);
    StepGraph g(m, f, arch.h, b, Dim::symbol("T"), a[step::kIds], a[step::kPos], a[step::kSeq]);
    b.ret({Builder::named(arch.embedding(g, arch.forward(g)), "embd")});
    deferred.insert(deferred.end(), g.deferred_errors.begin(), g.deferred_errors.end());
  }
  if (!o.check_tensors) return m;
  require_full_accounting(f, account_tensors(f, m));
  if (!deferred.empty()) throw Error(fmt::format("{}: {}", f.path(), fmt::join(deferred, "; ")));
  return m;
}

namespace {

// @prefill and @decode of a text-generating architecture.
void build_text_steps(ir::Module& m, const gguf::GgufFile& f, const Architecture& arch,
                      std::vector<std::string>& deferred) {
  const Hparams& h = arch.h;
  {
    Builder b = step_builder(m, StepKind::Prefill);
    const StepArgs a(b, StepKind::Prefill);
    StepGraph g(m, f, h, b, Dim::symbol("T"), a[step::kIds], a[step::kPos], a[step::kSeq]);
    Value x = arch.forward(g);
    b.ret({Builder::named(arch.head(g, b.gather(x, a[step::kRows], 0)), "logits")});
    deferred = g.deferred_errors;
  }
  {
    Builder b = step_builder(m, StepKind::Decode);
    const StepArgs a(b, StepKind::Decode);
    // Sampling is part of the step: the next ids are drawn on the target
    // and fed back through @last_ids, so placement and the verifier cover
    // the whole id feedback path (the seed's stale-ids bug).
    Value ids = Builder::named(b.state_read(step::kLastIds), std::string(step::kIds));
    StepGraph g(m, f, h, b, Dim::symbol("S"), ids, a[step::kPos], a[step::kSeq]);
    Value logits = Builder::named(arch.head(g, arch.forward(g)), "logits");
    Value next = Builder::named(b.sample(logits, a[step::kSampling], a[step::kSeed], a[step::kPos], kSampleMaxCandidates), "next");
    b.state_write(step::kLastIds, next);
    b.ret({logits, next});
  }
}

}  // namespace

}  // namespace vtc::arch
