// Module storage and structural equality.
//
// Equality maps each value to its position: ("arg", i) or (op index, result
// index). Two functions are equal when their ops match pairwise and every
// operand refers to the same position on both sides.
#include "ir/module.h"

#include <algorithm>

namespace vtc::ir {

Op::Op() = default;
Op::~Op() = default;

const Attr* Op::attr(std::string_view name) const {
  for (const auto& a : attrs)
    if (a.name == name) return &a.value;
  return nullptr;
}

void Op::set_attr(std::string name, Attr value) {
  auto it = std::lower_bound(attrs.begin(), attrs.end(), name,
                             [](const NamedAttr& a, const std::string& n) { return a.name < n; });
  if (it != attrs.end() && it->name == name)
    it->value = std::move(value);
  else
    attrs.insert(it, NamedAttr{std::move(name), std::move(value)});
}

Value Function::new_value(TensorType type, std::string name, Op* def, unsigned index) {
  auto data = std::make_unique<ValueData>();
  data->type = std::move(type);
  data->name = std::move(name);
  data->def = def;
  data->index = index;
  data->owner = this;
  values_.push_back(std::move(data));
  return Value(values_.back().get());
}

Value Function::add_arg(std::string name, TensorType type) {
  Value v = new_value(std::move(type), std::move(name), nullptr, static_cast<unsigned>(args.size()));
  args.push_back(v);
  return v;
}

Op& Function::append(OpKind kind, std::vector<Value> operands, std::vector<TensorType> result_types,
                     std::vector<NamedAttr> attrs, std::vector<std::string> result_names) {
  auto op = std::make_unique<Op>();
  op->kind = kind;
  op->operands = std::move(operands);
  for (auto& a : attrs) op->set_attr(std::move(a.name), std::move(a.value));
  for (size_t i = 0; i < result_types.size(); ++i) {
    std::string name = i < result_names.size() ? std::move(result_names[i]) : std::string();
    op->results.push_back(new_value(std::move(result_types[i]), std::move(name), op.get(), static_cast<unsigned>(i)));
  }
  ops.push_back(std::move(op));
  return *ops.back();
}

WeightDecl& Module::add_weight(std::string name, TensorType type, std::string source) {
  weights.push_back(WeightDecl{std::move(name), std::move(type), std::move(source), {}});
  return weights.back();
}

StateDecl& Module::add_state(std::string name, StateKind kind, TensorType type) {
  states.push_back(StateDecl{std::move(name), kind, std::move(type), {}});
  return states.back();
}

Function& Module::add_function(std::string name) {
  functions.push_back(std::make_unique<Function>());
  functions.back()->name = std::move(name);
  return *functions.back();
}

const WeightDecl* Module::find_weight(std::string_view name) const {
  for (const auto& w : weights)
    if (w.name == name) return &w;
  return nullptr;
}

const StateDecl* Module::find_state(std::string_view name) const {
  for (const auto& s : states)
    if (s.name == name) return &s;
  return nullptr;
}

Function* Module::find_function(std::string_view name) const {
  for (const auto& f : functions)
    if (f->name == name) return f.get();
  return nullptr;
}

namespace {

// Position of a value inside its function: args are (-1, i).
struct Position {
  long op = -1;
  unsigned index = 0;
  bool operator==(const Position&) const = default;
};

Position position_of(const Function& f, Value v) {
  if (!v || !v->def) return {-1, v ? v->index : 0};
  for (size_t i = 0; i < f.ops.size(); ++i)
    if (f.ops[i].get() == v->def) return {static_cast<long>(i), v->index};
  return {-2, 0};  // defined outside this function
}

bool fail(std::string* why, std::string msg) {
  if (why) *why = std::move(msg);
  return false;
}

bool functions_equal(const Function& a, const Function& b, std::string* why) {
  std::string where = "func @" + a.name;
  if (a.name != b.name) return fail(why, where + ": name differs from @" + b.name);
  if (a.args.size() != b.args.size()) return fail(why, where + ": argument count differs");
  for (size_t i = 0; i < a.args.size(); ++i)
    if (!(a.args[i].type() == b.args[i].type())) return fail(why, where + ": type of argument " + std::to_string(i) + " differs");
  if (a.ops.size() != b.ops.size()) return fail(why, where + ": op count differs");
  for (size_t i = 0; i < a.ops.size(); ++i) {
    const Op& x = *a.ops[i];
    const Op& y = *b.ops[i];
    std::string at = where + ": op #" + std::to_string(i) + " (" + std::string(x.mnemonic()) + ")";
    if (x.kind != y.kind) return fail(why, at + ": kind differs");
    if (!(x.attrs == y.attrs)) return fail(why, at + ": attributes differ");
    if (x.results.size() != y.results.size()) return fail(why, at + ": result count differs");
    for (size_t r = 0; r < x.results.size(); ++r)
      if (!(x.results[r].type() == y.results[r].type())) return fail(why, at + ": result type differs");
    if (x.operands.size() != y.operands.size()) return fail(why, at + ": operand count differs");
    for (size_t o = 0; o < x.operands.size(); ++o)
      if (!(position_of(a, x.operands[o]) == position_of(b, y.operands[o])))
        return fail(why, at + ": operand " + std::to_string(o) + " refers to a different value");
    if (bool(x.body) != bool(y.body)) return fail(why, at + ": only one has a body");
    if (x.body && !functions_equal(*x.body, *y.body, why)) return false;
  }
  return true;
}

}  // namespace

bool structurally_equal(const Module& a, const Module& b, std::string* why) {
  if (a.weights.size() != b.weights.size()) return fail(why, "weight count differs");
  for (size_t i = 0; i < a.weights.size(); ++i) {
    const auto& x = a.weights[i];
    const auto& y = b.weights[i];
    if (x.name != y.name || !(x.type == y.type) || x.source != y.source)
      return fail(why, "weight @" + x.name + " differs");
  }
  if (a.states.size() != b.states.size()) return fail(why, "state count differs");
  for (size_t i = 0; i < a.states.size(); ++i) {
    const auto& x = a.states[i];
    const auto& y = b.states[i];
    if (x.name != y.name || x.kind != y.kind || !(x.type == y.type)) return fail(why, "state @" + x.name + " differs");
  }
  if (a.functions.size() != b.functions.size()) return fail(why, "function count differs");
  for (size_t i = 0; i < a.functions.size(); ++i)
    if (!functions_equal(*a.functions[i], *b.functions[i], why)) return false;
  return true;
}

}  // namespace vtc::ir
