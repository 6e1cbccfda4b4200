// Hparams every architecture reads (as the reference's generic
// llama_model::load_hparams) and the rope options they imply. The dispatch
// to the builders is registry.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "frontends/gguf/arch/hparams.h"
#include "ir/builder.h"
#include "support/error.h"

namespace vtc::arch {

using ir::ElemType;

int64_t require_int(const gguf::GgufFile& f, const std::string& key) {
  auto v = f.get_int(key);
  if (!v || *v <= 0) throw Error(fmt::format("{}: missing or invalid hparam '{}'", f.path(), key));
  return *v;
}

namespace {

// The first non-zero count of a per-layer array, or `scalar` when the key
// was a single integer (an empty array) or every layer has none.
int64_t first_nonzero(const std::vector<int64_t>& per_layer, int64_t scalar) {
  for (int64_t n : per_layer)
    if (n != 0) return n;
  return scalar;
}

// Rope scaling as the reference reads it: the factor applies unless the
// type is "none" (the default type is linear); YaRN adds ext_factor 1 and an
// attention factor that cancels the kernel's own magnitude correction
// (llama-context.cpp), times rope.scaling.attn_factor.
void read_rope_scaling(const gguf::GgufFile& f, Hparams& h) {
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

namespace {

// A per-layer key given as an array of n_layer non-negative integers (the
// reference's get_key_or_arr): fills `per_layer` and returns layer 0's.
// A single integer leaves `per_layer` empty.
int64_t per_layer_int(const gguf::GgufFile& f, const std::string& key, int64_t n_layer, std::vector<int64_t>& per_layer,
                      std::optional<int64_t> fallback = std::nullopt) {
  const gguf::Value* v = f.find(key);
  if (v && v->as_array()) {
    per_layer = int_array(f, key);
    const bool valid = int64_t(per_layer.size()) == n_layer &&
                       std::all_of(per_layer.begin(), per_layer.end(), [](int64_t x) { return x >= 0; });
    if (!valid)
      throw Error(fmt::format("{}: hparam '{}' must hold {} non-negative integers (one per layer)", f.path(), key, n_layer));
    return per_layer[0];
  }
  if (!v && fallback) return *fallback;
  return require_int(f, key);
}

}  // namespace

Hparams read_hparams(const gguf::GgufFile& f) {
  Hparams h;
  h.arch = f.architecture();
  const std::string& a = h.arch;
  h.n_embd = require_int(f, a + ".embedding_length");
  h.n_layer = require_int(f, a + ".block_count");
  h.n_head = per_layer_int(f, a + ".attention.head_count", h.n_layer, h.layer_n_head);
  h.n_head_kv = per_layer_int(f, a + ".attention.head_count_kv", h.n_layer, h.layer_n_head_kv, h.n_head);
  if (!f.find(a + ".attention.head_count_kv")) h.layer_n_head_kv = h.layer_n_head;  // defaults to n_head, per layer
  // The model-wide counts are those of its attention layers: a hybrid
  // whose first layer is recurrent (LFM2: KV heads 0 on its conv layers)
  // still has the heads of the others.
  h.n_head = first_nonzero(h.layer_n_head, h.n_head);
  h.n_head_kv = first_nonzero(h.layer_n_head_kv, h.n_head_kv);
  if (h.n_head <= 0 && !f.find(a + ".attention.key_length"))
    throw Error(fmt::format("{}: layer 0 has no heads and the file no attention.key_length", f.path()));
  h.head_dim = f.get_int(a + ".attention.key_length").value_or(h.n_head > 0 ? h.n_embd / h.n_head : 0);
  h.n_ff = per_layer_int(f, a + ".feed_forward_length", h.n_layer, h.layer_n_ff);
  h.n_ff = first_nonzero(h.layer_n_ff, h.n_ff);  // a hybrid's recurrent layers have none
  h.n_ctx = require_int(f, a + ".context_length");
  h.n_rot = f.get_int(a + ".rope.dimension_count").value_or(h.head_dim);
  h.eps = f.get_float(a + ".attention.layer_norm_rms_epsilon").value_or(1e-5);
  h.rope_base = f.get_float(a + ".rope.freq_base").value_or(10000.0);
  read_rope_scaling(f, h);
  h.rope_mode = a == "llama" ? ir::RopeMode::Normal : ir::RopeMode::Neox;
  auto* embd = f.find_tensor("token_embd.weight");
  if (!embd || embd->dims.size() != 2)
    throw Error(fmt::format("{}: missing or malformed tensor 'token_embd.weight'", f.path()));
  h.n_vocab = int64_t(embd->dims[1]);
  for (int64_t l = 0; l < h.n_layer; ++l) {
    // A layer without KV heads has no attention cache (Deci's linear and
    // attention-free layers); the builders that accept one say so.
    if (h.kv_heads(l) > 0 && h.heads(l) % h.kv_heads(l) != 0)
      throw Error(fmt::format("{}: layer {}: head_count {} is not a multiple of head_count_kv {}", f.path(), l,
                              h.heads(l), h.kv_heads(l)));
  }
  return h;
}

ir::RopeOptions rope_options(const Hparams& h) {
  ir::RopeOptions rope{.mode = h.rope_mode, .n_rot = h.n_rot, .base = h.rope_base};
  if (h.rope_freq_scale != 1.0f) rope.freq_scale = h.rope_freq_scale;
  if (h.yarn_attn_factor != 1.0f) rope.attn_factor = h.yarn_attn_factor;
  if (h.yarn_ext_factor != 0.0f) {
    rope.ext_factor = h.yarn_ext_factor;
    rope.n_ctx_orig = h.yarn_n_ctx_orig;
  }
  return rope;
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

std::vector<int64_t> int_array(const gguf::GgufFile& f, const std::string& key) {
  std::vector<int64_t> out;
  const auto* kv = f.find(key);
  if (!kv) return out;
  if (const auto* arr = kv->as_array()) {
    for (const auto& item : arr->items) out.push_back(item.as_int().value_or(0));
  } else if (auto v = kv->as_int()) {
    out.push_back(*v);
  }
  return out;
}

std::vector<int64_t> rope_sections(const gguf::GgufFile& f, const Hparams& h) {
  std::vector<int64_t> sections = int_array(f, h.arch + ".rope.dimension_sections");
  sections.resize(4, 0);
  return sections;
}

std::string longrope_factors(const gguf::GgufFile& f, const Hparams& h) {
  const int64_t n_ctx_orig = f.get_int(h.arch + ".rope.scaling.original_context_length").value_or(h.n_ctx);
  return h.n_ctx > n_ctx_orig ? "rope_factors_long" : "rope_factors_short";
}

int64_t read_expert_hparams(const gguf::GgufFile& f, const std::string& a) {
  const int64_t n_expert = require_int(f, a + ".expert_count");
  const int64_t n_used = require_int(f, a + ".expert_used_count");
  if (n_used > n_expert)
    throw Error(fmt::format("{}: expert_used_count {} exceeds expert_count {}", f.path(), n_used, n_expert));
  return n_used;
}

ir::MoeGating expert_gating(const gguf::GgufFile& f, int64_t func, ir::MoeGating none_means) {
  switch (func) {
    case 0: return none_means;
    case 1: return ir::MoeGating::Softmax;
    case 2: return ir::MoeGating::Sigmoid;
    case 3: return ir::MoeGating::SoftmaxWeight;
    default:
      throw Error(fmt::format("{}: expert_gating_func {} is not supported (softmax, sigmoid, softmax_weight)",
                              f.path(), func));
  }
}

}  // namespace vtc::arch
