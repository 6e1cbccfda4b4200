#include "runtime/tensor.h"

#include <cstring>

#include "support/ggml_type.h"

namespace vtc {

HostTensor HostTensor::i32(const std::vector<int32_t>& values) {
  HostTensor t;
  t.elem = ir::ElemType::I32;
  t.shape = {int64_t(values.size())};
  t.bytes.resize(values.size() * 4);
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::vector<float> HostTensor::row(int64_t r) const {
  const int64_t cols = shape.back();
  return std::vector<float>(f32() + r * cols, f32() + (r + 1) * cols);
}

uint64_t storage_bytes(const ir::ElemType& e, int64_t numel) {
  if (e.is_quant()) return ggml_bytes_for(e.quant_type(), uint64_t(numel)).value_or(0);
  return uint64_t(numel) * uint64_t(e.scalar_bytes());
}

}  // namespace vtc
