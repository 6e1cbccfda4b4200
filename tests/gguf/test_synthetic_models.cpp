// The generator's output, and the reader on real vocab files from the
// llama.cpp reference ([reference] tests need tests/reference/fetch.sh).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "frontends/gguf/gguf.h"
#include "samples/synthetic_model.h"

using namespace vtc;
namespace fs = std::filesystem;

namespace {

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("vtc_test_" + name)).string();
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
    size_t per_layer = arch == "qwen2" ? 12 : arch == "qwen3" ? 11 : 9;
    CHECK(f.tensors().size() == 3 + shape.n_layer * per_layer);
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

TEST_CASE("the reader parses every vocab GGUF of the reference", "[gguf][reference]") {
  const fs::path dir = VTC_REFERENCE_MODELS_DIR;
  REQUIRE(fs::is_directory(dir));
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".gguf") continue;
    INFO(entry.path());
    auto f = gguf::GgufFile::open(entry.path().string());
    auto* tokens = f.find("tokenizer.ggml.tokens");
    REQUIRE(tokens);
    REQUIRE(tokens->as_array());
    CHECK(tokens->as_array()->elem_type == gguf::ValueType::STRING);
    CHECK(tokens->as_array()->items.size() > 1000);
    if (auto* types = f.find("tokenizer.ggml.token_type"))
      CHECK(types->as_array()->items.size() == tokens->as_array()->items.size());
    ++files;
  }
  CHECK(files >= 15);
}
