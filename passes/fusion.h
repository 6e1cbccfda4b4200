// Building fused regions, for the fusion partitioner (fuse.cpp) through
// the rewrite driver (PatternRewriter::fuse).
//
// fuse_ops() turns a set of ops of a function into one `fused` op whose body
// holds clones of them:
//  1. The set is taken in function order. Values the set uses but does not
//     define become the op's operands (first use first, each once) and the
//     body's arguments.
//  2. Each op is cloned into the body with its operands mapped; an op that
//     is itself a fused region is inlined (its body's ops are cloned, its
//     results map to what its body returns), so regions grow by merging.
//  3. The body returns the mapped `outputs`; the fused op, with the
//     outputs' types and names, replaces the set at the position of its last
//     op, and every use of an output now uses the matching result.
// Ops between the first and last op of the set that read its results are
// first moved after the last op, in order (a region must sit where all its
// inputs are defined and before all its readers). Preconditions (checked; a
// violation is an error naming the op): no op of the set reads such a moved
// value, and every value of the set used outside it is an output.
#pragma once

#include <string>
#include <vector>

#include "ir/module.h"

namespace vtc::passes {

ir::Op& fuse_ops(ir::Function& f, std::vector<ir::Op*> ops, const std::vector<ir::Value>& outputs,
                 const std::string& kind);

}  // namespace vtc::passes
