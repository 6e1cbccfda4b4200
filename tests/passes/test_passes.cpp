// PassManager and pass tests beyond the golden files: pipeline parsing, the
// no-change detector, verification after a pass, dumps, and the whole
// pipeline on the dense llama module built from a generated model.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "frontends/gguf/arch/arch.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/step_interface.h"
#include "ir/verifier.h"
#include "passes/memory_plan.h"
#include "passes/pass_manager.h"
#include "passes/placement.h"
#include "support/error.h"
#include "tests/e2e/e2e_fixtures.h"

using namespace vtc;

namespace {

const char* kNgramDecode = R"(
state @last_ids : plain<S x i32, device>
state @ngram : ring<S x 2 x i64, device>
func @decode(%seq: tensor<S x i32, device>, %x: tensor<S x 8 x f32, device>) {
  %ids = state_read() {state = @last_ids} : tensor<S x i32, device>
  %hist = state_read() {state = @ngram} : tensor<S x 2 x i64, device>
  %rows = ngram_hash(%ids, %seq, %hist) {n = 3, heads_per_gram = 2, eos = 2, mult = [11, 13, 17], vocab = [5, 6, 7, 8], offset = [0, 5, 11, 18]} : tensor<S x 4 x i32, device>
  %hist2 = ngram_roll(%hist, %ids, %seq) {eos = 2} : tensor<S x 2 x i64, device>
  state_write(%hist2) {state = @ngram}
  %tok = argmax(%x) : tensor<S x i32, device>
  state_write(%tok) {state = @last_ids}
  return(%rows, %x)
}
)";

// Changes the module but claims it did not.
class LyingPass final : public passes::Pass {
 public:
  std::string_view name() const override { return "liar"; }
  bool run(ir::Module& m, passes::PassContext&) override {
    m.functions[0]->ops[0]->results[0]->name = "renamed";
    return false;
  }
};

// Breaks the module (a result type no longer matches) and says so.
class BreakingPass final : public passes::Pass {
 public:
  std::string_view name() const override { return "breaker"; }
  bool run(ir::Module& m, passes::PassContext&) override {
    for (auto& op : m.functions[0]->ops)
      if (op->kind == ir::OpKind::Argmax) op->results[0]->type.elem = ir::ElemType::F32;
    return true;
  }
};

std::ostringstream sink;

}  // namespace

TEST_CASE("pipelines parse with options and reject bad text", "[passes]") {
  auto p = passes::parse_pipeline("canonicalize, placement{target=cuda}, memory-plan{T=512,S=1,R=1},bind-state");
  REQUIRE(p.size() == 4);
  CHECK(p[1].name == "placement");
  CHECK(p[1].options.get("target") == "cuda");
  CHECK(p[2].options.get_int("T", 0) == 512);
  CHECK(p[2].options.values.size() == 3);
  CHECK_THROWS_WITH(passes::parse_pipeline("canonicalize,"), Catch::Contains("trailing ','"));
  CHECK_THROWS_WITH(passes::parse_pipeline("placement{target"), Catch::Contains("missing '}'"));
  CHECK_THROWS_WITH(passes::create_pass({"fuse-all", {}}), Catch::Contains("unknown pass 'fuse-all'"));
  CHECK_THROWS_WITH(passes::create_pass(passes::parse_pipeline("canonicalize{x=1}")[0]),
                    Catch::Contains("takes no options"));
  for (const auto& r : passes::registered_passes()) CHECK(passes::create_pass({r.name, {}})->name() == r.name);
}

TEST_CASE("the no-change detector catches a pass that lies", "[passes]") {
  ir::Module m = ir::parse(kNgramDecode);
  passes::PassManagerOptions o;
  o.check_no_change = true;
  o.log = &sink;
  passes::PassManager pm(o);
  pm.add(std::make_unique<LyingPass>());
  CHECK_THROWS_WITH(pm.run(m), Catch::Contains("pass 'liar' reported no change but changed the module"));
}

TEST_CASE("a pass that breaks the module fails verification, naming it", "[passes]") {
  ir::Module m = ir::parse(kNgramDecode);
  passes::PassManagerOptions o;
  o.log = &sink;
  passes::PassManager pm(o);
  pm.add(std::make_unique<BreakingPass>());
  CHECK_THROWS_WITH(pm.run(m), Catch::Contains("module does not verify after pass 'breaker'"));
}

TEST_CASE("placement on cuda keeps an n-gram decode on the device with zero transfers", "[passes]") {
  ir::Module m = ir::parse(kNgramDecode);
  passes::PassManagerOptions o;
  o.check_no_change = true;
  o.log = &sink;
  passes::PassManager pm(o);
  pm.add_pipeline("placement{target=cuda,max_transfers=0}");
  pm.run(m);
  auto& placement = dynamic_cast<passes::PlacementPass&>(pm.pass(0));
  CHECK(placement.transfers().empty());
  for (const auto& op : m.functions[0]->ops) {
    CHECK(op->kind != ir::OpKind::ToHost);
    if (op->kind == ir::OpKind::NgramHash || op->kind == ir::OpKind::Argmax)
      CHECK(op->results[0].type().placement == ir::Placement::Device);
  }
}

TEST_CASE("placement reports the drain when the ids live on the host", "[passes]") {
  // @last_ids on the host: the input spells out the transfers (it must
  // verify); placement drops them and must insert and report both again.
  const char* text = R"(
state @last_ids : plain<S x i32, host>
func @decode(%seq: tensor<S x i32, device>, %x: tensor<S x 8 x f32, device>, %hist: tensor<S x 2 x i64, device>) {
  %ids = state_read() {state = @last_ids} : tensor<S x i32, host>
  %ids_dev = to_device(%ids) : tensor<S x i32, device>
  %rows = ngram_hash(%ids_dev, %seq, %hist) {n = 3, heads_per_gram = 2, eos = 2, mult = [11, 13, 17], vocab = [5, 6, 7, 8], offset = [0, 5, 11, 18]} : tensor<S x 4 x i32, device>
  %tok = argmax(%x) : tensor<S x i32, device>
  %tok_host = to_host(%tok) : tensor<S x i32, host>
  state_write(%tok_host) {state = @last_ids}
  return(%rows)
}
)";
  ir::Module m = ir::parse(text);
  passes::PassManagerOptions o;
  o.log = &sink;
  {
    passes::PassManager pm(o);
    pm.add_pipeline("placement{target=cuda}");
    pm.run(m);
    auto& placement = dynamic_cast<passes::PlacementPass&>(pm.pass(0));
    REQUIRE(placement.transfers().size() == 2);  // ids up for the hash, sampled ids down
    CHECK(placement.transfers()[0].kind == "to_device");
    CHECK(placement.transfers()[1].kind == "to_host");
    CHECK(pm.context().remarks.size() == 2);
  }
  passes::PassManager strict(o);
  strict.add_pipeline("placement{target=cuda,max_transfers=0}");
  CHECK_THROWS_WITH(strict.run(m), Catch::Contains("more than max_transfers=0"));
}

TEST_CASE("dumps are written per step and pass, parse again, and honour the filter", "[passes]") {
  const auto dir = std::filesystem::path(test::unique_temp_path("pass_dumps"));
  std::filesystem::remove_all(dir);
  ir::Module m = ir::parse(kNgramDecode);
  passes::PassManagerOptions o;
  o.dump_dir = dir.string();
  o.dump_pass = "^(placement|bind-state)$";
  o.disabled_passes = {"canonicalize"};
  o.log = &sink;
  passes::PassManager pm(o);
  pm.add_pipeline("canonicalize,placement{target=cuda},memory-plan{S=1},bind-state");
  pm.run(m);
  CHECK(pm.runs()[0].disabled);
  CHECK(std::filesystem::exists(dir / "decode" / "00-input.vtcir"));
  CHECK_FALSE(std::filesystem::exists(dir / "decode" / "01-canonicalize.vtcir"));
  CHECK(std::filesystem::exists(dir / "decode" / "02-placement.vtcir"));
  CHECK_FALSE(std::filesystem::exists(dir / "decode" / "03-memory-plan.vtcir"));
  REQUIRE(std::filesystem::exists(dir / "decode" / "04-bind-state.vtcir"));
  std::ifstream in(dir / "decode" / "04-bind-state.vtcir");
  std::stringstream text;
  text << in.rdbuf();
  ir::Module again = ir::parse(text.str());
  CHECK(ir::structurally_equal(m, again));
  CHECK(text.str().find("// memory-plan @decode") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("the pipeline runs on the dense llama module, each pass alone and together", "[passes][reference]") {
  auto file = gguf::GgufFile::open(test::model_path("llama", "f32"));
  const std::string plan = "memory-plan{T=64,S=1,R=1,P=8}";
  for (std::string pipeline : {std::string("canonicalize"), std::string("placement{target=cpu}"),
                               std::string("placement{target=cuda}"), plan, std::string("bind-state"),
                               "canonicalize,placement{target=cuda},bind-state," + plan}) {
    INFO(pipeline);
    ir::Module m = arch::build_module(file);
    passes::PassManagerOptions o;
    o.check_no_change = true;
    o.log = &sink;
    passes::PassManager pm(o);
    pm.add_pipeline(pipeline);
    REQUIRE_NOTHROW(pm.run(m));  // verifies after every pass that changed the module
    REQUIRE_NOTHROW(ir::verify(m));
    for (size_t i = 0; i < pm.size(); ++i) {
      if (auto* p = dynamic_cast<passes::PlacementPass*>(&pm.pass(i))) CHECK(p->transfers().empty());
      if (auto* p = dynamic_cast<passes::MemoryPlanPass*>(&pm.pass(i))) {
        REQUIRE(p->plans().size() == m.functions.size());
        for (const auto& fp : p->plans()) {
          INFO(fp.function << ": arena " << fp.arena_bytes() << " naive " << fp.naive_bytes);
          CHECK(fp.arena_bytes() > 0);
          CHECK(fp.arena_bytes() < fp.naive_bytes);
        }
      }
    }
  }
}

// The step interface (ir/step_interface.h) is what the builder declares and
// the Session fills; the check names any drift between them.
TEST_CASE("step interface: the built steps match the table, and drift is named", "[passes][step-interface]") {
  auto file = gguf::GgufFile::open(test::model_path("llama", "f32"));
  ir::Module m = arch::build_module(file, {.embeddings = true});
  REQUIRE(m.find_function("embed"));
  CHECK(ir::step_interface_mismatches(m).empty());
  REQUIRE_NOTHROW(ir::check_step_interface(m, "llama"));
  // Every argument of every step is a table row, in the table's order.
  for (ir::StepKind kind : ir::kAllStepKinds) {
    const ir::Function* fn = m.find_function(ir::step_name(kind));
    REQUIRE(fn);
    std::vector<std::string> names, rows;
    for (const ir::Value& a : fn->args) names.push_back(a->name);
    for (const ir::StepValue* v : ir::step_args(kind)) rows.push_back(std::string(v->name));
    CHECK(names == rows);
  }

  SECTION("a table row missing from a built step") {
    for (ir::Value a : m.find_function("decode")->args)
      if (a->name == "seed") a->name = "seeds";
    const auto bad = ir::step_interface_mismatches(m);
    REQUIRE(bad.size() == 2);
    CHECK(bad[0] == "@decode lacks argument %seed (i32 [S x 2], written by the session)");
    CHECK(bad[1] == "@decode takes argument %seeds, which the step interface does not list for @decode");
    CHECK_THROWS_WITH(ir::check_step_interface(m, "llama"),
                      Catch::StartsWith("llama: the step functions do not match the step interface "
                                        "(ir/step_interface.h): @decode lacks argument %seed"));
  }
  SECTION("an argument of another shape") {
    for (ir::Value a : m.find_function("prefill")->args)
      if (a->name == "rows") a->type.shape = {ir::Dim::symbol("T")};
    CHECK(ir::step_interface_mismatches(m) ==
          std::vector<std::string>{"@prefill argument %rows is i32 [T] but the step interface says i32 [R]"});
  }
  SECTION("a state of another type") {
    for (auto& s : m.states)
      if (s.name == "last_ids") s.type.elem = ir::ElemType::I64;
    CHECK(ir::step_interface_mismatches(m) ==
          std::vector<std::string>{"state @last_ids is plain i64 [S] but the step interface says plain i32 [S]"});
  }
}

TEST_CASE("a pass's target option is parsed by parse_target, naming the pass", "[passes]") {
  for (const char* pass : {"fuse", "placement", "weight-layout"}) {
    passes::PassManagerOptions o;
    o.log = &sink;
    passes::PassManager pm(o);
    CHECK_THROWS_WITH(pm.add_pipeline(std::string(pass) + "{target=tpu}"),
                      Catch::Contains(std::string(pass) + ": unknown target 'tpu' (valid: cpu, cuda)"));
  }
  CHECK(parse_target("cuda") == Target::Cuda);
  CHECK(target_name(parse_target("cpu")) == "cpu");
  CHECK_THROWS_WITH(parse_target("CUDA"), "unknown target 'CUDA' (valid: cpu, cuda)");
}
