// Module storage and structural equality.
//
// Equality maps each value to its position: ("arg", i) or (op index, result
// index). Two functions are equal when their ops match pairwise and every
// operand refers to the same position on both sides.
#include "ir/module.h"

#include <algorithm>

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>

namespace vtc::ir {

// --- def-use chains -----------------------------------------------------------

namespace {

// Records operand `i` of `op` in its value's use list.
void link_use(Op& op, unsigned i, llvm::SmallVectorImpl<Value>& values, llvm::SmallVectorImpl<unsigned>& slots) {
  ValueData* v = values[i].data();
  if (v == nullptr) return;
  slots[i] = static_cast<unsigned>(v->uses.size());
  v->uses.push_back(Use{&op, i});
}

}  // namespace

size_t Value::replace_all_uses_with(Value to) const {
  if (to == *this) return 0;
  llvm::SmallVector<Use, 2> moved = std::move(data_->uses);
  data_->uses.clear();
  for (const Use& u : moved) {
    OperandList& list = u.user->operands;
    list.values_[u.operand] = to;
    list.use_slot_[u.operand] = static_cast<unsigned>(to->uses.size());
    to->uses.push_back(u);
  }
  return moved.size();
}

void Op::set_operand(size_t i, Value v) {
  // Unlink: the value's last use takes this slot's place in its list.
  ValueData* old = operands.values_[i].data();
  const unsigned k = operands.use_slot_[i];
  if (old != nullptr && k < old->uses.size() && old->uses[k] == Use{this, static_cast<unsigned>(i)}) {
    const Use last = old->uses.back();
    old->uses[k] = last;
    last.user->operands.use_slot_[last.operand] = k;
    old->uses.pop_back();
  }
  operands.values_[i] = v;
  link_use(*this, static_cast<unsigned>(i), operands.values_, operands.use_slot_);
}

void Op::set_operands(llvm::ArrayRef<Value> values) {
  drop_operands();
  operands.values_.assign(values.begin(), values.end());
  operands.use_slot_.assign(values.size(), 0);
  for (unsigned i = 0; i < values.size(); ++i) link_use(*this, i, operands.values_, operands.use_slot_);
}

void Op::drop_operands() {
  for (size_t i = operands.size(); i-- > 0;) set_operand(i, Value());
  operands.values_.clear();
  operands.use_slot_.clear();
}

namespace {

// The checks of one value's use list: each use names an op of the function
// and an operand slot of that op that reads the value.
std::string check_uses_of(Value v, const llvm::DenseSet<const Op*>& live) {
  for (const Use& u : v.uses()) {
    if (!live.count(u.user)) return "a use of a value is not an op of the function";
    if (u.operand >= u.user->operands.size() || !(u.user->operands[u.operand] == v))
      return "a use of a value names operand " + std::to_string(u.operand) + " of op '" +
             std::string(u.user->mnemonic()) + "', which reads another value";
  }
  return "";
}

// The walk in program order that names the first broken use: per operand,
// a scan of its value's list. That is quadratic in a value's use count (an
// argument read by every op of a 100k-op function), so check_use_lists runs
// it only once its linear count has found something wrong.
std::string first_broken_use(const Function& f, const llvm::DenseSet<const Op*>& live) {
  for (Value a : f.args)
    if (std::string why = check_uses_of(a, live); !why.empty()) return why;
  for (const auto& op : f.ops) {
    for (unsigned i = 0; i < op->operands.size(); ++i) {
      Value v = op->operands[i];
      if (!v) continue;
      bool found = false;
      for (const Use& u : v.uses()) found = found || u == Use{op.get(), i};
      if (!found)
        return "operand " + std::to_string(i) + " of op '" + std::string(op->mnemonic()) +
               "' is missing from its value's use list";
      if (std::string why = check_uses_of(v, live); !why.empty()) return why;
    }
    for (Value r : op->results)
      if (std::string why = check_uses_of(r, live); !why.empty()) return why;
  }
  return "";
}

}  // namespace

// Linear: every use of the function's values names a distinct operand slot
// that reads it (check_uses_of, plus a set of the slots seen), and there are
// as many uses as non-null operand slots, so every slot has its use. Any
// discrepancy (or an operand defined outside the function, whose uses are
// not counted here) falls back to the exact walk for its message.
std::string check_use_lists(const Function& f) {
  llvm::DenseSet<const Op*> live;
  for (const auto& op : f.ops) live.insert(op.get());
  llvm::DenseSet<std::pair<const Op*, unsigned>> slots_used;
  bool consistent = true;
  auto count_uses = [&](Value v) {
    if (!check_uses_of(v, live).empty()) return false;
    for (const Use& u : v.uses())
      if (!slots_used.insert({u.user, u.operand}).second) return false;
    return true;
  };
  for (Value a : f.args) consistent = consistent && count_uses(a);
  for (const auto& op : f.ops)
    for (Value r : op->results) consistent = consistent && count_uses(r);
  size_t slots = 0;
  for (const auto& op : f.ops)
    for (Value v : op->operands) slots += v ? 1 : 0;
  if (consistent && slots_used.size() == slots) return "";
  return first_broken_use(f, live);
}

Function::~Function() {
  // Values die with the function; empty their lists first so destroying
  // the ops does not walk them.
  for (auto& v : values_) v->uses.clear();
  ops.clear();
}

Op::Op() = default;
Op::~Op() { drop_operands(); }

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

Op& Function::append(OpKind kind, llvm::ArrayRef<Value> operands, std::vector<TensorType> result_types,
                     std::vector<NamedAttr> attrs, std::vector<std::string> result_names) {
  auto op = std::make_unique<Op>();
  op->kind = kind;
  op->set_operands(operands);
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

namespace {

// The declaration named `name` through `index`, rebuilding the index when
// the vector grew or was rebuilt behind it.
template <typename Decl>
const Decl* find_decl(const std::vector<Decl>& decls, llvm::StringMap<unsigned>& index, std::string_view name) {
  auto lookup = [&]() -> const Decl* {
    auto it = index.find(llvm::StringRef(name.data(), name.size()));
    if (it == index.end() || it->second >= decls.size() || decls[it->second].name != name) return nullptr;
    return &decls[it->second];
  };
  if (const Decl* d = lookup()) return d;
  if (index.size() == decls.size()) return nullptr;  // declarations are never renamed, only added
  index.clear();
  for (unsigned i = 0; i < decls.size(); ++i) index.try_emplace(decls[i].name, i);
  return lookup();
}

}  // namespace

const WeightDecl* Module::find_weight(std::string_view name) const { return find_decl(weights, weight_index_, name); }

const StateDecl* Module::find_state(std::string_view name) const { return find_decl(states, state_index_, name); }

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

using OpIndex = llvm::DenseMap<const Op*, long>;

OpIndex index_ops(const Function& f) {
  OpIndex index;
  index.reserve(f.ops.size());
  for (size_t i = 0; i < f.ops.size(); ++i) index[f.ops[i].get()] = static_cast<long>(i);
  return index;
}

Position position_of(const OpIndex& index, Value v) {
  if (!v || !v->def) return {-1, v ? v->index : 0};
  auto it = index.find(v->def);
  if (it == index.end()) return {-2, 0};  // defined outside this function
  return {it->second, v->index};
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
  const OpIndex index_a = index_ops(a), index_b = index_ops(b);
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
      if (!(position_of(index_a, x.operands[o]) == position_of(index_b, y.operands[o])))
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
