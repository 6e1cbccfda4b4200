// compare_step on hand-made step outputs: matching by key, verdicts, the
// order that decides the first divergence, states missing from one arm.
#include <catch2/catch.hpp>

#include <cstring>

#include "runtime/diff/compare.h"
#include "ir/parser.h"
#include "runtime/diff/report.h"
#include "runtime/diff/value_index.h"

using namespace vtc;
using namespace vtc::diff;

namespace {
HostTensor f32(std::vector<float> v) {
  HostTensor t{ir::ElemType::F32, {int64_t(v.size())}, std::vector<uint8_t>(v.size() * 4)};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}
Observed tap(std::string key, std::string name, HostTensor v) {
  return {std::move(key), std::move(name), "op", {"user"}, std::move(v)};
}
}  // namespace

TEST_CASE("compare_step judges taps by key and states by name", "[diff]") {
  StepOutput a, b;
  a.taps = {tap("k1", "%ids", HostTensor::i32({5})), tap("k2", "%x", f32({1, 2})), tap("k3", "%gone", f32({1}))};
  b.taps = {tap("k2", "%x", f32({1, 2.0001f})), tap("k1", "%ids", HostTensor::i32({5})), tap("k4", "%new", f32({1}))};
  a.states = {{"@last_ids", HostTensor::i32({5})}, {"@kv.0", f32({0, 1})}};
  b.states = {{"@last_ids", HostTensor::i32({5})}, {"@kv.0", f32({0, 1})}};
  StepComparison c = compare_step(1, a, b, Tolerances{});
  REQUIRE(c.rows.size() == 6);
  CHECK(c.rows[0].name == "%ids");
  CHECK(c.rows[0].verdict == Verdict::Ok);
  CHECK(c.rows[1].verdict == Verdict::Ok);  // 2e-5 relative is within f32's 1e-3
  CHECK(c.rows[2].verdict == Verdict::OnlyA);
  CHECK(c.rows[3].name == "%new");
  CHECK(c.rows[3].verdict == Verdict::OnlyB);
  CHECK(c.rows[4].name == "@last_ids");
  CHECK(c.first_divergence() == nullptr);

  // An integer tap off by one diverges (tolerance 0) and comes before the
  // state that also differs.
  b.taps[1].value = HostTensor::i32({0});
  b.states[0].value = HostTensor::i32({0});
  c = compare_step(1, a, b, Tolerances{});
  REQUIRE(c.first_divergence() != nullptr);
  CHECK(c.first_divergence()->name == "%ids");
  CHECK(c.count(Verdict::Diverged) == 2);
  CHECK(describe_divergence(1, *c.first_divergence()) ==
        "first divergence: step 1, %ids (op op, read by user): rel-L2 1 > tolerance 0 (i32)");

  // A state declared in one arm only is a divergence; so is a size mismatch.
  b.taps[1].value = HostTensor::i32({5});
  b.states = {{"@last_ids", HostTensor::i32({5})}};
  c = compare_step(2, a, b, Tolerances{});
  REQUIRE(c.first_divergence() != nullptr);
  CHECK(c.first_divergence()->name == "@kv.0");
  CHECK(c.first_divergence()->why == "declared only in arm A");
  b.states = {{"@last_ids", HostTensor::i32({5})}, {"@kv.0", f32({0, 1, 2})}};
  c = compare_step(2, a, b, Tolerances{});
  CHECK(c.first_divergence()->why == "2 elements against 3");
}

TEST_CASE("a NaN in one arm diverges whatever the tolerance", "[diff]") {
  StepOutput a, b;
  a.taps = {tap("k", "%h", f32({1, 2, 3}))};
  b.taps = {tap("k", "%h", f32({1, std::numeric_limits<float>::quiet_NaN(), 3}))};
  Tolerances loose;
  loose.set("f32=1e9");
  const StepComparison c = compare_step(0, a, b, loose);
  REQUIRE(c.first_divergence() != nullptr);
  CHECK(c.first_divergence()->why == "1 positions disagree on NaN/Inf");
}

TEST_CASE("value index skips fused bodies and keys unnamed values by structure", "[diff]") {
  // Two modules of one computation: B fuses the silu*mul that A spells out.
  const char* a_text = R"(
func @decode(%a: tensor<4 x f32, device>, %b: tensor<4 x f32, device>) {
  %s = silu(%a) : tensor<4 x f32, device>
  %m = mul(%s, %b) : tensor<4 x f32, device>
  %0 = add(%m, %a) : tensor<4 x f32, device>
  %out = neg(%0) : tensor<4 x f32, device>
  return(%out)
}
)";
  const char* b_text = R"(
func @decode(%a: tensor<4 x f32, device>, %b: tensor<4 x f32, device>) {
  %m = fused(%a, %b) {kind = elementwise} : tensor<4 x f32, device> body(%x: tensor<4 x f32, device>, %y: tensor<4 x f32, device>) {
    %s = silu(%x) : tensor<4 x f32, device>
    %0 = mul(%s, %y) : tensor<4 x f32, device>
    return(%0)
  }
  %0 = add(%m, %a) : tensor<4 x f32, device>
  %out = neg(%0) : tensor<4 x f32, device>
  return(%out)
}
)";
  const ir::Module a = ir::parse(a_text), b = ir::parse(b_text);
  const ir::Function& fa = *a.functions[0];
  const ir::Function& fb = *b.functions[0];
  const ValueIndex ia(fa), ib(fb);
  auto info = [](const ValueIndex& index, const ir::Function& fn, size_t op) { return index.find(fn.ops[op]->results[0].data()); };
  REQUIRE(info(ib, fb, 0));
  CHECK(info(ib, fb, 0)->op == "fused{elementwise}");
  CHECK(info(ib, fb, 0)->name == "%m");
  CHECK(ib.find(fb.ops[0]->body->ops[0]->results[0].data()) == nullptr);  // inside the body
  // The named %m matches across the fusion, so the unnamed add after it
  // gets the same structural key in both modules; the silu exists in A only.
  CHECK(info(ia, fa, 1)->key == info(ib, fb, 0)->key);
  CHECK(info(ia, fa, 2)->name == "%0");
  CHECK(info(ia, fa, 2)->key == info(ib, fb, 1)->key);
  CHECK(info(ia, fa, 2)->users == std::vector<std::string>{"neg"});
  CHECK(info(ia, fa, 3)->users == std::vector<std::string>{"return"});
}
