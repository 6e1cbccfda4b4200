// The one rewrite driver: patterns applied greedily over a worklist until
// none applies (MLIR's applyPatternsGreedily), shared by canonicalize and
// the fusion partitioner.
//
// Algorithm, per function:
//  1. The worklist starts as every op in function order and is consumed
//     front to back; an op is on it at most once.
//  2. A popped op that is trivially dead (no side effect, not the
//     terminator, every result unused: O(results) with def-use chains) is
//     erased, and the ops defining its operands go back on the list (they
//     may be dead now).
//  3. Otherwise the patterns rooted at its kind are tried in table order;
//     the first that applies rewrites through the PatternRewriter, which
//     puts back on the list every op the rewrite touched (the users of a
//     replaced value, an op whose operand changed and the old operand's
//     definer, the region a fusion built).
//  4. It ends when the list is empty, or throws after a bound on
//     applications (a pattern set that does not converge is a bug, named).
// Erased ops hold no operands and leave f.ops once, at the end (O(n)),
// except those fuse_ops removes itself.
// With a log (--debug-passes) each application prints one line: the pass,
// the pattern, the op it applied to and what it did.
#pragma once

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/DenseSet.h>

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/attr_enums.h"
#include "ir/module.h"

namespace vtc::passes {

class PatternRewriter;
struct RewritePattern;

struct DriverStats {
  size_t applications = 0;  // patterns applied
  size_t erased = 0;        // trivially dead ops erased
  bool changed() const { return applications + erased > 0; }
};

// Runs `patterns` on `f` to a fixed point (see above). `pass` names the
// caller in the log; `log` may be null. With erase_dead false, dead ops
// stay (the fusion partitioner leaves DCE to canonicalize).
DriverStats apply_patterns_greedily(ir::Function& f, llvm::ArrayRef<RewritePattern> patterns, std::string_view pass,
                                    std::ostream* log, bool erase_dead = true);

struct RewritePattern {
  std::string_view name;          // in the application log
  std::optional<ir::OpKind> root;  // tried on ops of this kind; nullopt: every op
  // Rewrites through `rewriter` and returns true, or returns false having
  // changed nothing.
  std::function<bool(ir::Op& root, PatternRewriter& rewriter)> apply;
};

// Every change a pattern makes goes through here, so the driver can keep
// its worklist and its log.
class PatternRewriter {
 public:
  ir::Function& function() { return f_; }
  // Every use of `from` reads `to`; the users are revisited. Returns the count.
  size_t replace_all_uses(ir::Value from, ir::Value to);
  // Operand `i` of `op` reads `v`; `op` and the old operand's definer are revisited.
  void set_operand(ir::Op& op, size_t i, ir::Value v);
  // `op` changed in place (an attribute): it and its users are revisited.
  void changed_in_place(ir::Op& op);
  // fuse_ops (passes/fusion.h) through the driver: the members leave the
  // worklist, the region joins it.
  ir::Op& fuse(std::vector<ir::Op*> ops, const std::vector<ir::Value>& outputs, ir::FusedKind kind);
  // What the log line of this application says it did (default: "applied").
  void note(std::string what) { note_ = std::move(what); }

 private:
  friend DriverStats apply_patterns_greedily(ir::Function&, llvm::ArrayRef<RewritePattern>, std::string_view,
                                             std::ostream*, bool);
  explicit PatternRewriter(ir::Function& f) : f_(f) {}
  void push(ir::Op* op);
  void push_users(ir::Value v);

  ir::Function& f_;
  std::vector<ir::Op*> list_;
  size_t head_ = 0;
  llvm::DenseSet<ir::Op*> queued_, erased_;
  std::string note_;
};

}  // namespace vtc::passes
