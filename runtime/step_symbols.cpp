#include "runtime/step_symbols.h"

#include <fmt/format.h>

#include "support/error.h"

namespace vtc {

std::optional<int64_t> lookup_symbol(std::string_view name, const void* env) {
  const auto& e = *static_cast<const SymbolEnv*>(env);
  auto it = e.find(std::string(name));
  if (it == e.end()) return std::nullopt;
  return it->second;
}

std::vector<int64_t> concrete_shape(const ir::Shape& shape, const SymbolEnv& env, const std::string& what,
                                    Target backend) {
  std::vector<int64_t> out;
  for (const auto& d : shape) {
    auto v = d.evaluate(lookup_symbol, &env);
    if (!v || *v < 0) throw Error(fmt::format("{}: cannot size {}: dim {} is unbound or negative", target_name(backend), what, d.str()));
    out.push_back(*v);
  }
  return out;
}

SymbolEnv bind_step_symbols(const ir::Function& fn, const StepRequest& req, Target backend) {
  SymbolEnv env;
  env["S"] = int64_t(req.slots.size());
  for (const auto& arg : fn.args) {
    auto it = req.args.find(arg->name);
    if (it == req.args.end()) throw Error(fmt::format("{}: step @{} needs argument %{}", target_name(backend), fn.name, arg->name));
    const HostTensor& t = it->second;
    if (!(t.elem == arg.type().elem) || t.shape.size() != arg.type().rank())
      throw Error(fmt::format("{}: argument %{} must be {}", target_name(backend), arg->name, arg.type().str()));
    for (size_t i = 0; i < t.shape.size(); ++i) {
      auto sym = arg.type().shape[i].as_symbol();
      if (!sym) continue;
      auto [pos, inserted] = env.emplace(*sym, t.shape[i]);
      if (!inserted && pos->second != t.shape[i])
        throw Error(fmt::format("{}: argument %{} dim {} is {} but {} = {}", target_name(backend), arg->name, i, t.shape[i], *sym,
                                pos->second));
    }
  }
  for (const auto& arg : fn.args)
    if (concrete_shape(arg.type().shape, env, "%" + arg->name, backend) != req.args.at(arg->name).shape)
      throw Error(fmt::format("{}: argument %{} must be {}", target_name(backend), arg->name, arg.type().str()));
  return env;
}

}  // namespace vtc
