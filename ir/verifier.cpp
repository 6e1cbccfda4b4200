// Verifier.
//
// Rules, each tagged in its message so tests and readers can tell them apart:
//   [symbol]     declaration and function names are well formed and unique;
//                functions are named after a step kind; weights an op
//                names are declared.
//   [decl]       weights have constant shapes, whole quant blocks per row
//                and a source tensor; ring and plain states have an S dim
//                (one slot per sequence), paged states a P dim; no state
//                holds a quantized type.
//   [arity]      operand and result counts match the op table.
//   [attr]       required attributes present, none unknown, kinds and enum
//                values match the table.
//   [ssa]        every operand is defined in the same function, before use
//                (one block, so dominance is textual order).
//   [state]      states an op names are declared; a state write stores
//                exactly the declared type.
//   [placement]  an op runs in one place (where its results live); its
//                operands live there too. Only to_host / to_device cross,
//                and they must cross.
//   [type]       result types equal the ones the shape function infers.
//   [layout]     a weight in a layout other than rows (q4_k_x8) is 2-D with
//                whole row groups, and its values are read only as a
//                matmul's weight (operand 1) or passed into a fused body
//                (whose uses are checked the same way).
//   [effect]     results of side-effecting ops (attention, which appends to
//                its KV state, and transfers) are used.
//   [return]     each function ends with exactly one return.
// Per op, the rules run in this order and stop at the first failure, and a
// broken op still defines its results, so one mistake yields one message.
#include "ir/verifier.h"

#include <llvm/ADT/DenseMap.h>

#include <unordered_map>
#include <unordered_set>

#include "ir/fused_kinds.h"
#include "ir/printer.h"
#include "ir/shape_infer.h"
#include "support/error.h"
#include "support/kv_cache_type.h"

namespace vtc::ir {
namespace {

bool is_symbol_text(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.'))
      return false;
  return true;
}

std::string loc_str(Location loc) {
  return loc.line ? " (" + std::to_string(loc.line) + ":" + std::to_string(loc.column) + ")" : "";
}

class Verifier {
 public:
  explicit Verifier(const Module& m) : m_(m) {}

  std::vector<std::string> run() {
    check_declarations();
    for (const auto& f : m_.functions) check_function(*f);
    return std::move(errors_);
  }

 private:
  void report(const std::string& where, const std::string& rule, const std::string& message) {
    errors_.push_back(where + ": [" + rule + "] " + message);
  }

  void check_declarations() {
    std::unordered_set<std::string> seen;
    auto check_name = [&](const std::string& kind, const std::string& name, Location loc) {
      std::string where = kind + " @" + name + loc_str(loc);
      if (!is_symbol_text(name)) report(where, "symbol", "name must be letters, digits, '_' or '.'");
      if (!seen.insert(name).second) report(where, "symbol", "@" + name + " is declared twice");
      return where;
    };
    for (const auto& w : m_.weights) {
      std::string where = check_name("weight", w.name, w.loc);
      for (const auto& d : w.type.shape)
        if (!d.is_constant()) report(where, "decl", "weight shapes must be constant, got " + w.type.str());
      if (w.source.empty()) report(where, "decl", "weight needs a source tensor name");
      check_quant_blocks(where, w.type);
      check_layout_decl(where, w.type);
    }
    for (const auto& s : m_.states) {
      std::string where = check_name("state", s.name, s.loc);
      check_state(where, s);
    }
    for (const auto& f : m_.functions) {
      std::string where = check_name("func", f->name, f->loc);
      bool step = false;
      for (auto k : kStepKinds) step |= f->name == k;
      if (!step) report(where, "symbol", "functions are named after a step kind (@prefill, @decode or @embed)");
    }
  }

  // Quantized rows are whole blocks: the contiguous (last) dim must be a
  // multiple of the type's block size.
  void check_quant_blocks(const std::string& where, const TensorType& t) {
    if (!t.elem.is_quant()) return;
    uint32_t block = ggml_traits(t.elem.quant_type()).block_size;
    auto k = t.shape.empty() ? std::optional<int64_t>() : t.shape.back().constant();
    if (!k || *k % block != 0)
      report(where, "decl", t.elem.name() + " rows are blocks of " + std::to_string(block) +
                                " values; the last dimension must be a multiple of it, got " + t.str());
  }

  void check_layout_decl(const std::string& where, const TensorType& t) {
    const WeightLayout layout = t.elem.layout();
    if (layout == WeightLayout::Rows) return;
    const int64_t group = weight_layout_rows(layout);
    auto rows = t.shape.size() == 2 ? t.shape[0].constant() : std::nullopt;
    if (!rows || *rows % group != 0)
      report(where, "layout", "a weight in the " + std::string(weight_layout_name(layout)) + " layout is 2-D with a multiple of " +
                                  std::to_string(group) + " rows, got " + t.str());
  }

  void check_state(const std::string& where, const StateDecl& s) {
    // A quantized state is a KV cache of one of llama.cpp's cache types
    // (attention quantizes its rows as it appends them).
    if (s.type.elem.is_quant() && (s.kind != StateKind::Paged || s.type.elem.layout() != WeightLayout::Rows ||
                                   !is_kv_cache_type(s.type.elem.quant_type())))
      report(where, "decl", "state cannot hold quantized type " + s.type.elem.name() +
                                " (only a paged KV state, of " + kv_cache_type_list() + ")");
    auto has_dim = [&](const char* sym) {
      for (const auto& d : s.type.shape)
        if (d == Dim::symbol(sym)) return true;
      return false;
    };
    if (s.kind == StateKind::Paged && !has_dim("P"))
      report(where, "decl", "a paged state needs a P (pages) dimension");
    if (s.kind != StateKind::Paged && !has_dim("S"))
      report(where, "decl", "a " + std::string(state_kind_name(s.kind)) +
                                " state keeps one slot per sequence: its shape needs an S dimension");
  }

  // `label` names the function in messages ("func @decode", or
  // "func @decode, op #3 'fused' body" for a fused body).
  void check_function(const Function& f, std::string label = {}) {
    if (label.empty()) label = "func @" + f.name;
    llvm::DenseMap<const ValueData*, size_t> defined_at;  // op index + 1; args at 0
    for (const auto& a : f.args) defined_at[a.data()] = 0;
    for (size_t i = 0; i < f.ops.size(); ++i) {
      const Op& op = *f.ops[i];
      std::string where = label + ", op #" + std::to_string(i) + " '" + std::string(op.mnemonic()) + "'" + loc_str(op.loc);
      if (check_op(f, op, i, where, defined_at) && op.body) check_body(op, where);
      // Define results even when the op is broken, so one mistake is one
      // message rather than one per transitive use.
      for (const auto& r : op.results) defined_at[r.data()] = i + 1;
    }
    check_uses(f, label);
    if (f.ops.empty() || f.ops.back()->kind != OpKind::Return)
      report(label + loc_str(f.loc), "return", "function must end with return");
  }

  // A fused body computes; it does not load weights, touch state, move
  // data between places or nest another region. Its arguments live where
  // the op's operands do.
  void check_body(const Op& op, const std::string& where) {
    const Function& body = *op.body;
    size_t errors_before = errors_.size();
    for (size_t i = 0; i < body.ops.size(); ++i) {
      const Op& inner = *body.ops[i];
      bool allowed = inner.info().effect == Effect::Pure && inner.kind != OpKind::Weight && inner.kind != OpKind::Fused;
      if (!allowed && inner.kind != OpKind::Return)
        report(where + " body, op #" + std::to_string(i) + " '" + std::string(inner.mnemonic()) + "'" + loc_str(inner.loc),
               "fusion", "a fused body may only hold pure compute ops");
    }
    if (errors_.size() != errors_before) return;
    for (size_t a = 0; a < body.args.size() && a < op.operands.size(); ++a)
      body_arg_origin_[body.args[a].data()] = value_origin(op.operands[a]);
    check_function(body, where + " body");
    if (errors_.size() != errors_before) return;
    try {
      check_fused_body(op);  // the shape its kind promises the backends (ir/fused_kinds.h)
    } catch (const Error& e) {
      report(where, "fusion", e.what());
    }
  }

  bool check_op(const Function& f, const Op& op, size_t index, const std::string& where,
                const llvm::DenseMap<const ValueData*, size_t>& defined_at) {
    const OpInfo& info = op.info();
    int n = static_cast<int>(op.operands.size());
    if (n < info.min_operands || (info.max_operands >= 0 && n > info.max_operands)) {
      std::string want = info.max_operands < 0 ? "at least " + std::to_string(info.min_operands)
                         : info.min_operands == info.max_operands ? std::to_string(info.min_operands)
                         : std::to_string(info.min_operands) + " to " + std::to_string(info.max_operands);
      report(where, "arity", "expects " + want + " operands, got " + std::to_string(n));
      return false;
    }
    if (op.body && op.kind != OpKind::Fused) {
      report(where, "fusion", "only fused ops have a body");
      return false;
    }
    if (info.num_results < 0 && op.results.empty()) {
      report(where, "arity", "expects at least 1 result, got 0");
      return false;
    }
    if (info.num_results >= 0 && static_cast<int>(op.results.size()) != info.num_results) {
      report(where, "arity", "expects " + std::to_string(info.num_results) + " results, got " + std::to_string(op.results.size()));
      return false;
    }
    if (op.kind == OpKind::Return && index + 1 != f.ops.size()) {
      report(where, "return", "return must be the last op of the function");
      return false;
    }
    return check_attrs(op, where) && check_ssa(f, op, where, defined_at) && check_symbols(op, where) &&
           check_layout_uses(op, where) && check_placement(op, where) && check_types(op, where);
  }

  // Values of a non-rows layout feed only a matmul's weight operand or a
  // fused op (its body's uses are checked as a function's).
  bool check_layout_uses(const Op& op, const std::string& where) {
    for (size_t i = 0; i < op.operands.size(); ++i) {
      const ElemType& e = op.operands[i].type().elem;
      if (e.layout() == WeightLayout::Rows) continue;
      if ((op.kind == OpKind::Matmul && i == 1) || op.kind == OpKind::Fused) continue;
      std::string what = value_origin(op.operands[i]);
      report(where, "layout", "operand " + std::to_string(i) + " (" + what + ") is " + e.name() + ", a weight layout only " +
                                  "a matmul's weight operand (operand 1) reads; keep the weight in the rows layout (" +
                                  ElemType::quant(e.quant_type()).name() + ") for '" + std::string(op.mnemonic()) + "'");
      return false;
    }
    return true;
  }

  bool check_attrs(const Op& op, const std::string& where) {
    const OpInfo& info = op.info();
    for (const auto& a : op.attrs) {
      const AttrSpec* spec = info.find_attr(a.name);
      if (!spec) {
        report(where, "attr", "unknown attribute '" + a.name + "'");
        return false;
      }
      if (spec->kind != a.value.kind) {
        report(where, "attr", "attribute '" + a.name + "' must be " + std::string(attr_kind_name(spec->kind)) + ", got " +
                                  std::string(attr_kind_name(a.value.kind)));
        return false;
      }
      if (spec->kind == AttrKind::Enum) {
        bool ok = false;
        std::string allowed;
        for (const auto& v : spec->enum_values) {
          ok |= v == a.value.s;
          allowed += (allowed.empty() ? "" : ", ") + v;
        }
        if (!ok) {
          report(where, "attr", "attribute '" + a.name + "' is '" + a.value.s + "', expected one of " + allowed);
          return false;
        }
      }
    }
    for (const auto& spec : info.attrs) {
      if (!spec.optional && !op.attr(spec.name)) {
        report(where, "attr", "missing attribute '" + spec.name + "' (" + std::string(attr_kind_name(spec.kind)) + ")");
        return false;
      }
    }
    return true;
  }

  bool check_ssa(const Function& f, const Op& op, const std::string& where,
                 const llvm::DenseMap<const ValueData*, size_t>& defined_at) {
    for (size_t i = 0; i < op.operands.size(); ++i) {
      Value v = op.operands[i];
      std::string which = "operand " + std::to_string(i);
      if (!v) {
        report(where, "ssa", which + " is null");
        return false;
      }
      if (v->owner != &f) {
        report(where, "ssa", which + " is defined in another function");
        return false;
      }
      if (!defined_at.count(v.data())) {
        report(where, "ssa", which + " is used before it is defined (definitions must dominate uses)");
        return false;
      }
    }
    return true;
  }

  // Weights and states an op names must be declared; a state write must
  // store exactly the declared type.
  bool check_symbols(const Op& op, const std::string& where) {
    if (op.kind == OpKind::Weight && !m_.find_weight(op.attr("name")->s)) {
      report(where, "symbol", "weight @" + op.attr("name")->s + " is not declared");
      return false;
    }
    if (!touches_state(op.info().effect)) return true;
    const std::string& name = op.attr("state")->s;
    const StateDecl* decl = m_.find_state(name);
    if (!decl) {
      report(where, "state", "state @" + name + " is not declared");
      return false;
    }
    if (op.kind == OpKind::StateWrite && !(op.operands[0].type() == decl->type)) {
      report(where, "state", "writes " + op.operands[0].type().str() + " to state @" + name + " declared as " +
                                 decl->type.str());
      return false;
    }
    return true;
  }

  // The op's placement: where its results live, or for state_write the
  // state's. Return has none.
  std::optional<Placement> op_placement(const Op& op) {
    if (!op.results.empty()) return op.results[0].type().placement;
    if (op.kind == OpKind::StateWrite) {
      const Attr* s = op.attr("state");
      if (const StateDecl* d = m_.find_state(s->s)) return d->type.placement;
    }
    return std::nullopt;
  }

  bool check_placement(const Op& op, const std::string& where) {
    for (size_t r = 1; r < op.results.size(); ++r) {
      if (op.results[r].type().placement != op.results[0].type().placement) {
        report(where, "placement", "an op runs in one place, but its results are on both host and device");
        return false;
      }
    }
    auto place = op_placement(op);
    if (!place) return true;
    std::string here(placement_name(*place));
    if (op.info().effect == Effect::Transfer) {
      Placement from = op.operands[0].type().placement;
      if (from == *place) {
        report(where, "placement", "transfer to " + here + " of a value already on " + here);
        return false;
      }
      return true;
    }
    for (size_t i = 0; i < op.operands.size(); ++i) {
      Placement p = op.operands[i].type().placement;
      if (p == *place) continue;
      std::string there(placement_name(p));
      std::string via = p == Placement::Device ? "to_host" : "to_device";
      report(where, "placement", "operand " + std::to_string(i) + " (" + operand_name(op, i) + ") is on " + there +
                                     " but the op runs on " + here + "; a " + there + " value reaches a " + here +
                                     " op only through " + via);
      return false;
    }
    return true;
  }

  // "weight @name" for a weight op's result or a fused-body argument bound
  // to one, else the value's name.
  std::string value_origin(Value v) const {
    if (v->def && v->def->kind == OpKind::Weight)
      if (const Attr* name = v->def->attr("name"); name && name->kind == AttrKind::Symbol) return "weight @" + name->s;
    if (auto it = body_arg_origin_.find(v.data()); it != body_arg_origin_.end()) return it->second;
    return v->name.empty() ? "unnamed" : "%" + v->name;
  }

  static std::string operand_name(const Op& op, size_t i) {
    const std::string& n = op.operands[i]->name;
    return n.empty() ? "unnamed" : "%" + n;
  }

  bool check_types(const Op& op, const std::string& where) {
    std::vector<TensorType> want;
    try {
      want = infer_result_types(m_, op);
    } catch (const Error& e) {
      report(where, "type", e.what());
      return false;
    }
    for (size_t r = 0; r < want.size(); ++r) {
      TensorType got = op.results[r].type();
      if (op.info().effect != Effect::Transfer && op.info().min_operands > 0) got.placement = want[r].placement;
      if (!(got == want[r])) {
        report(where, "type", "result " + std::to_string(r) + " is " + op.results[r].type().str() + " but the op produces " +
                                  want[r].str());
        return false;
      }
    }
    return true;
  }

  // The def-use chains first (every other check trusts them), then the
  // results of side-effecting ops, which must be read.
  void check_uses(const Function& f, const std::string& label) {
    if (std::string why = check_use_lists(f); !why.empty()) {
      report(label, "use-list", why);
      return;
    }
    for (size_t i = 0; i < f.ops.size(); ++i) {
      const Op& op = *f.ops[i];
      if (!has_side_effect(op.info().effect)) continue;
      for (size_t r = 0; r < op.results.size(); ++r) {
        if (!op.results[r].use_empty()) continue;
        report(label + ", op #" + std::to_string(i) + " '" + std::string(op.mnemonic()) + "'" + loc_str(op.loc),
               "effect", "result " + std::to_string(r) + " of a side-effecting op (" +
                             std::string(effect_name(op.info().effect)) + ") is never used");
      }
    }
  }

  const Module& m_;
  std::vector<std::string> errors_;
  llvm::DenseMap<const ValueData*, std::string> body_arg_origin_;
};

}  // namespace

std::vector<std::string> verify_all(const Module& module) { return Verifier(module).run(); }

void verify(const Module& module) {
  auto errors = verify_all(module);
  if (errors.empty()) return;
  std::string msg;
  for (const auto& e : errors) msg += (msg.empty() ? "" : "\n") + e;
  throw Error(msg);
}

}  // namespace vtc::ir
