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

TEST_CASE("a quantized type carries its weight layout: named, parsed and compared", "[ir][types][layout]") {
  using vtc::GgmlType;
  using vtc::WeightLayout;
  const ElemType rows = ElemType::quant(GgmlType::Q4_K);
  const ElemType x8 = ElemType::quant(GgmlType::Q4_K, WeightLayout::Interleaved8);
  CHECK(rows.layout() == WeightLayout::Rows);
  CHECK(x8.layout() == WeightLayout::Interleaved8);
  CHECK(x8.quant_type() == GgmlType::Q4_K);
  CHECK(x8.name() == "q4_k_x8");
  CHECK(ElemType::quant(GgmlType::Q4_0, WeightLayout::Interleaved8).name() == "q4_0_x8");
  CHECK_FALSE(rows == x8);  // the layout is part of the type
  CHECK(rows.with_layout(WeightLayout::Interleaved8) == x8);
  CHECK(x8.with_layout(WeightLayout::Rows) == rows);
  CHECK(ElemType::from_name("q4_k_x8") == x8);
  CHECK(ElemType::from_name("Q4_K_X8") == x8);  // any case, like the ggml name
  CHECK(ElemType::from_name(x8.name()) == x8);
  // A layout the type has no kernels for, or a suffix that is no layout.
  CHECK_FALSE(ElemType::from_name("q5_1_x8"));
  CHECK_FALSE(ElemType::from_name("f32_x8"));
  CHECK_FALSE(ElemType::from_name("q4_k_rows"));
  CHECK_FALSE(ElemType::from_name("q4_k_x9"));
  CHECK(ElemType::unknown_name_reason("q5_1_x8").find("q5_1 weights have no x8 layout") != std::string::npos);
  CHECK(ElemType::unknown_name_reason("q4_k_x9") == "unknown element type 'q4_k_x9'");
  CHECK_THROWS_AS(ElemType::quant(GgmlType::Q5_1, WeightLayout::Interleaved8), vtc::Error);
  CHECK_THROWS_AS(ElemType(ElemType::F32).with_layout(WeightLayout::Interleaved8), vtc::Error);
  CHECK(ElemType(ElemType::F32).layout() == WeightLayout::Rows);
  TensorType t{x8, {16, 256}, Placement::Host};
  CHECK(t.str() == "tensor<16 x 256 x q4_k_x8, host>");
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
