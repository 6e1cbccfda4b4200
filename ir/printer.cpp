// Printer. Value names come from their hints when unique and well formed;
// otherwise values are numbered %0, %1, ... in definition order. The
// printer only uses data in the module, so unverified IR prints too.
#include "ir/printer.h"

#include <llvm/ADT/DenseMap.h>

#include <unordered_map>
#include <unordered_set>

namespace vtc::ir {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

bool is_valid_hint(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!is_name_char(c)) return false;
  return true;
}

// Prints one function, or the body of a fused op (`indent` deeper, its own
// name scope: a body sees only its arguments).
class FunctionPrinter {
 public:
  explicit FunctionPrinter(const Function& f, std::string indent = "") : f_(f), indent_(std::move(indent)) {}

  std::string run() { return "func @" + f_.name + signature() + "}\n"; }

  // "(%a: T, ...) {\n" + ops; the caller closes the brace.
  std::string signature() {
    std::string out = "(";
    for (size_t i = 0; i < f_.args.size(); ++i)
      out += (i ? ", " : "") + name_of(f_.args[i]) + ": " + f_.args[i].type().str();
    out += ") {\n";
    for (const auto& op : f_.ops) out += indent_ + "  " + op_line(*op) + "\n";
    return out + indent_;
  }

 private:
  std::string name_of(Value v) {
    if (!v) return "%<null>";
    auto it = names_.find(v.data());
    if (it != names_.end()) return it->second;
    std::string base = is_valid_hint(v->name) ? v->name : std::string();
    std::string name = base.empty() ? std::to_string(next_number_++) : base;
    for (int k = 1; used_.count(name); ++k)
      name = base.empty() ? std::to_string(next_number_++) : base + "." + std::to_string(k);
    used_.insert(name);
    return names_[v.data()] = "%" + name;
  }

  std::string op_line(const Op& op) {
    std::string line;
    // Operands first: they are already named, results get fresh names.
    std::string operands;
    for (size_t i = 0; i < op.operands.size(); ++i) operands += (i ? ", " : "") + name_of(op.operands[i]);
    for (size_t i = 0; i < op.results.size(); ++i) line += (i ? ", " : "") + name_of(op.results[i]);
    if (!op.results.empty()) line += " = ";
    line += std::string(op.mnemonic()) + "(" + operands + ")";
    if (!op.attrs.empty()) {
      line += " {";
      for (size_t i = 0; i < op.attrs.size(); ++i) line += (i ? ", " : "") + op.attrs[i].name + " = " + op.attrs[i].value.str();
      line += "}";
    }
    for (size_t i = 0; i < op.results.size(); ++i) line += (i ? ", " : " : ") + op.results[i].type().str();
    if (op.body) line += " body" + FunctionPrinter(*op.body, indent_ + "  ").signature() + "}";
    return line;
  }

  const Function& f_;
  std::string indent_;
  llvm::DenseMap<const ValueData*, std::string> names_;
  std::unordered_set<std::string> used_;
  int next_number_ = 0;
};

}  // namespace

std::string print(const Function& function) { return FunctionPrinter(function).run(); }

std::string print(const Module& module) {
  std::string out;
  for (const auto& w : module.weights)
    out += "weight @" + w.name + " : " + w.type.str() + " = gguf(" + quote_string(w.source) + ")\n";
  for (const auto& s : module.states) {
    std::string dims = shape_str(s.type.shape);
    out += "state @" + s.name + " : " + std::string(state_kind_name(s.kind)) + "<" + dims + (dims.empty() ? "" : " x ") +
           s.type.elem.name() + ", " + std::string(placement_name(s.type.placement)) + ">\n";
  }
  for (const auto& f : module.functions) {
    if (!out.empty()) out += "\n";
    out += print(*f);
  }
  return out;
}

}  // namespace vtc::ir
