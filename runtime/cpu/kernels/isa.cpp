// Run-time ISA selection for the CPU kernels.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "runtime/cpu/kernels/internal.h"
#include "runtime/cpu/kernels/kernels.h"
#include "support/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace vtc::cpu {

namespace {

bool cpu_has_avx2() {
#if defined(VTC_HAVE_AVX2_TU) && (defined(__x86_64__) || defined(__i386__))
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool f16c = (c & (1u << 29)) != 0;
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
#else
  return false;
#endif
}

Isa detect() {
  Isa best = cpu_has_avx2() ? Isa::Avx2 : Isa::Scalar;
  if (const char* env = std::getenv("VTC_CPU_ISA"); env != nullptr && std::strcmp(env, "scalar") == 0)
    best = Isa::Scalar;
  return best;
}

Isa cached_best() {
  static const Isa best = detect();
  return best;
}

std::atomic<int> g_active{-1};

}  // namespace

const char* isa_name(Isa isa) { return isa == Isa::Avx2 ? "avx2" : "scalar"; }

Isa best_isa() { return cached_best(); }

Isa active_isa() {
  const int a = g_active.load(std::memory_order_relaxed);
  return a < 0 ? cached_best() : static_cast<Isa>(a);
}

void set_active_isa(Isa isa) {
  if (isa == Isa::Avx2 && !cpu_has_avx2())
    throw Error("cpu kernels: AVX2 (with FMA and F16C) is not available on this machine or build");
  g_active.store(static_cast<int>(isa), std::memory_order_relaxed);
}

namespace detail {

#if !defined(VTC_HAVE_AVXVNNI_TU)
GemmKernels avxvnni_gemm_q8_0() { return GemmKernels{}; }
#endif

bool cpu_has_avxvnni() {
#if defined(VTC_HAVE_AVXVNNI_TU) && (defined(__x86_64__) || defined(__i386__))
  static const bool has = [] {
    if (const char* env = std::getenv("VTC_CPU_VNNI"); env != nullptr && std::strcmp(env, "0") == 0) return false;
    if (!cpu_has_avx2()) return false;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_max(0, nullptr) < 7) return false;
    __cpuid_count(7, 1, a, b, c, d);
    return (a & (1u << 4)) != 0;  // CPUID.(EAX=7,ECX=1):EAX[4] = AVX-VNNI
  }();
  return has;
#else
  return false;
#endif
}

#if !defined(VTC_HAVE_AVX2_TU)
const QuantKernels* avx2_quant_kernels() { return nullptr; }
const QuantKernels* avx2_quant_kernels_novnni() { return nullptr; }
const FloatKernels* avx2_float_kernels() { return nullptr; }
const FloatKernels* avx2_float_kernels_l16() { return nullptr; }
#endif

int reference_lanes() {
  static const int lanes = [] {
    if (const char* env = std::getenv("VTC_CPU_REF_LANES"); env != nullptr && *env != '\0')
      return std::strcmp(env, "16") == 0 ? 16 : 8;
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_supports("avx512f") ? 16 : 8;
#else
    return 8;
#endif
  }();
  return lanes;
}

const QuantKernels& active_quant_kernels() {
  if (active_isa() == Isa::Avx2) return *avx2_quant_kernels();
  return scalar_quant_kernels();
}

const FloatKernels& active_float_kernels() {
  if (active_isa() == Isa::Avx2) return reference_lanes() == 16 ? *avx2_float_kernels_l16() : *avx2_float_kernels();
  return scalar_float_kernels();
}

}  // namespace detail
}  // namespace vtc::cpu
