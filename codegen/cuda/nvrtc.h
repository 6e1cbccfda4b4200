// NVRTC, loaded at run time: compiles generated kernels to PTX or cubin, with
// a disk cache.
//
// libnvrtc is dlopen'ed (VTC_NVRTC_LIBRARY, then libnvrtc.so.13/.12/.so on
// the loader path, then /usr/local/cuda/lib64; with VTC_CUDA_DEVICE=sim the
// simulated device's NVRTC, which compiles for it with the host compiler),
// so a vtc binary built on a
// machine without CUDA still runs and reports the cuda target unavailable.
// No header of the toolkit is needed: kernels include nothing (their
// prelude defines what they use) and the few NVRTC entry points are declared
// here by their C ABI.
//
// Cache: <dir>/<entry>-<key>.<ptx|cubin>, key = FNV-1a 64 over (source,
// target, arch, NVRTC version). <dir> is $VTC_KERNEL_CACHE, else
// $XDG_CACHE_HOME/vtc/kernels, else ~/.cache/vtc/kernels. Files are written
// to a temporary name and renamed, so concurrent processes never read a
// partial file. VTC_KERNEL_CACHE=off disables the cache.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/cuda/kernel.h"

namespace vtc::cuda {

enum class CodeKind { Ptx, Cubin };

struct CompiledKernel {
  std::string entry;
  std::string image;        // PTX text or cubin bytes
  bool from_cache = false;
  double compile_ms = 0;
};

class Nvrtc {
 public:
  // Loads libnvrtc; returns null and sets *why when it is absent.
  static std::unique_ptr<Nvrtc> load(std::string* why);
  ~Nvrtc();

  std::string version() const;  // "13.0"
  // Compiles one kernel for sm_<arch> (e.g. 90). Throws vtc::Error on a
  // compile error: the message names the kernel, quotes NVRTC's log and
  // prints each offending line of the generated source with its number.
  CompiledKernel compile(const Kernel& kernel, int arch, CodeKind kind);

  struct Api;

 private:
  explicit Nvrtc(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
};

// The cache directory ("" when disabled).
std::string kernel_cache_dir();

// "NN:  source line" for lines [line-ctx, line+ctx] of `source`.
std::string source_excerpt(const std::string& source, int line, int context);

}  // namespace vtc::cuda
