// Verifies a module against the op table and the IR rules (docs/ir.md,
// "Verifier rules").
#pragma once

#include <string>
#include <vector>

#include "ir/module.h"

namespace vtc::ir {

// One message per broken rule, in module order. Each names the op, where it
// is (line:col when parsed, op #N when built) and the rule, e.g.
//   "func @decode, op #4 'ngram_hash' (12:3): [placement] operand 0 (%ids) is
//    on device but the op runs on host; a device value reaches a host op
//    only through to_host".
std::vector<std::string> verify_all(const Module& module);

// Throws vtc::Error with every message joined by newlines if any rule fails.
void verify(const Module& module);

}  // namespace vtc::ir
