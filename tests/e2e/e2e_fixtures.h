// Models for end-to-end tests, generated once per test run into the build's
// test-data folder: f32 and f16 from the generator ("small" size, so
// K-quants apply), quantized forms from the reference's own quantizer.
#pragma once

#include <fmt/format.h>

#include <filesystem>
#include <mutex>
#include <unistd.h>
#include <string>
#include <vector>

#include "samples/synthetic_model.h"
#include "tests/test_process.h"

namespace vtc::test {

// A prompt of real-looking ids that fits every generated vocabulary.
inline std::vector<int32_t> sample_prompt(const std::string&) {
  return {1, 450, 4996, 17354, 1701, 432, 29916, 975, 278, 17366, 11203, 29889, 13, 1576, 11203, 338,
          5714, 29892, 541, 278, 1701, 29916, 338, 4996, 29889};
}

// Path of the `arch` model in `type` (f32, f16, or a reference quant type),
// created on first use. Arch "llama3" is llama with a tied output head and
// llama3-style rope_freqs; "qwen2-yarn" is qwen2 with YaRN rope scaling
// (factor 4), "llama-linear" llama with linear scaling (factor 2) and
// "qwen3next-split" qwen3next with attn_qkv + attn_gate instead of ssm_in.
inline std::string model_path(const std::string& arch, const std::string& type) {
  static std::recursive_mutex mutex;  // quantized models recurse for their f32 source
  std::lock_guard<std::recursive_mutex> lock(mutex);
  const std::filesystem::path dir = std::filesystem::path(VTC_TEST_DATA_DIR) / "e2e";
  std::filesystem::create_directories(dir);
  auto path = (dir / fmt::format("{}-small-{}.gguf", arch, type)).string();
  if (std::filesystem::exists(path)) return path;
  // Per-process partial name: parallel ctest processes may build the same
  // model; each renames its own complete file into place.
  const std::string partial = fmt::format("{}.{}.partial", path, ::getpid());
  if (type == "f32" || type == "f16") {
    synth::Options o;
    o.arch = arch.substr(0, arch.find('-'));
    if (o.arch == "llama3") o.arch = "llama";
    o.tied_embeddings = o.rope_freqs = arch == "llama3";
    if (arch == "qwen2-yarn") o.rope_scaling = "yarn", o.rope_factor = 4.0f;
    if (arch == "llama-linear") o.rope_scaling = "linear", o.rope_factor = 2.0f;
    o.split_qkvz = arch == "qwen3next-split";
    o.size = "small";
    o.seed = 1234;
    o.weight_type = type == "f32" ? GgmlType::F32 : GgmlType::F16;
    o.vocab_path = synth::find_default_vocab(o.arch);
    synth::write_model(o, partial);
  } else {
    run_capture(fmt::format("{} quantize {} {} {}", VTC_REF_TOOL, model_path(arch, "f32"), partial, type));
  }
  std::filesystem::rename(partial, path);
  return path;
}

}  // namespace vtc::test
