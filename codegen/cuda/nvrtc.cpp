// NVRTC loader, compile driver and disk cache (see nvrtc.h).
#include "codegen/cuda/nvrtc.h"


#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "codegen/cuda/sim_device.h"
#include "support/error.h"
#include "support/dynlib.h"
#include "support/hash.h"

namespace vtc::cuda {

// The C ABI of the NVRTC entry points vtc uses (nvrtc.h of CUDA 11-13).
struct Nvrtc::Api {
  using Prog = void*;
  void* handle = nullptr;
  int (*version)(int*, int*) = nullptr;
  int (*create)(Prog*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*compile)(Prog, int, const char* const*) = nullptr;
  int (*log_size)(Prog, size_t*) = nullptr;
  int (*log)(Prog, char*) = nullptr;
  int (*ptx_size)(Prog, size_t*) = nullptr;
  int (*ptx)(Prog, char*) = nullptr;
  int (*cubin_size)(Prog, size_t*) = nullptr;
  int (*cubin)(Prog, char*) = nullptr;
  int (*destroy)(Prog*) = nullptr;
  const char* (*error_string)(int) = nullptr;
  ~Api() {
    if (handle) dlclose(handle);
  }
};

namespace {

using vtc::bind_symbol;

}  // namespace

std::unique_ptr<Nvrtc> Nvrtc::load(std::string* why) {
  std::vector<std::string> names;
  std::string choice_error;
  switch (device_choice(&choice_error)) {
    case DeviceChoice::Invalid:
      if (why) *why = choice_error;
      return nullptr;
    case DeviceChoice::Simulated:
      names.push_back(simulated_device_library());  // its NVRTC compiles for the simulated device only
      break;
    case DeviceChoice::Hardware:
      if (const char* env = std::getenv("VTC_NVRTC_LIBRARY"); env && *env) names.push_back(env);
      for (const char* n : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so.13",
                            "/usr/local/cuda/lib64/libnvrtc.so.12", "/usr/local/cuda/lib64/libnvrtc.so"})
        names.push_back(n);
  }
  auto api = std::make_unique<Api>();
  std::string tried;
  for (const auto& n : names) {
    api->handle = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api->handle) break;
    tried += (tried.empty() ? "" : ", ") + n;
  }
  if (!api->handle) {
    if (why) *why = "libnvrtc not found (tried " + tried + "); install the CUDA toolkit or set VTC_NVRTC_LIBRARY";
    return nullptr;
  }
  void* h = api->handle;
  bool ok = bind_symbol(h, "nvrtcVersion", api->version) && bind_symbol(h, "nvrtcCreateProgram", api->create) &&
            bind_symbol(h, "nvrtcCompileProgram", api->compile) && bind_symbol(h, "nvrtcGetProgramLogSize", api->log_size) &&
            bind_symbol(h, "nvrtcGetProgramLog", api->log) && bind_symbol(h, "nvrtcGetPTXSize", api->ptx_size) &&
            bind_symbol(h, "nvrtcGetPTX", api->ptx) && bind_symbol(h, "nvrtcDestroyProgram", api->destroy) &&
            bind_symbol(h, "nvrtcGetErrorString", api->error_string);
  bind_symbol(h, "nvrtcGetCUBINSize", api->cubin_size);  // optional: CUDA >= 11.1
  bind_symbol(h, "nvrtcGetCUBIN", api->cubin);
  if (!ok) {
    if (why) *why = "libnvrtc lacks an expected entry point (too old?)";
    return nullptr;
  }
  return std::unique_ptr<Nvrtc>(new Nvrtc(std::move(api)));
}

Nvrtc::Nvrtc(std::unique_ptr<Api> api) : api_(std::move(api)) {}
Nvrtc::~Nvrtc() = default;

std::string Nvrtc::version() const {
  int major = 0, minor = 0;
  api_->version(&major, &minor);
  return fmt::format("{}.{}", major, minor);
}

std::string kernel_cache_dir() {
  if (const char* env = std::getenv("VTC_KERNEL_CACHE"); env && *env) return std::string(env) == "off" ? "" : env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/vtc/kernels";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/vtc/kernels";
  return "";
}

std::string source_excerpt(const std::string& source, int line, int context) {
  std::istringstream in(source);
  std::string text, out;
  for (int n = 1; std::getline(in, text); ++n)
    if (n >= line - context && n <= line + context) out += fmt::format("{}{:5}: {}\n", n == line ? ">" : " ", n, text);
  return out;
}

namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_atomically(const std::filesystem::path& p, const std::string& bytes) {
  std::error_code ec;
  std::filesystem::create_directories(p.parent_path(), ec);
  if (ec) return;  // an unwritable cache is not an error: compile again next time
  const auto tmp = p.string() + fmt::format(".tmp{}", getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    if (!out) return;
  }
  std::filesystem::rename(tmp, p, ec);
}

// NVRTC log lines look like "name.cu(LINE): error: ...".
std::string explain_log(const Kernel& k, const std::string& log) {
  std::string out = fmt::format("cuda codegen: NVRTC failed to compile kernel {} ({}):\n{}", k.entry, k.what, log);
  const std::regex line_re(R"(\((\d+)\): (error|warning))");
  int shown = 0;
  for (std::sregex_iterator it(log.begin(), log.end(), line_re), end; it != end && shown < 5; ++it, ++shown) {
    const int line = std::stoi((*it)[1].str());
    out += fmt::format("\ngenerated source around line {} of {}.cu:\n{}", line, k.entry, source_excerpt(k.source, line, 2));
  }
  return out;
}

}  // namespace

CompiledKernel Nvrtc::compile(const Kernel& k, int arch, CodeKind kind) {
  const bool cubin = kind == CodeKind::Cubin;
  if (cubin && !api_->cubin) throw Error("cuda: this libnvrtc cannot produce cubin");
  const std::string arch_opt = fmt::format("--gpu-architecture={}_{}", cubin ? "sm" : "compute", arch);
  const uint64_t key = fnv1a64(arch_opt + version(), fnv1a64(k.source));
  const std::string dir = kernel_cache_dir();
  const std::filesystem::path cached =
      dir.empty() ? std::filesystem::path() : std::filesystem::path(dir) / fmt::format("{}-{:016x}.{}", k.entry, key, cubin ? "cubin" : "ptx");
  CompiledKernel out{k.entry, "", false, 0};
  if (!dir.empty() && std::filesystem::exists(cached)) {
    out.image = read_file(cached);
    if (!out.image.empty()) {
      out.from_cache = true;
      return out;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  Api::Prog prog = nullptr;
  const std::string name = k.entry + ".cu";
  if (int rc = api_->create(&prog, k.source.c_str(), name.c_str(), 0, nullptr, nullptr); rc != 0)
    throw Error(fmt::format("cuda: nvrtcCreateProgram failed for {}: {}", k.entry, api_->error_string(rc)));
  const char* opts[] = {arch_opt.c_str(), "--std=c++17", "-lineinfo"};
  const int rc = api_->compile(prog, int(std::size(opts)), opts);
  size_t log_size = 0;
  api_->log_size(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size) api_->log(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (rc != 0) {
    api_->destroy(&prog);
    throw Error(explain_log(k, log));
  }
  size_t size = 0;
  (cubin ? api_->cubin_size : api_->ptx_size)(prog, &size);
  out.image.resize(size);
  (cubin ? api_->cubin : api_->ptx)(prog, out.image.data());
  api_->destroy(&prog);
  if (!cubin) while (!out.image.empty() && out.image.back() == '\0') out.image.pop_back();
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!dir.empty()) write_atomically(cached, out.image);
  return out;
}

}  // namespace vtc::cuda
