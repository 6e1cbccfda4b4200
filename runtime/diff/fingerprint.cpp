#include "runtime/diff/fingerprint.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "frontends/gguf/dequant.h"
#include "support/error.h"

namespace vtc::diff {
namespace {

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Shortest text that reads back as the value; integral values print bare.
std::string number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == std::trunc(v) && std::fabs(v) < 1e15) return fmt::format("{}", int64_t(v));
  return fmt::format("{:.6g}", v);
}

}  // namespace

std::vector<double> widen(ir::ElemType elem, std::span<const uint8_t> bytes, int64_t count) {
  if (elem.is_quant()) {  // a quantized KV cache: its blocks' values
    const auto need = ggml_bytes_for(elem.quant_type(), uint64_t(std::max<int64_t>(count, 0)));
    if (count < 0 || !need || *need > bytes.size() || !can_dequantize(elem.quant_type()))
      throw Error(fmt::format("fingerprint: {} values of {} are not whole blocks in {} bytes", count, elem.name(),
                              bytes.size()));
    std::vector<float> values(static_cast<size_t>(count));
    dequantize_row(elem.quant_type(), bytes.data(), values.data(), count);
    return {values.begin(), values.end()};
  }
  const int64_t size = elem.scalar_bytes();
  if (size == 0) throw Error(fmt::format("fingerprint: element type {} is not a dense type", elem.name()));
  if (count < 0 || uint64_t(count) * uint64_t(size) > bytes.size())
    throw Error(fmt::format("fingerprint: {} elements of {} need {} bytes, got {}", count, elem.name(), count * size,
                            bytes.size()));
  std::vector<double> out(static_cast<size_t>(count));
  const uint8_t* p = bytes.data();
  for (int64_t i = 0; i < count; ++i, p += size) {
    double& v = out[size_t(i)];
    switch (elem.kind()) {
      case ir::ElemType::F32: v = load<float>(p); break;
      case ir::ElemType::F16: v = fp16_to_fp32(load<uint16_t>(p)); break;
      case ir::ElemType::BF16: v = bf16_to_fp32(load<uint16_t>(p)); break;
      case ir::ElemType::I32: v = double(load<int32_t>(p)); break;
      case ir::ElemType::I64: v = double(load<int64_t>(p)); break;
      case ir::ElemType::U8: v = double(*p); break;
      case ir::ElemType::Quant: break;  // rejected above
    }
  }
  return out;
}

std::vector<double> widen(const HostTensor& t) { return widen(t.elem, t.bytes, t.numel()); }

Fingerprint fingerprint(std::span<const double> values) {
  Fingerprint f;
  f.count = int64_t(values.size());
  for (double x : values) {
    if (x != 0) ++f.nonzero;
    if (!std::isfinite(x)) {
      ++f.nonfinite;
      continue;
    }
    f.max_abs = std::max(f.max_abs, std::fabs(x));
    f.sum_abs += std::fabs(x);
  }
  f.first.assign(values.begin(), values.begin() + std::min(values.size(), kFingerprintFirst));
  return f;
}

std::string format_fingerprint(const Fingerprint& f) {
  std::vector<std::string> first;
  for (double v : f.first) first.push_back(number(v));
  return fmt::format("nonfinite={} nonzero={} max|x|={} sum|x|={} first=[{}]", f.nonfinite, f.nonzero, number(f.max_abs),
                     number(f.sum_abs), fmt::join(first, ", "));
}

ValueComparison compare_values(std::span<const double> a, std::span<const double> b) {
  if (a.size() != b.size())
    throw Error(fmt::format("compare: {} values against {}", a.size(), b.size()));
  ValueComparison c;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool fa = std::isfinite(a[i]), fb = std::isfinite(b[i]);
    if (fa && fb) {
      diff += (a[i] - b[i]) * (a[i] - b[i]);
      norm += a[i] * a[i];
    } else if (fa != fb || !((std::isnan(a[i]) && std::isnan(b[i])) || a[i] == b[i])) {
      ++c.nonfinite_mismatches;
    }
  }
  if (norm > 0) c.rel_l2 = std::sqrt(diff / norm);
  else c.rel_l2 = diff > 0 ? INFINITY : 0.0;
  return c;
}

}  // namespace vtc::diff
