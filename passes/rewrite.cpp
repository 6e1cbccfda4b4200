#include "passes/rewrite.h"

#include <algorithm>

namespace vtc::passes {

ir::Op& move_last_op_to(ir::Function& f, size_t index) {
  std::rotate(f.ops.begin() + static_cast<std::ptrdiff_t>(index), f.ops.end() - 1, f.ops.end());
  return *f.ops[index];
}

size_t op_index(const ir::Function& f, const ir::Op* op) {
  for (size_t i = 0; i < f.ops.size(); ++i)
    if (f.ops[i].get() == op) return i;
  return f.ops.size();
}

std::string describe(const ir::Function& f, ir::Value v) {
  if (!v->name.empty()) return "%" + v->name;
  if (!v->def) return "arg #" + std::to_string(v->index);
  return "op #" + std::to_string(op_index(f, v->def)) + " '" + std::string(v->def->mnemonic()) + "' result " +
         std::to_string(v->index);
}

}  // namespace vtc::passes
