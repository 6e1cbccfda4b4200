#include "samples/synthetic_model.h"

#include <fmt/format.h>

#include <algorithm>
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
      // Llama-3-8B's widths with 2 of its 32 layers: small enough for the
      // simulated device, priced as 32 layers by `vtc bench --scale-layers 32`.
      {"8b-2l", {4096, 14336, 2, 32, 8, 128, 8192}},
      // Llama-3-70B's widths with 1 of its 80 layers (`--scale-layers 80`).
      {"70b-1l", {8192, 28672, 1, 64, 8, 128, 8192}},
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
bool is_gemma(const std::string& a) { return a == "gemma2" || a == "gemma3"; }
bool is_gpt_oss(const std::string& a) { return a == "gpt-oss"; }
bool is_moe_arch(const std::string& a) {
  return a == "qwen3moe" || a == "qwen35moe" || a == "qwen3next" || is_qwen4exp(a) || is_gpt_oss(a);
}
bool has_shared_expert(const std::string& a) {
  return a == "qwen35moe" || a == "qwen3next" || is_qwen4exp(a);
}

// The state space architectures (frontends/gguf/arch: mamba2, lfm2, and the
// Mamba hybrids jamba and nemotron_h): no attention on most (mamba2: any)
// layers, their recurrent states in the state store. Planned by
// plan_recurrent_layer, keyed by set_recurrent_hparams.
bool is_recurrent_arch(const std::string& a) {
  return a == "mamba2" || a == "lfm2" || a == "jamba" || a == "nemotron_h";
}

// Mamba-2's geometry from the size's shape, as the released models' ratios:
// d_inner = 2 n_embd in heads of the attention head dim (time_step_rank
// heads), one group, state 128 (16 below n_embd 768, the tiny sizes), a
// 4-tap conv; and twice the size's layers, a Mamba block standing for a
// transformer layer's attention and FFN (mamba2-780m: 48 layers of 1536).
struct Mamba2Shape {
  uint64_t conv_kernel = 4, d_inner = 0, d_state = 0, n_heads = 0, n_group = 1;
  uint64_t conv_dim() const { return d_inner + 2 * n_group * d_state; }
  uint64_t in_proj() const { return d_inner + conv_dim() + n_heads; }  // z, x|B|C, dt
};
// nemotron_h's Mamba-2 layers split B and C in 2 groups (Nemotron-H has 8),
// so the grouped scan and the grouped ssm_norm are exercised.
Mamba2Shape mamba2_shape(const ModelShape& s, const std::string& arch) {
  Mamba2Shape m;
  m.d_inner = 2 * uint64_t{s.n_embd};
  m.n_heads = m.d_inner / s.head_dim;
  m.d_state = s.n_embd >= 768 ? 128 : 16;
  if (arch == "nemotron_h") m.n_group = 2;
  return m;
}

// Mamba-1's geometry (jamba's mixer), as the released models' ratios and the
// reference's only supported expansion: d_inner = 2 n_embd, state 16, a
// dt projection of rank ceil(n_embd / 16), a 4-tap conv.
struct Mamba1Shape {
  uint64_t conv_kernel = 4, d_inner = 0, d_state = 16, dt_rank = 0;
};
Mamba1Shape mamba1_shape(const ModelShape& s) {
  return {.d_inner = 2 * uint64_t{s.n_embd}, .dt_rank = (uint64_t{s.n_embd} + 15) / 16};
}

// Jamba's layer pattern: attention on one layer in 4 (the last of each 4;
// Jamba-v0.1 has one in 8) and routed experts on every odd layer (as its
// expert_layer_period 2, offset 1); a 2-layer size gets one of each.
bool jamba_attention_layer(const ModelShape& s, uint32_t l) { return l % 4 == std::min(s.n_layer, 4u) - 1; }
bool jamba_moe_layer(uint32_t l) { return l % 2 == 1; }

// Nemotron-H's layers are single blocks: Mamba-2, attention or a relu^2
// FFN, in the repeating pattern Mamba, FFN, attention, FFN (twice the
// size's layers; Nemotron-H-8B has 4 attention layers in 52).
enum class NemotronBlock { Mamba, Attention, Ffn };
NemotronBlock nemotron_block(uint32_t l) {
  return l % 2 == 1 ? NemotronBlock::Ffn : l % 4 == 0 ? NemotronBlock::Mamba : NemotronBlock::Attention;
}

// LFM2: gated short convolutions of 3 taps (shortconv.l_cache) with full
// attention on every third layer (LFM2-350M: 6 of its 16; every second of
// a 2-layer size, so it has one), each layer with a SwiGLU FFN; the
// attention layers are those with KV heads.
constexpr uint32_t kLfm2ConvCache = 3;
bool lfm2_attention_layer(const ModelShape& s, uint32_t l) { return (l + 1) % std::min(3u, s.n_layer) == 0; }

// The llama-like families, each after its builder in
// frontends/gguf/arch/<arch>.cpp and the reference's loader: their layers
// are planned by plan_family_layer and their keys by set_family_hparams.
bool is_family_arch(const std::string& a) {
  return a == "phi3" || a == "deepseek2" || a == "glm4moe" || a == "granite" || a == "smollm3" ||
         a == "command-r" || a == "olmoe" || a == "qwen2moe" || a == "mistral3" || a == "llama4";
}

// Family constants, small stand-ins for the trained models' values:
// - deepseek2 and glm4moe: one leading dense block (first_k_dense_replace),
//   one shared expert, sigmoid gating with a selection bias, renormalized
//   weights scaled by DeepSeek-V3's 2.5; deepseek2 groups its 8 experts in
//   4 groups of which 2 are searched (V3: 8 of 256 in 4 of 8 groups), so
//   grouped routing runs; glm4moe has GLM-4.5's single group;
// - granite: Granite 3.0 2B's multipliers (embedding 12, residual 0.22,
//   logits / 8) and attention scale 1 / head_dim (its 1/64 at head_dim 64);
// - command-r: Command-R's logit scale 0.0625;
// - llama4: one expert of 8 per token and every second layer MoE
//   (Maverick's interleave step; Scout's is 1), chunked attention of 8192;
// - phi3: LongRoPE at Phi-3-128k's ratio, context 32x the original.
constexpr uint32_t kLeadingDense = 1, kSharedExperts = 1;
constexpr uint32_t kDeepseekGroups = 4, kDeepseekGroupsUsed = 2;
constexpr float kExpertWeightsScale = 2.5f;
constexpr float kGraniteEmbeddingScale = 12.0f, kGraniteResidualScale = 0.22f, kGraniteLogitScale = 8.0f;
constexpr float kCommandRLogitScale = 0.0625f;
constexpr uint32_t kLlama4MoeStep = 2, kLlama4Chunk = 8192, kLlama4Used = 1;
constexpr uint32_t kBertTokenTypes = 2;  // BERT's sentence A and B
constexpr uint32_t kPhi3ContextRatio = 32;

// Whether layer l of a family has routed experts.
bool family_moe_layer(const Options& o, uint32_t l) {
  const std::string& a = o.arch;
  if (a == "olmoe" || a == "qwen2moe") return true;
  if (a == "granite") return o.moe;
  if (a == "deepseek2" || a == "glm4moe") return l >= kLeadingDense;
  if (a == "llama4") return (l + 1) % kLlama4MoeStep == 0;
  return false;
}
// The shared expert's width: qwen2moe's and Granite MoE Shared's as wide as
// the dense FFN; deepseek2's and glm4moe's n_shared routed-expert widths
// (the loaders derive it so); llama4's one routed-expert width.
uint64_t family_shared_ff(const Options& o, const ModelShape& s) {
  if (o.arch == "qwen2moe" || o.arch == "granite") return shared_ff(s);
  return uint64_t{moe_ff(s)} * (o.arch == "llama4" ? 1 : kSharedExperts);
}
bool family_has_experts(const Options& o) {
  return o.arch == "olmoe" || o.arch == "qwen2moe" || o.arch == "deepseek2" || o.arch == "glm4moe" ||
         o.arch == "llama4" || (o.arch == "granite" && o.moe);
}

// Rotary dims: all of the head, except the hybrids' and glm4moe's partial
// rotary (half, GLM-4.5's partial_rotary_factor) and deepseek2's separate
// rotary part of each key.
uint32_t rope_dims(const Options& o, const ModelShape& s) {
  if (o.arch == "deepseek2") return mla_shape(s).rope_dim;
  return is_hybrid_arch(o.arch) || o.arch == "glm4moe" ? s.head_dim / 2 : s.head_dim;
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
    // test-llama-archs draws every tensor alike; the test's rescaler gives
    // each its role's scale.
    if (o.llama_archs_layout) type = GgmlType::F32, init = {0.0f, 0.01f};
    plan.push_back({std::move(name), std::move(dims), type, init});
  }
  // The per-tensor .scale and .input_scale of projection `w` ("blk.0.attn_q")
  // that the reference's generic pass loads, in the llama_archs layout.
  void projection_scales(const std::string& w) {
    if (!o.llama_archs_layout) return;
    add(w + ".scale", {1}, GgmlType::F32, {});
    add(w + ".input_scale", {1}, GgmlType::F32, {});
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

// A gemma2/gemma3 layer: sandwich norms around attention and the GELU FFN,
// gemma3's QK-norm; the llama_archs layout adds the optional q/k/v biases
// and every projection's scales.
void plan_gemma_layer(Planner& p, uint32_t l) {
  const ModelShape& s = p.s;
  const std::string blk = fmt::format("blk.{}.", l);
  const uint64_t d = s.n_embd, q_dim = uint64_t{s.n_head} * s.head_dim, kv_dim = uint64_t{s.n_head_kv} * s.head_dim;
  p.gain(blk + "attn_norm.weight", d);
  const std::pair<const char*, uint64_t> qkv[] = {{"attn_q", q_dim}, {"attn_k", kv_dim}, {"attn_v", kv_dim}};
  for (const auto& [name, width] : qkv) {
    p.matrix(blk + name + ".weight", {d, width});
    if (p.o.llama_archs_layout) p.bias(blk + name + ".bias", width);
    p.projection_scales(blk + name);
  }
  if (p.o.arch == "gemma3") {
    p.gain(blk + "attn_q_norm.weight", s.head_dim);
    p.gain(blk + "attn_k_norm.weight", s.head_dim);
  }
  p.matrix(blk + "attn_output.weight", {q_dim, d});
  if (int(l) == p.o.zero_attn_output_layer) p.zero_last();
  p.projection_scales(blk + "attn_output");
  p.gain(blk + "post_attention_norm.weight", d);
  p.gain(blk + "ffn_norm.weight", d);
  for (const char* name : {"ffn_gate", "ffn_up"}) {
    p.matrix(blk + name + ".weight", {d, s.n_ff});
    p.projection_scales(blk + name);
  }
  p.matrix(blk + "ffn_down.weight", {s.n_ff, d});
  p.projection_scales(blk + "ffn_down");
  p.gain(blk + "post_ffw_norm.weight", d);
}

// A gpt-oss layer (the reference's openai-moe load_arch_tensors): biased
// q/k/v and output projections, one sink logit per head, and biased
// experts behind a biased router. Sinks are O(1) logits, as trained ones.
void plan_gpt_oss_layer(Planner& p, uint32_t l) {
  const ModelShape& s = p.s;
  const std::string blk = fmt::format("blk.{}.", l);
  const uint64_t d = s.n_embd, q_dim = uint64_t{s.n_head} * s.head_dim, kv_dim = uint64_t{s.n_head_kv} * s.head_dim;
  const uint64_t f = moe_ff(s), e = kMoeExperts;
  p.gain(blk + "attn_norm.weight", d);
  const std::pair<const char*, uint64_t> qkv[] = {{"attn_q", q_dim}, {"attn_k", kv_dim}, {"attn_v", kv_dim}};
  for (const auto& [name, width] : qkv) {
    p.matrix(blk + name + ".weight", {d, width});
    p.bias(blk + name + ".bias", width);
  }
  p.matrix(blk + "attn_output.weight", {q_dim, d});
  if (int(l) == p.o.zero_attn_output_layer) p.zero_last();
  p.bias(blk + "attn_output.bias", d);
  p.add(blk + "attn_sinks.weight", {s.n_head}, GgmlType::F32, {0.0f, 1.0f});
  p.gain(blk + "post_attention_norm.weight", d);
  p.matrix(blk + "ffn_gate_inp.weight", {d, e});
  p.bias(blk + "ffn_gate_inp.bias", e);
  p.matrix(blk + "ffn_gate_exps.weight", {d, f, e});
  p.matrix(blk + "ffn_up_exps.weight", {d, f, e});
  p.matrix(blk + "ffn_down_exps.weight", {f, d, e});
  p.add(blk + "ffn_gate_exps.bias", {f, e}, GgmlType::F32, {0.0f, 0.1f});
  p.add(blk + "ffn_up_exps.bias", {f, e}, GgmlType::F32, {0.0f, 0.1f});
  p.add(blk + "ffn_down_exps.bias", {d, e}, GgmlType::F32, {0.0f, 0.1f});
}

// The families' attention block: attn_norm, q/k/v (phi3: fused attn_qkv)
// with optional biases and QK-norm gains (per head, or olmoe's over the
// whole projection) and attn_output.
enum class QkNorm { none, per_head, full };
struct AttnLayout {
  bool fused_qkv = false;
  bool biases = false;
  QkNorm qk_norm = QkNorm::none;
};

void plan_family_attention(Planner& p, const std::string& blk, uint32_t l, AttnLayout a) {
  const ModelShape& s = p.s;
  const uint64_t d = s.n_embd, q_dim = uint64_t{s.n_head} * s.head_dim, kv_dim = uint64_t{s.n_head_kv} * s.head_dim;
  p.gain(blk + "attn_norm.weight", d);
  if (a.fused_qkv) {
    p.matrix(blk + "attn_qkv.weight", {d, q_dim + 2 * kv_dim});
  } else {
    const std::pair<const char*, uint64_t> qkv[] = {{"attn_q", q_dim}, {"attn_k", kv_dim}, {"attn_v", kv_dim}};
    for (const auto& [name, width] : qkv) {
      p.matrix(blk + name + ".weight", {d, width});
      if (a.biases) p.bias(blk + name + ".bias", width);
    }
  }
  if (a.qk_norm != QkNorm::none) {
    const bool full = a.qk_norm == QkNorm::full;
    p.gain(blk + "attn_q_norm.weight", full ? q_dim : s.head_dim);
    p.gain(blk + "attn_k_norm.weight", full ? kv_dim : s.head_dim);
  }
  p.matrix(blk + "attn_output.weight", {q_dim, d});
  if (int(l) == p.o.zero_attn_output_layer) p.zero_last();
}

void plan_swiglu(Planner& p, const std::string& blk, const std::string& suffix, uint64_t width) {
  p.matrix(blk + "ffn_gate" + suffix + ".weight", {p.s.n_embd, width});
  p.matrix(blk + "ffn_up" + suffix + ".weight", {p.s.n_embd, width});
  p.matrix(blk + "ffn_down" + suffix + ".weight", {width, p.s.n_embd});
}

// A family's FFN: phi3's fused gate|up, a dense SwiGLU, or routed experts
// (with deepseek2's and glm4moe's selection bias exp_probs_b, O(0.1) against
// sigmoid scores in (0, 1), so it changes picks) plus the shared expert
// (qwen2moe's gated by sigmoid(ffn_gate_inp_shexp . x)).
void plan_family_ffn(Planner& p, const std::string& blk, uint32_t l) {
  const std::string& a = p.o.arch;
  const ModelShape& s = p.s;
  const uint64_t d = s.n_embd, e = kMoeExperts;
  if (a == "phi3") {
    p.matrix(blk + "ffn_up.weight", {d, 2 * uint64_t{s.n_ff}});
    p.matrix(blk + "ffn_down.weight", {s.n_ff, d});
    return;
  }
  if (!family_moe_layer(p.o, l)) return plan_swiglu(p, blk, "", s.n_ff);
  p.matrix(blk + "ffn_gate_inp.weight", {d, e});
  if (a == "deepseek2" || a == "glm4moe") p.bias(blk + "exp_probs_b.bias", e);
  p.matrix(blk + "ffn_gate_exps.weight", {d, moe_ff(s), e});
  p.matrix(blk + "ffn_up_exps.weight", {d, moe_ff(s), e});
  p.matrix(blk + "ffn_down_exps.weight", {moe_ff(s), d, e});
  if (a == "olmoe") return;
  if (a == "qwen2moe") p.add(blk + "ffn_gate_inp_shexp.weight", {d}, GgmlType::F32, {0.0f, 1.0f / std::sqrt(float(d))});
  plan_swiglu(p, blk, "_shexp", family_shared_ff(p.o, s));
}

// deepseek2's multi-head latent attention in the MLA layout the current
// converter writes (attn_k_b / attn_v_b split per head), then its FFN.
void plan_deepseek2_layer(Planner& p, const std::string& blk, uint32_t l) {
  const MlaShape m = mla_shape(p.s);
  const uint64_t d = p.s.n_embd, h = p.s.n_head;
  p.gain(blk + "attn_norm.weight", d);
  p.gain(blk + "attn_q_a_norm.weight", m.q_lora_rank);
  p.gain(blk + "attn_kv_a_norm.weight", m.kv_lora_rank);
  p.matrix(blk + "attn_q_a.weight", {d, m.q_lora_rank});
  p.matrix(blk + "attn_q_b.weight", {m.q_lora_rank, h * m.k_dim()});
  p.matrix(blk + "attn_kv_a_mqa.weight", {d, uint64_t{m.kv_lora_rank} + m.rope_dim});
  p.matrix(blk + "attn_k_b.weight", {m.nope_dim, m.kv_lora_rank, h});
  p.matrix(blk + "attn_v_b.weight", {m.kv_lora_rank, m.v_dim, h});
  p.matrix(blk + "attn_output.weight", {h * m.v_dim, d});
  if (int(l) == p.o.zero_attn_output_layer) p.zero_last();
  p.gain(blk + "ffn_norm.weight", d);
  plan_family_ffn(p, blk, l);
}

// A family layer. command-r's block is parallel (attention and FFN read the
// same attn_norm output: no ffn_norm); glm4moe calls the FFN's norm
// post_attention_norm.
void plan_family_layer(Planner& p, uint32_t l) {
  const std::string& a = p.o.arch;
  const std::string blk = fmt::format("blk.{}.", l);
  if (a == "deepseek2") return plan_deepseek2_layer(p, blk, l);
  AttnLayout attn;
  attn.fused_qkv = a == "phi3";
  attn.biases = a == "qwen2moe" || a == "glm4moe";
  attn.qk_norm = a == "glm4moe" ? QkNorm::per_head : a == "olmoe" ? QkNorm::full : QkNorm::none;
  plan_family_attention(p, blk, l, attn);
  if (a == "glm4moe")
    p.gain(blk + "post_attention_norm.weight", p.s.n_embd);
  else if (a != "command-r")
    p.gain(blk + "ffn_norm.weight", p.s.n_embd);
  plan_family_ffn(p, blk, l);
}

// The state space architectures' mixers. Inits keep the recurrences well
// conditioned with every term influential: A (ssm_a, stored negative)
// uniform in [-8, -1] and dt = softplus(x W_dt + dt_bias) around 0.05 give
// per-token decays around 0.8; the conv kernels (F32: ggml_ssm_conv reads
// f32) at std 0.5 keep unit variance.
void plan_mamba2_mixer(Planner& p, const std::string& blk) {
  const Mamba2Shape m = mamba2_shape(p.s, p.o.arch);
  p.matrix(blk + "ssm_in.weight", {p.s.n_embd, m.in_proj()});
  p.add(blk + "ssm_conv1d.weight", {m.conv_kernel, m.conv_dim()}, GgmlType::F32, {0.0f, 0.5f});
  p.bias(blk + "ssm_conv1d.bias", m.conv_dim());
  p.add(blk + "ssm_dt.bias", {m.n_heads}, GgmlType::F32, {-3.0f, 0.5f});
  p.add(blk + "ssm_a", {1, m.n_heads}, GgmlType::F32, {-4.5f, 3.5f / std::sqrt(3.0f)});
  p.add(blk + "ssm_d", {1, m.n_heads}, GgmlType::F32, {1.0f, 0.1f});
  p.add(blk + "ssm_norm.weight", {m.d_inner / m.n_group, m.n_group}, GgmlType::F32, {1.0f, 0.1f});
  p.matrix(blk + "ssm_out.weight", {m.d_inner, p.s.n_embd});
}

// Jamba's Mamba-1 mixer, with the RMS norms of dt, B and C its loader
// requires. dt is normed to unit size before its projection, so W_dt's
// 1/sqrt(rank) rows give O(1) values around the bias.
void plan_mamba1_mixer(Planner& p, const std::string& blk) {
  const Mamba1Shape m = mamba1_shape(p.s);
  p.matrix(blk + "ssm_in.weight", {p.s.n_embd, 2 * m.d_inner});
  p.add(blk + "ssm_conv1d.weight", {m.conv_kernel, m.d_inner}, GgmlType::F32, {0.0f, 0.5f});
  p.bias(blk + "ssm_conv1d.bias", m.d_inner);
  p.matrix(blk + "ssm_x.weight", {m.d_inner, m.dt_rank + 2 * m.d_state});
  p.gain(blk + "ssm_dt_norm.weight", m.dt_rank);
  p.matrix(blk + "ssm_dt.weight", {m.dt_rank, m.d_inner});
  p.add(blk + "ssm_dt.bias", {m.d_inner}, GgmlType::F32, {-3.0f, 0.5f});
  p.gain(blk + "ssm_b_norm.weight", m.d_state);
  p.gain(blk + "ssm_c_norm.weight", m.d_state);
  p.add(blk + "ssm_a", {m.d_state, m.d_inner}, GgmlType::F32, {-4.5f, 3.5f / std::sqrt(3.0f)});
  p.add(blk + "ssm_d", {m.d_inner}, GgmlType::F32, {1.0f, 0.1f});
  p.matrix(blk + "ssm_out.weight", {m.d_inner, p.s.n_embd});
}

// Attention without biases or norms (lfm2 adds its QK-norm gains).
void plan_plain_attention(Planner& p, const std::string& blk) {
  const ModelShape& s = p.s;
  const uint64_t d = s.n_embd, kv_dim = uint64_t{s.n_head_kv} * s.head_dim;
  if (p.o.arch == "lfm2") {
    p.gain(blk + "attn_q_norm.weight", s.head_dim);
    p.gain(blk + "attn_k_norm.weight", s.head_dim);
  }
  p.matrix(blk + "attn_q.weight", {d, d});
  p.matrix(blk + "attn_k.weight", {d, kv_dim});
  p.matrix(blk + "attn_v.weight", {d, kv_dim});
  p.matrix(blk + "attn_output.weight", {d, d});
}

// A dense SwiGLU FFN of the size's width, or (jamba) routed experts of
// that width behind a router.
void plan_swiglu_or_experts(Planner& p, const std::string& blk, bool experts) {
  const uint64_t d = p.s.n_embd, f = p.s.n_ff;
  if (!experts) {
    p.matrix(blk + "ffn_gate.weight", {d, f});
    p.matrix(blk + "ffn_up.weight", {d, f});
    p.matrix(blk + "ffn_down.weight", {f, d});
    return;
  }
  p.matrix(blk + "ffn_gate_inp.weight", {d, kMoeExperts});
  p.matrix(blk + "ffn_gate_exps.weight", {d, f, kMoeExperts});
  p.matrix(blk + "ffn_up_exps.weight", {d, f, kMoeExperts});
  p.matrix(blk + "ffn_down_exps.weight", {f, d, kMoeExperts});
}

// One layer of a state space architecture: the mixer after attn_norm
// (--zero-attn-output zeroes its output projection, or nemotron_h's FFN
// block's ffn_down), then the FFN.
void plan_recurrent_layer(Planner& p, uint32_t l) {
  const ModelShape& s = p.s;
  const std::string& a = p.o.arch;
  const std::string blk = fmt::format("blk.{}.", l);
  const uint64_t d = s.n_embd;
  p.gain(blk + "attn_norm.weight", d);
  if (a == "nemotron_h" && nemotron_block(l) == NemotronBlock::Ffn) {  // non-gated relu^2
    p.matrix(blk + "ffn_up.weight", {d, s.n_ff});
    p.matrix(blk + "ffn_down.weight", {s.n_ff, d});
    if (int(l) == p.o.zero_attn_output_layer) p.zero_last();
    return;
  }
  const bool attention = a == "lfm2"         ? lfm2_attention_layer(s, l)
                         : a == "jamba"      ? jamba_attention_layer(s, l)
                         : a == "nemotron_h" ? nemotron_block(l) == NemotronBlock::Attention
                                             : false;
  if (attention)
    plan_plain_attention(p, blk);
  else if (a == "lfm2") {
    p.add(blk + "shortconv.conv.weight", {kLfm2ConvCache, d}, GgmlType::F32, {0.0f, 0.5f});
    p.matrix(blk + "shortconv.in_proj.weight", {d, 3 * d});
    p.matrix(blk + "shortconv.out_proj.weight", {d, d});
  } else if (a == "jamba")
    plan_mamba1_mixer(p, blk);
  else
    plan_mamba2_mixer(p, blk);
  if (int(l) == p.o.zero_attn_output_layer) p.zero_last();
  if (a == "mamba2" || a == "nemotron_h") return;  // the mixer is the whole layer
  p.gain(blk + "ffn_norm.weight", d);
  plan_swiglu_or_experts(p, blk, a == "jamba" && jamba_moe_layer(l));
}

void plan_layer(Planner& p, uint32_t l) {
  if (is_recurrent_arch(p.o.arch)) return plan_recurrent_layer(p, l);
  if (is_family_arch(p.o.arch)) return plan_family_layer(p, l);
  if (is_qwen4exp(p.o.arch)) return plan_qwen4exp_layer(p, l);
  if (is_gemma(p.o.arch)) return plan_gemma_layer(p, l);
  if (is_gpt_oss(p.o.arch)) return plan_gpt_oss_layer(p, l);
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

// gemma2's loader takes no output.weight and gemma3's converter writes none
// (the llama_archs layout has it: the loader takes it when present);
// gpt-oss's loader requires one.
// command-r's loader takes no output.weight (and granite and smollm3 ship
// tied, as Granite 3 and SmolLM3 do); olmoe's and qwen2moe's require one.
bool has_output_matrix(const Options& o) {
  const std::string& a = o.arch;
  if (a == "gemma2" || a == "command-r" || a == "granite" || a == "smollm3" || a == "lfm2") return false;
  if (a == "gemma3") return o.llama_archs_layout;
  return is_gpt_oss(a) || a == "olmoe" || a == "qwen2moe" || !o.tied_embeddings;
}

// bert (an encoder, frontends/gguf/arch/bert.cpp): token, token-type and
// position embeddings with a biased layer norm, then per layer biased q, k,
// v and output projections, a post-attention layer norm, a biased GELU FFN
// and a post-FFN layer norm, all norms with biases; no output norm or head.
std::vector<TensorPlan> plan_bert(Planner& p, uint32_t n_vocab) {
  const ModelShape& s = p.s;
  const uint64_t d = s.n_embd;
  auto norm = [&](const std::string& name) {
    p.gain(name + ".weight", d);
    p.bias(name + ".bias", d);
  };
  auto projection = [&](const std::string& name, uint64_t in, uint64_t out) {
    p.matrix(name + ".weight", {in, out});
    p.bias(name + ".bias", out);
  };
  p.add("token_embd.weight", {d, n_vocab}, p.o.weight_type, {0.0f, 1.0f});
  p.add("token_types.weight", {d, kBertTokenTypes}, GgmlType::F32, {0.0f, 1.0f});
  p.add("position_embd.weight", {d, s.n_ctx}, GgmlType::F32, {0.0f, 1.0f});
  norm("token_embd_norm");
  for (uint32_t l = 0; l < s.n_layer; ++l) {
    const std::string blk = fmt::format("blk.{}.", l);
    for (const char* w : {"attn_q", "attn_k", "attn_v"}) projection(blk + w, d, d);
    projection(blk + "attn_output", d, d);
    if (int(l) == p.o.zero_attn_output_layer) p.plan[p.plan.size() - 2].init = {0.0f, 0.0f};
    norm(blk + "attn_output_norm");
    projection(blk + "ffn_up", d, s.n_ff);
    projection(blk + "ffn_down", s.n_ff, d);
    norm(blk + "layer_output_norm");
  }
  return std::move(p.plan);
}

std::vector<TensorPlan> plan_tensors(const Options& o, const ModelShape& s, uint32_t n_vocab) {
  Planner p{o, s, {}};
  if (o.arch == "bert") return plan_bert(p, n_vocab);
  // Embeddings at unit scale, so the residual stream and the layers'
  // contributions are of the same order.
  // The gemmas multiply the embedding by sqrt(n_embd) (as trained ones'
  // small rows expect), so theirs are drawn at 1/sqrt(n_embd).
  // Granite multiplies it by its embedding scale: drawn at the inverse.
  // lfm2's tied head reads the embedding too: drawn as the gemmas' so
  // its logits stay O(1).
  const float embd_std = is_gemma(o.arch) || o.arch == "lfm2" ? 1.0f / std::sqrt(float(s.n_embd))
                         : o.arch == "granite" ? 1.0f / kGraniteEmbeddingScale
                                               : 1.0f;
  p.add("token_embd.weight", {s.n_embd, n_vocab}, o.weight_type, {0.0f, embd_std});
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
    p.gain(o.arch == "lfm2" ? "token_embd_norm.weight" : "output_norm.weight", s.n_embd);  // lfm2's name for it
  if (has_output_matrix(o)) p.matrix("output.weight", {s.n_embd, n_vocab});
  // Divisors of each rotary pair's angle, as llama3 ships them: ~1 for the
  // fast pairs up to ~8 for the slow ones (random, but centered there).
  if (o.rope_freqs) p.add("rope_freqs.weight", {s.head_dim / 2}, GgmlType::F32, {4.5f, 2.0f});
  // phi3's LongRoPE divisors per rotary pair: long ones of 1..15 as the
  // 128k models' (which grow with the pair), short ones near 1.
  if (o.arch == "phi3") {
    p.add("rope_factors_long.weight", {rope_dims(o, s) / 2}, GgmlType::F32, {8.0f, 4.0f});
    p.add("rope_factors_short.weight", {rope_dims(o, s) / 2}, GgmlType::F32, {1.5f, 0.25f});
  }
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

// gemma2 and gemma3: soft caps (gemma2's, as its converter writes them;
// gemma3 has none), the sliding window, and for gemma3 with fewer than 6
// layers a pattern key of n_layer so the last layer is global (the
// converter writes no pattern: the reference's default is 6).
void set_gemma_hparams(GgufWriter& w, const Options& o, const ModelShape& s) {
  const std::string& a = o.arch;
  w.set(a + ".attention.sliding_window", Value(sliding_window(o, s)));
  if (a == "gemma2") {
    // The llama_archs layout's attention scores are O(1..10), where a cap
    // of 50 is the identity to 1e-4: a cap of 5 makes the test see it.
    w.set(a + ".attn_logit_softcapping", Value(o.llama_archs_layout ? 5.0f : 50.0f));
    w.set(a + ".final_logit_softcapping", Value(30.0f));
  } else if (s.n_layer < 6) {
    w.set(a + ".attention.sliding_window_pattern", Value(s.n_layer));
  }
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

// The trained bases: llama's and gemma2's 10000, gpt-oss's 150000, gemma3's
// global layers' 1e6 (its local layers use the reference's default 10000),
// the qwen archs' 1e6; phi3, deepseek2, granite and olmoe 10000, SmolLM3's
// 5e6, Command-R's 8e6, Llama 4's 5e5, glm4moe's and Ministral 3's 1e6.
float rope_base(const std::string& a) {
  if (a == "llama" || a == "gemma2" || a == "phi3" || a == "deepseek2" || a == "granite" || a == "olmoe")
    return 10000.0f;
  if (a == "smollm3") return 5e6f;
  if (a == "command-r") return 8e6f;
  if (a == "llama4") return 5e5f;
  return is_gpt_oss(a) ? 150000.0f : 1000000.0f;
}

float rms_eps(const std::string& a) {
  const bool e5 = is_gpt_oss(a) || a == "phi3" || a == "glm4moe" || a == "granite" || a == "olmoe" ||
                  a == "mistral3" || a == "llama4";
  return e5 ? 1e-5f : 1e-6f;
}

// The expert keys, as each family's converter writes them: olmoe and
// Granite MoE give the expert width as feed_forward_length (their loaders
// read it there), the others as expert_feed_forward_length.
void set_family_experts(GgufWriter& w, const Options& o, const ModelShape& s) {
  const std::string& a = o.arch;
  w.set(a + ".expert_count", Value(kMoeExperts));
  w.set(a + ".expert_used_count", Value(a == "llama4" ? kLlama4Used : kMoeUsed));
  if (a == "olmoe" || a == "granite")
    w.set(a + ".feed_forward_length", Value(moe_ff(s)));
  else
    w.set(a + ".expert_feed_forward_length", Value(moe_ff(s)));
  if (a == "qwen2moe" || a == "granite")
    w.set(a + ".expert_shared_feed_forward_length", Value(uint32_t(family_shared_ff(o, s))));
  if (a == "deepseek2" || a == "glm4moe") {
    w.set(a + ".leading_dense_block_count", Value(kLeadingDense));
    w.set(a + ".expert_shared_count", Value(kSharedExperts));
    w.set(a + ".expert_gating_func", Value(uint32_t{2}));  // sigmoid
    w.set(a + ".expert_weights_norm", Value(true));
    w.set(a + ".expert_weights_scale", Value(kExpertWeightsScale));
    const bool ds = a == "deepseek2";
    w.set(a + ".expert_group_count", Value(ds ? kDeepseekGroups : 1u));
    w.set(a + ".expert_group_used_count", Value(ds ? kDeepseekGroupsUsed : 1u));
  }
  if (a == "llama4") w.set(a + ".interleave_moe_layer_step", Value(kLlama4MoeStep));
}

// deepseek2's MLA keys as its converter writes them: the cache's key is
// the latent plus the rotary part (key_length), its value the latent, and
// the per-head sizes after decompression are the _mla lengths.
void set_mla_hparams(GgufWriter& w, const ModelShape& s) {
  const std::string a = "deepseek2";
  const MlaShape m = mla_shape(s);
  w.set(a + ".attention.q_lora_rank", Value(m.q_lora_rank));
  w.set(a + ".attention.kv_lora_rank", Value(m.kv_lora_rank));
  w.set(a + ".attention.key_length", Value(m.kv_lora_rank + m.rope_dim));
  w.set(a + ".attention.value_length", Value(m.kv_lora_rank));
  w.set(a + ".attention.key_length_mla", Value(m.k_dim()));
  w.set(a + ".attention.value_length_mla", Value(m.v_dim));
}

// Each family's own keys.
void set_family_hparams(GgufWriter& w, const Options& o, const ModelShape& s) {
  const std::string& a = o.arch;
  if (family_has_experts(o)) set_family_experts(w, o, s);
  if (a == "deepseek2") set_mla_hparams(w, s);
  if (a == "phi3") {
    // Phi-3's converter: the original context and LongRoPE's attention
    // factor sqrt(1 + ln(scale) / ln(original)); the sliding window (the
    // context, as the 128k files say) the reference turns off.
    const uint32_t orig = s.n_ctx / kPhi3ContextRatio;
    const double attn = std::sqrt(1.0 + std::log(double(kPhi3ContextRatio)) / std::log(double(orig)));
    w.set(a + ".rope.scaling.original_context_length", Value(orig));
    w.set(a + ".rope.scaling.attn_factor", Value(float(attn)));
    w.set(a + ".attention.sliding_window", Value(s.n_ctx));
  }
  if (a == "granite") {
    w.set(a + ".embedding_scale", Value(kGraniteEmbeddingScale));
    w.set(a + ".residual_scale", Value(kGraniteResidualScale));
    w.set(a + ".logit_scale", Value(kGraniteLogitScale));
    w.set(a + ".attention.scale", Value(1.0f / float(s.head_dim)));
  }
  if (a == "command-r") {
    w.set(a + ".logit_scale", Value(kCommandRLogitScale));
    w.set(a + ".attention.layer_norm_epsilon", Value(1e-5f));
  }
  if (a == "llama4") w.set(a + ".attention.sliding_window", Value(kLlama4Chunk));
}

// bert's keys, as convert_hf_to_gguf.py writes a bge/MiniLM checkpoint:
// layer norms, bidirectional attention, CLS pooling (bge's), and the token
// types (BERT's two sentence ids); no rope.
void set_bert_hparams(GgufWriter& w, const Options& o) {
  const std::string& a = o.arch;
  w.set(a + ".attention.layer_norm_epsilon", Value(1e-12f));
  w.set(a + ".attention.causal", Value(false));
  w.set(a + ".pooling_type", Value(uint32_t{2}));
  w.set("tokenizer.ggml.token_type_count", Value(kBertTokenTypes));
}

// The state space architectures' keys: Mamba-2's geometry; LFM2's conv
// cache and its layer pattern, as per-layer KV head counts (0: a conv layer).
void set_recurrent_hparams(GgufWriter& w, const Options& o, const ModelShape& s) {
  const std::string& a = o.arch;
  if (a == "mamba2") {
    const Mamba2Shape m = mamba2_shape(s, o.arch);
    w.set(a + ".ssm.conv_kernel", Value(uint32_t(m.conv_kernel)));
    w.set(a + ".ssm.inner_size", Value(uint32_t(m.d_inner)));
    w.set(a + ".ssm.state_size", Value(uint32_t(m.d_state)));
    w.set(a + ".ssm.time_step_rank", Value(uint32_t(m.n_heads)));
    w.set(a + ".ssm.group_count", Value(uint32_t(m.n_group)));
    return;
  }
  if (a == "jamba") {
    const Mamba1Shape m = mamba1_shape(s);
    w.set(a + ".ssm.conv_kernel", Value(uint32_t(m.conv_kernel)));
    w.set(a + ".ssm.inner_size", Value(uint32_t(m.d_inner)));
    w.set(a + ".ssm.state_size", Value(uint32_t(m.d_state)));
    w.set(a + ".ssm.time_step_rank", Value(uint32_t(m.dt_rank)));
    w.set(a + ".expert_count", Value(kMoeExperts));
    w.set(a + ".expert_used_count", Value(kMoeUsed));
  }
  if (a == "nemotron_h") {
    const Mamba2Shape m = mamba2_shape(s, a);
    w.set(a + ".ssm.conv_kernel", Value(uint32_t(m.conv_kernel)));
    w.set(a + ".ssm.inner_size", Value(uint32_t(m.d_inner)));
    w.set(a + ".ssm.state_size", Value(uint32_t(m.d_state)));
    w.set(a + ".ssm.time_step_rank", Value(uint32_t(m.n_heads)));
    w.set(a + ".ssm.group_count", Value(uint32_t(m.n_group)));
    w.set(a + ".attention.layer_norm_epsilon", Value(1e-5f));  // required by the reference's loader
  }
  if (a == "lfm2") w.set(a + ".shortconv.l_cache", Value(kLfm2ConvCache));
  // The layer pattern, as per-layer KV head counts (0: a recurrent layer)
  // and, for nemotron_h, FFN widths (0: a mixer layer).
  std::vector<uint32_t> kv_heads, ffn_widths;
  for (uint32_t l = 0; l < s.n_layer; ++l) {
    const bool attention = a == "lfm2"    ? lfm2_attention_layer(s, l)
                           : a == "jamba" ? jamba_attention_layer(s, l)
                                          : nemotron_block(l) == NemotronBlock::Attention;
    kv_heads.push_back(attention ? s.n_head_kv : 0);
    ffn_widths.push_back(nemotron_block(l) == NemotronBlock::Ffn ? s.n_ff : 0);
  }
  w.set(a + ".attention.head_count_kv", array_of(gguf::ValueType::U32, kv_heads));
  if (a == "nemotron_h") w.set(a + ".feed_forward_length", array_of(gguf::ValueType::U32, ffn_widths));
}

void set_hparams(GgufWriter& w, const Options& o, const ModelShape& s, uint32_t n_vocab) {
  const std::string& a = o.arch;
  w.set("general.architecture", Value(a));
  w.set("general.name", Value(fmt::format("vtc-synthetic-{}-{}", a, o.llama_archs_layout ? "llama-archs" : o.size)));
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
  if (a == "bert") return set_bert_hparams(w, o);
  if (a != "command-r") w.set(a + ".attention.layer_norm_rms_epsilon", Value(rms_eps(a)));
  w.set(a + ".rope.freq_base", Value(rope_base(a)));
  w.set(a + ".rope.dimension_count", Value(rope_dims(o, s)));
  if (is_moe_arch(a)) {
    w.set(a + ".expert_count", Value(kMoeExperts));
    w.set(a + ".expert_used_count", Value(kMoeUsed));
    w.set(a + ".expert_feed_forward_length", Value(moe_ff(s)));
  }
  if (is_hybrid_arch(a)) set_hybrid_hparams(w, o, s);
  if (is_gemma(a)) set_gemma_hparams(w, o, s);
  if (is_gpt_oss(a)) w.set(a + ".attention.sliding_window", Value(sliding_window(o, s)));
  if (is_qwen4exp(a)) set_qwen4exp_hparams(w, s);
  if (is_family_arch(a)) set_family_hparams(w, o, s);
  if (is_recurrent_arch(a)) set_recurrent_hparams(w, o, s);
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

// test-llama-archs's vocabulary: none, kLlamaArchsVocab dummy ids.
VocabInfo write_no_vocab(GgufWriter& w, const std::string& arch) {
  w.set("tokenizer.ggml.model", Value("no_vocab"));
  w.set("tokenizer.ggml.bos_token_id", Value(uint32_t{UINT32_MAX}));
  w.set("tokenizer.ggml.eos_token_id", Value(uint32_t{UINT32_MAX}));
  w.set(arch + ".vocab_size", Value(kLlamaArchsVocab));
  return {kLlamaArchsVocab, std::nullopt};
}

VocabInfo copy_tokenizer(GgufWriter& w, const std::string& vocab_path, const std::string& arch) {
  GgufFile vocab = GgufFile::open(vocab_path);
  // The gpt-neox vocab has no pre-tokenizer key (the reference's "default");
  // OLMoE's converter writes "olmo", GPT-2's split, which GPT-NeoX-20B's
  // tokenizer (OLMoE's) uses too.
  if ((arch == "olmoe" || arch == "mamba2") && !vocab.find("tokenizer.ggml.pre"))
    w.set("tokenizer.ggml.pre", Value("olmo"));
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
  if (!vocab.find("tokenizer.chat_template") && arch != "bert") {  // an encoder has no chat
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
  static const std::vector<std::string> sizes = {"tiny", "small", "125m", "0.5b", "0.56b", "1b", "8b-2l", "70b-1l"};
  return sizes;
}

const std::vector<std::string>& known_archs() {
  static const std::vector<std::string> archs = {
      "llama",  "qwen2",   "qwen3",     "qwen3moe", "qwen35",   "qwen35moe", "qwen3next", "qwen4exp",
      "gemma2", "gemma3",  "gpt-oss",   "phi3",     "deepseek2", "glm4moe",  "granite",   "smollm3",
      "command-r", "olmoe", "qwen2moe", "mistral3", "llama4", "bert", "mamba2", "lfm2", "jamba", "nemotron_h"};
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

ModelShape llama_archs_shape() { return {256, 512, 6, 4, 2, 64, 256}; }

// smollm3 and llama4 need a fourth layer for their no-rope layer; OLMoE is
// multi-head (its k norm is n_embd wide); deepseek2's MLA files say one KV
// head (the shared latent).
ModelShape model_shape(const Options& o) {
  ModelShape s = o.llama_archs_layout ? llama_archs_shape() : shape_for(o.size);
  if (o.arch == "smollm3" || o.arch == "llama4") s.n_layer = std::max(s.n_layer, 4u);
  if (o.arch == "olmoe") s.n_head_kv = s.n_head;
  if (o.arch == "deepseek2") s.n_head_kv = 1;
  // mamba2 and nemotron_h: a block per attention and per FFN
  if (o.arch == "mamba2" || o.arch == "nemotron_h") s.n_layer *= 2;
  if (o.arch == "bert") s.n_head_kv = s.n_head;  // BERT is multi-head
  return s;
}

// DeepSeek-V3's proportions (q_lora 1536 of 7168, kv_lora 512, nope 128,
// rope 64, v 128) on the size's head dim: nope = v = head_dim, rope half of
// it, the latent 4 heads wide and q's rank n_embd.
MlaShape mla_shape(const ModelShape& s) {
  MlaShape m;
  m.q_lora_rank = s.n_embd;
  m.kv_lora_rank = 4 * s.head_dim;
  m.nope_dim = s.head_dim;
  m.rope_dim = s.head_dim / 2;
  m.v_dim = s.head_dim;
  return m;
}

uint32_t sliding_window(const Options& o, const ModelShape& s) {
  if (!is_gemma(o.arch) && !is_gpt_oss(o.arch)) return 0;
  return o.llama_archs_layout ? 32 : s.n_ctx / 4;
}

// Gemma's tokenizer is SentencePiece like llama's; the reference's models/
// has only Gemma 4's (tokenizer model "gemma4", which vtc does not read), so
// the gemmas take llama-spm. gpt-oss's o200k is not there either: the BPE
// qwen2 vocab stands in.
//
// The families: phi3, command-r and qwen2moe take their own vocab;
// deepseek2 takes deepseek-llm (V2/V3's own deepseek-v3 pre-tokenizer is
// not there), olmoe gpt-neox (OLMoE's is GPT-NeoX-20B's), granite refact
// (Granite's StarCoder-style BPE), smollm3 llama-bpe (SmolLM3's is Llama
// 3's); for mistral3's tekken and llama4's own BPE llama-bpe stands in, for
// GLM-4.5's qwen2.
std::string default_vocab_name(const std::string& arch) {
  if (arch == "bert") return "ggml-vocab-bert-bge.gguf";  // bge's WordPiece
  if (arch == "llama" || is_gemma(arch) || arch == "jamba") return "ggml-vocab-llama-spm.gguf";  // Jamba's is SPM
  if (arch == "phi3") return "ggml-vocab-phi-3.gguf";
  if (arch == "command-r") return "ggml-vocab-command-r.gguf";
  if (arch == "deepseek2") return "ggml-vocab-deepseek-llm.gguf";
  if (arch == "olmoe" || arch == "mamba2") return "ggml-vocab-gpt-neox.gguf";  // Mamba's is GPT-NeoX's
  if (arch == "granite") return "ggml-vocab-refact.gguf";
  if (arch == "smollm3" || arch == "mistral3" || arch == "llama4" || arch == "nemotron_h")
    return "ggml-vocab-llama-bpe.gguf";
  return "ggml-vocab-qwen2.gguf";
}

namespace {

// The rope scaling an architecture's files carry when none is asked for:
// gpt-oss's converter always writes yarn; the llama_archs layout gives
// gemma3 the linear factor 8 of Gemma 3 4B and up (global layers only).
Options with_default_rope_scaling(Options o) {
  if (!o.rope_scaling.empty()) return o;
  if (is_gpt_oss(o.arch) || o.arch == "mistral3") o.rope_scaling = "yarn";  // Ministral 3's is yarn too
  if (o.llama_archs_layout && o.arch == "gemma3") o.rope_scaling = "linear", o.rope_factor = 8.0f;
  return o;
}

}  // namespace

Summary write_model(const Options& options, const std::string& out_path, const ProgressFn& progress) {
  const Options o = with_default_rope_scaling(options);
  const auto& archs = known_archs();
  if (std::find(archs.begin(), archs.end(), o.arch) == archs.end())
    throw Error(fmt::format("unknown architecture '{}' (known: {})", o.arch, fmt::join(archs, ", ")));
  // The reference loads no rope_freqs for these and rejects the extra tensor.
  const bool family_freqs = o.arch == "granite" || o.arch == "mistral3" || o.arch == "llama4";
  if (o.rope_freqs && (is_hybrid_arch(o.arch) || is_gemma(o.arch) || is_gpt_oss(o.arch) ||
                       (is_family_arch(o.arch) && !family_freqs)))
    throw Error(fmt::format("gen-model: --rope-freqs is not supported for {}", o.arch));
  // phi3 has its LongRoPE keys; vtc refuses deepseek2's yarn_log_multiplier,
  // without which its yarn would not be DeepSeek's.
  if (!o.rope_scaling.empty() && (o.arch == "phi3" || o.arch == "deepseek2"))
    throw Error(fmt::format("gen-model: --rope-scaling is not supported for {}", o.arch));
  if (o.moe && o.arch != "granite")
    throw Error(fmt::format("gen-model: --moe is for granite only, not {}", o.arch));
  if (o.llama_archs_layout && !is_gemma(o.arch))
    throw Error(fmt::format("gen-model: the test-llama-archs layout is written for gemma2 and gemma3 only, not {}",
                            o.arch));
  Summary summary;
  summary.shape = model_shape(o);
  GgufWriter w;
  const uint32_t n_vocab_placeholder = 0;
  set_hparams(w, o, summary.shape, n_vocab_placeholder);
  const VocabInfo vocab = o.llama_archs_layout ? write_no_vocab(w, o.arch) : copy_tokenizer(w, o.vocab_path, o.arch);
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
