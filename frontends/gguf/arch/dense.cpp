// Dense decoder-only transformers: llama (Llama 2/3, Mistral, TinyLlama),
// qwen2 (attention biases) and qwen3 (QK-norm). One builder covers all
// three; the differences are data (which tensors exist, rope mode).
//
// Per layer (pre-norm):
//   h = rms_norm(x) ; q,k,v = h Wq,Wk,Wv (+ bias)      qwen2: biases
//   q,k = rms_norm over head_dim                        qwen3: QK-norm
//   q,k = rope(q,k, pos)                                llama: normal, qwen: neox
//   x += attention(q,k,v over @kv.L) Wo
//   x += (silu(h Wgate) * h Wup) Wdown, h = rms_norm(x)
// Head: logits = rms_norm(x) Woutput (Woutput = token_embd when tied).
// build_decoder (dense.h) takes an optional FFN builder that replaces the
// SwiGLU line; the MoE architectures (qwen3moe.cpp) pass theirs.
#include <fmt/format.h>

#include <cmath>

#include "frontends/gguf/arch/dense.h"
#include "ir/builder.h"
#include "support/error.h"

namespace vtc::arch {
namespace {

using ir::Builder;
using ir::Dim;
using ir::ElemType;
using ir::TensorType;
using ir::Value;

}  // namespace

int64_t require_int(const gguf::GgufFile& f, const std::string& key) {
  auto v = f.get_int(key);
  if (!v || *v <= 0) throw Error(fmt::format("{}: missing or invalid hparam '{}'", f.path(), key));
  return *v;
}

namespace {

// Rope scaling as the reference reads it: the factor applies unless the
// type is "none" (the default type is linear); YaRN adds ext_factor 1 and an
// attention factor that cancels the kernel's own magnitude correction
// (llama-context.cpp), times rope.scaling.attn_factor.
void read_rope_scaling(const gguf::GgufFile& f, DenseHparams& h) {
  const std::string& a = h.arch;
  const std::string scaling = f.get_string(a + ".rope.scaling.type").value_or("linear");
  if (scaling != "none" && scaling != "linear" && scaling != "yarn")
    throw Error(fmt::format("{}: rope scaling '{}' is not supported (supported: none, linear, yarn, and llama3 "
                            "rope_freqs)",
                            f.path(), scaling));
  float factor = float(f.get_float(a + ".rope.scaling.factor").value_or(f.get_float(a + ".rope.scale_linear").value_or(0.0)));
  h.rope_freq_scale = factor == 0.0f || scaling == "none" ? 1.0f : 1.0f / factor;
  const float rope_attn_factor = float(f.get_float(a + ".rope.scaling.attn_factor").value_or(1.0));
  h.yarn_attn_factor = rope_attn_factor;
  if (scaling != "yarn") return;
  if (f.find(a + ".rope.scaling.yarn_log_multiplier"))
    throw Error(fmt::format("{}: rope.scaling.yarn_log_multiplier is not supported yet", f.path()));
  h.yarn_ext_factor = 1.0f;
  const float scale = 1.0f / h.rope_freq_scale;
  const float mscale = scale <= 1.0f ? 1.0f : 0.1f * std::log(scale) + 1.0f;
  h.yarn_attn_factor = mscale * (1.0f / (1.0f + 0.1f * std::log(scale))) * rope_attn_factor;
  h.yarn_n_ctx_orig = f.get_int(a + ".rope.scaling.original_context_length").value_or(h.n_ctx);
}

}  // namespace

DenseHparams read_dense_hparams(const gguf::GgufFile& f) {
  DenseHparams h;
  h.arch = f.architecture();
  const std::string& a = h.arch;
  h.n_embd = require_int(f, a + ".embedding_length");
  h.n_layer = require_int(f, a + ".block_count");
  h.n_head = require_int(f, a + ".attention.head_count");
  h.n_head_kv = f.get_int(a + ".attention.head_count_kv").value_or(h.n_head);
  h.head_dim = f.get_int(a + ".attention.key_length").value_or(h.n_embd / h.n_head);
  h.n_ff = require_int(f, a + ".feed_forward_length");
  h.n_ctx = require_int(f, a + ".context_length");
  h.n_rot = f.get_int(a + ".rope.dimension_count").value_or(h.head_dim);
  h.eps = f.get_float(a + ".attention.layer_norm_rms_epsilon").value_or(1e-5);
  h.rope_base = f.get_float(a + ".rope.freq_base").value_or(10000.0);
  read_rope_scaling(f, h);
  h.rope_mode = a == "llama" ? "normal" : "neox";
  auto* embd = f.find_tensor("token_embd.weight");
  if (!embd || embd->dims.size() != 2)
    throw Error(fmt::format("{}: missing or malformed tensor 'token_embd.weight'", f.path()));
  h.n_vocab = int64_t(embd->dims[1]);
  h.tied = f.find_tensor("output.weight") == nullptr;
  h.has_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  h.qk_norm = f.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
  h.has_rope_freqs = f.find_tensor("rope_freqs.weight") != nullptr;
  if (h.n_head % h.n_head_kv != 0)
    throw Error(fmt::format("{}: head_count {} is not a multiple of head_count_kv {}", f.path(), h.n_head,
                            h.n_head_kv));
  return h;
}

namespace {

std::string blk(int64_t layer, const char* name) { return fmt::format("blk.{}.{}", layer, name); }

}  // namespace

void declare_weights(ir::Module& m, const gguf::GgufFile& f) {
  for (const auto& t : f.tensors()) {
    ir::Shape shape(t.dims.rbegin(), t.dims.rend());
    std::string name = t.name;
    if (name.size() > 7 && name.ends_with(".weight")) name.resize(name.size() - 7);
    m.add_weight(name, {elem_type_of(t.type), shape, ir::Placement::Device}, t.name);
  }
}

ir::RopeOptions rope_options(const DenseHparams& h) {
  ir::RopeOptions rope{.mode = h.rope_mode, .n_rot = h.n_rot, .base = h.rope_base};
  if (h.rope_freq_scale != 1.0f) rope.freq_scale = h.rope_freq_scale;
  if (h.yarn_attn_factor != 1.0f) rope.attn_factor = h.yarn_attn_factor;
  if (h.yarn_ext_factor != 0.0f) {
    rope.ext_factor = h.yarn_ext_factor;
    rope.n_ctx_orig = h.yarn_n_ctx_orig;
  }
  return rope;
}

Value swiglu_ffn(Builder& b, Value h, int64_t layer, const std::string& suffix) {
  auto w = [&](const char* name) { return b.weight(fmt::format("blk.{}.{}{}", layer, name, suffix)); };
  Value gate = b.silu(b.matmul(h, w("ffn_gate")));
  Value up = b.matmul(h, w("ffn_up"));
  return b.matmul(b.mul(gate, up), w("ffn_down"));
}

namespace {

class DenseBuilder {
 public:
  DenseBuilder(ir::Module& m, const DenseHparams& h, const BuildOptions& o, const DecoderHooks& hooks)
      : m_(m), h_(h), o_(o), hooks_(hooks) {}

  void declare_states() {
    const Dim P = Dim::symbol("P");
    if (hooks_.declare_states) hooks_.declare_states(m_);
    for (int64_t l = 0; l < h_.n_layer && !hooks_.declare_states; ++l)
      m_.add_state(fmt::format("kv.{}", l), ir::StateKind::Paged,
                   {o_.kv_type, {2, P, o_.kv_page_tokens, h_.n_head_kv, h_.head_dim}, ir::Placement::Device});
    m_.add_state("last_ids", ir::StateKind::Plain, {ElemType::I32, {Dim::symbol("S")}, ir::Placement::Device});
  }

  void build_prefill() {
    Builder b(m_, "prefill");
    const Dim T = Dim::symbol("T");
    Value ids = b.arg("ids", i32({T}));
    Value pos = b.arg("pos", i32({T}));
    Value seq = b.arg("seq", i32({T}));
    Value rows = b.arg("rows", i32({Dim::symbol("R")}));
    Value x = forward_layers(b, ids, pos, seq, T);
    b.ret({Builder::named(head(b, b.gather(x, rows, 0)), "logits")});
  }

  void build_decode() {
    Builder b(m_, "decode");
    const Dim S = Dim::symbol("S");
    Value pos = b.arg("pos", i32({S}));
    Value seq = b.arg("seq", i32({S}));
    Value ids = Builder::named(b.state_read("last_ids"), "ids");
    Value x = forward_layers(b, ids, pos, seq, S);
    b.ret({Builder::named(head(b, x), "logits")});
  }

 private:
  static TensorType i32(ir::Shape shape) { return {ElemType::I32, std::move(shape), ir::Placement::Device}; }

  Value w(Builder& b, const std::string& name) { return b.weight(name); }

  Value forward_layers(Builder& b, Value ids, Value pos, Value seq, const Dim& n) {
    if (hooks_.forward) return hooks_.forward(b, ids, pos, seq, n);
    Value x = Builder::named(b.embed(w(b, "token_embd"), ids), "x");
    for (int64_t l = 0; l < h_.n_layer; ++l) {
      Value h = b.rms_norm(x, w(b, blk(l, "attn_norm")), h_.eps);
      x = b.add(x, hooks_.mixer ? hooks_.mixer(b, h, pos, seq, n, l) : attention(b, h, pos, seq, n, l));
      x = Builder::named(ffn_block(b, x, l), fmt::format("x{}", l));
    }
    return x;
  }

  Value project(Builder& b, Value h, int64_t l, const char* name, const char* bias, const Dim& n, int64_t heads) {
    Value y = b.matmul(h, w(b, blk(l, name)));
    if (h_.has_bias) y = b.add(y, w(b, blk(l, bias)));
    return b.reshape(y, {n, heads, h_.head_dim});
  }

  // The dense token mixer on the normalized input h; the caller adds the residual.
  Value attention(Builder& b, Value h, Value pos, Value seq, const Dim& n, int64_t l) {
    Value q = project(b, h, l, "attn_q", "attn_q.bias", n, h_.n_head);
    Value k = project(b, h, l, "attn_k", "attn_k.bias", n, h_.n_head_kv);
    Value v = project(b, h, l, "attn_v", "attn_v.bias", n, h_.n_head_kv);
    if (h_.qk_norm) {
      q = b.rms_norm(q, w(b, blk(l, "attn_q_norm")), h_.eps);
      k = b.rms_norm(k, w(b, blk(l, "attn_k_norm")), h_.eps);
    }
    const ir::RopeOptions rope = rope_options(h_);
    Value factors = h_.has_rope_freqs ? w(b, "rope_freqs") : Value();
    q = b.rope(q, pos, rope, factors);
    k = b.rope(k, pos, rope, factors);
    ir::AttentionOptions attn{.state = fmt::format("kv.{}", l), .scale = 1.0 / std::sqrt(double(h_.head_dim))};
    Value a = b.attention(q, k, v, pos, seq, attn);
    return b.matmul(b.reshape(a, {n, h_.n_head * h_.head_dim}), w(b, blk(l, "attn_output")));
  }

  Value ffn_block(Builder& b, Value x, int64_t l) {
    Value h = b.rms_norm(x, w(b, blk(l, hooks_.ffn_norm.c_str())), h_.eps);
    return b.add(x, hooks_.ffn ? hooks_.ffn(b, h, l) : swiglu_ffn(b, h, l));
  }

  Value head(Builder& b, Value x) {
    Value h = hooks_.final_norm ? hooks_.final_norm(b, x) : b.rms_norm(x, w(b, "output_norm"), h_.eps);
    return b.matmul(h, w(b, h_.tied ? "token_embd" : "output"));
  }

  ir::Module& m_;
  const DenseHparams& h_;
  const BuildOptions& o_;
  const DecoderHooks& hooks_;
};

}  // namespace

ir::Module build_decoder(const gguf::GgufFile& f, const BuildOptions& o, const DenseHparams& h,
                         const DecoderHooks& hooks) {
  ir::Module m;
  declare_weights(m, f);
  DenseBuilder builder(m, h, o, hooks);
  builder.declare_states();
  builder.build_prefill();
  builder.build_decode();
  return m;
}

ir::ElemType elem_type_of(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return ElemType::F32;
    case GgmlType::F16: return ElemType::F16;
    case GgmlType::BF16: return ElemType::BF16;
    case GgmlType::I32: return ElemType::I32;
    case GgmlType::I64: return ElemType::I64;
    case GgmlType::I8: return ElemType::U8;
    default: return ElemType::quant(type);
  }
}

std::vector<std::string> known_architectures() {
  return {"llama", "qwen2", "qwen3", "qwen3moe", "qwen35", "qwen35moe", "qwen3next", "qwen4exp"};
}

ir::Module build_module(const gguf::GgufFile& f, const BuildOptions& o) {
  const std::string arch = f.architecture();
  if (arch == "qwen3moe") return build_qwen3moe(f, o);
  if (arch == "qwen4exp") return build_qwen4exp(f, o);
  if (arch == "qwen35" || arch == "qwen35moe" || arch == "qwen3next") return build_qwen35(f, o);
  for (const auto& known : {"llama", "qwen2", "qwen3"})
    if (arch == known) return build_decoder(f, o, read_dense_hparams(f));
  throw Error(fmt::format("{}: architecture '{}' is not supported (supported: {})", f.path(),
                          arch.empty() ? "(none)" : arch, fmt::join(known_architectures(), ", ")));
}

}  // namespace vtc::arch
