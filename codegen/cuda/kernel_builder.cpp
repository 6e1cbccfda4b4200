// KernelBuilder: assembles one kernel's translation unit.
//
// Layout of the generated source:
//   // vtc kernel: <what>
//   <prelude>            typedefs, f16/bf16 conversions, warp/block sums
//   <helpers>            the named helpers the emitter asked for, deps first
//   extern "C" __global__ void <entry>(<params>) { <body> }
// The entry name is "<mnemonic>_<hash>" where hash is FNV-1a 64 over the
// source with a placeholder name (and without the `what` comment), so equal
// kernels get equal names and the name itself is a content key.
#include "codegen/cuda/emit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <cmath>

#include "support/error.h"
#include "support/hash.h"

namespace vtc::cuda {

KernelBuilder::KernelBuilder(std::string_view mnemonic, std::string what) : mnemonic_(mnemonic) {
  kernel_.what = std::move(what);
}

std::string KernelBuilder::add(KernelArg arg) {
  std::string name = arg.name;
  kernel_.args.push_back(std::move(arg));
  return name;
}

std::string KernelBuilder::in(const ir::Value& v, const std::string& name) {
  return add({KernelArg::Kind::Value, v.data(), name, "", 0, "const " + c_type(v.type().elem) + "* __restrict__"});
}
std::string KernelBuilder::out(const ir::Value& v, const std::string& name) {
  return add({KernelArg::Kind::Value, v.data(), name, "", 0, c_type(v.type().elem) + "*"});
}
std::string KernelBuilder::state_rows(const std::string& state, const std::string& name, const std::string& ctype) {
  return add({KernelArg::Kind::StateRows, nullptr, name, state, 0, ctype});
}
std::string KernelBuilder::state_pool(const std::string& state, int half, const std::string& name,
                                      const std::string& ctype) {
  return add({KernelArg::Kind::StatePool, nullptr, name, state, half, ctype});
}
std::string KernelBuilder::slots() { return add({KernelArg::Kind::Slots, nullptr, "slots", "", 0, "const int*"}); }
std::string KernelBuilder::page_table() {
  expr(ir::Dim::symbol("PT_STRIDE"));
  return add({KernelArg::Kind::PageTable, nullptr, "page_table", "", 0, "const int*"});
}
std::string KernelBuilder::scratch(const ir::Dim& bytes) {
  kernel_.scratch_bytes = bytes;
  for (const auto& s : {bytes}) expr(s);  // its symbols must be bound at launch
  return add({KernelArg::Kind::Scratch, nullptr, "scratch", "", 0, "float*"});
}

std::string KernelBuilder::counters(const ir::Dim& ints) {
  kernel_.counter_ints = ints;
  expr(ints);
  return add({KernelArg::Kind::Counters, nullptr, "counters", "", 0, "int*"});
}

std::string KernelBuilder::extra(const std::string& name, const std::string& ctype) {
  return add({KernelArg::Kind::Extra, nullptr, name, "", 0, ctype});
}

// Symbols are found in the printed polynomial (maximal identifier runs that
// start with a letter) and renamed to their parameter, s_<symbol>, so they
// can never clash with a kernel's locals.
std::string KernelBuilder::expr(const ir::Dim& d) {
  if (auto c = d.constant()) return fmt::format("{}LL", *c);
  const std::string text = d.str();
  std::string out = "(";
  for (size_t i = 0; i < text.size();) {
    if (std::isalpha(static_cast<unsigned char>(text[i]))) {
      size_t j = i;
      while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_')) ++j;
      symbols_.insert(text.substr(i, j - i));
      out += "s_" + text.substr(i, j - i);
      i = j;
    } else {
      out += text[i++];
    }
  }
  return out + ")";
}

void KernelBuilder::need(const std::string& helper) {
  for (const auto& dep : helper_deps(helper)) need(dep);
  if (std::find(helpers_.begin(), helpers_.end(), helper) == helpers_.end()) helpers_.push_back(helper);
}

void KernelBuilder::launch(const ir::Dim& threads_x, int block, const ir::Dim& rows_y, int rows_per_block_y) {
  kernel_.threads_x = threads_x;
  kernel_.rows_y = rows_y;
  kernel_.rows_per_block_y = rows_per_block_y;
  kernel_.block = block;
  expr(threads_x);
  expr(rows_y);
}


namespace {

// `text` with every identifier `from` (a maximal run of letters, digits
// and '_') replaced by `to`.
std::string replace_identifier(const std::string& text, const std::string& from, const std::string& to) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out;
  size_t at = 0;
  for (size_t i = text.find(from); i != std::string::npos; i = text.find(from, i + 1)) {
    if ((i > 0 && ident(text[i - 1])) || (i + from.size() < text.size() && ident(text[i + from.size()]))) continue;
    out.append(text, at, i - at).append(to);
    at = i + from.size();
  }
  return out.append(text, at);
}

}  // namespace

Kernel KernelBuilder::finish() {
  for (const auto& s : symbols_) kernel_.args.push_back({KernelArg::Kind::Symbol, nullptr, s, "", 0, "long long"});
  // A kernel whose rows are S or T (not both) names that parameter s_ROWS,
  // so @decode's kernels and @prefill's decode form (kernel.h, RowsGuard)
  // are one source, compiled once; the argument still binds its symbol.
  std::string rows_symbol;
  if (symbols_.count("S") + symbols_.count("T") == 1 && !symbols_.count("ROWS")) {
    rows_symbol = symbols_.count("S") ? "S" : "T";
    body_ = replace_identifier(body_, "s_" + rows_symbol, "s_ROWS");
  }
  std::string params;
  for (const auto& a : kernel_.args) {
    const bool symbol = a.kind == KernelArg::Kind::Symbol;
    params += fmt::format("{}{} {}{}", params.empty() ? "" : ", ", a.ctype, symbol ? "s_" : "",
                          symbol && a.name == rows_symbol ? "ROWS" : a.name);
  }
  std::string helpers;
  for (const auto& h : helpers_) helpers += helper_source(h);
  const std::string tail = fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n{}}}\n",
                                       kernel_.block, "@ENTRY@", params, body_);
  std::string source = prelude_source() + helpers + tail;
  kernel_.entry = fmt::format("{}_{:016x}", mnemonic_, fnv1a64(source));
  source.replace(source.find("@ENTRY@"), 7, kernel_.entry);
  kernel_.source = fmt::format("// vtc kernel {}: {}\n", kernel_.entry, kernel_.what) + source;
  return std::move(kernel_);
}

// --- element types -----------------------------------------------------------
std::string c_type(const ir::ElemType& e) {
  switch (e.kind()) {
    case ir::ElemType::F32: return "float";
    case ir::ElemType::F16:
    case ir::ElemType::BF16: return "unsigned short";
    case ir::ElemType::I32: return "int";
    case ir::ElemType::I64: return "long long";
    case ir::ElemType::U8:
    case ir::ElemType::Quant: return "unsigned char";
  }
  return "float";
}

std::string load_as_float(const ir::ElemType& e, const std::string& p, const std::string& i) {
  switch (e.kind()) {
    case ir::ElemType::F16: return fmt::format("vtc_h2f({}[{}])", p, i);
    case ir::ElemType::BF16: return fmt::format("vtc_bf2f({}[{}])", p, i);
    case ir::ElemType::F32: return fmt::format("{}[{}]", p, i);
    default: return fmt::format("(float){}[{}]", p, i);
  }
}

std::string store_from_float(const ir::ElemType& e, const std::string& p, const std::string& i, const std::string& v) {
  switch (e.kind()) {
    case ir::ElemType::F16: return fmt::format("{}[{}] = vtc_f2h({});", p, i, v);
    case ir::ElemType::BF16: return fmt::format("{}[{}] = vtc_f2bf({});", p, i, v);
    case ir::ElemType::F32: return fmt::format("{}[{}] = {};", p, i, v);
    default: return fmt::format("{}[{}] = ({})({});", p, i, c_type(e), v);
  }
}

ir::Dim dims_product(const ir::Shape& s, size_t from, size_t to) {
  ir::Dim n = 1;
  for (size_t i = from; i < to && i < s.size(); ++i) n = n * s[i];
  return n;
}
ir::Dim numel(const ir::TensorType& t) { return dims_product(t.shape, 0, t.shape.size()); }

std::string flit(double v) {
  const float f = float(v);
  if (std::isnan(f)) return "__int_as_float(0x7fc00000)";
  if (std::isinf(f)) return f > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
  // Hex floats are exact; negatives are parenthesized so "x - lit" stays valid.
  return f < 0 ? fmt::format("({:a}f)", f) : fmt::format("{:a}f", f);
}

void unsupported(const ir::Op& op, const std::string& why) {
  throw Error(fmt::format("cuda codegen: op '{}' at {}:{}: {}", op.mnemonic(), op.loc.line, op.loc.column, why));
}

std::vector<const Kernel*> StepKernels::unique() const {
  std::vector<const Kernel*> out;
  std::set<std::string> seen;
  for (const auto& k : kernels)
    if (seen.insert(k.entry).second) out.push_back(&k);
  return out;
}

namespace {
// A source without its first line, the "// vtc kernel ENTRY: WHAT" comment:
// WHAT names values as the module printed them, and a re-parsed module
// numbers unnamed values, so only the code is compared (the entry's hash
// covers the code too).
std::string_view code_of(std::string_view source) {
  if (source.rfind("// vtc kernel ", 0) != 0) return source;
  const size_t eol = source.find('\n');
  return eol == std::string_view::npos ? std::string_view{} : source.substr(eol + 1);
}
}  // namespace

void check_stored_kernels(const StepKernels& step, const std::vector<KernelSource>& stored) {
  std::map<std::string, const KernelSource*> by_entry;
  for (const KernelSource& k : stored)
    if (!by_entry.emplace(k.entry, &k).second)
      throw Error(fmt::format("@{}: the artifact stores kernel {} twice", step.function, k.entry));
  for (const Kernel* k : step.unique()) {
    auto it = by_entry.find(k->entry);
    if (it == by_entry.end())
      throw Error(fmt::format("@{}: kernel {} ({}) is not in the artifact: it was compiled by another vtc; recompile it "
                              "with `vtc compile --target cuda`", step.function, k->entry, k->what));
    if (code_of(it->second->source) != code_of(k->source))
      throw Error(fmt::format("@{}: the artifact's source of kernel {} ({}) differs from what it generates; recompile it",
                              step.function, k->entry, k->what));
    by_entry.erase(it);
  }
  if (!by_entry.empty())
    throw Error(fmt::format("@{}: the artifact stores kernel {} ({}), which the step does not launch", step.function,
                            by_entry.begin()->first, by_entry.begin()->second->what));
}

}  // namespace vtc::cuda
