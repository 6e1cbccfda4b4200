// libFuzzer harness for the .vtc artifact loader (runtime/compile/artifact.h):
// arbitrary bytes are written to a file and loaded, which parses the
// header and the JSON manifest, opens and checks the referenced or packed
// GGUF, parses and verifies the lowered IR, re-binds the states and
// validates every stored memory plan against that IR. An artifact that
// loads is then run: a CPU session takes a 3-token prefill and one decode
// step with the stored plans, so a plan that passed validation but would
// write out of bounds shows up under ASan. Any input either works or
// throws vtc::Error; a crash, a sanitizer report or another exception is a
// bug. Seed with a compiled tiny artifact (docs/fuzzing.md).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/compile/artifact.h"
#include "runtime/session.h"
#include "support/error.h"

namespace {

// Runs only artifacts whose arenas and states stay small, so a valid but
// huge plan (a bound raised to 2^20 is legal) does not trip the fuzzer's
// malloc limit.
constexpr uint64_t kMaxRunBytes = uint64_t(256) << 20;

std::string input_path() {
  static const std::string path = [] {
    std::filesystem::path dir = std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    dir /= "vtc-artifact-fuzz-" + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    return (dir / "input.vtc").string();
  }();
  return path;
}

bool small_enough(const vtc::CompiledModel& m) {
  for (const auto& p : m.plans)
    if (p.arena_bytes() > kMaxRunBytes) return false;
  for (const auto& s : m.module.states) {
    uint64_t row = 1;
    for (const auto& d : s.type.shape)
      if (auto c = d.constant()) {
        if (*c > int64_t(kMaxRunBytes)) return false;
        row *= uint64_t(*c);
        if (row > kMaxRunBytes) return false;
      }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = input_path();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  try {
    vtc::CompiledModel m = vtc::load_artifact(path);
    if (m.target != vtc::Target::Cpu || !small_enough(m)) return 0;
  } catch (const vtc::Error&) {
    return 0;
  }
  try {
    vtc::SessionOptions o;
    o.threads = 1;
    o.n_ctx = 32;
    o.max_step_tokens = 8;
    vtc::Session s(path, o);
    const std::vector<int32_t> prompt = {1, 2, 3};
    vtc::HostTensor logits = s.prefill(0, prompt, 0, /*all_logits=*/false);
    int32_t slot = 0, tok = 4, pos = 3;
    s.decode({&slot, 1}, {&tok, 1}, {&pos, 1});
    return logits.numel() > 0 ? 0 : 0;
  } catch (const vtc::Error&) {
    return 0;
  }
}
