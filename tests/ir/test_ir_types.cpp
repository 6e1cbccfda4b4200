// Types: symbolic dims, element types, tensor type printing.
#include <catch2/catch.hpp>

#include <limits>

#include "ir/types.h"
#include "support/error.h"

using namespace vtc::ir;

TEST_CASE("dims are canonical polynomials over step symbols", "[ir][types]") {
  Dim T = Dim::symbol("T"), P = Dim::symbol("P"), S = Dim::symbol("S");
  CHECK((T * 8).str() == "T*8");
  CHECK((Dim(8) * T) == (T * 8));
  CHECK((T + P).str() == "P+T");
  CHECK((P + T) == (T + P));
  CHECK((T - 1).str() == "T-1");
  CHECK((Dim(0) - T).str() == "-T");
  CHECK((T * S * 2 + 4).str() == "S*T*2+4");
  CHECK((T + T).str() == "T*2");
  CHECK((T - T).constant() == 0);
  CHECK((T * 8).constant() == std::nullopt);
  CHECK(Dim(42).constant() == 42);
  CHECK(Dim(42).is_constant());
  CHECK_FALSE(T.is_constant());
  CHECK(product({T, Dim(4), Dim(16)}) == product({T * 64}));
  CHECK((T - 1).has_negative_coefficient());
}

TEST_CASE("dim arithmetic is overflow-checked and bounded", "[ir][types]") {
  Dim big(std::numeric_limits<int64_t>::max());
  CHECK_THROWS_AS(big + 1, vtc::Error);
  CHECK_THROWS_AS(big * 2, vtc::Error);
  Dim T = Dim::symbol("T");
  Dim d = T;
  CHECK_THROWS_AS([&] { for (int i = 0; i < 20; ++i) d = d * T; }(), vtc::Error);
  CHECK(Dim(std::numeric_limits<int64_t>::min()).str() == "-9223372036854775808");
}

TEST_CASE("element types cover scalars and every GGUF quant type", "[ir][types]") {
  for (const char* name : {"f32", "f16", "bf16", "i32", "i64", "u8"}) {
    auto t = ElemType::from_name(name);
    REQUIRE(t);
    CHECK(t->name() == name);
    CHECK_FALSE(t->is_quant());
  }
  int quant_count = 0;
  for (auto* t = vtc::ggml_type_table_begin(); t != vtc::ggml_type_table_end(); ++t) {
    if (!t->quantized) continue;
    ++quant_count;
    auto e = ElemType::from_name(t->name);
    REQUIRE(e);
    CHECK(e->is_quant());
    CHECK(e->quant_type() == t->type);
    CHECK(ElemType::from_name(e->name()) == e);  // lowercase name reads back
  }
  CHECK(quant_count > 20);
  CHECK(ElemType::from_name("Q4_K")->name() == "q4_k");
  CHECK_FALSE(ElemType::from_name("f64"));  // GGUF scalar, not an IR type
  CHECK_FALSE(ElemType::from_name("nope"));
}

TEST_CASE("tensor types print element type, shape and placement", "[ir][types]") {
  TensorType t{ElemType::F32, {Dim::symbol("T"), 4096}, Placement::Device};
  CHECK(t.str() == "tensor<T x 4096 x f32, device>");
  TensorType scalar{ElemType::I64, {}, Placement::Host};
  CHECK(scalar.str() == "tensor<i64, host>");
  TensorType moved = t;
  moved.placement = Placement::Host;
  CHECK_FALSE(moved == t);
}
