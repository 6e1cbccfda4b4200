// Small in-place rewriting helpers over ir::Function, shared by the passes.
#pragma once

#include <string>

#include "ir/module.h"

namespace vtc::passes {

// Use queries are the values' own (ir::Value::uses, has_one_use,
// replace_all_uses_with: O(uses)); these helpers are about positions.
// Moves the op most recently appended to `f` so that it sits at `index`.
ir::Op& move_last_op_to(ir::Function& f, size_t index);
// Index of `op` in `f.ops`; f.ops.size() if absent.
size_t op_index(const ir::Function& f, const ir::Op* op);
// "%name" if the value has a name hint, else "op #N result R" / "arg #N".
std::string describe(const ir::Function& f, ir::Value v);

}  // namespace vtc::passes
