// The one symbol-binding rule of both backends (runtime/step_symbols.h).
#include <catch2/catch.hpp>

#include "ir/parser.h"
#include "runtime/step_symbols.h"
#include "support/error.h"

using namespace vtc;

namespace {

// @decode(%x: [S x T x 4], %y: [T]): T is named twice.
ir::Module step_module() {
  return ir::parse(R"(func @decode(%x: tensor<S x T x 4 x f32, host>, %y: tensor<T x i32, host>) {
  return(%x)
})");
}

HostTensor tensor(ir::ElemType elem, std::vector<int64_t> shape) {
  HostTensor t;
  t.elem = elem;
  t.shape = std::move(shape);
  t.bytes.resize(storage_bytes(elem, t.numel()));
  return t;
}

}  // namespace

TEST_CASE("step symbols: S from the slots, the rest from the arguments", "[runtime][symbols]") {
  ir::Module m = step_module();
  StepRequest req{"decode", {0, 1}, {}};
  req.args["x"] = tensor(ir::ElemType::F32, {2, 3, 4});
  req.args["y"] = tensor(ir::ElemType::I32, {3});
  SymbolEnv env = bind_step_symbols(*m.functions[0], req, vtc::Target::Cuda);
  CHECK(env.at("S") == 2);
  CHECK(env.at("T") == 3);
}

TEST_CASE("step symbols: a conflicting binding is an error naming both, on every backend", "[runtime][symbols]") {
  ir::Module m = step_module();
  StepRequest req{"decode", {0, 1}, {}};
  req.args["x"] = tensor(ir::ElemType::F32, {2, 3, 4});
  req.args["y"] = tensor(ir::ElemType::I32, {5});
  for (vtc::Target backend : {vtc::Target::Cpu, vtc::Target::Cuda}) {
    CHECK_THROWS_WITH(bind_step_symbols(*m.functions[0], req, backend),
                      std::string(vtc::target_name(backend)) + ": argument %y dim 0 is 5 but T = 3");
  }
  req.args["y"] = tensor(ir::ElemType::I32, {3});
  req.slots = {0};  // S = 1, but %x says 2
  CHECK_THROWS_WITH(bind_step_symbols(*m.functions[0], req, vtc::Target::Cuda), "cuda: argument %x dim 0 is 2 but S = 1");
}
