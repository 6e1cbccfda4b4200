// Binding C functions from a library opened with dlopen (libnvrtc and
// libcuda are loaded at run time so one vtc binary runs without CUDA).
#pragma once

#include <dlfcn.h>

namespace vtc {

// Sets `fn` to the symbol `name` of `handle`; false if it is missing.
template <typename F>
bool bind_symbol(void* handle, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(handle, name));
  return fn != nullptr;
}

}  // namespace vtc
