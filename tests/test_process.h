// Running a helper program (vtc-ref, vtc) from a test and capturing stdout.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

namespace vtc::test {

// Runs `command` through the shell; returns its stdout. Throws if it
// cannot start or exits non-zero, so a broken harness fails the test.
inline std::string run_capture(const std::string& command) {
  std::FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run: " + command);
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  int status = pclose(pipe);
  if (status != 0) throw std::runtime_error("command failed (status " + std::to_string(status) + "): " + command);
  return out;
}

// A temp file path unique to this process: ctest runs test cases of one
// binary in parallel processes, so fixed names would collide.
inline std::string unique_temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("vtc_" + std::to_string(getpid()) + "_" + name)).string();
}

}  // namespace vtc::test
