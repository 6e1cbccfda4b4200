// Binding a step's symbolic dims (S, T, ...) from its request: the one rule
// both backends follow. S is the request's slot count; every other symbol
// takes the size of the first argument dim that names it, and an argument
// dim that disagrees with an earlier binding is an error naming both.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/module.h"
#include "runtime/tensor.h"
#include "support/target.h"

namespace vtc {

using SymbolEnv = std::unordered_map<std::string, int64_t>;

// ir::Dim::evaluate's lookup over a SymbolEnv (passed as `env`).
std::optional<int64_t> lookup_symbol(std::string_view name, const void* env);

// The sizes of `shape` under `env`; throws naming `what`, prefixed by
// the backend's target name, if a dim is unbound or negative.
std::vector<int64_t> concrete_shape(const ir::Shape& shape, const SymbolEnv& env, const std::string& what,
                                    Target backend);

// The symbols of `fn` bound by `req` (see above); also checks that each
// argument has the function's element type and its concrete shape.
SymbolEnv bind_step_symbols(const ir::Function& fn, const StepRequest& req, Target backend);

}  // namespace vtc
