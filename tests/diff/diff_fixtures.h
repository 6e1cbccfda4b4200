// Tiny models for the diff tests, generated once into the build's test-data
// folder (f32, the generator's "tiny" size: 2 layers, n_embd 64, a real
// vocabulary from the reference cache, so these cases are tagged
// [reference]), plus helpers to run the vtc binary.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "samples/synthetic_model.h"
#include "tests/test_process.h"

namespace vtc::test {

inline std::string tiny_model(const std::string& arch, const std::string& size = "tiny") {
  const std::filesystem::path dir = std::filesystem::path(VTC_TEST_DATA_DIR) / "diff";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / fmt::format("{}-{}-f32.gguf", arch, size)).string();
  if (std::filesystem::exists(path)) return path;
  synth::Options o;
  o.arch = arch;
  o.size = size;
  o.seed = 77;
  o.vocab_path = synth::find_default_vocab(arch);
  // ctest runs cases in parallel processes: write privately, publish by rename.
  const std::string partial = fmt::format("{}.{}.partial", path, getpid());
  synth::write_model(o, partial);
  std::filesystem::rename(partial, path);
  return path;
}

inline const std::vector<int32_t>& diff_prompt() {
  static const std::vector<int32_t> ids = {1, 450, 4996, 17354, 1701, 432, 29916, 975, 278};
  return ids;
}

// Runs a shell command; returns stdout+stderr and the exit status.
struct Outcome {
  std::string text;
  int status = -1;
};
inline Outcome run_status(const std::string& command) {
  const std::string out = run_capture(fmt::format("({}) 2>&1; echo \"exit=$?\"", command));
  const size_t at = out.rfind("exit=");
  return {out.substr(0, at), std::stoi(out.substr(at + 5))};
}

}  // namespace vtc::test
