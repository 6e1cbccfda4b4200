// bind-state: maps every state access to a state-store slot.
//
// Algorithm:
//  1. Slots: one per state declaration, numbered in declaration order (the
//     order the runtime's state store allocates them). Each slot records the
//     declaration's kind (plain/ring: one row per sequence, indexed by S;
//     paged: KV pages, indexed by P), element type, shape and placement.
//  2. Accesses: every state_read, state_write and attention op, in every
//     function, is bound to its slot and checked against the declaration:
//     the state is declared; state_read yields and state_write stores
//     exactly the declared type (placement included); attention names a
//     paged or ring state of a float type whose leading dim is 2 (K and V).
//     Every violation is collected; any makes the pass throw vtc::Error
//     listing them all.
//  3. The table (bindings()) is published as the "bind-state" artifact:
//     one line per slot with its declaration and accessors, e.g.
//       slot 0 @kv.0 paged<2 x P x 16 x 4 x 16 x f16, device>: @decode op #12 attention
//     Unused declarations are listed as "unused". The module is unchanged.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace vtc::passes {

struct StateAccess {
  std::string function;
  size_t op = 0;
  std::string mnemonic;
};

struct StateSlot {
  int slot = 0;
  std::string state;
  std::string layout;  // "paged<2 x P x ... , device>"
  std::vector<StateAccess> accesses;
};

class BindStatePass final : public Pass {
 public:
  std::string_view name() const override { return "bind-state"; }
  bool run(ir::Module& module, PassContext& context) override;
  const std::vector<StateSlot>& slots() const { return slots_; }

 private:
  std::vector<StateSlot> slots_;
};

std::unique_ptr<Pass> create_bind_state(const PassOptions& options);

}  // namespace vtc::passes
