// What `vtc diff` knows about each op result of a step function: the name
// the IR printer gives it, a key that matches it to the same tensor in the
// other arm's module, a short label of its op, and which ops read it.
//
// Names: the printer's own (`%x0`, `%17`), read from ir::print of the
// function, so a report names values exactly as `--dump-ir` files do. The
// printed body has one line per top-level op (fused bodies are indented
// deeper and skipped); a mismatch in that count is an error, not a guess.
//
// Keys: two arms may run different modules of one model (fused and
// unfused, or after different passes), so values cannot be matched by
// pointer or by number. A value the frontend named (`%ids`, `%x0`,
// `%logits`) is keyed by that name. Any other value is keyed by structure:
// a hash of its op's mnemonic, attributes and result index with the keys of
// its operands (arguments by name, weights by symbol). Equal expressions get
// equal keys in both modules; a fused op gets a new key, so its results
// are reported as present in one arm only, and matching resumes at the next
// named value. Repeated keys in one function get a "#n" suffix in order.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/module.h"

namespace vtc::diff {

struct ValueInfo {
  std::string name;    // "%ids"
  std::string key;     // matching key across arms
  std::string op;      // "state_read @last_ids", "matmul", "fused{norm_matmul}"
  std::vector<std::string> users;  // mnemonics of the ops reading it, once each; "return" for outputs
  size_t op_index = 0; // position of its op in the function
};

class ValueIndex {
 public:
  explicit ValueIndex(const ir::Function& function);
  // Null for a value that is not a top-level op result of the function
  // (an argument, or a value inside a fused body).
  const ValueInfo* find(const ir::ValueData* value) const;

 private:
  std::unordered_map<const ir::ValueData*, ValueInfo> info_;
};

}  // namespace vtc::diff
