// Running a helper program (vtc-ref, vtc) from a test and capturing stdout.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

namespace vtc::test {

inline std::string unique_temp_path(const std::string& name);

// Runs `command` through the shell; returns its stdout. Throws if it
// cannot start or exits non-zero, with the command's stderr in the message,
// so a broken harness fails the test and says why.
inline std::string run_capture(const std::string& command) {
  static int counter = 0;
  const std::string err_path = unique_temp_path("stderr_" + std::to_string(counter++) + ".txt");
  std::FILE* pipe = popen((command + " 2>" + err_path).c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run: " + command);
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  int status = pclose(pipe);
  std::string err;
  if (std::FILE* f = std::fopen(err_path.c_str(), "r")) {
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) err.append(buf, n);
    std::fclose(f);
  }
  std::remove(err_path.c_str());
  if (status != 0)
    throw std::runtime_error("command failed (status " + std::to_string(status) + "): " + command + "\nstderr:\n" +
                             err.substr(0, 4000));
  return out;
}

// A temp file path unique to this process: ctest runs test cases of one
// binary in parallel processes, so fixed names would collide.
inline std::string unique_temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("vtc_" + std::to_string(getpid()) + "_" + name)).string();
}

}  // namespace vtc::test
