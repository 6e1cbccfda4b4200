// Verifier: the valid module passes; each mutation breaks exactly one rule
// and must fail with that rule's message. Plus the seed bug of DESIGN.md.
#include <catch2/catch.hpp>

#include <string>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ir_test_models.h"

using namespace vtc::ir;
using namespace vtc::ir::testing;
using Catch::Matchers::Contains;

namespace {

const std::string kValid = R"(weight @embd : tensor<256 x 64 x q8_0, device> = gguf("token_embd.weight")
weight @norm : tensor<64 x f32, device> = gguf("output_norm.weight")
weight @out : tensor<256 x 64 x f16, device> = gguf("output.weight")
state @last_ids : plain<S x i32, device>
state @ngram : ring<S x 2 x i64, device>
state @kv : paged<2 x P x 16 x 4 x 16 x f16, device>

func @decode(%seq: tensor<S x i32, device>, %pos: tensor<S x i32, device>) {
  %ids = state_read() {state = @last_ids} : tensor<S x i32, device>
  %e = weight() {name = @embd} : tensor<256 x 64 x q8_0, device>
  %x = embed(%e, %ids) : tensor<S x 64 x f32, device>
  %hist = state_read() {state = @ngram} : tensor<S x 2 x i64, device>
  %g = ngram_hash(%ids, %seq, %hist) {eos = 2, heads_per_gram = 1, mult = [3, 5, 7], n = 3, offset = [0, 10], vocab = [10, 20]} : tensor<S x 2 x i32, device>
  %hist2 = ngram_roll(%hist, %ids, %seq) {eos = 2} : tensor<S x 2 x i64, device>
  state_write(%hist2) {state = @ngram}
  %q = reshape(%x) {shape = [S, 4, 16]} : tensor<S x 4 x 16 x f32, device>
  %r = rope(%q, %pos) {base = 10000.0, mode = neox, n_rot = 16} : tensor<S x 4 x 16 x f32, device>
  %a = attention(%r, %r, %r, %pos, %seq) {causal = true, scale = 0.25, state = @kv} : tensor<S x 4 x 16 x f32, device>
  %a2 = reshape(%a) {shape = [S, 64]} : tensor<S x 64 x f32, device>
  %w = weight() {name = @norm} : tensor<64 x f32, device>
  %n = rms_norm(%a2, %w) {eps = 1.0e-06} : tensor<S x 64 x f32, device>
  %o = weight() {name = @out} : tensor<256 x 64 x f16, device>
  %logits = matmul(%n, %o) : tensor<S x 256 x f32, device>
  %tok = argmax(%logits) : tensor<S x i32, device>
  state_write(%tok) {state = @last_ids}
  %host_tok = to_host(%tok) : tensor<S x i32, host>
  return(%host_tok, %g)
}
)";

std::string replace_once(std::string text, const std::string& from, const std::string& to) {
  auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  REQUIRE(text.find(from, at + 1) == std::string::npos);  // the mutation is unambiguous
  return text.replace(at, from.size(), to);
}

std::string joined_errors(const std::string& text) {
  std::string all;
  for (const auto& e : verify_all(parse(text))) all += e + "\n";
  return all;
}

struct Mutation {
  const char* rule;
  std::string from, to, expected;
};

}  // namespace

TEST_CASE("the valid module verifies", "[ir][verifier]") {
  CHECK(joined_errors(kValid).empty());
}

TEST_CASE("each verifier rule rejects its mutation", "[ir][verifier]") {
  const Mutation mutations[] = {
      {"arity (operands)", "argmax(%logits)", "argmax(%logits, %logits)",
       "op #15 'argmax' (24:3): [arity] expects 1 operands, got 2"},
      {"arity (results)", "%tok = argmax(%logits) : tensor<S x i32, device>",
       "%tok, %extra = argmax(%logits) : tensor<S x i32, device>, tensor<S x i32, device>",
       "'argmax' (24:3): [arity] expects 1 results, got 2"},
      {"attr missing", " {eps = 1.0e-06}", "", "'rms_norm' (21:3): [attr] missing attribute 'eps' (float)"},
      {"attr unknown", "{eps = 1.0e-06}", "{eps = 1.0e-06, alpha = 2}", "[attr] unknown attribute 'alpha'"},
      {"attr kind", "{eps = 1.0e-06}", "{eps = \"small\"}", "[attr] attribute 'eps' must be float, got string"},
      {"attr enum", "mode = neox", "mode = sideways", "[attr] attribute 'mode' is 'sideways', expected one of normal, neox, multi"},
      {"type (annotation)", "%logits = matmul(%n, %o) : tensor<S x 256 x f32", "%logits = matmul(%n, %o) : tensor<S x 255 x f32",
       "'matmul' (23:3): [type] result 0 is tensor<S x 255 x f32, device> but the op produces tensor<S x 256 x f32, device>"},
      {"type (shape function)", "tensor<256 x 64 x f16, device> = gguf", "tensor<256 x 32 x f16, device> = gguf",
       "'weight' (22:3): [type] result 0 is tensor<256 x 64 x f16, device> but the op produces tensor<256 x 32 x f16, device>"},
      {"placement (operand)", "%tok = argmax(%logits) : tensor<S x i32, device>", "%tok = argmax(%logits) : tensor<S x i32, host>",
       "'argmax' (24:3): [placement] operand 0 (%logits) is on device but the op runs on host; a device value reaches a host op only through to_host"},
      {"placement (transfer)", "%host_tok = to_host(%tok) : tensor<S x i32, host>", "%host_tok = to_host(%tok) : tensor<S x i32, device>",
       "'to_host' (26:3): [placement] transfer to device of a value already on device"},
      {"state (undeclared)", "state_write(%tok) {state = @last_ids}", "state_write(%tok) {state = @first_ids}",
       "'state_write' (25:3): [state] state @first_ids is not declared"},
      {"state (write type)", "state_write(%hist2) {state = @ngram}", "state_write(%g) {state = @ngram}",
       "[state] writes tensor<S x 2 x i32, device> to state @ngram declared as tensor<S x 2 x i64, device>"},
      {"symbol (weight undeclared)", "{name = @norm}", "{name = @nrom}", "'weight' (20:3): [symbol] weight @nrom is not declared"},
      {"effect (unused transfer)", "return(%host_tok, %g)", "return(%g)",
       "'to_host' (26:3): [effect] result 0 of a side-effecting op (transfer) is never used"},
      {"return (missing)", "  return(%host_tok, %g)\n", "", "func @decode (8:1): [return] function must end with return"},
      {"return (not last)", "  state_write(%tok) {state = @last_ids}\n", "  return(%tok)\n",
       "[return] return must be the last op of the function"},
      {"decl (ring state)", "ring<S x 2 x i64, device>", "ring<2 x 2 x i64, device>",
       "state @ngram (5:1): [decl] a ring state keeps one slot per sequence: its shape needs an S dimension"},
      {"decl (paged state)", "paged<2 x P x 16", "paged<2 x 8 x 16", "[decl] a paged state needs a P (pages) dimension"},
      {"decl (quant block)", "weight @embd : tensor<256 x 64 x q8_0", "weight @embd : tensor<256 x 48 x q8_0",
       "weight @embd (1:1): [decl] q8_0 rows are blocks of 32 values; the last dimension must be a multiple of it"},
      {"decl (symbolic weight)", "weight @norm : tensor<64 x f32", "weight @norm : tensor<T x f32",
       "[decl] weight shapes must be constant"},
      {"symbol (duplicate)", "state @kv :", "state @ngram :", "state @ngram (6:1): [symbol] @ngram is declared twice"},
      {"symbol (step kind)", "func @decode(", "func @decod(", "[symbol] functions are named after a step kind"},
  };
  for (const auto& m : mutations) {
    SECTION(m.rule) {
      std::string errors = joined_errors(replace_once(kValid, m.from, m.to));
      INFO(errors);
      CHECK_THAT(errors, Contains(m.expected));
    }
  }
}

TEST_CASE("ssa: a use before its definition is rejected", "[ir][verifier]") {
  // Text cannot spell this (the parser resolves names in order), so swap
  // two ops of a parsed module.
  Module m = parse(kValid);
  Function& f = *m.functions[0];
  std::swap(f.ops[1], f.ops[2]);  // embed now precedes the weight it reads
  std::string all;
  for (const auto& e : verify_all(m)) all += e + "\n";
  CHECK_THAT(all, Contains("op #1 'embed' (11:3): [ssa] operand 0 is used before it is defined"));
}

TEST_CASE("ssa: a value from another function is rejected", "[ir][verifier]") {
  Module m = parse(kValid);
  Function& other = m.add_function("prefill");
  Value foreign = m.functions[0]->ops[0]->results[0];
  other.append(OpKind::Return, {foreign}, {});
  std::string all;
  for (const auto& e : verify_all(m)) all += e + "\n";
  CHECK_THAT(all, Contains("func @prefill, op #0 'return': [ssa] operand 0 is defined in another function"));
}

TEST_CASE("parse errors carry line, column and message", "[ir][verifier][parser]") {
  CHECK_THROWS_WITH(parse(replace_once(kValid, "argmax(%logits)", "argmax(%logit)")),
                    "24:17: error: use of undefined value %logit");
  CHECK_THROWS_WITH(parse(replace_once(kValid, "argmax(%logits)", "argmux(%logits)")), "24:10: error: unknown op 'argmux'");
}

// DESIGN.md, "Why a compiler": the decode step hashed host ids while the
// sampled ids lived on the device, so the hash read a stale host copy.
// Here the ids come from the device state @last_ids (written by argmax on
// the device); an ngram_hash placed on the host may not read them.
TEST_CASE("seed bug: host ngram_hash reading device-sampled ids is rejected", "[ir][verifier][seed]") {
  Module buggy = make_ngram_decode(Placement::Host, /*insert_to_host=*/false);
  auto errors = verify_all(buggy);
  REQUIRE_FALSE(errors.empty());
  INFO(print(buggy));
  CHECK_THAT(errors[0], Contains("func @decode, op #2 'ngram_hash': [placement] operand 0 (%ids) is on device but the op "
                                 "runs on host; a device value reaches a host op only through to_host"));
}

TEST_CASE("seed bug fixes verify: explicit to_host, or the hash on the device", "[ir][verifier][seed]") {
  Module drained = make_ngram_decode(Placement::Host, /*insert_to_host=*/true);
  CHECK(verify_all(drained).empty());
  CHECK(print(drained).find("to_host(%ids)") != std::string::npos);
  Module on_device = make_ngram_decode(Placement::Device, /*insert_to_host=*/false);
  CHECK(verify_all(on_device).empty());
  CHECK(print(on_device).find("to_host") == std::string::npos);  // no drain per step
}

TEST_CASE("verify() throws with every message", "[ir][verifier]") {
  Module buggy = make_ngram_decode(Placement::Host, false);
  CHECK_THROWS_WITH(verify(buggy), Contains("[placement]"));
  CHECK_NOTHROW(verify(make_llama_module(1)));
}
