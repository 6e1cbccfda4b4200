// The NVRTC entry points of the simulated device, exported from
// libvtc_cuda_sim.so next to the driver's.
//
// nvrtcCompileProgram compiles the same CUDA C++ text NVRTC would get with
// the host C++ compiler (VTC_CUDA_SIM_CXX, default the compiler vtc was
// built with), with kernel_host.h force-included, into a shared object.
// For every `extern "C" __global__` entry E it appends
//   vtc_sim_params_E   the parameters' sizes, pointer flags and names;
//   vtc_sim_run_E      runs one CUDA thread: E(*(T0*)p[0], *(T1*)p[1], ...).
// The "cubin" (and "PTX") it returns is that object behind a short header
// ("//VTCSIM1 <bytes>\n"), so the executor's kernel cache stores it by
// source hash like a real cubin. nvrtcVersion reports 0.<hash of the
// kernel headers and flags>, so a changed header never reuses a cached
// object. Compiler diagnostics are rewritten to NVRTC's
// "name.cu(LINE): error: ..." so the codegen's error excerpts still work.
#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/cuda/sim/memory.h"
#include "runtime/cuda/sim/profiler.h"

extern char** environ;

namespace vtc::cuda::sim {
extern const char kKernelAbiHeader[];
extern const char kKernelHostHeader[];
}  // namespace vtc::cuda::sim

using namespace vtc::cuda::sim;

namespace {

enum : int { kOk = 0, kOutOfMemory = 1, kInvalidInput = 3, kInvalidProgram = 4, kCompilation = 6 };

// Checked mode adds GCC's kernel-address instrumentation with a call per
// access (kernel_host.h defines the called functions; nothing of ASan's
// runtime is needed). Profile mode builds a second, instrumented variant
// that also counts special functions and dp4a (VTC_SIM_PROFILED); it runs
// only inside profile windows (profiler.h), the first variant elsewhere.
std::vector<std::string> flags_for(bool instrumented, bool profiled) {
  std::vector<std::string> f = {"-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
                                "-ffp-contract=off", "-fno-math-errno", "-w"};
  if (instrumented)
    for (const char* c : {"-DVTC_SIM_CHECKED", "-fsanitize=kernel-address", "-fsanitize-recover=kernel-address",
                          "--param=asan-instrumentation-with-call-threshold=0", "--param=asan-stack=0",
                          "--param=asan-globals=0"})
      f.push_back(c);
  if (profiled) f.push_back("-DVTC_SIM_PROFILED");
  return f;
}

const std::vector<std::string>& compile_flags() {
  static const std::vector<std::string> flags = flags_for(checked_mode(), false);
  return flags;
}

std::string compiler() {
  if (const char* e = std::getenv("VTC_CUDA_SIM_CXX"); e && *e) return e;
  return VTC_SIM_DEFAULT_CXX;
}

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

struct Program {
  std::string source, name, log, image;
};

struct Param {
  std::string type, name;
};
struct Entry {
  std::string name;
  std::vector<Param> params;
};

// `extern "C" __global__ void [__launch_bounds__(N)] NAME(T a, U b, ...)`.
std::vector<Entry> find_entries(const std::string& src) {
  static const std::regex entry_re(R"(extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(([^)]*)\))");
  std::vector<Entry> out;
  for (std::sregex_iterator it(src.begin(), src.end(), entry_re), end; it != end; ++it) {
    Entry e{(*it)[1].str(), {}};
    std::stringstream list((*it)[2].str());
    for (std::string p; std::getline(list, p, ',');) {
      while (!p.empty() && std::isspace(static_cast<unsigned char>(p.back()))) p.pop_back();
      size_t cut = p.size();
      while (cut > 0 && (std::isalnum(static_cast<unsigned char>(p[cut - 1])) || p[cut - 1] == '_')) --cut;
      if (cut == p.size()) continue;  // `void` or an unnamed parameter
      e.params.push_back({p.substr(0, cut), p.substr(cut)});
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::string trampolines(const std::vector<Entry>& entries) {
  std::string out = "\n// --- simulated device: launch trampolines ---\n";
  for (const auto& e : entries) {
    std::string sizes, pointers, names, args;
    for (size_t i = 0; i < e.params.size(); ++i) {
      const auto& p = e.params[i];
      const char* sep = i ? ", " : "";
      sizes += fmt::format("{}sizeof({})", sep, p.type);
      pointers += fmt::format("{}{}", sep, p.type.find('*') != std::string::npos ? 1 : 0);
      names += fmt::format("{}\"{}\"", sep, p.name);
      args += fmt::format("{}*({}*)p[{}]", sep, p.type, i);
    }
    const size_t n = e.params.size();
    out += fmt::format("static const unsigned vtc_sim_sizes_{0}[] = {{{1}0}};\n", e.name, n ? sizes + ", " : "");
    out += fmt::format("static const int vtc_sim_pointers_{0}[] = {{{1}0}};\n", e.name, n ? pointers + ", " : "");
    out += fmt::format("static const char* const vtc_sim_names_{0}[] = {{{1}0}};\n", e.name, n ? names + ", " : "");
    out += fmt::format("VTC_SIM_EXPORT const VtcSimParams vtc_sim_params_{0} = {{{1}, vtc_sim_sizes_{0}, vtc_sim_pointers_{0}, "
                       "vtc_sim_names_{0}}};\n",
                       e.name, n);
    out += fmt::format("VTC_SIM_EXPORT VTC_SIM_UNCHECKED void vtc_sim_run_{0}(void** p, const VtcSimThread* t) {{ (void)p; vtc_sim_self = t; "
                       "{0}({1}); }}\n",
                       e.name, args);
  }
  return out;
}

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// "dir/NAME:LINE:COL: error: msg" -> "NAME(LINE): error: msg".
std::string nvrtc_style_log(const std::string& log, const std::string& name) {
  static const std::regex diag(R"(([^\s:]+):(\d+):\d+: (error|warning|note):)");
  std::string out;
  std::stringstream in(log);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, diag) && std::filesystem::path(m[1].str()).filename() == name)
      line = fmt::format("{}({}): {}:{}", name, m[2].str(), m[3].str(), m.suffix().str());
    out += line + "\n";
  }
  return out;
}

// Runs the compiler; returns its exit status, its output in *log.
int run_compiler(const std::vector<std::string>& argv, const std::filesystem::path& log_path, std::string* log) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    *log = fmt::format("cannot run the host compiler {}: {} (set VTC_CUDA_SIM_CXX)", argv[0], std::strerror(rc));
    return -1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  *log = read_all(log_path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int compile(Program& p) {
  const std::vector<Entry> entries = find_entries(p.source);
  if (entries.empty()) {
    p.log = p.name + ": no extern \"C\" __global__ entry found (the simulated device launches only those)";
    return kCompilation;
  }
  const char* tmp = std::getenv("TMPDIR");
  const std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/vtc-sim-nvrtc-XXXXXX";
  std::vector<char> dir_buf(templ.begin(), templ.end());
  dir_buf.push_back('\0');
  if (!mkdtemp(dir_buf.data())) {
    p.log = fmt::format("cannot create a temporary directory like {} for the host compiler: {}", templ, std::strerror(errno));
    return kCompilation;
  }
  const std::filesystem::path dir(dir_buf.data());
  const std::string name = p.name.empty() ? "kernel.cu" : std::filesystem::path(p.name).filename().string();
  std::ofstream(dir / "kernel_abi.h") << kKernelAbiHeader;
  std::ofstream(dir / "kernel_host.h") << kKernelHostHeader;
  std::ofstream(dir / name) << p.source << trampolines(entries);
  // One object per variant; the image is their framed concatenation.
  auto build = [&](const std::vector<std::string>& flags, std::string* log) {
    std::vector<std::string> argv = {compiler()};
    for (const auto& f : flags) argv.push_back(f);
    for (const std::string& a : {std::string("-I") + dir.string(), std::string("-include"),
                                 (dir / "kernel_host.h").string(), std::string("-x"), std::string("c++"),
                                 (dir / name).string(), std::string("-o"), (dir / "kernel.so").string()})
      argv.push_back(a);
    const int status = run_compiler(argv, dir / "compile.log", log);
    if (status == 0) {
      const std::string object = read_all(dir / "kernel.so");
      p.image += fmt::format("//VTCSIM1 {}\n", object.size()) + object + "\n";
    }
    return status;
  };
  std::string log;
  int status = build(compile_flags(), &log);
  if (status == 0 && profile_mode()) status = build(flags_for(true, true), &log);
  p.log = nvrtc_style_log(log, name);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return status == 0 ? kOk : kCompilation;
}

}  // namespace

#define VTC_SIM_API extern "C" __attribute__((visibility("default")))

VTC_SIM_API int nvrtcVersion(int* major, int* minor) {
  std::string key = std::string(kKernelAbiHeader) + kKernelHostHeader;
  for (const auto& f : compile_flags()) key += f;
  if (profile_mode()) key += "+profiled";
  *major = 0;
  *minor = int(fnv1a(key) % 1000000);
  return kOk;
}
VTC_SIM_API int nvrtcCreateProgram(void** prog, const char* src, const char* name, int, const char* const*,
                                   const char* const*) {
  if (!prog || !src) return kInvalidInput;
  *prog = new Program{src, name ? name : "", "", ""};
  return kOk;
}
VTC_SIM_API int nvrtcCompileProgram(void* prog, int, const char* const*) {
  if (!prog) return kInvalidProgram;
  return compile(*static_cast<Program*>(prog));
}
VTC_SIM_API int nvrtcGetProgramLogSize(void* prog, size_t* size) {
  *size = static_cast<Program*>(prog)->log.size() + 1;
  return kOk;
}
VTC_SIM_API int nvrtcGetProgramLog(void* prog, char* log) {
  const std::string& l = static_cast<Program*>(prog)->log;
  std::memcpy(log, l.c_str(), l.size() + 1);
  return kOk;
}
VTC_SIM_API int nvrtcGetPTXSize(void* prog, size_t* size) {
  *size = static_cast<Program*>(prog)->image.size();
  return kOk;
}
VTC_SIM_API int nvrtcGetPTX(void* prog, char* out) {
  const std::string& i = static_cast<Program*>(prog)->image;
  std::memcpy(out, i.data(), i.size());
  return kOk;
}
VTC_SIM_API int nvrtcGetCUBINSize(void* prog, size_t* size) { return nvrtcGetPTXSize(prog, size); }
VTC_SIM_API int nvrtcGetCUBIN(void* prog, char* out) { return nvrtcGetPTX(prog, out); }
VTC_SIM_API int nvrtcDestroyProgram(void** prog) {
  if (prog) {
    delete static_cast<Program*>(*prog);
    *prog = nullptr;
  }
  return kOk;
}
VTC_SIM_API const char* nvrtcGetErrorString(int rc) {
  switch (rc) {
    case kOk: return "NVRTC_SUCCESS";
    case kOutOfMemory: return "NVRTC_ERROR_OUT_OF_MEMORY";
    case kInvalidInput: return "NVRTC_ERROR_INVALID_INPUT";
    case kInvalidProgram: return "NVRTC_ERROR_INVALID_PROGRAM";
    case kCompilation: return "NVRTC_ERROR_COMPILATION";
    default: return "NVRTC_ERROR (simulated)";
  }
}
