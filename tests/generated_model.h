// A generated model written once into the test data folder, shared by
// the tests that need the same file.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <string>

#include "samples/synthetic_model.h"

namespace vtc::test {

// The generated model `o` at VTC_TEST_DATA_DIR/`folder`/`name`, written
// once (under a per-process partial name, so parallel tests may race).
inline std::string generated_model(const std::string& folder, const std::string& name, const synth::Options& o) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  const auto dir = std::filesystem::path(VTC_TEST_DATA_DIR) / folder;
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  if (std::filesystem::exists(path)) return path;
  const std::string partial = path + fmt::format(".{}.partial", getpid());
  synth::write_model(o, partial);
  std::filesystem::rename(partial, path);
  return path;
}

}  // namespace vtc::test
