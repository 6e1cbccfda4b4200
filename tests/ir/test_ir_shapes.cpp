// Shape inference, one section per op: the inferred result type of a valid
// use, and the message of an invalid one.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "ir/builder.h"
#include "ir_test_models.h"
#include "support/error.h"

using namespace vtc::ir;
using namespace vtc::ir::testing;
using Catch::Matchers::Contains;

namespace {

struct Fixture {
  Module m;
  Builder b{m, "decode"};
  Dim T = Dim::symbol("T");
  Value x, w, ids, pos;
  Fixture() {
    m.add_weight("wq", tensor({32, 64}, ElemType::quant(vtc::GgmlType::Q8_0)), "wq");
    m.add_weight("emb", tensor({100, 64}, ElemType::quant(vtc::GgmlType::Q4_K)), "emb");
    m.add_state("kv", StateKind::Paged, tensor({2, P, 16, 2, 8}, ElemType::F16));
    m.add_state("hist", StateKind::Ring, tensor({S, 2}, ElemType::I64));
    x = b.arg("x", tensor({T, 64}, ElemType::F32));
    w = b.arg("w", tensor({64}, ElemType::F32));
    ids = b.arg("ids", tensor({T}, ElemType::I32));
    pos = b.arg("pos", tensor({T}, ElemType::I32));
  }
  std::string type(Value v) const { return v.type().str(); }
};

}  // namespace

TEST_CASE_METHOD(Fixture, "shape: weight, state_read, state_write, transfers", "[ir][shapes]") {
  CHECK(type(b.weight("wq")) == "tensor<32 x 64 x q8_0, device>");
  CHECK_THROWS_WITH(b.weight("nope"), Contains("weight @nope is not declared"));
  CHECK(type(b.state_read("hist")) == "tensor<S x 2 x i64, device>");
  CHECK_THROWS_WITH(b.state_read("nope"), Contains("state @nope is not declared"));
  CHECK_NOTHROW(b.state_write("hist", b.state_read("hist")));
  CHECK_THROWS_WITH(b.state_write("hist", x), Contains("does not match the declaration of state @hist"));
  Value h = b.to_host(x);
  CHECK(type(h) == "tensor<T x 64 x f32, host>");
  CHECK(type(b.to_device(h)) == "tensor<T x 64 x f32, device>");
}

TEST_CASE_METHOD(Fixture, "shape: embed from quantized and float tables", "[ir][shapes]") {
  CHECK(type(b.embed(b.weight("emb"), ids)) == "tensor<T x 64 x f32, device>");
  CHECK(type(b.embed(x, ids)) == "tensor<T x 64 x f32, device>");
  CHECK_THROWS_WITH(b.embed(b.weight("emb"), x), Contains("ids (operand 1) must be i32 or i64"));
  CHECK_THROWS_WITH(b.embed(w, ids), Contains("table (operand 0) must have rank 2"));
}

TEST_CASE_METHOD(Fixture, "shape: matmul with quantized or float weight", "[ir][shapes]") {
  CHECK(type(b.matmul(x, b.weight("wq"))) == "tensor<T x 32 x f32, device>");
  Value wf = b.arg("wf", tensor({10, 64}, ElemType::BF16));
  CHECK(type(b.matmul(x, wf)) == "tensor<T x 10 x f32, device>");
  Value bad = b.arg("bad", tensor({10, 63}, ElemType::F32));
  CHECK_THROWS_WITH(b.matmul(x, bad), Contains("contraction dim") && Contains("64 != 63"));
  CHECK_THROWS_WITH(b.matmul(ids, wf), Contains("input (operand 0) must be f32, f16 or bf16"));
}

TEST_CASE_METHOD(Fixture, "shape: elementwise ops", "[ir][shapes]") {
  CHECK(type(b.add(x, x)) == "tensor<T x 64 x f32, device>");
  CHECK(type(b.mul(x, w)) == "tensor<T x 64 x f32, device>");  // broadcast of a suffix
  CHECK_THROWS_WITH(b.add(w, x), Contains("does not broadcast"));
  Value col = b.arg("col", tensor({T, 1}, ElemType::F32));  // a per-row scalar (shared-expert gate)
  CHECK(type(b.mul(x, col)) == "tensor<T x 64 x f32, device>");
  Value w2 = b.arg("w2", tensor({2, 64}, ElemType::F32));
  CHECK_THROWS_WITH(b.mul(x, w2), Contains("does not broadcast") && Contains("each dim must equal a's or be 1"));
  CHECK_THROWS_WITH(b.add(x, b.cast(x, ElemType::F16)), Contains("share a non-quantized element type"));
  for (auto op : {OpKind::Silu, OpKind::Gelu, OpKind::Sigmoid, OpKind::Softplus, OpKind::Exp, OpKind::Neg,
                  OpKind::Abs, OpKind::Sign, OpKind::Sqrt, OpKind::Softmax}) {
    INFO(op_info(op).mnemonic);
    CHECK(type(b.create(op, {x}).results[0]) == "tensor<T x 64 x f32, device>");
    CHECK_THROWS_WITH(b.create(op, {ids}), Contains("must be f32, f16 or bf16"));
  }
  CHECK(type(b.scale(x, 2.0)) == "tensor<T x 64 x f32, device>");
  CHECK(type(b.cast(ids, ElemType::I64)) == "tensor<T x i64, device>");
  CHECK_THROWS_WITH(b.cast(x, ElemType::quant(vtc::GgmlType::Q8_0)), Contains("not a non-quantized element type"));
}

TEST_CASE_METHOD(Fixture, "shape: abs, sign, sqrt keep bf16, clamp checks its bounds", "[ir][shapes]") {
  Value h = b.cast(x, ElemType::BF16);
  CHECK(type(b.sqrt(b.sign(b.abs(h)))) == "tensor<T x 64 x bf16, device>");
  CHECK(type(b.clamp(x, 1e-6, std::numeric_limits<double>::infinity())) == "tensor<T x 64 x f32, device>");
  CHECK(type(b.clamp(h, -1.0, -1.0)) == "tensor<T x 64 x bf16, device>");  // a point range is valid
  CHECK_THROWS_WITH(b.clamp(x, 2.0, 1.0), Contains("clamp needs min <= max, got min = 2.0, max = 1.0"));
  CHECK_THROWS_WITH(b.clamp(x, std::nan(""), 1.0), Contains("clamp needs min <= max"));
  CHECK_THROWS_WITH(b.clamp(ids, 0.0, 1.0), Contains("input (operand 0) must be f32, f16 or bf16"));
  CHECK_THROWS_WITH(b.create(OpKind::Clamp, {x}, {{"min", Attr::of_float(0.0)}}), Contains("missing attribute 'max'"));
}

TEST_CASE_METHOD(Fixture, "shape: sum keeps the last dim as 1, in f32", "[ir][shapes]") {
  CHECK(type(b.sum(x)) == "tensor<T x 1 x f32, device>");
  Value h = b.reshape(b.cast(x, ElemType::F16), {T, 4, 16});
  CHECK(type(b.sum(h)) == "tensor<T x 4 x 1 x f32, device>");
  CHECK(type(b.sum(b.to_host(w))) == "tensor<1 x f32, host>");
  CHECK_THROWS_WITH(b.sum(ids), Contains("input (operand 0) must be f32, f16 or bf16"));
  Value scalar = b.arg("scalar", tensor({}, ElemType::F32));
  CHECK_THROWS_WITH(b.sum(scalar), Contains("must have rank >= 1"));
}

TEST_CASE_METHOD(Fixture, "shape: l2_norm, causal_conv1d and delta_rule", "[ir][shapes]") {
  CHECK(type(b.l2_norm(x, 1e-6)) == "tensor<T x 64 x f32, device>");
  CHECK_THROWS_WITH(b.l2_norm(x, 0.0), Contains("eps must be positive"));
  m.add_state("conv", StateKind::Plain, tensor({S, 3, 64}, ElemType::F32));
  m.add_state("conv_d2", StateKind::Plain, tensor({S, 6, 64}, ElemType::F32));
  Value kernel = b.arg("kernel", tensor({64, 4}, ElemType::F32));
  CHECK(type(b.causal_conv1d(x, kernel, ids, "conv")) == "tensor<T x 64 x f32, device>");
  CHECK(type(b.causal_conv1d(x, kernel, ids, "conv_d2", 2)) == "tensor<T x 64 x f32, device>");
  CHECK_THROWS_WITH(b.causal_conv1d(x, kernel, ids, "conv", 2), Contains("must be [S x 6 x 64]"));
  CHECK_THROWS_WITH(b.causal_conv1d(x, kernel, ids, "kv"), Contains("must be plain"));
  CHECK_THROWS_WITH(b.causal_conv1d(x, kernel, x, "conv"), Contains("sequence ids (operand 2) must be [T] i32"));
  m.add_state("delta", StateKind::Plain, tensor({S, 4, 16, 16}, ElemType::F32));
  Value q = b.reshape(x, {T, 4, 16});
  Value g = b.arg("g", tensor({T, 4}, ElemType::F32));
  CHECK(type(b.delta_rule(q, q, q, g, g, ids, "delta", 0.25)) == "tensor<T x 4 x 16 x f32, device>");
  Value q2 = b.reshape(x, {T, 2, 32});
  CHECK_THROWS_WITH(b.delta_rule(q2, q2, q, g, g, ids, "delta", 0.25), Contains("head counts differ"));
  CHECK_THROWS_WITH(b.delta_rule(q, q, q, g, g, ids, "conv", 0.25), Contains("must be [S x 4 x 16 x 16]"));
  CHECK_THROWS_WITH(b.delta_rule(q, q, q, x, g, ids, "delta", 0.25), Contains("gate [T, H]"));
  // A per-key-channel gate [T, H, Dk] (Kimi Delta Attention); beta stays per head.
  CHECK(type(b.delta_rule(q, q, q, q, g, ids, "delta", 0.25)) == "tensor<T x 4 x 16 x f32, device>");
  CHECK_THROWS_WITH(b.delta_rule(q, q, q, b.reshape(x, {T, 2, 32}), g, ids, "delta", 0.25), Contains("or [T x 4 x 16]"));
  CHECK_THROWS_WITH(b.delta_rule(q, q, q, g, q, ids, "delta", 0.25), Contains("beta [T, H] (operand 4) must have rank 2"));
}

TEST_CASE_METHOD(Fixture, "shape: rms_norm", "[ir][shapes]") {
  CHECK(type(b.rms_norm(x, w, 1e-6)) == "tensor<T x 64 x f32, device>");
  Value w8 = b.arg("w8", tensor({8}, ElemType::F32));
  CHECK_THROWS_WITH(b.rms_norm(x, w8, 1e-6), Contains("must match the input's trailing dims"));
  CHECK_THROWS_WITH(b.rms_norm(x, w, 0.0), Contains("eps must be positive"));
  // Grouped gains: [G, D] over [T, G, D] (hyper-connection streams).
  Value streams = b.reshape(x, {T, 4, 16});
  Value gains = b.arg("gains", tensor({4, 16}, ElemType::F32));
  CHECK(type(b.rms_norm(streams, gains, 1e-6)) == "tensor<T x 4 x 16 x f32, device>");
  Value wrong = b.arg("wrong", tensor({2, 16}, ElemType::F32));
  CHECK_THROWS_WITH(b.rms_norm(streams, wrong, 1e-6), Contains("must match the input's trailing dims"));
}

TEST_CASE_METHOD(Fixture, "shape: rope normal, neox and multi", "[ir][shapes]") {
  Value q = b.reshape(x, {T, 4, 16});
  CHECK(type(b.rope(q, pos, {.mode = RopeMode::Normal, .n_rot = 16})) == "tensor<T x 4 x 16 x f32, device>");
  CHECK(type(b.rope(q, pos, {.mode = RopeMode::Neox, .n_rot = 8})) == "tensor<T x 4 x 16 x f32, device>");
  Value pos4 = b.arg("pos4", tensor({T, 4}, ElemType::I32));
  CHECK(type(b.rope(q, pos4, {.mode = RopeMode::Multi, .n_rot = 16, .sections = {4, 2, 2, 0}})) == "tensor<T x 4 x 16 x f32, device>");
  CHECK_THROWS_WITH(b.rope(q, pos4, {.mode = RopeMode::Multi, .n_rot = 16}), Contains("multi rope needs 4 'sections'"));
  CHECK_THROWS_WITH(b.rope(q, pos, {.mode = RopeMode::Neox, .n_rot = 32}), Contains("n_rot exceeds head dim"));
  CHECK_THROWS_WITH(b.rope(x, pos, {.n_rot = 16}), Contains("must have rank 3"));
  Value factors = b.arg("factors", tensor({8}, ElemType::F32));
  CHECK(type(b.rope(q, pos, {.mode = RopeMode::Normal, .n_rot = 16}, factors)) == "tensor<T x 4 x 16 x f32, device>");
  CHECK_THROWS_WITH(b.rope(q, pos, {.mode = RopeMode::Normal, .n_rot = 8}, factors), Contains("freq_factors (operand 2) must be [4] f32"));
}

TEST_CASE_METHOD(Fixture, "shape: attention with GQA, window and softcap", "[ir][shapes]") {
  Value q = b.reshape(b.slice(x, 1, 0, 32), {T, 4, 8});
  Value k = b.reshape(b.slice(x, 1, 32, 16), {T, 2, 8});
  AttentionOptions o{.state = "kv", .scale = 0.35, .causal = true, .window = 4096, .softcap = 30.0};
  CHECK(type(b.attention(q, k, k, pos, pos, o)) == "tensor<T x 4 x 8 x f32, device>");
  Value k3 = b.reshape(b.slice(x, 1, 0, 24), {T, 3, 8});
  CHECK_THROWS_WITH(b.attention(q, k3, k3, pos, pos, o), Contains("multiple of kv heads"));
  CHECK_THROWS_WITH(b.attention(q, k, k, pos, pos, {.state = "hist", .scale = 1}), Contains("KV state @hist"));
  CHECK_THROWS_WITH(b.attention(q, k, k, pos, pos, {.state = "none", .scale = 1}), Contains("not declared"));
  CHECK_THROWS_WITH(b.attention(q, k, k, pos, x, o), Contains("sequence ids (operand 4)"));
}

TEST_CASE_METHOD(Fixture, "shape: indexer_select", "[ir][shapes]") {
  m.add_state("idx", StateKind::Paged, tensor({1, P, 16, 16}, ElemType::F16));
  m.add_state("idx_i", StateKind::Paged, tensor({1, P, 16, 16}, ElemType::I32));
  Value q = b.reshape(x, {T, 4, 16});
  Value k = b.slice(x, 1, 0, 16);
  Value kn = b.arg("kn", tensor({16}, ElemType::F32));
  IndexerOptions o{.state = "idx", .ratio = 4, .top_k = 32, .eps = 1e-6, .rope = {.mode = RopeMode::Neox, .n_rot = 16}};
  CHECK(type(b.indexer_select(q, k, kn, pos, ids, o)) == "tensor<T x 35 x i32, device>");
  IndexerOptions multi = o;
  multi.rope = {.mode = RopeMode::IMulti, .n_rot = 16, .sections = {4, 2, 2, 0}};
  CHECK(type(b.indexer_select(q, k, kn, pos, ids, multi)) == "tensor<T x 35 x i32, device>");
  auto with = [&](auto edit) {
    IndexerOptions e = o;
    edit(e);
    return e;
  };
  CHECK_THROWS_WITH(b.indexer_select(q, k, kn, pos, ids, with([](auto& e) { e.rope.mode = RopeMode::Multi; })),
                    Contains("multi rope needs 4 'sections'; other modes take none"));
  CHECK_THROWS_WITH(b.indexer_select(q, k, kn, pos, ids, with([](auto& e) { e.rope.sections = {4, 2, 2, 0}; })),
                    Contains("multi rope needs 4 'sections'; other modes take none"));
  CHECK_THROWS_WITH(b.indexer_select(q, k, kn, pos, ids, with([](auto& e) { e.ratio = 0; })),
                    Contains("ratio must be in [1, 64]"));
  CHECK_THROWS_WITH(b.indexer_select(q, k, kn, pos, ids, with([](auto& e) { e.ratio = 65; })),
                    Contains("ratio must be in [1, 64]"));
  CHECK_THROWS_WITH(b.indexer_select(q, k, kn, pos, ids, with([](auto& e) { e.top_k = 0; })),
                    Contains("top_k must be positive"));
  CHECK_THROWS_WITH(b.indexer_select(q, k, kn, pos, ids, with([](auto& e) { e.rope.n_rot = 18; })),
                    Contains("n_rot must be positive, even and at most the head dim"));
  CHECK_THROWS_WITH(b.indexer_select(q, k, kn, pos, ids, with([](auto& e) { e.rope.n_rot = 3; })),
                    Contains("n_rot must be positive, even and at most the head dim"));
  CHECK_THROWS_WITH(b.indexer_select(q, k, kn, pos, ids, with([](auto& e) { e.state = "kv"; })),
                    Contains("indexer state @kv [2 x P x 16 x 2 x 8] must be paged [1, P, page, 16]"));
  CHECK_THROWS_WITH(b.indexer_select(q, k, kn, pos, ids, with([](auto& e) { e.state = "hist"; })),
                    Contains("must be paged [1, P, page, 16]"));
  CHECK_THROWS_WITH(b.indexer_select(q, k, kn, pos, ids, with([](auto& e) { e.state = "none"; })),
                    Contains("state @none is not declared"));
  CHECK_THROWS_WITH(b.indexer_select(q, k, kn, pos, ids, with([](auto& e) { e.state = "idx_i"; })),
                    Contains("indexer state @idx_i must hold floats"));
  CHECK_THROWS_WITH(b.indexer_select(q, b.slice(x, 1, 0, 8), kn, pos, ids, o),
                    Contains("queries and keys have different head dims: 16 != 8"));
  Value k5 = b.arg("k5", tensor({5, 16}, ElemType::F32));
  CHECK_THROWS_WITH(b.indexer_select(q, k5, kn, pos, ids, o),
                    Contains("queries and keys have different token counts: T != 5"));
  CHECK_THROWS_WITH(b.indexer_select(q, q, kn, pos, ids, o), Contains("raw keys [T, D] (operand 1) must have rank 2"));
  CHECK_THROWS_WITH(b.indexer_select(x, k, kn, pos, ids, o), Contains("queries [T, H, D] (operand 0) must have rank 3"));
  CHECK_THROWS_WITH(b.indexer_select(b.cast(q, ElemType::F16), k, kn, pos, ids, o), Contains("operand 0 must be f32"));
  Value kn8 = b.arg("kn8", tensor({8}, ElemType::F32));
  CHECK_THROWS_WITH(b.indexer_select(q, k, kn8, pos, ids, o),
                    Contains("the key norm weight and the key head dim differ"));
  CHECK_THROWS_WITH(b.indexer_select(q, k, kn, k, ids, o), Contains("positions (operand 3) must be [T] i32"));
  CHECK_THROWS_WITH(b.indexer_select(q, k, kn, pos, k, o), Contains("sequence ids (operand 4) must be [T] i32"));
}

TEST_CASE_METHOD(Fixture, "shape: attention's selected positions (operand 5)", "[ir][shapes]") {
  Value q = b.reshape(b.slice(x, 1, 0, 32), {T, 4, 8});
  Value k = b.reshape(b.slice(x, 1, 32, 16), {T, 2, 8});
  AttentionOptions o{.state = "kv", .scale = 0.35};
  Value sel = b.arg("sel", tensor({T, 35}, ElemType::I32));
  CHECK(type(b.attention(q, k, k, pos, ids, o, sel)) == "tensor<T x 4 x 8 x f32, device>");
  CHECK_THROWS_WITH(b.attention(q, k, k, pos, ids, o, x),
                    Contains("selected positions (operand 5) must be [T, W] i32, got tensor<T x 64 x f32, device>"));
  Value sel5 = b.arg("sel5", tensor({5, 35}, ElemType::I32));
  CHECK_THROWS_WITH(b.attention(q, k, k, pos, ids, o, sel5), Contains("selected positions (operand 5) must be [T, W] i32"));
  CHECK_THROWS_WITH(b.attention(q, k, k, pos, ids, o, ids), Contains("selected positions (operand 5) must be [T, W] i32"));
}

TEST_CASE_METHOD(Fixture, "shape: softmax, argmax, top_k", "[ir][shapes]") {
  CHECK(type(b.argmax(x)) == "tensor<T x i32, device>");
  auto [v, i] = b.top_k(x, 5);
  CHECK(type(v) == "tensor<T x 5 x f32, device>");
  CHECK(type(i) == "tensor<T x 5 x i32, device>");
  CHECK_THROWS_WITH(b.top_k(x, 65), Contains("k = 65 must be in [1, 64]"));
  CHECK_THROWS_WITH(b.argmax(ids), Contains("must be f32"));
}

TEST_CASE_METHOD(Fixture, "shape: moe_ffn's four operand forms through Builder::moe_ffn", "[ir][shapes][moe]") {
  const ElemType q8 = ElemType::quant(vtc::GgmlType::Q8_0);
  Value logits = b.arg("logits", tensor({T, 8}, ElemType::F32));
  Op& route = b.create(OpKind::MoeRoute, {logits},
                       {{"k", Attr::of_int(2)}, {"gating", Attr::of_enum("softmax")}, {"norm", Attr::of_bool(true)}});
  Value rw = route.results[0], rid = route.results[1];
  MoeExperts split{.gate = b.arg("g", tensor({8, 96, 64}, q8)), .up = b.arg("u", tensor({8, 96, 64}, q8)),
                   .down = b.arg("d", tensor({8, 64, 96}, q8))};
  MoeExperts merged{.gate_up = b.arg("gu", tensor({8, 192, 64}, q8)), .down = split.down};
  Value s = b.arg("s", tensor({8}, ElemType::F32));
  auto check_form = [&](const MoeExperts& e, size_t operands, bool scaled) {
    Value y = b.moe_ffn(x, rw, rid, e);
    CHECK(type(y) == "tensor<T x 64 x f32, device>");
    const Op& op = *y->def;
    CHECK(op.operands.size() == operands);
    CHECK(MoeFfnAttrs::of(op).scaled == scaled);
    // MoeExperts::of decodes what the builder encoded.
    const MoeExperts back = MoeExperts::of(op);
    CHECK(back.gate == e.gate);
    CHECK(back.up == e.up);
    CHECK(back.gate_up == e.gate_up);
    CHECK(back.down == e.down);
    CHECK(back.gate_scale == e.gate_scale);
    CHECK(back.up_scale == e.up_scale);
    CHECK(back.down_scale == e.down_scale);
  };
  check_form(split, 6, false);
  check_form(merged, 5, false);
  MoeExperts split_scaled = split, merged_scaled = merged;
  split_scaled.gate_scale = split_scaled.up_scale = split_scaled.down_scale = s;
  merged_scaled.down_scale = s;
  check_form(split_scaled, 9, true);
  check_form(merged_scaled, 6, true);
  // Which operands may be given together.
  MoeExperts partial = split;
  partial.down_scale = s;
  CHECK_THROWS_WITH(b.moe_ffn(x, rw, rid, partial), Contains("takes all three scales or none, got 1"));
  MoeExperts both = merged;
  both.gate = split.gate;
  CHECK_THROWS_WITH(b.moe_ffn(x, rw, rid, both), Contains("takes gate_up or gate and up, not both"));
  MoeExperts gate_scaled = merged;
  gate_scaled.gate_scale = s;
  CHECK_THROWS_WITH(b.moe_ffn(x, rw, rid, gate_scaled), Contains("takes only a down scale"));
  // Shapes: the merged stack's rows are 2F of down's F; scales are [E] f32.
  MoeExperts wide = merged;
  wide.gate_up = b.arg("gu2", tensor({8, 96, 64}, q8));
  CHECK_THROWS_WITH(b.moe_ffn(x, rw, rid, wide), Contains("down experts must be [8 x 64 x 48], got [8 x 64 x 96]"));
  MoeExperts bad_scale = merged;
  bad_scale.down_scale = b.arg("s4", tensor({4}, ElemType::F32));
  CHECK_THROWS_WITH(b.moe_ffn(x, rw, rid, bad_scale),
                    Contains("down scale [E] (operand 5) must be [8] f32 (one factor per expert), got tensor<4 x f32"));
  MoeExperts int_stack = merged;
  int_stack.gate_up = b.arg("gui", tensor({8, 192, 64}, ElemType::I32));
  CHECK_THROWS_WITH(b.moe_ffn(x, rw, rid, int_stack), Contains("gate_up experts [E, 2F, D] (operand 3) must be float or quantized"));
}

TEST_CASE_METHOD(Fixture, "shape: reshape, view, transpose", "[ir][shapes]") {
  CHECK(type(b.reshape(x, {T * 2, 32})) == "tensor<T*2 x 32 x f32, device>");
  CHECK_THROWS_WITH(b.reshape(x, {T, 63}), Contains("changes the element count"));
  CHECK(type(b.view(w, {4, 8}, 32)) == "tensor<4 x 8 x f32, device>");
  CHECK_THROWS_WITH(b.view(w, {4, 8}, 33), Contains("exceeds the 64 elements"));
  CHECK(type(b.transpose(x, {1, 0})) == "tensor<64 x T x f32, device>");
  CHECK_THROWS_WITH(b.transpose(x, {0, 0}), Contains("perm must be a permutation"));
}

TEST_CASE_METHOD(Fixture, "shape: concat, slice", "[ir][shapes]") {
  CHECK(type(b.concat({x, x, x}, 1)) == "tensor<T x 192 x f32, device>");
  CHECK(type(b.concat({x, x}, 0)) == "tensor<T*2 x 64 x f32, device>");
  CHECK_THROWS_WITH(b.concat({x, w}, 0), Contains("does not match operand 0"));
  CHECK_THROWS_WITH(b.concat({x}, 2), Contains("axis 2 is out of range"));
  CHECK(type(b.slice(x, 0, T - 1, 1)) == "tensor<1 x 64 x f32, device>");
  CHECK_THROWS_WITH(b.slice(x, 1, 60, 8), Contains("exceeds dim 64"));
}

TEST_CASE_METHOD(Fixture, "shape: gather, scatter", "[ir][shapes]") {
  Value idx2 = b.arg("idx2", tensor({S, 3}, ElemType::I64));
  CHECK(type(b.gather(x, idx2, 0)) == "tensor<S x 3 x 64 x f32, device>");
  CHECK(type(b.gather(x, ids, 1)) == "tensor<T x T x f32, device>");
  CHECK_THROWS_WITH(b.gather(x, x, 0), Contains("indices (operand 1) must be i32 or i64"));
  Value upd = b.arg("upd", tensor({S, 3, 64}, ElemType::F32));
  CHECK(type(b.scatter(x, idx2, upd, 0)) == "tensor<T x 64 x f32, device>");
  CHECK_THROWS_WITH(b.scatter(x, idx2, x, 0), Contains("updates (operand 2) must be [S x 3 x 64]"));
}

TEST_CASE_METHOD(Fixture, "shape: ngram_hash and ngram_roll", "[ir][shapes]") {
  Value hist = b.state_read("hist");
  NgramHashOptions o{.n = 3, .heads_per_gram = 2, .eos = 1, .mult = {3, 5, 7}, .vocab = {5, 6, 7, 8},
                     .offset = {0, 5, 11, 18}};
  CHECK(type(b.ngram_hash(ids, pos, hist, o)) == "tensor<T x 4 x i32, device>");
  NgramHashOptions short_mult = o;
  short_mult.mult = {3, 5};
  CHECK_THROWS_WITH(b.ngram_hash(ids, pos, hist, short_mult), Contains("mult must have n = 3 entries"));
  NgramHashOptions wide = o;
  wide.n = 4;
  wide.mult = {1, 2, 3, 4};
  CHECK_THROWS_WITH(b.ngram_hash(ids, pos, hist, wide), Contains("history must keep n-1 = 3 tokens"));
  NgramHashOptions overflow = o;
  overflow.offset = {0, 5, 11, 2147483647};
  CHECK_THROWS_WITH(b.ngram_hash(ids, pos, hist, overflow), Contains("must fit in i32"));
  CHECK(type(b.ngram_roll(hist, ids, pos, 1)) == "tensor<S x 2 x i64, device>");
  CHECK_THROWS_WITH(b.ngram_roll(x, ids, pos, 1), Contains("history (operand 0) must be [S, n-1] i64"));
}

TEST_CASE_METHOD(Fixture, "a failed build leaves the function unchanged", "[ir][shapes]") {
  size_t before = b.function().ops.size();
  CHECK_THROWS(b.matmul(ids, ids));
  CHECK(b.function().ops.size() == before);
}
