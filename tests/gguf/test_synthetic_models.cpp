// The generator's output, and the reader on real vocab files from the
// llama.cpp reference ([reference] tests need tests/reference/fetch.sh).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "frontends/gguf/gguf.h"
#include "samples/synthetic_model.h"
#include "tests/test_process.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

using namespace vtc;
namespace fs = std::filesystem;

namespace {

std::string temp_path(const std::string& name) {
  return test::unique_temp_path(name);
}

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

synth::Summary generate(const std::string& arch, const std::string& path, uint64_t seed = 42) {
  synth::Options o;
  o.arch = arch;
  o.seed = seed;
  o.vocab_path = synth::find_default_vocab(arch);
  return synth::write_model(o, path);
}

// qwen4exp: token_embd, per_layer_token_embd, output and the 3 output_hc
// tensors; per layer 8 hyper-connection and 8 MoE tensors, DeltaNet's 9 or
// gated attention's 6 plus 4 indexer tensors, and 6 more on the PLE layer.
size_t qwen4exp_tensor_count(const synth::ModelShape& shape) {
  const auto g = synth::delta_net_shape(shape);
  const auto q = synth::qwen4exp_shape(shape);
  size_t n = 6;
  for (uint32_t l = 0; l < shape.n_layer; ++l)
    n += 16 + (g.is_linear(l) ? 9 : 10) + (l == q.ple_layer ? 6 : 0);
  return n;
}

// The llama-like families, by their loaders: the globals (token_embd,
// output_norm, output unless tied, phi3's two rope factor vectors) and per
// layer the attention block with its norms, then the dense FFN (3; phi3's
// fused up and down: 2) or the MoE (router and 3 expert stacks, plus
// deepseek2's and glm4moe's selection bias, plus 3 shared-expert matrices
// and qwen2moe's shared gate). deepseek2 and glm4moe have one leading
// dense layer, llama4 MoE on every second layer.
size_t family_tensor_count(const std::string& arch, const synth::ModelShape& shape, bool moe) {
  const bool tied = arch == "granite" || arch == "smollm3" || arch == "command-r";
  size_t n = (tied ? 2 : 3) + (arch == "phi3" ? 2 : 0);
  for (uint32_t l = 0; l < shape.n_layer; ++l) {
    // attn_norm, q, k, v, attn_output, ffn_norm; phi3 fuses qkv, command-r
    // has no ffn_norm, the others add biases (3) or QK-norm (2).
    size_t attn = arch == "phi3" ? 4 : arch == "command-r" ? 5 : 6;
    if (arch == "qwen2moe") attn += 3;
    if (arch == "glm4moe") attn += 3 + 2;
    if (arch == "olmoe") attn += 2;
    if (arch == "deepseek2") attn = 10;  // norms 4, q_a, q_b, kv_a_mqa, k_b, v_b, output
    bool moe_layer = arch == "olmoe" || arch == "qwen2moe" || (arch == "granite" && moe);
    if (arch == "deepseek2" || arch == "glm4moe") moe_layer = l >= 1;
    if (arch == "llama4") moe_layer = l % 2 == 1;
    size_t ffn = arch == "phi3" ? 2 : 3;
    if (moe_layer) {
      ffn = 4 + (arch == "deepseek2" || arch == "glm4moe" ? 1 : 0) + (arch == "olmoe" ? 0 : 3) +
            (arch == "qwen2moe" ? 1 : 0);
    }
    n += attn + ffn;
  }
  return n;
}

const std::vector<std::string> kFamilies = {"phi3",      "deepseek2", "glm4moe",  "granite",  "smollm3",
                                            "command-r", "olmoe",     "qwen2moe", "mistral3", "llama4"};
bool is_family(const std::string& arch) {
  return std::find(kFamilies.begin(), kFamilies.end(), arch) != kFamilies.end();
}

// token_embd, output_norm, output, and each layer's tensors.
size_t expected_tensor_count(const std::string& arch, const synth::ModelShape& shape) {
  if (is_family(arch)) return family_tensor_count(arch, shape, false);
  // bert: token, token-type and position embeddings and the biased embedding
  // norm; per layer q/k/v/output and up/down with biases, two biased norms.
  if (arch == "bert") return 5 + shape.n_layer * 16;
  // The gemmas are tied (no output): 11 tensors a layer, gemma3 adds QK-norm.
  if (arch == "gemma2" || arch == "gemma3") return 2 + shape.n_layer * (arch == "gemma3" ? 13 : 11);
  // gpt-oss: q/k/v/output with biases, sinks, 2 norms, biased router and experts.
  if (arch == "gpt-oss") return 3 + shape.n_layer * 19;
  // mamba2: attn_norm, ssm_in, conv weight and bias, dt bias, A, D, the
  // grouped norm and ssm_out per layer.
  if (arch == "mamba2") return 3 + shape.n_layer * 9;
  // lfm2 (tied; its final norm is token_embd_norm): both norms and the FFN
  // per layer, then QK-norm and q/k/v/output on the attention layers (every
  // third; every second of 2) or the conv and its two projections.
  if (arch == "lfm2") {
    size_t n = 2;
    const uint32_t period = std::min(3u, shape.n_layer);
    for (uint32_t l = 0; l < shape.n_layer; ++l) n += 5 + ((l + 1) % period == 0 ? 6 : 3);
    return n;
  }
  // jamba: both norms per layer; Mamba-1's 12 tensors (with the dt/B/C
  // norms) or q/k/v/output on the attention layer of each 4 (the second of
  // 2); a dense SwiGLU, or a router and 3 expert stacks on odd layers.
  if (arch == "jamba") {
    size_t n = 3;
    for (uint32_t l = 0; l < shape.n_layer; ++l)
      n += 2 + (l % 4 == std::min(shape.n_layer, 4u) - 1 ? 4 : 12) + (l % 2 == 1 ? 4 : 3);
    return n;
  }
  // nemotron_h: attn_norm, then by the pattern Mamba, FFN, attention, FFN:
  // mamba2's 8 mixer tensors, ffn_up/down, or q/k/v/output.
  if (arch == "nemotron_h") {
    size_t n = 3;
    for (uint32_t l = 0; l < shape.n_layer; ++l) n += 1 + (l % 2 == 1 ? 2 : l % 4 == 0 ? 8 : 4);
    return n;
  }
  if (!synth::is_hybrid_arch(arch)) {
    size_t per_layer = arch == "qwen2" || arch == "qwen3moe" ? 12 : arch == "qwen3" ? 11 : 9;
    return 3 + shape.n_layer * per_layer;
  }
  if (arch == "qwen4exp") return qwen4exp_tensor_count(shape);
  const auto g = synth::delta_net_shape(shape);
  const size_t ffn = arch == "qwen35" ? 3 : 8;  // dense, or 4 routed + 4 shared-expert tensors
  const size_t linear = arch == "qwen3next" ? 7 : 9, full = 6;
  size_t n = 3;
  for (uint32_t l = 0; l < shape.n_layer; ++l) n += 2 + ffn + (g.is_linear(l) ? linear : full);
  return n;
}

}  // namespace

TEST_CASE("generated models have complete metadata and tensors", "[gguf][synth][reference]") {
  for (const auto& arch : synth::known_archs()) {
    INFO("arch " << arch);
    auto path = temp_path(arch + ".gguf");
    auto summary = generate(arch, path);
    auto f = gguf::GgufFile::open(path);
    CHECK(f.architecture() == arch);
    synth::Options o;
    o.arch = arch;
    const auto shape = synth::model_shape(o);
    CHECK(summary.shape.n_layer == shape.n_layer);
    CHECK(f.get_int(arch + ".block_count") == shape.n_layer);
    CHECK(f.get_int(arch + ".embedding_length") == shape.n_embd);
    if (arch != "lfm2" && arch != "jamba" && arch != "nemotron_h")  // per layer, 0 on the recurrent layers
      CHECK(f.get_int(arch + ".attention.head_count_kv") == shape.n_head_kv);
    CHECK(f.get_int(arch + ".vocab_size") == summary.vocab_size);
    auto* tokens = f.find("tokenizer.ggml.tokens");
    REQUIRE(tokens);
    CHECK(tokens->as_array()->items.size() == summary.vocab_size);
    CHECK(f.tensors().size() == expected_tensor_count(arch, shape));
    auto* embd = f.find_tensor("token_embd.weight");
    REQUIRE(embd);
    CHECK(embd->dims == std::vector<uint64_t>{shape.n_embd, summary.vocab_size});
    uint64_t params = 0;
    for (const auto& t : f.tensors()) params += t.n_elements;
    CHECK(params == summary.parameters);
    fs::remove(path);
  }
}

TEST_CASE("the generator is deterministic in its seed", "[gguf][synth][reference]") {
  auto a = temp_path("seed_a.gguf"), b = temp_path("seed_b.gguf"), c = temp_path("seed_c.gguf");
  generate("qwen3", a, 7);
  generate("qwen3", b, 7);
  generate("qwen3", c, 8);
  CHECK(read_all(a) == read_all(b));
  CHECK(read_all(a) != read_all(c));
  for (auto& p : {a, b, c}) fs::remove(p);
}

TEST_CASE("generated weights are sensitive: unit-scale norms, 1/sqrt(fan_in) matrices", "[gguf][synth][reference]") {
  auto path = temp_path("scale.gguf");
  generate("llama", path);
  auto f = gguf::GgufFile::open(path);
  auto stats = [&](const std::string& name) {
    auto* t = f.find_tensor(name);
    REQUIRE(t);
    auto* v = reinterpret_cast<const float*>(t->data);
    double sum = 0, sq = 0;
    for (uint64_t i = 0; i < t->n_elements; ++i) sum += v[i], sq += double(v[i]) * v[i];
    double mean = sum / t->n_elements;
    return std::pair{mean, std::sqrt(sq / t->n_elements - mean * mean)};
  };
  auto [norm_mean, norm_std] = stats("blk.0.attn_norm.weight");
  CHECK(norm_mean == Approx(1.0).margin(0.05));
  auto [q_mean, q_std] = stats("blk.0.attn_q.weight");
  CHECK(q_std == Approx(1.0 / std::sqrt(64.0)).epsilon(0.05));
  auto [d_mean, d_std] = stats("blk.1.ffn_down.weight");
  CHECK(d_std == Approx(1.0 / std::sqrt(192.0)).epsilon(0.05));
  fs::remove(path);
}

TEST_CASE("hybrid models have the DeltaNet keys and the reference's tensor shapes", "[gguf][synth][reference]") {
  for (const std::string arch : {"qwen35", "qwen35moe", "qwen3next", "qwen4exp"}) {
    INFO("arch " << arch);
    synth::Options o;
    o.arch = arch;
    o.size = "small";
    o.weight_type = GgmlType::F16;
    o.vocab_path = synth::find_default_vocab(arch);
    auto path = temp_path(arch + "_hybrid.gguf");
    synth::write_model(o, path);
    auto f = gguf::GgufFile::open(path);
    CHECK(f.get_int(arch + ".ssm.conv_kernel") == 4);
    CHECK(f.get_int(arch + ".ssm.state_size") == 64);
    CHECK(f.get_int(arch + ".ssm.group_count") == 2);
    CHECK(f.get_int(arch + ".ssm.time_step_rank") == 4);
    CHECK(f.get_int(arch + ".ssm.inner_size") == 256);
    CHECK(f.get_int(arch + ".full_attention_interval") == 2);
    CHECK(f.get_int(arch + ".rope.dimension_count") == 32);
    CHECK((f.find(arch + ".rope.dimension_sections") != nullptr) == (arch != "qwen3next"));
    auto dims = [&](const std::string& name) {
      auto* t = f.find_tensor(name);
      REQUIRE(t);
      return t->dims;
    };
    auto type = [&](const std::string& name) { return f.find_tensor(name)->type; };
    // Layer 0 is DeltaNet: conv channels are q, k (2 heads of 64) and v (4 heads of 64).
    CHECK(dims("blk.0.ssm_conv1d.weight") == std::vector<uint64_t>{4, 512});
    CHECK(type("blk.0.ssm_conv1d.weight") == GgmlType::F32);
    CHECK(dims("blk.0.ssm_a") == std::vector<uint64_t>{4});
    CHECK(dims("blk.0.ssm_out.weight") == std::vector<uint64_t>{256, 256});
    CHECK(type("blk.0.ssm_out.weight") == GgmlType::F16);
    if (arch == "qwen3next") {
      CHECK(dims("blk.0.ssm_in.weight") == std::vector<uint64_t>{256, 768});
      CHECK(dims("blk.0.ssm_ba.weight") == std::vector<uint64_t>{256, 8});
    } else {
      CHECK(dims("blk.0.attn_qkv.weight") == std::vector<uint64_t>{256, 512});
      CHECK(dims("blk.0.attn_gate.weight") == std::vector<uint64_t>{256, 256});
    }
    // ssm_a holds -exp(A_log): all negative, so the state decays.
    auto* a = f.find_tensor("blk.0.ssm_a");
    for (uint64_t i = 0; i < a->n_elements; ++i) CHECK(reinterpret_cast<const float*>(a->data)[i] < 0.0f);
    // Layer 1 is full attention; attn_q carries each head's query and gate.
    CHECK(dims("blk.1.attn_q.weight") == std::vector<uint64_t>{256, 512});
    CHECK(f.find_tensor("blk.1.ssm_out.weight") == nullptr);
    if (arch != "qwen35") CHECK(dims("blk.1.ffn_gate_inp_shexp.weight") == std::vector<uint64_t>{256});
    fs::remove(path);
  }
}

// Each family's distinguishing keys and tensors against its reference
// loader (src/models/<arch>.cpp) and converter, on the "small" shape
// (n_embd 256, 4 heads of 64, 2 KV heads, n_ff 512).
TEST_CASE("the llama-like families have their reference keys and tensor shapes", "[gguf][synth][reference]") {
  using D = std::vector<uint64_t>;
  auto open = [](const std::string& arch, bool moe = false) {
    synth::Options o;
    o.arch = arch;
    o.size = "small";
    o.moe = moe;
    o.vocab_path = synth::find_default_vocab(arch);
    auto path = temp_path(arch + "_family.gguf");
    synth::write_model(o, path);
    auto f = gguf::GgufFile::open(path);
    fs::remove(path);  // the mapping stays valid
    CHECK(f.tensors().size() == family_tensor_count(arch, synth::model_shape(o), moe));
    return f;
  };
  auto dims = [](const gguf::GgufFile& f, const std::string& name) {
    auto* t = f.find_tensor(name);
    REQUIRE(t);
    return t->dims;
  };
  SECTION("deepseek2: MLA, a dense lead block, grouped sigmoid routing") {
    auto f = open("deepseek2");
    CHECK(f.get_int("deepseek2.attention.head_count_kv") == 1);
    CHECK(f.get_int("deepseek2.attention.q_lora_rank") == 256);
    CHECK(f.get_int("deepseek2.attention.kv_lora_rank") == 256);
    CHECK(f.get_int("deepseek2.attention.key_length_mla") == 96);  // nope 64 + rope 32
    CHECK(f.get_int("deepseek2.attention.value_length_mla") == 64);
    CHECK(f.get_int("deepseek2.attention.key_length") == 256 + 32);
    CHECK(f.get_int("deepseek2.rope.dimension_count") == 32);
    CHECK(f.get_int("deepseek2.expert_group_count") == 4);
    CHECK(f.get_int("deepseek2.expert_group_used_count") == 2);
    CHECK(f.get_int("deepseek2.expert_gating_func") == 2);
    CHECK(f.get_int("deepseek2.leading_dense_block_count") == 1);
    CHECK(dims(f, "blk.0.attn_q_b.weight") == D{256, 4 * 96});
    CHECK(dims(f, "blk.0.attn_kv_a_mqa.weight") == D{256, 256 + 32});
    CHECK(dims(f, "blk.0.attn_k_b.weight") == D{64, 256, 4});
    CHECK(dims(f, "blk.0.attn_v_b.weight") == D{256, 64, 4});
    CHECK(dims(f, "blk.0.ffn_gate.weight") == D{256, 512});
    CHECK(f.find_tensor("blk.0.ffn_gate_inp.weight") == nullptr);
    CHECK(dims(f, "blk.1.exp_probs_b.bias") == D{8});
    CHECK(dims(f, "blk.1.ffn_up_shexp.weight") == D{256, 256});
  }
  SECTION("glm4moe: partial rotary, biases, QK-norm, sigmoid experts") {
    auto f = open("glm4moe");
    CHECK(f.get_int("glm4moe.rope.dimension_count") == 32);  // of head_dim 64
    CHECK(f.get_int("glm4moe.expert_shared_count") == 1);
    CHECK(dims(f, "blk.0.attn_q.bias") == D{256});
    CHECK(dims(f, "blk.0.attn_k_norm.weight") == D{64});
    CHECK(dims(f, "blk.1.post_attention_norm.weight") == D{256});
    CHECK(dims(f, "blk.1.exp_probs_b.bias") == D{8});
  }
  SECTION("phi3: fused qkv and gate|up, LongRoPE") {
    auto f = open("phi3");
    CHECK(dims(f, "blk.0.attn_qkv.weight") == D{256, 256 + 2 * 128});
    CHECK(dims(f, "blk.0.ffn_up.weight") == D{256, 1024});
    CHECK(dims(f, "rope_factors_long.weight") == D{32});
    CHECK(dims(f, "rope_factors_short.weight") == D{32});
    CHECK(f.get_int("phi3.rope.scaling.original_context_length") == 1024 / 32);
    CHECK(f.get_float("phi3.rope.scaling.attn_factor").value_or(0) > 1.0);
  }
  SECTION("granite: multipliers, tied; Granite MoE with a shared expert") {
    auto f = open("granite");
    CHECK(f.get_float("granite.logit_scale") == Approx(8.0));
    CHECK(f.get_float("granite.embedding_scale") == Approx(12.0));
    CHECK(f.get_float("granite.residual_scale") == Approx(0.22));
    CHECK(f.get_float("granite.attention.scale") == Approx(1.0 / 64));
    CHECK(f.find_tensor("output.weight") == nullptr);
    auto m = open("granite", true);
    CHECK(m.get_int("granite.expert_count") == 8);
    CHECK(m.get_int("granite.feed_forward_length") == 256);  // the expert width
    CHECK(dims(m, "blk.0.ffn_down_exps.weight") == D{256, 256, 8});
    CHECK(dims(m, "blk.0.ffn_gate_shexp.weight") == D{256, 512});
  }
  SECTION("smollm3, command-r, olmoe, qwen2moe, mistral3, llama4") {
    CHECK(open("smollm3").get_int("smollm3.block_count") == 4);
    auto c = open("command-r");
    CHECK(c.get_float("command-r.logit_scale") == Approx(0.0625));
    CHECK(c.find("command-r.attention.layer_norm_rms_epsilon") == nullptr);
    CHECK(c.find_tensor("blk.0.ffn_norm.weight") == nullptr);
    auto o = open("olmoe");
    CHECK(o.get_int("olmoe.attention.head_count_kv") == 4);
    CHECK(dims(o, "blk.0.attn_k_norm.weight") == D{256});
    CHECK(o.get_string("tokenizer.ggml.pre") == "olmo");
    auto q = open("qwen2moe");
    CHECK(dims(q, "blk.0.ffn_gate_inp_shexp.weight") == D{256});
    CHECK(q.get_int("qwen2moe.expert_shared_feed_forward_length") == 512);
    CHECK(open("mistral3").get_string("mistral3.rope.scaling.type") == "yarn");
    auto l = open("llama4");
    CHECK(l.get_int("llama4.block_count") == 4);
    CHECK(l.get_int("llama4.interleave_moe_layer_step") == 2);
    CHECK(l.get_int("llama4.expert_used_count") == 1);
    CHECK(l.find_tensor("blk.0.ffn_gate_inp.weight") == nullptr);
    CHECK(dims(l, "blk.1.ffn_gate_inp.weight") == D{256, 8});
  }
}

namespace {
std::vector<uint64_t> u64_array(const gguf::GgufFile& f, const std::string& key) {
  auto* v = f.find(key);
  REQUIRE(v);
  auto* a = v->as_array();
  REQUIRE(a);
  CHECK(a->elem_type == gguf::ValueType::U64);  // the reference reads these only as uint64
  std::vector<uint64_t> out;
  for (const auto& item : a->items) out.push_back(uint64_t(*item.as_int()));
  return out;
}
}  // namespace

// The "small" qwen4exp, key by key and tensor by tensor against
// src/models/qwen4exp.cpp (load_arch_hparams, load_arch_tensors).
TEST_CASE("qwen4exp has the reference's hyper-connection/PLE/QSA keys and tensors",
          "[gguf][synth][reference]") {
  synth::Options o;
  o.arch = "qwen4exp";
  o.size = "small";
  o.weight_type = GgmlType::F16;
  o.vocab_path = synth::find_default_vocab(o.arch);
  auto path = temp_path("qwen4exp_small.gguf");
  auto summary = synth::write_model(o, path);
  auto f = gguf::GgufFile::open(path);
  const std::string a = "qwen4exp.";
  CHECK(f.get_int(a + "hyper_connection.count") == 4);
  CHECK(f.get_int(a + "hyper_connection.low_rank") == 8);
  CHECK(f.get_int(a + "attention.indexer.head_count") == 4);
  CHECK(f.get_int(a + "attention.indexer.key_length") == 64);
  CHECK(f.get_int(a + "attention.indexer.top_k") == 32);
  CHECK(f.get_int(a + "expert_count") == 8);
  CHECK(f.get_int(a + "expert_shared_feed_forward_length") == 512);
  CHECK(f.find(a + "attention.indexer.block_size") == nullptr);  // minimax-m3's; qwen4exp reads none
  auto* ratios = f.find(a + "attention.compress_ratios");
  REQUIRE(ratios);
  REQUIRE(ratios->as_array()->items.size() == 2);
  CHECK(ratios->as_array()->items[0].as_int() == 0);  // DeltaNet
  CHECK(ratios->as_array()->items[1].as_int() == 4);  // full attention
  // PLE: on DeltaNet layer 0, hashing at the vocabulary's own EOS.
  auto* ple_layers = f.find(a + "ple.layers");
  REQUIRE(ple_layers);
  REQUIRE(ple_layers->as_array()->items.size() == 1);
  CHECK(ple_layers->as_array()->items[0].as_int() == 0);
  CHECK(f.get_int(a + "ple.ngram_size") == 3);
  CHECK(f.get_int(a + "ple.heads_per_ngram") == 2);
  CHECK(f.get_int(a + "ple.conv_kernel") == 4);
  CHECK(f.get_int(a + "ple.eos_token_id") == f.get_int("tokenizer.ggml.eos_token_id"));
  CHECK(f.get_int(a + "embedding_length_per_layer_input") == 64);  // n_embd / 4 heads
  auto mult = u64_array(f, a + "ple.layer_multipliers");
  REQUIRE(mult.size() == 3);
  for (uint64_t m : mult) {
    CHECK(m % 2 == 1);
    CHECK(m >= (uint64_t{1} << 44));
    CHECK(m < (uint64_t{1} << 45));
  }
  auto sizes = u64_array(f, a + "ple.head_vocab_sizes");
  auto offsets = u64_array(f, a + "ple.head_offsets");
  REQUIRE(sizes.size() == 4);
  REQUIRE(offsets.size() == 4);
  uint64_t rows = 0;
  for (size_t h = 0; h < sizes.size(); ++h) {
    CHECK(offsets[h] == rows);  // contiguous ranges
    CHECK(sizes[h] > 1000);
    CHECK(sizes[h] < summary.vocab_size);
    if (h > 0) CHECK(sizes[h] < sizes[h - 1]);
    rows += sizes[h];
  }
  auto dims = [&](const std::string& name) {
    auto* t = f.find_tensor(name);
    REQUIRE(t);
    return t->dims;
  };
  auto type = [&](const std::string& name) { return f.find_tensor(name)->type; };
  using D = std::vector<uint64_t>;
  CHECK(dims("per_layer_token_embd.weight") == D{64, rows});
  CHECK(type("per_layer_token_embd.weight") == GgmlType::F16);
  // Hyper-connections over 4 streams of 256 at rank 8; no RMSNorm tensors left.
  CHECK(dims("output_hc_norm.weight") == D{1024});
  CHECK(dims("output_hc_down.weight") == D{1024, 8});
  CHECK(dims("output_hc_up.weight") == D{8, 1024});
  CHECK(f.find_tensor("output_hc_inject.weight") == nullptr);
  CHECK(f.find_tensor("output_norm.weight") == nullptr);
  for (const std::string blk : {"blk.0.", "blk.1."}) {
    CHECK(dims(blk + "hc_attn_inject.weight") == D{1024, 4});
    CHECK(dims(blk + "hc_ffn_up.weight") == D{8, 1024});
    CHECK(f.find_tensor(blk + "attn_norm.weight") == nullptr);
    CHECK(f.find_tensor(blk + "post_attention_norm.weight") == nullptr);
  }
  CHECK(dims("blk.0.ple_key.weight") == D{256, 1024});
  CHECK(dims("blk.0.ple_value.weight") == D{256, 256});
  CHECK(dims("blk.0.ple_norm_conv.weight") == D{1024});
  CHECK(dims("blk.0.ple_conv1d.weight") == D{4, 1024});
  CHECK(type("blk.0.ple_conv1d.weight") == GgmlType::F32);
  CHECK(f.find_tensor("blk.1.ple_key.weight") == nullptr);
  // The indexer is on the full-attention layer only.
  CHECK(dims("blk.1.indexer.q_proj.weight") == D{256, 256});
  CHECK(dims("blk.1.indexer.k_proj.weight") == D{256, 64});
  CHECK(dims("blk.1.indexer.k_norm.weight") == D{64});
  CHECK(f.find_tensor("blk.0.indexer.q_proj.weight") == nullptr);
  CHECK(f.tensors().size() == expected_tensor_count("qwen4exp", synth::shape_for("small")));
  fs::remove(path);
}

namespace {
// Compares vtc's reading of `path` with ggml's own (vtc-ref gguf-dump):
// version, alignment, data offset, every key and value type, array lengths,
// string values, and every tensor's type, dims, offset and size.
void check_against_ggml(const std::string& path) {
  INFO(path);
  auto f = gguf::GgufFile::open(path);
  auto ref = nlohmann::json::parse(test::run_capture(std::string(VTC_REF_TOOL) + " gguf-dump " + path));
  CHECK(f.version() == ref["version"]);
  CHECK(f.alignment() == ref["alignment"]);
  CHECK(f.data_offset() == ref["data_offset"]);
  REQUIRE(f.metadata().size() == ref["kv"].size());
  for (size_t i = 0; i < f.metadata().size(); ++i) {
    const auto& ours = f.metadata()[i];
    const auto& theirs = ref["kv"][i];
    INFO("key " << ours.key);
    CHECK(ours.key == theirs["key"]);
    CHECK(int(ours.value.type()) == theirs["type"]);
    if (auto* a = ours.value.as_array()) {
      CHECK(int(a->elem_type) == theirs["elem_type"]);
      CHECK(a->items.size() == theirs["n"]);
    }
    if (auto* s = ours.value.as_string()) CHECK(*s == theirs["value"]);
  }
  REQUIRE(f.tensors().size() == ref["tensors"].size());
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const auto& t = f.tensors()[i];
    const auto& theirs = ref["tensors"][i];
    INFO("tensor " << t.name);
    CHECK(t.name == theirs["name"]);
    CHECK(int(t.type) == theirs["type"]);
    CHECK(t.offset == theirs["offset"]);
    CHECK(t.n_bytes == theirs["size"]);
    std::vector<uint64_t> dims = theirs["dims"].get<std::vector<uint64_t>>();
    std::vector<uint64_t> ours = t.dims;
    while (ours.size() > dims.size() && ours.back() == 1) ours.pop_back();  // ggml drops trailing 1s
    CHECK(ours == dims);
  }
}
}  // namespace

TEST_CASE("the reader agrees with ggml on every vocab GGUF of the reference", "[gguf][reference]") {
  const fs::path dir = VTC_REFERENCE_MODELS_DIR;
  REQUIRE(fs::is_directory(dir));
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".gguf") continue;
    check_against_ggml(entry.path().string());
    auto f = gguf::GgufFile::open(entry.path().string());
    auto* tokens = f.find("tokenizer.ggml.tokens");
    REQUIRE(tokens);
    REQUIRE(tokens->as_array());
    CHECK(tokens->as_array()->items.size() > 1000);
    ++files;
  }
  CHECK(files >= 15);
}

TEST_CASE("the reader agrees with ggml on generated and quantized models", "[gguf][reference]") {
  for (const auto& arch : synth::known_archs()) {
    auto path = temp_path("ggml_" + arch + ".gguf");
    generate(arch, path);
    check_against_ggml(path);
    auto quantized = temp_path("ggml_" + arch + "_q4_k_m.gguf");
    test::run_capture(fmt::format("{} quantize {} {} q4_k_m", VTC_REF_TOOL, path, quantized));
    check_against_ggml(quantized);
    fs::remove(path);
    fs::remove(quantized);
  }
}
