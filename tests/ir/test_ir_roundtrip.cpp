// Round trip: parse(print(m)) is structurally equal to m for modules built
// in code, and printing is a fixed point.
#include <catch2/catch.hpp>

#include <limits>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ir_test_models.h"

using namespace vtc::ir;
using namespace vtc::ir::testing;

namespace {

void check_round_trip(const Module& m) {
  auto errors = verify_all(m);
  INFO((errors.empty() ? "" : errors[0]));
  REQUIRE(errors.empty());
  std::string text = print(m);
  INFO(text);
  Module parsed = parse(text);
  std::string why;
  CHECK(structurally_equal(m, parsed, &why));
  INFO(why);
  CHECK(print(parsed) == text);
  CHECK(verify_all(parsed).empty());
}

}  // namespace

TEST_CASE("llama-like prefill and decode steps round-trip", "[ir][roundtrip]") {
  Module m = make_llama_module(2);
  check_round_trip(m);
  std::string text = print(m);
  CHECK(text.find("func @decode(%pos: tensor<S x i32, device>") != std::string::npos);
  CHECK(text.find("attention(") != std::string::npos);
  CHECK(text.find("state @kv.1 : paged<2 x P x 16 x 2 x 16 x f16, device>") != std::string::npos);
}

TEST_CASE("n-gram decode steps round-trip in both placements", "[ir][roundtrip]") {
  check_round_trip(make_ngram_decode(Placement::Device, false));
  check_round_trip(make_ngram_decode(Placement::Host, true));
}

TEST_CASE("every attribute kind and multi-result ops round-trip", "[ir][roundtrip]") {
  Module m;
  m.add_state("kv", StateKind::Ring, tensor({2, S, 64, 2, 8}, ElemType::BF16));
  m.add_weight("w", tensor({32, 16}, ElemType::F32), "w \"quoted\"\n\x01");
  Builder b(m, "prefill");
  Dim T = Dim::symbol("T");
  Value x = b.arg("x", tensor({T, 4, 8}, ElemType::F32));
  Value pos4 = b.arg("pos4", tensor({T, 4}, ElemType::I32));
  Value pos = b.arg("pos", tensor({T}, ElemType::I32));
  Value r = b.rope(x, pos4, {.mode = RopeMode::Multi, .n_rot = 8, .base = 1e6, .freq_scale = 0.5, .sections = {2, 1, 1, 0}});
  Value k = b.slice(r, 1, 0, 2);
  Value a = b.attention(r, k, k, pos, pos,
                        {.state = "kv", .scale = 0.125, .causal = false, .window = 128, .softcap = 50.0});
  Value flat = b.reshape(a, {T * 32});
  Value v = b.view(flat, {T, 16}, T * 16);
  auto [vals, idx] = b.top_k(b.softmax(b.scale(v, -0.5)), 4);
  Value c = b.concat({b.cast(vals, ElemType::F16), b.cast(vals, ElemType::F16)}, 1);
  Value t = b.transpose(c, {1, 0});
  Value g = b.gather(b.weight("w"), idx, 0);
  Value s = b.scatter(b.weight("w"), idx, g, 0);
  // qwen4exp's PLE gate: sum, abs, clamp to [1e-6, inf), sqrt, sign.
  Value sum = b.sum(vals);
  Value mag = b.sqrt(b.clamp(b.abs(sum), 1e-6, std::numeric_limits<double>::infinity()));
  Value gate = b.mul(b.sign(sum), b.clamp(mag, -0.5, 2.0));
  b.ret({t, s, b.exp(b.neg(b.gelu(b.sigmoid(b.softplus(vals))))), gate});
  check_round_trip(m);
  const std::string text = print(m);
  CHECK(text.find("clamp(%") != std::string::npos);
  CHECK(text.find("{max = inf, min = 1e-06}") != std::string::npos);
  CHECK(text.find("{max = 2.0, min = -0.5}") != std::string::npos);
}

TEST_CASE("a decode step that samples its next ids round-trips", "[ir][roundtrip]") {
  Module m;
  m.add_state("last_ids", StateKind::Plain, tensor({S}, ElemType::I32));
  Builder b(m, "decode");
  Value logits = b.arg("logits", tensor({S, 64}, ElemType::F32));
  Value params = b.arg("params", tensor({S, 4}, ElemType::F32));
  Value seed = b.arg("seed", tensor({S, 2}, ElemType::I32));
  Value pos = b.arg("pos", tensor({S}, ElemType::I32));
  Value tok = Builder::named(b.sample(logits, params, seed, pos, 40), "tok");
  b.state_write("last_ids", tok);
  b.ret({tok});
  check_round_trip(m);
  CHECK(print(m).find("%tok = sample(%logits, %params, %seed, %pos) {max_k = 40} : tensor<S x i32, device>") !=
        std::string::npos);
}

TEST_CASE("special floats and extreme integers round-trip", "[ir][roundtrip]") {
  const char* text = R"(func @decode(%x: tensor<T x 8 x f32, device>) {
  %a = scale(%x) {factor = inf} : tensor<T x 8 x f32, device>
  %b = scale(%a) {factor = -0.0} : tensor<T x 8 x f32, device>
  %c = scale(%b) {factor = 1e-300} : tensor<T x 8 x f32, device>
  %d = view(%c) {offset = -9223372036854775808, shape = [T-1, 2*S]} : tensor<T-1 x S*2 x f32, device>
  %e = clamp(%d) {min = -inf, max = inf} : tensor<T-1 x S*2 x f32, device>
  return(%e)
}
)";
  Module m = parse(text);
  std::string printed = print(m);
  INFO(printed);
  Module again = parse(printed);
  CHECK(structurally_equal(m, again));
  CHECK(print(again) == printed);
  CHECK(printed.find("factor = inf") != std::string::npos);
  CHECK(printed.find("factor = -0.0") != std::string::npos);
  CHECK(printed.find("{max = inf, min = -inf}") != std::string::npos);
}

TEST_CASE("structural equality ignores names but not wiring", "[ir][roundtrip]") {
  Module a = parse("func @decode(%x: tensor<4 x f32, device>, %y: tensor<4 x f32, device>) {\n"
                   "  %s = add(%x, %y) : tensor<4 x f32, device>\n  return(%s)\n}\n");
  Module renamed = parse("func @decode(%p: tensor<4 x f32, device>, %q: tensor<4 x f32, device>) {\n"
                         "  %0 = add(%p, %q) : tensor<4 x f32, device>\n  return(%0)\n}\n");
  Module swapped = parse("func @decode(%x: tensor<4 x f32, device>, %y: tensor<4 x f32, device>) {\n"
                         "  %s = add(%y, %x) : tensor<4 x f32, device>\n  return(%s)\n}\n");
  std::string why;
  CHECK(structurally_equal(a, renamed));
  CHECK_FALSE(structurally_equal(a, swapped, &why));
  CHECK(why.find("operand 0") != std::string::npos);
}
