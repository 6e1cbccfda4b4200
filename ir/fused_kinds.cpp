// The fused-region contract: see fused_kinds.h for each kind's body.
#include "ir/fused_kinds.h"

#include <fmt/format.h>

#include <unordered_map>
#include <unordered_set>

#include "support/error.h"

namespace vtc::ir {
namespace {

bool is_arg(const Value& v) { return v->def == nullptr; }

[[noreturn]] void broken(FusedKind kind, std::string_view why) {
  throw Error(fmt::format("a fused {} region's body {}", enum_name(kind), why));
}

[[noreturn]] void broken(FusedKind kind, size_t index, const Op& op, std::string_view why) {
  broken(kind, fmt::format("op #{} '{}' {}", index, op.mnemonic(), why));
}

void check_elementwise(const Function& body) {
  for (size_t i = 0; i < body.ops.size(); ++i) {
    const Op& op = *body.ops[i];
    if (op.kind != OpKind::Return && !op.info().is_elementwise())
      broken(FusedKind::Elementwise, i, op, "is not an elementwise op");
  }
}

// matmul_epilogue: matmul(arg, arg), then a chain of elementwise ops each
// reading the previous value once (its other operands arguments), then
// return(last chain value).
EpilogueRegion decode_epilogue(const Function& body) {
  constexpr FusedKind kind = FusedKind::MatmulEpilogue;
  EpilogueRegion r;
  const ValueData* last = nullptr;  // the chain's value so far
  for (size_t i = 0; i < body.ops.size(); ++i) {
    const Op& op = *body.ops[i];
    auto fail = [&](std::string_view why) { broken(kind, i, op, why); };
    if (i == 0) {
      if (op.kind != OpKind::Matmul) fail("must be the region's matmul");
      if (!is_arg(op.operands[0]) || !is_arg(op.operands[1])) fail("must read its input and weight from arguments");
      r.matmul = &op;
      last = op.results[0].data();
      continue;
    }
    if (op.kind == OpKind::Return) {
      if (r.chain.empty()) fail("ends the body before any epilogue op");
      if (op.operands.size() != 1 || op.operands[0].data() != last) fail("must return the last epilogue value only");
      if (i + 1 != body.ops.size()) fail("is not the body's last op");
      return r;
    }
    if (!op.info().is_elementwise() || op.results.size() != 1) fail("is not an elementwise epilogue op");
    size_t reads = 0;
    for (const Value& v : op.operands) {
      if (v.data() == last) ++reads;
      else if (!is_arg(v)) fail("must read the previous epilogue value and otherwise only arguments");
    }
    if (reads != 1) fail("must read the previous epilogue value exactly once");
    r.chain.push_back(&op);
    last = op.results[0].data();
  }
  if (r.matmul == nullptr) broken(kind, "holds no matmul");
  broken(kind, "has no return");
}

// Decodes the projection ops in body order (fused_kinds.h); a value that
// no rule covers ends the decode with an error naming its op.
class ProjectionDecoder {
 public:
  explicit ProjectionDecoder(FusedKind kind) : kind_(kind) {}

  ProjectionRegion decode(const Function& body) {
    for (size_t i = 0; i < body.ops.size(); ++i) add(i, *body.ops[i]);
    finish();
    return std::move(r_);
  }

 private:
  using RopeChain = ProjectionRegion::RopeChain;

  void add(size_t i, const Op& op) {
    auto fail = [&](std::string_view why) { broken(kind_, i, op, why); };
    const ValueData* in = op.operands.empty() ? nullptr : op.operands[0].data();
    switch (op.kind) {
      case OpKind::RmsNorm:
        if (!is_arg(op.operands[1]) || op.operands[1].type().rank() != 1) fail("needs a 1-D gain argument");
        if (r_.matmuls.empty()) {
          if (r_.norm != nullptr || !is_arg(op.operands[0])) fail("must be the one prologue, over an argument");
          r_.norm = &op;
        } else {
          RopeChain chain = chain_to_rope(in);
          if (chain.matmul == nullptr || chain.qk_norm != nullptr) fail("must be the prologue or a QK-norm of a matmul");
          chain.qk_norm = &op;
          pre_rope_[op.results[0].data()] = chain;
          chained_.insert(in);
        }
        break;
      case OpKind::Matmul:
        if (!r_.input) r_.input = op.operands[0];
        if (!(op.operands[0] == r_.input)) fail("reads another input than the region's first matmul");
        if (!is_arg(op.operands[1])) fail("must take its weight from an argument");
        r_.matmuls.push_back(&op);
        matmul_of_[op.results[0].data()] = &op;
        break;
      case OpKind::Silu:
        if (!matmul_of_.count(in)) fail("must read a matmul");
        silu_of_[op.results[0].data()] = &op;
        break;
      case OpKind::Mul: add_swiglu(op, fail); break;
      case OpKind::Reshape:
        if (!matmul_of_.count(in)) fail("must read a matmul");
        pre_rope_[op.results[0].data()] = RopeChain{matmul_of_.at(in), &op, nullptr, nullptr};
        break;
      case OpKind::Rope: {
        RopeChain chain = chain_to_rope(in);
        if (chain.matmul == nullptr) fail("must read a matmul, through a reshape and a QK-norm");
        for (size_t k = 1; k < op.operands.size(); ++k)
          if (!is_arg(op.operands[k])) fail("must take its positions and frequency factors from arguments");
        if (!claim(chain.matmul)) fail("reads a matmul that already has an epilogue");
        chain.rope = &op;
        r_.ropes.push_back(chain);
        chained_.insert(in);
        break;
      }
      case OpKind::Return:
        for (const Value& v : op.operands)
          if (matmul_of_.count(v.data()) || silu_of_.count(v.data()) || pre_rope_.count(v.data()))
            r_.intermediates_returned = true;
        break;
      default: fail("has no place in a projection region");
    }
  }

  template <typename Fail>
  void add_swiglu(const Op& mul, Fail fail) {
    const ValueData *a = mul.operands[0].data(), *b = mul.operands[1].data();
    if (!silu_of_.count(a)) std::swap(a, b);
    if (!silu_of_.count(a) || consumed_silu_.count(a) || !matmul_of_.count(b)) fail("must multiply silu(gate) by up");
    const Op* silu = silu_of_.at(a);
    const Op* gate = matmul_of_.at(silu->operands[0].data());
    const Op* up = matmul_of_.at(b);
    if (gate == up || !claim(gate) || !claim(up)) fail("reads a matmul that already has an epilogue");
    r_.swiglu.push_back({gate, silu, up, &mul});
    consumed_silu_.insert(a);
  }

  // The chain so far from a matmul to `v` (a matmul, reshape or QK-norm
  // value); an empty chain when `v` is none of these.
  RopeChain chain_to_rope(const ValueData* v) const {
    if (auto it = pre_rope_.find(v); it != pre_rope_.end()) return it->second;
    if (auto it = matmul_of_.find(v); it != matmul_of_.end()) return RopeChain{it->second, nullptr, nullptr, nullptr};
    return RopeChain{nullptr, nullptr, nullptr, nullptr};
  }

  bool claim(const Op* matmul) { return claimed_.insert(matmul).second; }

  void finish() {
    if (r_.matmuls.empty()) broken(kind_, "holds no matmul");
    if (consumed_silu_.size() != silu_of_.size()) broken(kind_, "holds a silu outside a silu/mul pair");
    for (const auto& [value, chain] : pre_rope_)
      if (!chained_.count(value)) broken(kind_, "holds a reshape or QK-norm that no rope reads");
    if (r_.norm != nullptr && !(r_.input == r_.norm->results[0])) broken(kind_, "has a prologue norm that the matmuls do not read");
    for (const Op* m : r_.matmuls)
      if (!claimed_.count(m)) r_.plain.push_back(m);
    const bool only_swiglu = r_.swiglu.size() == 1 && r_.plain.empty() && r_.ropes.empty();
    const bool only_rope = r_.ropes.size() == 1 && r_.plain.empty() && r_.swiglu.empty();
    if (kind_ == FusedKind::NormMatmul && r_.norm == nullptr) broken(kind_, "has no rms_norm prologue");
    if (kind_ == FusedKind::Swiglu && !only_swiglu) broken(kind_, "must hold one silu/mul pair and no other matmul");
    if (kind_ == FusedKind::QkRope && !only_rope) broken(kind_, "must hold one rope chain and no other matmul");
  }

  FusedKind kind_;
  ProjectionRegion r_;
  std::unordered_map<const ValueData*, const Op*> matmul_of_, silu_of_;
  std::unordered_map<const ValueData*, RopeChain> pre_rope_;  // reshape and QK-norm results
  std::unordered_set<const Op*> claimed_;                      // matmuls with an epilogue
  std::unordered_set<const ValueData*> consumed_silu_, chained_;  // chained_: read by a later op of a rope chain
};

}  // namespace

FusedKind fused_kind(const Op& fused) {
  const Attr* a = fused.attr("kind");
  std::optional<FusedKind> kind = a ? parse_enum<FusedKind>(a->s) : std::nullopt;
  if (!kind) throw Error(fmt::format("a fused region has no known kind (got '{}')", a ? a->s : ""));
  return *kind;
}

ProjectionRegion decode_projection_region(FusedKind kind, const Function& body) {
  if (kind == FusedKind::Elementwise || kind == FusedKind::MatmulEpilogue)
    throw Error(fmt::format("a fused {} region is not a projection region", enum_name(kind)));
  return ProjectionDecoder(kind).decode(body);
}

EpilogueRegion decode_epilogue_region(const Function& body) { return decode_epilogue(body); }

void check_fused_body(const Op& fused) {
  const FusedKind kind = fused_kind(fused);
  if (kind == FusedKind::Elementwise)
    check_elementwise(*fused.body);
  else if (kind == FusedKind::MatmulEpilogue)
    decode_epilogue_region(*fused.body);
  else
    decode_projection_region(kind, *fused.body);
}

}  // namespace vtc::ir
