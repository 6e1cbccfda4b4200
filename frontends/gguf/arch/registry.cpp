// The dispatch from general.architecture to the architecture's builder,
// generated from architectures.def.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string_view>
#include <utility>

#include "frontends/gguf/arch/arch.h"
#include "support/error.h"

namespace vtc::arch {

// Each builder is defined in its own file of arch/.
#define VTC_ARCH(name, builder) ir::Module builder(const gguf::GgufFile& f, const BuildOptions& o);
#define VTC_ARCH_OUT_OF_SCOPE(name, why)
#include "frontends/gguf/arch/architectures.def"
#undef VTC_ARCH_OUT_OF_SCOPE
#undef VTC_ARCH

namespace {

using BuildFn = ir::Module (*)(const gguf::GgufFile&, const BuildOptions&);

const std::vector<std::pair<std::string, BuildFn>>& builders() {
  static const std::vector<std::pair<std::string, BuildFn>> table = {
#define VTC_ARCH(name, builder) {name, builder},
#define VTC_ARCH_OUT_OF_SCOPE(name, why)
#include "frontends/gguf/arch/architectures.def"
#undef VTC_ARCH_OUT_OF_SCOPE
#undef VTC_ARCH
  };
  return table;
}

// The architectures refused by design, with the reason.
const std::vector<std::pair<std::string_view, std::string_view>>& out_of_scope() {
  static const std::vector<std::pair<std::string_view, std::string_view>> table = {
#define VTC_ARCH(name, builder)
#define VTC_ARCH_OUT_OF_SCOPE(name, why) {name, why},
#include "frontends/gguf/arch/architectures.def"
#undef VTC_ARCH_OUT_OF_SCOPE
#undef VTC_ARCH
  };
  return table;
}

}  // namespace

std::vector<std::string> known_architectures() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : builders()) names.push_back(name);
  return names;
}

ir::Module build_module(const gguf::GgufFile& f, const BuildOptions& o) {
  const std::string arch = f.architecture();
  for (const auto& [name, fn] : builders())
    if (name == arch) {
      ir::Module m = fn(f, o);
      apply_kv_cache_types(m, o);
      return m;
    }
  for (const auto& [name, why] : out_of_scope())
    if (name == arch) throw Error(fmt::format("{}: architecture '{}' is out of scope for vtc: {}", f.path(), arch, why));
  throw Error(fmt::format("{}: architecture '{}' is not supported (supported: {})", f.path(),
                          arch.empty() ? "(none)" : arch, fmt::join(known_architectures(), ", ")));
}

}  // namespace vtc::arch
