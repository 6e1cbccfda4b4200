// Running a hand-written IR module's prefill through the CPU interpreter,
// for the kernel tests that check an op end to end (linear attention, the
// QSA indexer): parse + verify, a state store of 3 slots x 64 positions,
// two worker threads, no GGUF weights.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "ir/parser.h"
#include "ir/verifier.h"
#include "runtime/cpu/interpreter.h"
#include "tests/cpu_kernels/kernel_test_util.h"

namespace vtc::cpu::test {

inline HostTensor f32_tensor(std::vector<int64_t> shape, const std::vector<float>& values) {
  HostTensor t;
  t.shape = std::move(shape);
  t.bytes.resize(values.size() * 4);
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

inline HostTensor i32_tensor(std::vector<int64_t> shape, const std::vector<int32_t>& values) {
  HostTensor t = HostTensor::i32(values);
  t.shape = std::move(shape);
  return t;
}

inline ir::Module parse_verified(const std::string& text) {
  ir::Module m = ir::parse(text);
  ir::verify(m);
  return m;
}

struct IrRun {
  ir::Module module;
  StateStore states;
  HostStates host{states};
  ThreadPool pool{2};
  Interpreter interp;
  explicit IrRun(const std::string& text)
      : module(parse_verified(text)), states(module, StateStoreConfig{3, 64, 0}),
        interp(module, empty_gguf(), host, pool) {}
  // Maps pages for positions [0, n) of each slot, one page per slot in
  // turn, so the slots' tables interleave in the pool.
  void reserve(const std::map<int32_t, int64_t>& n_positions) {
    for (bool grew = true; grew;) {
      grew = false;
      for (const auto& [slot, n] : n_positions) {
        const int64_t have = int64_t(states.page_table(slot).size()) * states.page_size();
        if (have >= n) continue;
        REQUIRE(states.reserve(slot, have + 1));
        grew = true;
      }
    }
  }
  std::vector<HostTensor> run(std::vector<int32_t> slots, std::map<std::string, HostTensor> args) {
    return interp.run(StepRequest{"prefill", std::move(slots), std::move(args)});
  }
};

// A float tensor's values, and one slot's row of a state as floats.
inline std::vector<float> f32_values(const HostTensor& t) { return {t.f32(), t.f32() + t.numel()}; }

inline std::vector<float> state_row(HostStates& st, const char* name, int32_t slot) {
  auto bytes = st.slot_bytes(st.buffer(name), slot);
  const float* f = reinterpret_cast<const float*>(bytes.data());
  return {f, f + bytes.size() / 4};
}

// |got - want| <= tol * (1 + |want|) everywhere; reports the worst index
// (the first NaN, if any).
inline void check_close(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  size_t worst = 0;
  double worst_err = 0;
  for (size_t i = 0; i < got.size() && !std::isnan(worst_err); ++i) {
    const double err = std::abs(double(got[i]) - want[i]) / (1.0 + std::abs(want[i]));
    if (!(err <= worst_err)) worst_err = err, worst = i;
  }
  INFO("worst index " << worst << ": got " << got[worst] << ", want " << want[worst]);
  CHECK(worst_err <= tol);
}

}  // namespace vtc::cpu::test
