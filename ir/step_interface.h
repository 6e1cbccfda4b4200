// The step interface, declared once: every argument a step function
// (@prefill, @decode, @embed) takes and every state the step contract
// names, with its element type, its shape in the step symbols (T tokens,
// S sequences, R logits rows), the steps that have it and who writes it.
//
// Both sides read this table: the architecture builder
// (frontends/gguf/arch/step_graph.cpp) declares the step arguments and
// @last_ids from it, the Session (runtime/session.cpp) fills a request's
// arguments by these names, and the backends look the names up here.
// check_step_interface() compares a module's steps against the table; the
// Session runs it on every model it loads, and compile_model on what the
// builder built. docs/ir.md ("The step interface") prints the table.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/module.h"
#include "ir/types.h"

namespace vtc::ir {

enum class StepKind : uint8_t { Prefill, Decode, Embed };
inline constexpr StepKind kAllStepKinds[] = {StepKind::Prefill, StepKind::Decode, StepKind::Embed};
std::string_view step_name(StepKind kind);  // "prefill": the function's name
std::optional<StepKind> step_kind(std::string_view function_name);

// The names of the step values, for code that writes or reads one.
namespace step {
inline constexpr std::string_view kIds = "ids";            // %ids: token ids
inline constexpr std::string_view kPos = "pos";            // %pos: positions
inline constexpr std::string_view kSeq = "seq";            // %seq: each token's sequence (row of the slot list)
inline constexpr std::string_view kRows = "rows";          // %rows: tokens whose logits are returned
inline constexpr std::string_view kSampling = "sampling";  // %sampling: temperature, top_k, top_p, min_p per row
inline constexpr std::string_view kSeed = "seed";          // %seed: the 64-bit seed of each row, two i32 halves
inline constexpr std::string_view kLastIds = "last_ids";   // @last_ids: each slot's last token
}  // namespace step

// Who writes a step value.
enum class StepWriter : uint8_t {
  Session,  // runtime/session.cpp, from the request, before the step runs
  Step,     // the step itself (@decode's `sample` op, on the backend);
            // Session::set_last_id seeds it
};
std::string_view step_writer_name(StepWriter writer);  // "session" | "step (sample op)"

// One dim of a step value: a step symbol, or a constant when symbol is empty.
struct StepDim {
  std::string_view symbol;
  int64_t size = 0;
};

struct StepValue {
  std::string_view name;      // step::k*
  bool state = false;         // a `state` declaration (@name), not an argument (%name)
  ElemType::Kind elem = ElemType::I32;
  std::array<StepDim, 2> dims = {};
  int rank = 1;
  uint8_t steps = 0;          // a bit per StepKind (in())
  StepWriter writer = StepWriter::Session;
  std::string_view meaning;

  bool in(StepKind kind) const { return (steps >> unsigned(kind)) & 1u; }
  // As the builder declares it (on the device; placement moves it to the
  // host for the cpu target).
  TensorType type() const;
  std::string ref() const;  // "%ids" | "@last_ids"
};

// Every row, in the order a step function takes its arguments.
std::span<const StepValue> step_interface();
// The row of step `kind` named `name` (%pos is [T] in @prefill, [S] in
// @decode); throws vtc::Error for a name the table lacks for that step.
const StepValue& step_value(StepKind kind, std::string_view name);
// The arguments of step `kind`, in order.
std::vector<const StepValue*> step_args(StepKind kind);

// Where `m` disagrees with the table, one line each (empty: it agrees):
// for each step function, an argument the table lists for that step and
// the function lacks, an argument the table does not list for it, and an
// element type or shape that differs (placement is the target's, so not
// compared); for each state row, a module with a step that reads it but no
// declaration, or a declaration of another type or kind.
std::vector<std::string> step_interface_mismatches(const Module& m);
// Throws vtc::Error naming every mismatch, prefixed by `where` (a path).
void check_step_interface(const Module& m, std::string_view where);

}  // namespace vtc::ir
