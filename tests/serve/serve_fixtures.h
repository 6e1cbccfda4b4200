// Fixtures for the server tests: the tiny generated model, and a `vtc serve`
// child process on a free loopback port (--port 0; the port is read from
// the server's "listening on" line), stopped with SIGTERM.
#pragma once

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "samples/synthetic_model.h"
#include "tests/generated_model.h"
#include "tests/test_process.h"

namespace vtc::test {

// A generated tiny model of `arch` (`vtc gen-model --arch ARCH --size
// tiny --seed SEED`, 42 by default), written once into the test data folder.
inline std::string tiny_model_of(const std::string& arch, uint64_t seed = 42) {
  synth::Options o;
  o.arch = arch;
  o.size = "tiny";
  o.seed = seed;
  o.vocab_path = synth::find_default_vocab(o.arch);
  return generated_model("serve", seed == 42 ? fmt::format("tiny-{}.gguf", arch) : fmt::format("tiny-{}-seed{}.gguf", arch, seed), o);
}

// gemma2 in llama.cpp's test-llama-archs layout: a 128-id vocabulary and
// small weights, whose greedy output soon falls into a cycle, so n-gram
// drafts get accepted.
inline std::string cycling_gemma2() {
  synth::Options o;
  o.arch = "gemma2";
  o.llama_archs_layout = true;
  return generated_model("serve", "gemma2-cycling.gguf", o);
}

// The quick start's default model: tiny llama (512-token context), seed 42.
inline std::string tiny_model() { return tiny_model_of("llama"); }

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ServerProcess {
 public:
  explicit ServerProcess(const std::vector<std::string>& extra_args) : log_(unique_temp_path(fmt::format("serve_{}.log", counter()++))) {
    std::vector<std::string> args = {VTC_TOOL, "serve", tiny_model(), "--port", "0", "-t", "2"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      FILE* f = std::fopen(log_.c_str(), "w");
      if (f) dup2(fileno(f), 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    const std::regex listening("listening on http://[^:]+:(\\d+)");
    for (int i = 0; i < 600 && port_ == 0; ++i) {
      std::smatch m;
      const std::string text = slurp(log_);
      if (std::regex_search(text, m, listening)) port_ = std::stoi(m[1]);
      else std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (exited()) throw std::runtime_error("vtc serve exited early:\n" + slurp(log_));
    }
    if (port_ == 0) throw std::runtime_error("vtc serve did not start:\n" + slurp(log_));
  }
  ~ServerProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::remove(log_.c_str());
  }
  int port() const { return port_; }
  std::string url() const { return fmt::format("http://127.0.0.1:{}", port_); }
  std::string log() const { return slurp(log_); }
  // Sends `sig` and waits up to `timeout` for the exit; returns the exit
  // status (-1 when it did not exit in time, -2 when killed by a signal).
  int stop(int sig, std::chrono::seconds timeout) {
    kill(pid_, sig);
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  bool exited() {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) return reaped_ = true;
    return false;
  }
  std::string log_;
  pid_t pid_ = -1;
  int port_ = 0;
  bool reaped_ = false;
};

}  // namespace vtc::test
