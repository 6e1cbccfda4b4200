// The generator's output, and the reader on real vocab files from the
// llama.cpp reference ([reference] tests need tests/reference/fetch.sh).
#include <catch2/catch.hpp>

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

// token_embd, output_norm, output, and each layer's tensors.
size_t expected_tensor_count(const std::string& arch, const synth::ModelShape& shape) {
  if (!synth::is_hybrid_arch(arch)) {
    size_t per_layer = arch == "qwen2" || arch == "qwen3moe" ? 12 : arch == "qwen3" ? 11 : 9;
    return 3 + shape.n_layer * per_layer;
  }
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
    const auto shape = synth::shape_for("tiny");
    CHECK(f.get_int(arch + ".block_count") == shape.n_layer);
    CHECK(f.get_int(arch + ".embedding_length") == shape.n_embd);
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
  for (const std::string arch : {"qwen35", "qwen35moe", "qwen3next"}) {
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
