// The IR module: weights, states and one SSA function per step kind.
//
// A Function is one basic block: a list of ops ending in `return`. A `fused`
// op owns a body, itself a Function that sees only its own arguments (bound
// to the op's operands) and returns the op's results. Values are
// owned by their function (arguments and op results); a Value is a cheap
// handle. Ops carry the source location they were parsed from (0:0 when
// built in code) so verifier messages can point at text.
#pragma once

#include <memory>
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

struct ValueData {
  TensorType type;
  std::string name;      // printing hint only; ignored by equality
  Op* def = nullptr;     // defining op; null for a function argument
  unsigned index = 0;    // result index in def, or argument index
  Function* owner = nullptr;
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

 private:
  ValueData* data_ = nullptr;
};

struct Op {
  OpKind kind;
  std::vector<Value> operands;
  std::vector<Value> results;
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
};

struct Function {
  std::string name;
  std::vector<Value> args;
  std::vector<std::unique_ptr<Op>> ops;
  Location loc;

  Value add_arg(std::string name, TensorType type);
  // Appends an op with results of the given types; names are print hints.
  Op& append(OpKind kind, std::vector<Value> operands, std::vector<TensorType> result_types,
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

  const WeightDecl* find_weight(std::string_view name) const;
  const StateDecl* find_state(std::string_view name) const;
  Function* find_function(std::string_view name) const;
};

// Same declarations, same ops in the same order with the same attributes,
// types and operand wiring. Value names and locations are ignored. On a
// mismatch, `why` (if given) says where.
bool structurally_equal(const Module& a, const Module& b, std::string* why = nullptr);

// Step kinds a module may define a function for (@embed: only when built
// for embeddings, frontends/gguf/arch/arch.h).
inline constexpr std::string_view kStepKinds[] = {"prefill", "decode", "embed"};

}  // namespace vtc::ir
