// The neutral types every backend and every caller share: a dense host
// tensor (step inputs and outputs), a step request (which function, which
// sequence slots, which arguments) and the observer a diff or a tap hangs on
// a backend. They belong to no backend, so no backend links another.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/module.h"

namespace vtc {

// A dense host tensor.
struct HostTensor {
  ir::ElemType elem = ir::ElemType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  static HostTensor i32(const std::vector<int32_t>& values);
  int64_t numel() const;
  const float* f32() const { return reinterpret_cast<const float*>(bytes.data()); }
  const int32_t* i32_data() const { return reinterpret_cast<const int32_t*>(bytes.data()); }
  // Row `r` of a 2-D f32 tensor, copied.
  std::vector<float> row(int64_t r) const;
};

// One call of a step function. The step contract (which arguments a step
// takes) is written once, in runtime/session.cpp; backends only check that
// the arguments match the function's signature.
struct StepRequest {
  std::string step;                          // function name: prefill, decode
  std::vector<int32_t> slots;                // the step's S sequences' state slots
  std::map<std::string, HostTensor> args;    // by argument name
  // Each row must have the bits its one-token step would give it (a
  // speculative verify chunk; Backend::rows_with_decode_bits): the CPU
  // interpreter then sums every matmul row as a one-row matmul does
  // (cpu::TokenOrder::EachAsOne), not in a batched order of the reference.
  bool rows_as_decode = false;
};

// Called after every computing op with the op and its results copied to
// the host, parallel to op.results; nullopt for a result the backend never
// materialized (a CUDA value no kernel wrote).
// Bytes for `numel` values of `e` (quantized: whole blocks).
uint64_t storage_bytes(const ir::ElemType& e, int64_t numel);

using OpObserver = std::function<void(const ir::Op& op, const std::vector<std::optional<HostTensor>>& results)>;

}  // namespace vtc
