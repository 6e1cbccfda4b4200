// Small in-place rewriting helpers over ir::Function, shared by the passes.
#pragma once

#include <string>

#include "ir/module.h"

namespace vtc::passes {

// Replaces every operand use of `from` by `to` in `f`. Returns the count.
size_t replace_all_uses(ir::Function& f, ir::Value from, ir::Value to);
// Number of operand uses of `v` in `f`.
size_t use_count(const ir::Function& f, ir::Value v);
// Moves the op most recently appended to `f` so that it sits at `index`.
ir::Op& move_last_op_to(ir::Function& f, size_t index);
// Index of `op` in `f.ops`; f.ops.size() if absent.
size_t op_index(const ir::Function& f, const ir::Op* op);
// "%name" if the value has a name hint, else "op #N result R" / "arg #N".
std::string describe(const ir::Function& f, ir::Value v);

}  // namespace vtc::passes
