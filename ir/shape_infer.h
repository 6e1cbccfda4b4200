// Shape functions: compute an op's result types from its operands and
// attributes. One function per table row (see ops.def). They throw
// vtc::Error with a message that states the broken rule; the verifier and
// the builder add the op name and location.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/module.h"

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

  const Attr& attr(std::string_view name, AttrKind kind) const;
  bool has(std::string_view name) const { return op.attr(name) != nullptr; }
  int64_t int_attr(std::string_view name) const { return attr(name, AttrKind::Int).i; }
  double float_attr(std::string_view name) const { return attr(name, AttrKind::Float).f; }
  const std::string& str_attr(std::string_view name, AttrKind kind) const { return attr(name, kind).s; }
  const std::vector<int64_t>& ints_attr(std::string_view name) const { return attr(name, AttrKind::Ints).ints; }
};

// Result types of `op`. Precondition: operand count is within the table's
// range and every operand is non-null (the verifier checks both first).
std::vector<TensorType> infer_result_types(const Module& module, const Op& op);

#define VTC_OP(id, mnemonic, min_ops, max_ops, results, effect, fusion, infer, attrs) void infer(InferContext&);
#include "ir/ops.def"
#undef VTC_OP

}  // namespace vtc::ir
