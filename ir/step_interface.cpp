#include "ir/step_interface.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "support/error.h"

namespace vtc::ir {

namespace {

constexpr uint8_t bit(StepKind k) { return uint8_t(1u << unsigned(k)); }
constexpr uint8_t kPrefill = bit(StepKind::Prefill), kDecode = bit(StepKind::Decode), kEmbed = bit(StepKind::Embed);
constexpr StepDim sym(std::string_view s) { return {s, 0}; }
constexpr StepDim size(int64_t n) { return {{}, n}; }

// The step interface. Argument rows are in the order the functions take
// them; a step's arguments are the rows that list it.
constexpr StepValue kInterface[] = {
    {step::kIds, false, ElemType::I32, {sym("T")}, 1, kPrefill | kEmbed, StepWriter::Session,
     "token ids of every chunk, in chunk order"},
    {step::kPos, false, ElemType::I32, {sym("T")}, 1, kPrefill | kEmbed, StepWriter::Session,
     "each token's position in its sequence"},
    {step::kPos, false, ElemType::I32, {sym("S")}, 1, kDecode, StepWriter::Session, "each row's position"},
    {step::kSeq, false, ElemType::I32, {sym("T")}, 1, kPrefill | kEmbed, StepWriter::Session,
     "each token's sequence: an index into the request's slots"},
    {step::kSeq, false, ElemType::I32, {sym("S")}, 1, kDecode, StepWriter::Session,
     "each row's index into the slots (0, 1, ...); padding rows are their own"},
    {step::kRows, false, ElemType::I32, {sym("R")}, 1, kPrefill, StepWriter::Session,
     "the tokens whose logits rows the step returns"},
    {step::kSampling, false, ElemType::F32, {sym("S"), size(4)}, 2, kDecode, StepWriter::Session,
     "each row's temperature, top_k, top_p, min_p"},
    {step::kSeed, false, ElemType::I32, {sym("S"), size(2)}, 2, kDecode, StepWriter::Session,
     "each row's 64-bit seed, low and high halves"},
    {step::kLastIds, true, ElemType::I32, {sym("S")}, 1, kDecode, StepWriter::Step,
     "each slot's last token: @decode reads its ids here and its sample op writes the next"},
};

std::string shape_of(const StepValue& v) { return shape_str(v.type().shape); }

}  // namespace

std::string_view step_name(StepKind kind) {
  switch (kind) {
    case StepKind::Prefill: return "prefill";
    case StepKind::Decode: return "decode";
    case StepKind::Embed: return "embed";
  }
  return "?";
}

std::optional<StepKind> step_kind(std::string_view function_name) {
  for (StepKind k : kAllStepKinds)
    if (step_name(k) == function_name) return k;
  return std::nullopt;
}

std::string_view step_writer_name(StepWriter writer) {
  return writer == StepWriter::Session ? "session" : "step (sample op)";
}

TensorType StepValue::type() const {
  Shape shape;
  for (int i = 0; i < rank; ++i) shape.push_back(dims[i].symbol.empty() ? Dim(dims[i].size) : Dim::symbol(dims[i].symbol));
  return {elem, std::move(shape), Placement::Device};
}

std::string StepValue::ref() const { return fmt::format("{}{}", state ? "@" : "%", name); }

std::span<const StepValue> step_interface() { return kInterface; }

const StepValue& step_value(StepKind kind, std::string_view name) {
  for (const StepValue& v : kInterface)
    if (v.name == name && v.in(kind)) return v;
  throw Error(fmt::format("step interface: @{} has no step value named '{}'", step_name(kind), name));
}

std::vector<const StepValue*> step_args(StepKind kind) {
  std::vector<const StepValue*> out;
  for (const StepValue& v : kInterface)
    if (!v.state && v.in(kind)) out.push_back(&v);
  return out;
}

std::vector<std::string> step_interface_mismatches(const Module& m) {
  std::vector<std::string> out;
  std::vector<StepKind> present;
  for (const auto& fn : m.functions) {
    const std::optional<StepKind> kind = step_kind(fn->name);
    if (!kind) continue;
    present.push_back(*kind);
    const std::vector<const StepValue*> want = step_args(*kind);
    for (const StepValue* v : want) {
      auto it = std::find_if(fn->args.begin(), fn->args.end(), [&](const Value& a) { return a->name == v->name; });
      if (it == fn->args.end()) {
        out.push_back(fmt::format("@{} lacks argument {} ({} [{}], written by the {})", fn->name, v->ref(),
                                  v->type().elem.name(), shape_of(*v), step_writer_name(v->writer)));
        continue;
      }
      const TensorType& t = it->type();
      if (!(t.elem == v->type().elem) || t.shape != v->type().shape)
        out.push_back(fmt::format("@{} argument {} is {} [{}] but the step interface says {} [{}]", fn->name, v->ref(),
                                  t.elem.name(), shape_str(t.shape), v->type().elem.name(), shape_of(*v)));
    }
    for (const Value& a : fn->args)
      if (std::none_of(want.begin(), want.end(), [&](const StepValue* v) { return v->name == a->name; }))
        out.push_back(fmt::format("@{} takes argument %{}, which the step interface does not list for @{}", fn->name,
                                  a->name, fn->name));
  }
  for (const StepValue& v : kInterface) {
    if (!v.state) continue;
    const bool read = std::any_of(present.begin(), present.end(), [&](StepKind k) { return v.in(k); });
    if (!read) continue;
    const StateDecl* s = m.find_state(v.name);
    if (!s) {
      out.push_back(fmt::format("the module declares no state {} ({} [{}]), which its step functions use", v.ref(),
                                v.type().elem.name(), shape_of(v)));
      continue;
    }
    if (s->kind != StateKind::Plain || !(s->type.elem == v.type().elem) || s->type.shape != v.type().shape)
      out.push_back(fmt::format("state {} is {} {} [{}] but the step interface says plain {} [{}]", v.ref(),
                                state_kind_name(s->kind), s->type.elem.name(), shape_str(s->type.shape),
                                v.type().elem.name(), shape_of(v)));
  }
  return out;
}

void check_step_interface(const Module& m, std::string_view where) {
  const std::vector<std::string> bad = step_interface_mismatches(m);
  if (bad.empty()) return;
  throw Error(fmt::format("{}: the step functions do not match the step interface (ir/step_interface.h): {}", where,
                          fmt::join(bad, "; ")));
}

}  // namespace vtc::ir
