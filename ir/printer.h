// Prints a module in the textual form documented in docs/ir.md.
#pragma once

#include <string>

#include "ir/module.h"

namespace vtc::ir {

// Deterministic: printing a parsed print gives the same text. Works on
// modules that do not verify (it never dereferences a missing declaration),
// so passes can dump broken IR while debugging.
std::string print(const Module& module);
std::string print(const Function& function);

}  // namespace vtc::ir
