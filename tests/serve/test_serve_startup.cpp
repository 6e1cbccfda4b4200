// Start-up failures end the process (issue 27): every failure between
// `vtc serve` starting and the server being ready, and SIGTERM during a
// load, must end it within 2 s with exit code 1 and one line naming the
// cause. `vtc run` and `vtc bench` fail the same way on `--target cuda`
// without a GPU. Each case runs 20 times: the bug this guards against (a
// listener stopped before it started, so nothing woke it) hung one run in
// five on some inputs.
//
// A run that does not exit is killed after kHangLimit and fails the case
// as a hang: the test never waits on a stuck child for ever.
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "samples/synthetic_model.h"
#include "tests/serve/serve_fixtures.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using vtc::test::slurp;

constexpr int kRuns = 20;
constexpr double kExitLimitS = 2.0;   // the bound on every start-up failure
constexpr double kHangLimitS = 15.0;  // past this a run is a hang: killed, and the case fails

struct Outcome {
  int exit_code = -1;  // -1: killed as a hang; -2: died of a signal
  double seconds = 0;  // from start (or from the signal, when one was sent) to exit
  std::string stderr_text;
};

// Runs `vtc ARGS...` with extra environment entries. When `signal_after` is
// given, sends SIGTERM once stderr contains it and times the exit from then.
Outcome run_vtc(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                const std::string& signal_after = "") {
  const std::string log = vtc::test::unique_temp_path("startup_stderr.txt");
  const auto start = Clock::now();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) dup2(fd, 2);
    const int null_fd = ::open("/dev/null", O_WRONLY);
    if (null_fd >= 0) dup2(null_fd, 1);
    for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
    std::vector<std::string> full = {VTC_TOOL};
    full.insert(full.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : full) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  Outcome out;
  auto timed_from = start;
  bool signalled = signal_after.empty();
  for (;;) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -2;
      break;
    }
    if (!signalled && slurp(log).find(signal_after) != std::string::npos) {
      kill(pid, SIGTERM);
      timed_from = Clock::now();
      signalled = true;
    }
    if (std::chrono::duration<double>(Clock::now() - start).count() > kHangLimitS) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      out.exit_code = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  out.seconds = std::chrono::duration<double>(Clock::now() - timed_from).count();
  out.stderr_text = slurp(log);
  std::remove(log.c_str());
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    if (end > at) lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return lines;
}

// Exit code 1 within the limit, and exactly one error line, the last one,
// naming the cause (`reason`, a substring).
void check_start_failure(const Outcome& o, const std::string& reason) {
  INFO("stderr:\n" << o.stderr_text);
  INFO("exit code " << o.exit_code << " after " << o.seconds << " s");
  REQUIRE(o.exit_code != -1);  // -1: still running after the hang limit
  CHECK(o.exit_code == 1);
  CHECK(o.seconds < kExitLimitS);
  const std::vector<std::string> lines = lines_of(o.stderr_text);
  REQUIRE_FALSE(lines.empty());
  int error_lines = 0;
  for (const std::string& l : lines) error_lines += l.find("error") != std::string::npos;
  CHECK(error_lines == 1);
  CHECK(lines.back().rfind("vtc: error: ", 0) == 0);
  CHECK(lines.back().find(reason) != std::string::npos);
}

void repeat(const std::vector<std::string>& args, const std::string& reason, const std::vector<std::string>& env = {}) {
  double worst = 0;
  for (int i = 0; i < kRuns; ++i) {
    INFO("run " << i + 1 << " of " << kRuns);
    const Outcome o = run_vtc(args, env);
    worst = std::max(worst, o.seconds);
    check_start_failure(o, reason);
  }
  WARN(fmt::format("{}: {} runs, slowest exit {:.3f} s", args[0], kRuns, worst));
}

std::string scratch(const std::string& name) {
  const fs::path dir = fs::path(VTC_TEST_DATA_DIR) / "serve-startup";
  fs::create_directories(dir);
  return (dir / name).string();
}

// The tiny model cut to half its bytes: the tensor data runs past the end.
std::string truncated_model() {
  const std::string path = scratch("truncated.gguf");
  const std::string whole = slurp(vtc::test::tiny_model());
  std::ofstream(path, std::ios::binary).write(whole.data(), std::streamsize(whole.size() / 2));
  return path;
}

// The tiny model with general.architecture "llama" rewritten to "llamx":
// a well-formed file of an architecture vtc does not know.
std::string unknown_architecture_model() {
  const std::string path = scratch("unknown-arch.gguf");
  std::string bytes = slurp(vtc::test::tiny_model());
  const size_t key = bytes.find("general.architecture");
  REQUIRE(key != std::string::npos);
  // key, then the value's type (u32) and length (u64), then the text.
  const size_t value = key + std::string("general.architecture").size() + 4 + 8;
  REQUIRE(bytes.compare(value, 5, "llama") == 0);
  bytes[value + 4] = 'x';
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  return path;
}

// A loopback port held by a socket of this process.
struct HeldPort {
  int fd = -1, port = 0;
  HeldPort() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 4) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~HeldPort() { ::close(fd); }
};

// No CUDA driver, on any machine: the driver library is named by a path
// that does not exist.
const std::vector<std::string> kNoCudaDriver = {"VTC_CUDA_LIBRARY=/nonexistent/libcuda.so.1"};

}  // namespace

TEST_CASE("serve: --target cuda without a GPU exits 1 within 2 s", "[serve][startup][reference]") {
  repeat({"serve", vtc::test::tiny_model(), "--port", "0", "--target", "cuda"}, "CUDA", kNoCudaDriver);
}

TEST_CASE("serve: a truncated GGUF exits 1 within 2 s", "[serve][startup][reference]") {
  repeat({"serve", truncated_model(), "--port", "0"}, "truncated.gguf");
}

TEST_CASE("serve: a GGUF of an unknown architecture exits 1 within 2 s", "[serve][startup][reference]") {
  repeat({"serve", unknown_architecture_model(), "--port", "0"}, "llamx");
}

TEST_CASE("serve: a chat template that does not parse exits 1 within 2 s", "[serve][startup][reference]") {
  repeat({"serve", vtc::test::tiny_model(), "--port", "0", "--chat-template", "{% if messages %}{{ messages[0] }"},
         "template");
}

TEST_CASE("serve: a port already in use exits 1 within 2 s", "[serve][startup][reference]") {
  HeldPort held;
  repeat({"serve", vtc::test::tiny_model(), "--port", std::to_string(held.port)}, "already in use");
}

TEST_CASE("run and bench: --target cuda without a GPU exit 1 within 2 s", "[serve][startup][reference]") {
  repeat({"run", vtc::test::tiny_model(), "-p", "hi", "-n", "2", "--target", "cuda"}, "CUDA", kNoCudaDriver);
  repeat({"bench", vtc::test::tiny_model(), "-p", "8", "-n", "2", "--target", "cuda"}, "CUDA", kNoCudaDriver);
}

TEST_CASE("serve: SIGTERM while a 0.5b model loads exits within 2 s", "[serve][startup][reference]") {
  const std::string model = scratch("llama-0.5b-f16.gguf");
  if (!fs::exists(model)) {
    vtc::synth::Options o;
    o.arch = "llama";
    o.size = "0.5b";
    o.weight_type = vtc::GgmlType::F16;
    o.vocab_path = vtc::synth::find_default_vocab(o.arch);
    const std::string partial = model + fmt::format(".{}.partial", getpid());
    vtc::synth::write_model(o, partial);
    fs::rename(partial, model);
  }
  double worst = 0;
  for (int i = 0; i < kRuns; ++i) {
    INFO("run " << i + 1 << " of " << kRuns);
    const Outcome o = run_vtc({"serve", model, "--port", "0"}, {}, "listening on");
    INFO("stderr:\n" << o.stderr_text);
    // The load must still have been under way when the signal came.
    REQUIRE(o.stderr_text.find("serve: ready") == std::string::npos);
    worst = std::max(worst, o.seconds);
    check_start_failure(o, "SIGTERM received while loading");
  }
  WARN(fmt::format("SIGTERM during a 0.5b load: {} runs, slowest exit {:.3f} s after the signal", kRuns, worst));
}

// A refusal that needs no model comes before the port opens (no
// "listening on"), so nothing ever answers on it.
TEST_CASE("serve: --draft-on device on the cpu target exits 1 before the port opens", "[serve][startup][reference]") {
  const Outcome o =
      run_vtc({"serve", vtc::test::tiny_model(), "--port", "0", "--spec", "ngram", "--draft-on", "device"}, {});
  check_start_failure(o, "--draft-on device: the cpu target drafts on the host");
  CHECK(o.stderr_text.find("listening on") == std::string::npos);
}
