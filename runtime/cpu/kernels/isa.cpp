// Run-time ISA selection for the CPU kernels.
#include <atomic>
#include <iterator>
#include <mutex>
#include <string>

#include <fmt/format.h>
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

constexpr const char* kIsaNames[] = {"scalar", "avx2", "avxvnni", "avx512vnni", "avx512bf16"};
static_assert(std::size(kIsaNames) == static_cast<size_t>(kLastIsa) + 1);

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

bool cpu_has_avx512vnni() {
#if defined(VTC_HAVE_AVX512_TU) && (defined(__x86_64__) || defined(__i386__))
  // __builtin_cpu_supports also checks that the OS saves the zmm state.
  return cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

bool cpu_has_avx512bf16() {
#if defined(VTC_HAVE_AVX512BF16_TU) && (defined(__x86_64__) || defined(__i386__))
  return cpu_has_avx512vnni() && __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

bool machine_supports(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return true;
    case Isa::Avx2: return cpu_has_avx2();
    case Isa::AvxVnni: return detail::cpu_has_avxvnni();
    case Isa::Avx512Vnni: return cpu_has_avx512vnni();
    case Isa::Avx512Bf16: return cpu_has_avx512bf16();
  }
  return false;
}

std::string supported_list() {
  std::string s;
  for (Isa isa : supported_isas()) s += fmt::format("{}{}", s.empty() ? "" : ", ", isa_name(isa));
  return s;
}

struct BestIsa {
  Isa isa = Isa::Scalar;
  bool forced = false;
};

BestIsa detect() {
  const BestIsa best{supported_isas().back(), false};  // scalar at least
  const char* env = std::getenv("VTC_CPU_ISA");
  if (env == nullptr || *env == '\0') return best;
  Isa wanted{};
  if (!isa_from_name(env, wanted))
    throw Error(fmt::format("VTC_CPU_ISA={}: unknown instruction set (one of scalar, avx2, avxvnni, avx512vnni, "
                            "avx512bf16)", env));
  if (!machine_supports(wanted))
    throw Error(fmt::format("VTC_CPU_ISA={}: this machine or build cannot run it (it runs: {})", env,
                            supported_list()));
  return {wanted, true};
}

const BestIsa& cached_best() {
  static const BestIsa best = detect();
  return best;
}

std::atomic<int> g_active{-1};

}  // namespace

const char* isa_name(Isa isa) {
  const auto i = static_cast<size_t>(isa);
  return i < std::size(kIsaNames) ? kIsaNames[i] : "unknown";
}

bool isa_from_name(const char* name, Isa& out) {
  for (size_t i = 0; i < std::size(kIsaNames); ++i)
    if (std::strcmp(name, kIsaNames[i]) == 0) {
      out = static_cast<Isa>(i);
      return true;
    }
  return false;
}

bool isa_supported(Isa isa) { return machine_supports(isa); }

std::vector<Isa> supported_isas() {
  std::vector<Isa> v;
  for (int i = 0; i <= static_cast<int>(kLastIsa); ++i)
    if (machine_supports(static_cast<Isa>(i))) v.push_back(static_cast<Isa>(i));
  return v;
}

Isa best_isa() { return cached_best().isa; }
bool isa_forced() { return cached_best().forced; }

Isa active_isa() {
  const int a = g_active.load(std::memory_order_relaxed);
  return a < 0 ? cached_best().isa : static_cast<Isa>(a);
}

void set_active_isa(Isa isa) {
  if (!machine_supports(isa))
    throw Error(fmt::format("cpu kernels: {} is not available on this machine or build (it runs: {})", isa_name(isa),
                            supported_list()));
  g_active.store(static_cast<int>(isa), std::memory_order_relaxed);
}

namespace detail {

#if !defined(VTC_HAVE_AVXVNNI_TU)
void add_avxvnni_kernels(QuantKernels&) {}
#endif
#if defined(VTC_HAVE_AVX512_TU)
void add_avx512_kernels(QuantKernels& t) {
  add_avx512_row_kernels(t);
  add_avx512_float_tiles(t);
  add_avx512_x8_kernels(t);
}
#else
void add_avx512_kernels(QuantKernels&) {}
#endif
#if !defined(VTC_HAVE_AVX512BF16_TU)
void add_avx512bf16_kernels(QuantKernels&) {}
#endif

bool cpu_has_avxvnni() {
#if defined(VTC_HAVE_AVXVNNI_TU) && (defined(__x86_64__) || defined(__i386__))
  static const bool has = [] {
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

int reference_vector_width() { return active_isa() == Isa::Scalar ? 0 : reference_lanes(); }

namespace {

// The table of each level: the one below it, with the level's kernels in
// their place (Isa's comment). AVX-512 starts from AVX-VNNI's table where
// the CPU has AVX-VNNI, else from AVX2's.
QuantKernels build_quant_kernels(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return scalar_quant_kernels();
    case Isa::Avx2: return *avx2_quant_kernels_novnni();
    case Isa::AvxVnni: {
      QuantKernels t = *avx2_quant_kernels_novnni();
      add_avxvnni_kernels(t);
      return t;
    }
    case Isa::Avx512Vnni: {
      QuantKernels t = build_quant_kernels(cpu_has_avxvnni() ? Isa::AvxVnni : Isa::Avx2);
      add_avx512_kernels(t);
      return t;
    }
    case Isa::Avx512Bf16: {
      QuantKernels t = build_quant_kernels(Isa::Avx512Vnni);
      add_avx512bf16_kernels(t);
      return t;
    }
  }
  return scalar_quant_kernels();
}

}  // namespace

const QuantKernels& quant_kernels(Isa isa) {
  // Built on first use, only for levels the machine runs (set_active_isa).
  static const QuantKernels* tables[static_cast<int>(kLastIsa) + 1] = {};
  static std::once_flag once[static_cast<int>(kLastIsa) + 1];
  const int i = static_cast<int>(isa);
  std::call_once(once[i], [&] { tables[i] = new QuantKernels(build_quant_kernels(isa)); });
  return *tables[i];
}

const QuantKernels& active_quant_kernels() { return quant_kernels(active_isa()); }

const FloatKernels& active_float_kernels() {
  if (active_isa() >= Isa::Avx2) return reference_lanes() == 16 ? *avx2_float_kernels_l16() : *avx2_float_kernels();
  return scalar_float_kernels();
}

}  // namespace detail
}  // namespace vtc::cpu
