// The IR module: weights, states and one SSA function per step kind.
//
// A Function is one basic block: a list of ops ending in `return`. A `fused`
// op owns a body, itself a Function that sees only its own arguments (bound
// to the op's operands) and returns the op's results. Values are
// owned by their function (arguments and op results); a Value is a cheap
// handle. Ops carry the source location they were parsed from (0:0 when
// built in code) so verifier messages can point at text.
//
// Def-use chains, as in LLVM and MLIR: every value keeps the list of operand
// slots that read it (its uses). An op's operands are read like a vector and
// written only through Op::set_operand / set_operands, which keep the lists;
// each slot remembers where its use sits in its value's list, so adding or
// dropping one use is O(1) and replace_all_uses_with is O(uses). An op drops
// its uses when it is destroyed. The verifier checks the chains.
#pragma once

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/DenseMapInfo.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringMap.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ir/attr.h"
#include "ir/op_info.h"
#include "ir/types.h"

namespace vtc::ir {

struct Op;
struct Function;

struct Location {
  int line = 0;    // 1-based; 0 = built in code
  int column = 0;
  friend bool operator==(const Location&, const Location&) = default;
};

// One operand slot that reads a value: the op and the operand's index.
struct Use {
  Op* user = nullptr;
  unsigned operand = 0;
  friend bool operator==(const Use&, const Use&) = default;
};

struct ValueData {
  TensorType type;
  std::string name;      // printing hint only; ignored by equality
  Op* def = nullptr;     // defining op; null for a function argument
  unsigned index = 0;    // result index in def, or argument index
  Function* owner = nullptr;
  // Every operand slot that reads this value, in no fixed order.
  llvm::SmallVector<Use, 2> uses;
};

class Value {
 public:
  Value() = default;
  explicit Value(ValueData* data) : data_(data) {}
  ValueData* operator->() const { return data_; }
  ValueData* data() const { return data_; }
  const TensorType& type() const { return data_->type; }
  explicit operator bool() const { return data_ != nullptr; }
  friend bool operator==(Value a, Value b) { return a.data_ == b.data_; }

  // The def-use chain: every operand slot reading this value. O(1) each.
  llvm::ArrayRef<Use> uses() const { return data_->uses; }
  size_t use_count() const { return data_->uses.size(); }
  bool use_empty() const { return data_->uses.empty(); }
  bool has_one_use() const { return data_->uses.size() == 1; }
  // Every use of this value reads `to` instead; O(uses). Returns the count.
  size_t replace_all_uses_with(Value to) const;

 private:
  ValueData* data_ = nullptr;
};

// An op's operands: read like a const vector of values. Writes go through
// Op::set_operand / set_operands, which keep the values' use lists.
class OperandList {
 public:
  using value_type = Value;
  using const_iterator = const Value*;
  using iterator = const Value*;
  size_t size() const { return values_.size(); }
  bool empty() const { return values_.empty(); }
  Value operator[](size_t i) const { return values_[i]; }
  Value at(size_t i) const { return i < values_.size() ? values_[i] : throw std::out_of_range("operand index"); }
  Value front() const { return values_.front(); }
  Value back() const { return values_.back(); }
  const Value* begin() const { return values_.begin(); }
  const Value* end() const { return values_.end(); }
  llvm::ArrayRef<Value> values() const { return values_; }
  operator llvm::ArrayRef<Value>() const { return values_; }
  std::vector<Value> vec() const { return {values_.begin(), values_.end()}; }

 private:
  friend struct Op;
  friend class Value;
  llvm::SmallVector<Value, 4> values_;
  llvm::SmallVector<unsigned, 4> use_slot_;  // where operand i's Use sits in its value's list
};

struct Op {
  OpKind kind;
  OperandList operands;                 // read-only; see set_operand
  llvm::SmallVector<Value, 1> results;
  std::vector<NamedAttr> attrs;  // sorted by name
  Location loc;
  std::unique_ptr<Function> body;  // `fused` ops only

  Op();
  ~Op();
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;

  const OpInfo& info() const { return op_info(kind); }
  std::string_view mnemonic() const { return info().mnemonic; }
  const Attr* attr(std::string_view name) const;
  void set_attr(std::string name, Attr value);  // keeps attrs sorted

  // Operand writes keep the def-use chains (O(1) per operand).
  void set_operand(size_t i, Value v);
  void set_operands(llvm::ArrayRef<Value> values);
  // Drops this op's uses from its operands' lists and clears the operands
  // (the destructor does it; an op about to be erased may do it early).
  void drop_operands();
};

struct Function {
  std::string name;
  std::vector<Value> args;
  std::vector<std::unique_ptr<Op>> ops;
  Location loc;

  Function() = default;
  Function(const Function&) = delete;
  Function& operator=(const Function&) = delete;
  ~Function();  // destroys the ops before the values they use

  Value add_arg(std::string name, TensorType type);
  // Appends an op with results of the given types; names are print hints.
  Op& append(OpKind kind, llvm::ArrayRef<Value> operands, std::vector<TensorType> result_types,
             std::vector<NamedAttr> attrs = {}, std::vector<std::string> result_names = {});

 private:
  Value new_value(TensorType type, std::string name, Op* def, unsigned index);
  std::vector<std::unique_ptr<ValueData>> values_;
};

struct WeightDecl {
  std::string name;    // symbol, without '@'
  TensorType type;
  std::string source;  // tensor name in the GGUF file
  Location loc;
};

// A persistent buffer owned by the runtime state store. Ring and plain
// states have one row per sequence slot (leading dim S); paged states are
// indexed by KV page (a P dim).
struct StateDecl {
  std::string name;
  StateKind kind = StateKind::Plain;
  TensorType type;
  Location loc;
};

class Module {
 public:
  std::vector<WeightDecl> weights;
  std::vector<StateDecl> states;
  std::vector<std::unique_ptr<Function>> functions;

  WeightDecl& add_weight(std::string name, TensorType type, std::string source);
  StateDecl& add_state(std::string name, StateKind kind, TensorType type);
  Function& add_function(std::string name);

  // By symbol, through an index kept beside the vectors (rebuilt when they
  // changed behind it): a module of a few thousand weights is looked up
  // once per weight op.
  const WeightDecl* find_weight(std::string_view name) const;
  const StateDecl* find_state(std::string_view name) const;
  Function* find_function(std::string_view name) const;

 private:
  mutable llvm::StringMap<unsigned> weight_index_, state_index_;
};

// Same declarations, same ops in the same order with the same attributes,
// types and operand wiring. Value names and locations are ignored. On a
// mismatch, `why` (if given) says where.
bool structurally_equal(const Module& a, const Module& b, std::string* why = nullptr);

// Checks every def-use chain of `f` (not its bodies): each operand slot's
// use is in its value's list, and each use of a value of `f` or of an
// operand is a slot of a live op of `f` that reads the value. Returns the
// first inconsistency, or "" when the chains are sound.
std::string check_use_lists(const Function& f);

// Step kinds a module may define a function for (@embed: only when built
// for embeddings, frontends/gguf/arch/arch.h).
inline constexpr std::string_view kStepKinds[] = {"prefill", "decode", "embed"};

}  // namespace vtc::ir

// Values as keys of llvm::DenseMap / DenseSet (by identity).
template <>
struct llvm::DenseMapInfo<vtc::ir::Value> {
  using Base = llvm::DenseMapInfo<vtc::ir::ValueData*>;
  static vtc::ir::Value getEmptyKey() { return vtc::ir::Value(Base::getEmptyKey()); }
  static vtc::ir::Value getTombstoneKey() { return vtc::ir::Value(Base::getTombstoneKey()); }
  static unsigned getHashValue(vtc::ir::Value v) { return Base::getHashValue(v.data()); }
  static bool isEqual(vtc::ir::Value a, vtc::ir::Value b) { return a == b; }
};
