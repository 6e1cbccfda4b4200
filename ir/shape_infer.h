// Shape functions: compute an op's result types from its operands and
// attributes. One function per table row (see ops.def). They throw
// vtc::Error with a message that states the broken rule; the verifier and
// the builder add the op name and location.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/module.h"
#include "ir/op_attrs.h"
#include "support/error.h"

namespace vtc::ir {

struct InferContext {
  const Module& module;
  const Op& op;
  std::vector<TensorType> results;

  const TensorType& operand(size_t i) const { return op.operands[i].type(); }
  [[noreturn]] void fail(const std::string& message) const;
  void require(bool ok, const std::string& message) const {
    if (!ok) fail(message);
  }

  // The op's typed attributes (ir/op_attrs.h): a missing or mistyped one
  // fails here, naming it.
  template <class Attrs>
  Attrs attrs() const {
    try {
      return Attrs::of(op);
    } catch (const Error& e) {
      fail(e.what());
    }
  }
  // Whether an optional attribute was written (some are checked only then).
  bool has(std::string_view name) const { return op.attr(name) != nullptr; }
};

// Result types of `op`. Precondition: operand count is within the table's
// range and every operand is non-null (the verifier checks both first).
std::vector<TensorType> infer_result_types(const Module& module, const Op& op);

#define VTC_OP(id, mnemonic, min_ops, max_ops, results, effect, op_class, pattern, infer) void infer(InferContext&);
#include "ir/ops.def"
#undef VTC_OP

}  // namespace vtc::ir
