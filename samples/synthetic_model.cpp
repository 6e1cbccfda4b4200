#include "samples/synthetic_model.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <utility>

#include "frontends/gguf/dequant.h"
#include "frontends/gguf/gguf.h"
#include "support/error.h"
#include "support/hash.h"

namespace vtc::synth {
namespace {

using gguf::GgufFile;
using gguf::GgufWriter;
using gguf::Value;

// n_embd, n_ff, n_layer, n_head, n_head_kv, head_dim, n_ctx. Every matrix
// dimension of "small" and up is a multiple of 256, so K-quants apply.
const std::map<std::string, ModelShape>& size_table() {
  static const std::map<std::string, ModelShape> table = {
      {"tiny", {64, 192, 2, 4, 2, 16, 512}},
      {"small", {256, 512, 2, 4, 2, 64, 1024}},
      {"125m", {768, 2048, 12, 12, 4, 64, 2048}},
      {"0.5b", {1024, 2816, 24, 16, 8, 64, 4096}},
      {"0.56b", {1280, 5120, 20, 20, 4, 64, 4096}},  // issue 15's CPU benchmark model
      {"1b", {2048, 5632, 16, 32, 8, 64, 4096}},
  };
  return table;
}

// splitmix64: a small, well-mixed generator; one stream per tensor.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  float symmetric() { return static_cast<float>((next() >> 40) * 0x1.0p-24 * 2.0 - 1.0); }
};

uint64_t stream_seed(uint64_t seed, const std::string& name) {
  return seed ^ fnv1a64(name);
}

// How a tensor's values are drawn: uniform with a given standard deviation
// around a center (norm gains use center 1).
struct Init {
  float center = 0.0f;
  float stddev = 0.0f;
};

void fill_values(GgmlType type, const std::string& name, uint64_t seed, Init init, uint8_t* dst,
                 uint64_t n_bytes) {
  Rng rng{stream_seed(seed, name)};
  const float half_width = init.stddev * std::sqrt(3.0f);  // uniform(-a,a) has std a/sqrt(3)
  auto draw = [&] { return init.center + half_width * rng.symmetric(); };
  if (type == GgmlType::F32) {
    for (uint64_t i = 0; i < n_bytes / 4; ++i) {
      float v = draw();
      std::memcpy(dst + 4 * i, &v, 4);
    }
    return;
  }
  for (uint64_t i = 0; i < n_bytes / 2; ++i) {
    uint16_t h = type == GgmlType::F16 ? fp32_to_fp16(draw()) : fp32_to_bf16(draw());
    std::memcpy(dst + 2 * i, &h, 2);
  }
}

// MoE geometry (qwen3moe, qwen35moe, qwen3next, qwen4exp): 8 experts, 2 used per
// token, each half as wide as the dense FFN of the same size (so expert
// widths stay multiples of 32, and of 256 from "small" up). The shared
// expert is as wide as the dense FFN: a width distinct from the routed
// experts', so a consumer that mixes the two up fails.
constexpr uint32_t kMoeExperts = 8, kMoeUsed = 2;
uint32_t moe_ff(const ModelShape& s) { return s.n_ff / 2; }
uint32_t shared_ff(const ModelShape& s) { return s.n_ff; }

bool is_qwen4exp(const std::string& a) { return a == "qwen4exp"; }
bool is_moe_arch(const std::string& a) {
  return a == "qwen3moe" || a == "qwen35moe" || a == "qwen3next" || is_qwen4exp(a);
}
bool has_shared_expert(const std::string& a) {
  return a == "qwen35moe" || a == "qwen3next" || is_qwen4exp(a);
}

// Rotary dims: all of the head, except the hybrids' partial rotary (half).
uint32_t rope_dims(const Options& o, const ModelShape& s) {
  return is_hybrid_arch(o.arch) ? s.head_dim / 2 : s.head_dim;
}

// qwen35's interleaved M-RoPE sections (temporal, height, width, extra) in
// rotary pairs, shaped like Qwen3.5's [11, 11, 10] and summing to all pairs.
std::vector<uint32_t> rope_sections(const Options& o, const ModelShape& s) {
  const uint32_t pairs = rope_dims(o, s) / 2, hw = pairs * 5 / 16;
  return {pairs - 2 * hw, hw, hw, 0};
}

struct TensorPlan {
  std::string name;
  std::vector<uint64_t> dims;
  GgmlType type;
  Init init;
};

// Collects the tensor list; each helper applies the file's init conventions.
struct Planner {
  const Options& o;
  const ModelShape& s;
  std::vector<TensorPlan> plan;

  void add(std::string name, std::vector<uint64_t> dims, GgmlType type, Init init) {
    plan.push_back({std::move(name), std::move(dims), type, init});
  }
  // Weight matrices (and expert stacks) at std 1/sqrt(fan_in), in the
  // requested weight type.
  void matrix(std::string name, std::vector<uint64_t> dims) {
    const float stddev = 1.0f / std::sqrt(float(dims[0]));
    add(std::move(name), std::move(dims), o.weight_type, {0.0f, stddev});
  }
  void gain(std::string name, uint64_t n) { add(std::move(name), {n}, GgmlType::F32, {1.0f, 0.1f}); }
  void bias(std::string name, uint64_t n) { add(std::move(name), {n}, GgmlType::F32, {0.0f, 0.1f}); }
  void zero_last() { plan.back().init = {0.0f, 0.0f}; }
};

// Plain attention (llama, qwen2, qwen3, qwen3moe) and the ffn_norm after it.
void plan_attention(Planner& p, const std::string& blk, uint32_t l) {
  const ModelShape& s = p.s;
  const std::string& a = p.o.arch;
  const uint64_t d = s.n_embd, q_dim = uint64_t{s.n_head} * s.head_dim, kv_dim = uint64_t{s.n_head_kv} * s.head_dim;
  p.matrix(blk + "attn_q.weight", {d, q_dim});
  p.matrix(blk + "attn_k.weight", {d, kv_dim});
  p.matrix(blk + "attn_v.weight", {d, kv_dim});
  if (a == "qwen2") {
    p.bias(blk + "attn_q.bias", q_dim);
    p.bias(blk + "attn_k.bias", kv_dim);
    p.bias(blk + "attn_v.bias", kv_dim);
  }
  if (a == "qwen3" || a == "qwen3moe") {
    p.gain(blk + "attn_q_norm.weight", s.head_dim);
    p.gain(blk + "attn_k_norm.weight", s.head_dim);
  }
  p.matrix(blk + "attn_output.weight", {q_dim, d});
  if (int(l) == p.o.zero_attn_output_layer) p.zero_last();
  p.gain(blk + "ffn_norm.weight", d);
}

// The hybrids' full attention: attn_q yields each head's query followed by
// its output gate (sigmoid), hence twice the query width; QK-norm as qwen3.
void plan_gated_attention(Planner& p, const std::string& blk, uint32_t l) {
  const ModelShape& s = p.s;
  const uint64_t d = s.n_embd, q_dim = uint64_t{s.n_head} * s.head_dim, kv_dim = uint64_t{s.n_head_kv} * s.head_dim;
  p.matrix(blk + "attn_q.weight", {d, 2 * q_dim});
  p.matrix(blk + "attn_k.weight", {d, kv_dim});
  p.matrix(blk + "attn_v.weight", {d, kv_dim});
  p.gain(blk + "attn_q_norm.weight", s.head_dim);
  p.gain(blk + "attn_k_norm.weight", s.head_dim);
  p.matrix(blk + "attn_output.weight", {q_dim, d});
  if (int(l) == p.o.zero_attn_output_layer) p.zero_last();
}

// A Gated DeltaNet layer. The inits keep the recurrence well conditioned
// and every term influential: ssm_a in [-1, -0.1] (the reference stores
// -exp(A_log), negative) makes the per-token decay
// exp(softplus(alpha + dt) * ssm_a) typically ~0.7 and within ~0.1..0.99,
// so the state carries several tokens yet forgets; beta is the sigmoid of
// a unit-variance projection; the 4-tap conv (std 0.5) keeps unit variance.
// The conv kernel stays F32 in every file: ggml_ssm_conv reads it as f32.
void plan_delta_net(Planner& p, const std::string& blk, uint32_t l) {
  const DeltaNetShape g = delta_net_shape(p.s);
  const uint64_t d = p.s.n_embd, v_dim = g.inner_size(), n_v = g.n_v_heads;
  if (p.o.arch == "qwen3next" && !p.o.split_qkvz) {
    // Fused [q, k, v, z] per key-head group (the reference's ssm_in layout).
    p.matrix(blk + "ssm_in.weight", {d, g.conv_dim() + v_dim});
  } else {
    p.matrix(blk + "attn_qkv.weight", {d, g.conv_dim()});
    p.matrix(blk + "attn_gate.weight", {d, v_dim});  // z, the output gate
  }
  p.add(blk + "ssm_conv1d.weight", {g.conv_kernel, g.conv_dim()}, GgmlType::F32, {0.0f, 0.5f});
  p.add(blk + "ssm_dt.bias", {n_v}, GgmlType::F32, {0.0f, 0.3f});
  p.add(blk + "ssm_a", {n_v}, GgmlType::F32, {-0.55f, 0.45f / std::sqrt(3.0f)});
  if (p.o.arch == "qwen3next") {
    p.matrix(blk + "ssm_ba.weight", {d, 2 * n_v});  // [beta, alpha] per key-head group
  } else {
    p.matrix(blk + "ssm_beta.weight", {d, n_v});
    p.matrix(blk + "ssm_alpha.weight", {d, n_v});
  }
  p.gain(blk + "ssm_norm.weight", g.head_dim);
  p.matrix(blk + "ssm_out.weight", {v_dim, d});
  if (int(l) == p.o.zero_attn_output_layer) p.zero_last();
}

// MoE FFN: a router [n_embd -> n_expert] and stacks of n_expert SwiGLU
// experts of width moe_ff(s), in the reference's tensor layout; the
// hybrids add a shared expert scaled by sigmoid(ffn_gate_inp_shexp . x),
// whose gate vector is 1-D in the reference (so F32, like other vectors).
void plan_experts(Planner& p, const std::string& blk) {
  const uint64_t d = p.s.n_embd, f = moe_ff(p.s), e = kMoeExperts;
  p.matrix(blk + "ffn_gate_inp.weight", {d, e});
  p.matrix(blk + "ffn_gate_exps.weight", {d, f, e});
  p.matrix(blk + "ffn_up_exps.weight", {d, f, e});
  p.matrix(blk + "ffn_down_exps.weight", {f, d, e});
  if (!has_shared_expert(p.o.arch)) return;
  const uint64_t fs = shared_ff(p.s);
  p.add(blk + "ffn_gate_inp_shexp.weight", {d}, GgmlType::F32, {0.0f, 1.0f / std::sqrt(float(d))});
  p.matrix(blk + "ffn_gate_shexp.weight", {d, fs});
  p.matrix(blk + "ffn_up_shexp.weight", {d, fs});
  p.matrix(blk + "ffn_down_shexp.weight", {fs, d});
}

void plan_ffn(Planner& p, const std::string& blk) {
  if (is_moe_arch(p.o.arch)) return plan_experts(p, blk);
  p.matrix(blk + "ffn_gate.weight", {p.s.n_embd, p.s.n_ff});
  p.matrix(blk + "ffn_up.weight", {p.s.n_embd, p.s.n_ff});
  p.matrix(blk + "ffn_down.weight", {p.s.n_ff, p.s.n_embd});
}

// One hyper-connection mixer: the grouped RMSNorm gain over all hc_count
// streams (stored near 1: the converter folds each gamma to 1 + w), the
// low-rank gate (down, then up) and, inside a block, the [hc_dim -> hc]
// weights that scatter the block's output back into the streams.
void plan_hyper_connection(Planner& p, const std::string& prefix, bool inject) {
  const Qwen4ExpShape q = qwen4exp_shape(p.s);
  const uint64_t hc_dim = uint64_t{q.hc_count} * p.s.n_embd;
  p.gain(prefix + "norm.weight", hc_dim);
  p.matrix(prefix + "down.weight", {hc_dim, q.hc_low_rank});
  p.matrix(prefix + "up.weight", {q.hc_low_rank, hc_dim});
  if (inject) p.matrix(prefix + "inject.weight", {hc_dim, q.hc_count});
}

// The QSA indexer of a full-attention layer: per-head queries and one
// shared key (pooled per block before its norm and rope), with QK norms.
void plan_indexer(Planner& p, const std::string& blk) {
  const Qwen4ExpShape q = qwen4exp_shape(p.s);
  const uint64_t d = p.s.n_embd, k = q.indexer_key_length;
  p.matrix(blk + "indexer.q_proj.weight", {d, uint64_t{q.indexer_heads} * k});
  p.matrix(blk + "indexer.k_proj.weight", {d, k});
  p.gain(blk + "indexer.q_norm.weight", k);
  p.gain(blk + "indexer.k_norm.weight", k);
}

// The PLE module: key and value projections of the gathered n-gram rows
// (ple_n_heads rows of n_embd / ple_n_heads, so n_embd wide), three grouped
// norms over the hc streams and the depthwise conv, F32 like ssm_conv1d and
// at the same std, so its taps keep unit variance.
void plan_ple(Planner& p, const std::string& blk) {
  const Qwen4ExpShape q = qwen4exp_shape(p.s);
  const uint64_t d = p.s.n_embd, hc_dim = uint64_t{q.hc_count} * d;
  p.matrix(blk + "ple_key.weight", {d, hc_dim});
  p.matrix(blk + "ple_value.weight", {d, d});
  p.gain(blk + "ple_norm_key.weight", hc_dim);
  p.gain(blk + "ple_norm_query.weight", hc_dim);
  p.gain(blk + "ple_norm_conv.weight", hc_dim);
  p.add(blk + "ple_conv1d.weight", {q.ple_conv_kernel, hc_dim}, GgmlType::F32, {0.0f, 0.5f});
}

// A qwen4exp layer has no RMSNorm tensors: a hyper-connection mixer sits
// before the token mixer and another before the MoE.
void plan_qwen4exp_layer(Planner& p, uint32_t l) {
  const std::string blk = fmt::format("blk.{}.", l);
  if (qwen4exp_shape(p.s).ple_layer == l) plan_ple(p, blk);
  plan_hyper_connection(p, blk + "hc_attn_", true);
  if (delta_net_shape(p.s).is_linear(l)) {
    plan_delta_net(p, blk, l);
  } else {
    plan_gated_attention(p, blk, l);
    plan_indexer(p, blk);
  }
  plan_hyper_connection(p, blk + "hc_ffn_", true);
  plan_experts(p, blk);
}

void plan_layer(Planner& p, uint32_t l) {
  if (is_qwen4exp(p.o.arch)) return plan_qwen4exp_layer(p, l);
  const std::string blk = fmt::format("blk.{}.", l);
  p.gain(blk + "attn_norm.weight", p.s.n_embd);
  if (!is_hybrid_arch(p.o.arch)) {
    plan_attention(p, blk, l);
  } else {
    if (delta_net_shape(p.s).is_linear(l))
      plan_delta_net(p, blk, l);
    else
      plan_gated_attention(p, blk, l);
    // The hybrids' pre-FFN norm (post_attention_layernorm in HF).
    p.gain(blk + "post_attention_norm.weight", p.s.n_embd);
  }
  plan_ffn(p, blk);
}

std::vector<TensorPlan> plan_tensors(const Options& o, const ModelShape& s, uint32_t n_vocab) {
  Planner p{o, s, {}};
  // Embeddings at unit scale, so the residual stream and the layers'
  // contributions are of the same order.
  p.add("token_embd.weight", {s.n_embd, n_vocab}, o.weight_type, {0.0f, 1.0f});
  const bool hc = is_qwen4exp(o.arch);
  if (hc) {
    // The n-gram table: rows are embeddings too, so unit scale as well.
    const Qwen4ExpShape q = qwen4exp_shape(s);
    p.add("per_layer_token_embd.weight", {s.n_embd / q.ple_n_heads(), q.ple_rows()}, o.weight_type,
          {0.0f, 1.0f});
  }
  for (uint32_t l = 0; l < s.n_layer; ++l) plan_layer(p, l);
  // qwen4exp has no output_norm: the final hyper-connection mixer is it.
  if (hc)
    plan_hyper_connection(p, "output_hc_", false);
  else
    p.gain("output_norm.weight", s.n_embd);
  if (!o.tied_embeddings) p.matrix("output.weight", {s.n_embd, n_vocab});
  // Divisors of each rotary pair's angle, as llama3 ships them: ~1 for the
  // fast pairs up to ~8 for the slow ones (random, but centered there).
  if (o.rope_freqs) p.add("rope_freqs.weight", {s.head_dim / 2}, GgmlType::F32, {4.5f, 2.0f});
  return std::move(p.plan);
}

uint32_t file_type_for(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return 0;   // LLAMA_FTYPE_ALL_F32
    case GgmlType::F16: return 1;   // LLAMA_FTYPE_MOSTLY_F16
    case GgmlType::BF16: return 32; // LLAMA_FTYPE_MOSTLY_BF16
    default:
      throw Error(fmt::format("gen-model: weight type {} is not supported (use f32, f16 or bf16; "
                              "quantize with the reference for other types)",
                              ggml_type_name(t)));
  }
}

// The hybrids' extra keys: DeltaNet geometry, layer pattern, M-RoPE
// sections (qwen35 and qwen35moe rope with IMROPE; qwen3next with plain
// NEOX rope and has none) and the shared expert's width.
void set_hybrid_hparams(GgufWriter& w, const Options& o, const ModelShape& s) {
  const std::string& a = o.arch;
  const DeltaNetShape g = delta_net_shape(s);
  w.set(a + ".ssm.conv_kernel", Value(g.conv_kernel));
  w.set(a + ".ssm.state_size", Value(g.head_dim));
  w.set(a + ".ssm.group_count", Value(g.n_k_heads));
  w.set(a + ".ssm.time_step_rank", Value(g.n_v_heads));
  w.set(a + ".ssm.inner_size", Value(g.inner_size()));
  w.set(a + ".full_attention_interval", Value(g.full_attention_interval));
  if (a != "qwen3next") {
    std::vector<Value> sections;
    for (uint32_t v : rope_sections(o, s)) sections.emplace_back(int32_t(v));
    w.set(a + ".rope.dimension_sections", Value::array(gguf::ValueType::I32, std::move(sections)));
  }
  if (has_shared_expert(a)) w.set(a + ".expert_shared_feed_forward_length", Value(shared_ff(s)));
}

template <typename T>
Value array_of(gguf::ValueType type, const std::vector<T>& v) {
  return Value::array(type, std::vector<Value>(v.begin(), v.end()));
}

// qwen4exp's hyper-connection and QSA keys. The ratios are per layer, 0 on
// the DeltaNet layers, as the converter writes them. The indexer's
// block_size and local_blocks keys belong to minimax-m3: qwen4exp reads
// neither (its block is compress_ratio tokens; its own tail is always kept).
void set_qwen4exp_hparams(GgufWriter& w, const ModelShape& s) {
  const std::string a = "qwen4exp";
  const Qwen4ExpShape q = qwen4exp_shape(s);
  const DeltaNetShape g = delta_net_shape(s);
  w.set(a + ".hyper_connection.count", Value(q.hc_count));
  w.set(a + ".hyper_connection.low_rank", Value(q.hc_low_rank));
  w.set(a + ".attention.indexer.head_count", Value(q.indexer_heads));
  w.set(a + ".attention.indexer.key_length", Value(q.indexer_key_length));
  w.set(a + ".attention.indexer.top_k", Value(q.indexer_top_k));
  std::vector<uint32_t> ratios;
  for (uint32_t l = 0; l < s.n_layer; ++l) ratios.push_back(g.is_linear(l) ? 0 : q.compress_ratio);
  w.set(a + ".attention.compress_ratios", array_of(gguf::ValueType::U32, ratios));
}

// Hash multipliers of the n-gram positions (the current token first),
// drawn from the seed: large odd 45-bit values, like the checkpoint's int64
// constants (~2.4e13), so the uint64 products are large and mix well.
std::vector<uint64_t> ple_multipliers(uint64_t seed, uint32_t n) {
  Rng rng{stream_seed(seed, "ple.layer_multipliers")};
  std::vector<uint64_t> m(n);
  for (auto& v : m) v = (rng.next() >> 19) | (uint64_t{1} << 44) | 1;
  return m;
}

// The PLE keys. They need the vocabulary's EOS id, at which the n-gram
// hash restarts, so they are written after the tokenizer.
void set_ple_hparams(GgufWriter& w, const Options& o, const ModelShape& s, uint32_t eos) {
  const std::string a = "qwen4exp";
  const Qwen4ExpShape q = qwen4exp_shape(s);
  w.set(a + ".ple.layers", array_of(gguf::ValueType::U32, std::vector<uint32_t>{q.ple_layer}));
  w.set(a + ".ple.ngram_size", Value(q.ple_ngram_size));
  w.set(a + ".ple.heads_per_ngram", Value(q.ple_heads_per_ngram));
  w.set(a + ".ple.conv_kernel", Value(q.ple_conv_kernel));
  w.set(a + ".ple.eos_token_id", Value(eos));
  w.set(a + ".embedding_length_per_layer_input", Value(s.n_embd / q.ple_n_heads()));
  // The reader takes these three only as uint64 arrays.
  const auto u64 = gguf::ValueType::U64;
  w.set(a + ".ple.layer_multipliers", array_of(u64, ple_multipliers(o.seed, q.ple_ngram_size)));
  w.set(a + ".ple.head_offsets", array_of(u64, q.ple_head_offsets()));
  w.set(a + ".ple.head_vocab_sizes", array_of(u64, q.ple_head_vocab_sizes));
}

void set_hparams(GgufWriter& w, const Options& o, const ModelShape& s, uint32_t n_vocab) {
  const std::string& a = o.arch;
  w.set("general.architecture", Value(a));
  w.set("general.name", Value(fmt::format("vtc-synthetic-{}-{}", a, o.size)));
  w.set("general.file_type", Value(file_type_for(o.weight_type)));
  w.set("general.vtc.seed", Value(o.seed));
  w.set(a + ".vocab_size", Value(n_vocab));
  w.set(a + ".context_length", Value(s.n_ctx));
  w.set(a + ".embedding_length", Value(s.n_embd));
  w.set(a + ".block_count", Value(s.n_layer));
  w.set(a + ".feed_forward_length", Value(s.n_ff));
  w.set(a + ".attention.head_count", Value(s.n_head));
  w.set(a + ".attention.head_count_kv", Value(s.n_head_kv));
  w.set(a + ".attention.key_length", Value(s.head_dim));
  w.set(a + ".attention.value_length", Value(s.head_dim));
  w.set(a + ".attention.layer_norm_rms_epsilon", Value(1e-6f));
  w.set(a + ".rope.freq_base", Value(a == "llama" ? 10000.0f : 1000000.0f));
  w.set(a + ".rope.dimension_count", Value(rope_dims(o, s)));
  if (is_moe_arch(a)) {
    w.set(a + ".expert_count", Value(kMoeExperts));
    w.set(a + ".expert_used_count", Value(kMoeUsed));
    w.set(a + ".expert_feed_forward_length", Value(moe_ff(s)));
  }
  if (is_hybrid_arch(a)) set_hybrid_hparams(w, o, s);
  if (is_qwen4exp(a)) set_qwen4exp_hparams(w, s);
  if (!o.rope_scaling.empty()) {
    w.set(a + ".rope.scaling.type", Value(o.rope_scaling));
    w.set(a + ".rope.scaling.factor", Value(o.rope_factor));
    w.set(a + ".rope.scaling.original_context_length", Value(uint32_t(float(s.n_ctx) / o.rope_factor)));
  }
}

struct VocabInfo {
  uint32_t n_vocab = 0;
  std::optional<int64_t> eos;  // tokenizer.ggml.eos_token_id
};

VocabInfo copy_tokenizer(GgufWriter& w, const std::string& vocab_path) {
  GgufFile vocab = GgufFile::open(vocab_path);
  VocabInfo info;
  for (const auto& kv : vocab.metadata()) {
    if (kv.key.rfind("tokenizer.", 0) != 0) continue;
    w.set(kv.key, kv.value);
    if (kv.key == "tokenizer.ggml.tokens") info.n_vocab = uint32_t(kv.value.as_array()->items.size());
  }
  if (info.n_vocab == 0)
    throw Error(fmt::format("{}: no tokenizer.ggml.tokens array; not a vocab GGUF", vocab_path));
  info.eos = vocab.get_int("tokenizer.ggml.eos_token_id");
  // Vocab files without a chat template get the built-in one of the model
  // family that uses that vocabulary, so --chat works on every synthetic model.
  if (!vocab.find("tokenizer.chat_template")) {
    std::string model = vocab.get_string("tokenizer.ggml.model").value_or("");
    std::string pre = vocab.get_string("tokenizer.ggml.pre").value_or("");
    w.set("tokenizer.chat_template",
          Value(model == "llama" ? "mistral-v1" : pre == "llama-bpe" ? "llama3" : "chatml"));
  }
  return info;
}

// qwen4exp's PLE hash needs a real EOS id: the converter refuses a
// checkpoint without one, and so does the generator.
uint32_t ple_eos(const VocabInfo& v, const std::string& vocab_path) {
  if (!v.eos || *v.eos < 0 || *v.eos >= int64_t{v.n_vocab})
    throw Error(fmt::format("{}: qwen4exp needs tokenizer.ggml.eos_token_id (its n-gram hash resets "
                            "at EOS)",
                            vocab_path));
  return uint32_t(*v.eos);
}

}  // namespace

const std::vector<std::string>& known_sizes() {
  static const std::vector<std::string> sizes = {"tiny", "small", "125m", "0.5b", "0.56b", "1b"};
  return sizes;
}

const std::vector<std::string>& known_archs() {
  static const std::vector<std::string> archs = {"llama",  "qwen2",     "qwen3",     "qwen3moe",
                                                 "qwen35", "qwen35moe", "qwen3next", "qwen4exp"};
  return archs;
}

bool is_hybrid_arch(const std::string& arch) {
  return arch == "qwen35" || arch == "qwen35moe" || arch == "qwen3next" || arch == "qwen4exp";
}

// Two-layer sizes alternate (a DeltaNet layer, then full attention); deeper
// ones put full attention on every 4th layer, as Qwen3.5 and Qwen3-Next do.
DeltaNetShape delta_net_shape(const ModelShape& s) {
  DeltaNetShape g;
  g.conv_kernel = 4;
  g.head_dim = s.head_dim;
  g.n_k_heads = s.n_head_kv;
  g.n_v_heads = s.n_head;
  g.full_attention_interval = s.n_layer <= 2 ? 2 : 4;
  return g;
}

namespace {
uint64_t next_prime(uint64_t n) {
  for (;; ++n) {
    bool prime = n > 1;
    for (uint64_t d = 2; prime && d * d <= n; ++d) prime = n % d != 0;
    if (prime) return n;
  }
}
}  // namespace

// Hyper-connections of 4 streams at rank 8, QSA over blocks of 4 tokens
// keeping 8 of them (so 75-token prompts are already sparse), and 2-grams
// and 3-grams hashed by 2 heads each. The heads' tables are prime-sized
// and distinct, a few thousand rows each at "small" (16 * n_embd, shrinking
// per head), so each head hashes differently; the PLE sits on a DeltaNet
// layer (the reference keeps its conv history in the recurrent cache), the
// second one when there is a second.
Qwen4ExpShape qwen4exp_shape(const ModelShape& s) {
  Qwen4ExpShape q;
  q.hc_count = 4;
  q.hc_low_rank = 8;
  q.indexer_heads = s.n_head;
  q.indexer_key_length = s.head_dim;
  q.compress_ratio = 4;
  q.indexer_top_k = 8 * q.compress_ratio;
  q.ple_layer = s.n_layer > 2 ? 1 : 0;
  q.ple_ngram_size = 3;
  q.ple_heads_per_ngram = 2;
  q.ple_conv_kernel = 4;
  const uint64_t n = q.ple_n_heads(), base = 16 * uint64_t{s.n_embd};
  for (uint64_t h = 0; h < n; ++h) q.ple_head_vocab_sizes.push_back(next_prime(base * (2 * n - h) / (2 * n)));
  return q;
}

std::vector<uint64_t> Qwen4ExpShape::ple_head_offsets() const {
  std::vector<uint64_t> offsets;
  uint64_t at = 0;
  for (uint64_t size : ple_head_vocab_sizes) offsets.push_back(std::exchange(at, at + size));
  return offsets;
}

uint64_t Qwen4ExpShape::ple_rows() const {
  uint64_t rows = 0;
  for (uint64_t size : ple_head_vocab_sizes) rows += size;
  return rows;
}

ModelShape shape_for(const std::string& size) {
  auto it = size_table().find(size);
  if (it == size_table().end())
    throw Error(fmt::format("unknown model size '{}' (known: {})", size,
                            fmt::join(known_sizes(), ", ")));
  return it->second;
}

std::string default_vocab_name(const std::string& arch) {
  return arch == "llama" ? "ggml-vocab-llama-spm.gguf" : "ggml-vocab-qwen2.gguf";
}

Summary write_model(const Options& o, const std::string& out_path, const ProgressFn& progress) {
  const auto& archs = known_archs();
  if (std::find(archs.begin(), archs.end(), o.arch) == archs.end())
    throw Error(fmt::format("unknown architecture '{}' (known: {})", o.arch, fmt::join(archs, ", ")));
  // The reference loads no rope_freqs for the hybrids and rejects the extra tensor.
  if (o.rope_freqs && is_hybrid_arch(o.arch))
    throw Error(fmt::format("gen-model: --rope-freqs is not supported for {}", o.arch));
  Summary summary;
  summary.shape = shape_for(o.size);
  GgufWriter w;
  const uint32_t n_vocab_placeholder = 0;
  set_hparams(w, o, summary.shape, n_vocab_placeholder);
  const VocabInfo vocab = copy_tokenizer(w, o.vocab_path);
  summary.vocab_size = vocab.n_vocab;
  w.set(o.arch + ".vocab_size", Value(summary.vocab_size));
  if (is_qwen4exp(o.arch)) set_ple_hparams(w, o, summary.shape, ple_eos(vocab, o.vocab_path));

  auto plan = plan_tensors(o, summary.shape, summary.vocab_size);
  uint64_t bytes_total = 0;
  for (const auto& t : plan) {
    uint64_t n = 1;
    for (auto d : t.dims) n *= d;
    summary.parameters += n;
    bytes_total += *ggml_bytes_for(t.type, n);
  }
  auto bytes_done = std::make_shared<uint64_t>(0);
  for (size_t i = 0; i < plan.size(); ++i) {
    TensorPlan t = plan[i];
    w.add_tensor(t.name, t.type, t.dims,
                 [=, seed = o.seed, total = plan.size()](uint8_t* dst, uint64_t n) {
                   fill_values(t.type, t.name, seed, t.init, dst, n);
                   *bytes_done += n;
                   if (progress) progress({i + 1, total, t.name, *bytes_done, bytes_total});
                 });
  }
  w.write(out_path);
  summary.file_bytes = std::filesystem::file_size(out_path);
  return summary;
}

}  // namespace vtc::synth

namespace vtc::synth {

std::string find_default_vocab(const std::string& arch) {
  std::string cache;
  if (const char* env = std::getenv("VTC_REF_CACHE"); env && *env) {
    cache = env;
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    cache = std::string(home) + "/.cache/vtc/llama-ref";
  }
  std::string path = cache + "/llama.cpp/models/" + default_vocab_name(arch);
  if (!std::filesystem::exists(path))
    throw Error(fmt::format("vocab file {} not found; fetch the llama.cpp reference with "
                            "`bash tests/reference/fetch.sh` (or pass --vocab FILE.gguf)",
                            path));
  return path;
}

}  // namespace vtc::synth
