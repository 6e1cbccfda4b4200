// Internal to the CPU interpreter: the per-step view of every value and the
// per-op execution functions (one per row of ir/ops.def).
#pragma once

#include <fmt/format.h>
#include <llvm/ADT/DenseMap.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ir/module.h"
#include "runtime/cpu/kernels/kernels.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/state/host_states.h"
#include "runtime/tensor.h"
#include "support/error.h"
#include "support/ggml_type.h"

namespace vtc::cpu {

// A value's storage during one step: a pointer into the arena, a weight
// mapping or an aliased operand, with its concrete shape.
struct Buf {
  uint8_t* data = nullptr;
  std::vector<int64_t> shape;
  ir::ElemType elem;
  int64_t numel = 0;

  template <typename T>
  T* as() const { return reinterpret_cast<T*>(data); }
  int64_t last_dim() const { return shape.empty() ? 1 : shape.back(); }
  int64_t rows() const { return last_dim() ? numel / last_dim() : 0; }
};

struct ExecContext {
  const ir::Module& module;
  HostStates& states;
  ThreadPool& pool;
  const std::vector<int32_t>& slots;  // the step's sequences, by index
  // Every value of the step, fused bodies included (described before the
  // first op runs, so lookups never insert).
  llvm::DenseMap<const ir::ValueData*, Buf>& bufs;
  // StepRequest::rows_as_decode: matmuls sum every row as one-row ones do.
  TokenOrder token_order = TokenOrder::Batched;

  const Buf& buf(const ir::ValueData* v) const {
    auto it = bufs.find(v);
    if (it == bufs.end()) throw Error("cpu: a value has no buffer in this step");
    return it->second;
  }
  const Buf& in(const ir::Op& op, size_t i) const {
    if (i >= op.operands.size()) throw Error(fmt::format("cpu: '{}' has no operand {}", op.mnemonic(), i));
    return buf(op.operands[i].data());
  }
  const Buf& out(const ir::Op& op, size_t i = 0) const {
    if (i >= op.results.size()) throw Error(fmt::format("cpu: '{}' has no result {}", op.mnemonic(), i));
    return buf(op.results[i].data());
  }
};

using ExecFn = void (*)(ExecContext&, const ir::Op&);
// The execution function for an op kind (a table built from ops.def).
ExecFn exec_fn(ir::OpKind kind);
// Runs matmul ops that all read the same input (operand 0) as one
// matmul_shared_input call.
void exec_matmuls_shared_input(ExecContext& ctx, const std::vector<const ir::Op*>& matmuls);
// The rope parameters of a `rope` or `indexer_select` op's attributes
// (freq_factors, an operand, is left null).
struct RopeParams;
RopeParams rope_params(const ir::Op& op);

int64_t elem_bytes(const ir::ElemType& e);
// The ggml storage type of an IR element type (F32 for i32 is not valid).
GgmlType ggml_type_of(const ir::ElemType& e);

}  // namespace vtc::cpu
