#include "runtime/diff/value_index.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <sstream>
#include <vector>

#include "ir/op_attrs.h"
#include "ir/printer.h"
#include "support/error.h"

namespace vtc::diff {
namespace {

// The result names of each top-level op, as printed: the text before " = "
// on the op's line, split at ", ". Body lines of fused ops are indented
// deeper than the two spaces of a top-level op and are skipped.
std::vector<std::vector<std::string>> printed_result_names(const ir::Function& fn) {
  std::vector<std::vector<std::string>> out;
  std::istringstream text(ir::print(fn));
  std::string line;
  std::getline(text, line);  // func @name(...) {
  while (std::getline(text, line)) {
    if (line.size() < 3 || line.compare(0, 2, "  ") != 0 || line[2] == ' ' || line[2] == '}') continue;
    std::vector<std::string> names;
    if (line[2] == '%') {
      const std::string lhs = line.substr(2, line.find(" = ") - 2);
      size_t start = 0;
      for (size_t comma; (comma = lhs.find(", ", start)) != std::string::npos; start = comma + 2)
        names.push_back(lhs.substr(start, comma - start));
      names.push_back(lhs.substr(start));
    }
    out.push_back(std::move(names));
  }
  if (out.size() != fn.ops.size())
    throw Error(fmt::format("diff: the printer wrote {} op lines for @{}, which has {} ops", out.size(), fn.name,
                            fn.ops.size()));
  return out;
}

bool is_number(const std::string& printed) {
  return printed.size() > 1 && printed.find_first_not_of("0123456789", 1) == std::string::npos;
}

std::string op_label(const ir::Op& op) {
  std::string label(op.mnemonic());
  if (op.kind == ir::OpKind::Fused) label += "{" + std::string(ir::enum_name(ir::FusedAttrs::of(op).kind)) + "}";
  if (const std::string* state = ir::state_symbol(op)) label += " @" + *state;
  return label;
}

std::string structural_key(const ir::Op& op, size_t result, const std::unordered_map<const ir::ValueData*, std::string>& keys) {
  std::string text(op.mnemonic());
  for (const auto& a : op.attrs) text += ";" + a.name + "=" + a.value.str();
  for (const auto& v : op.operands) {
    auto it = keys.find(v.data());
    text += "|" + (it != keys.end() ? it->second : std::string("?"));
  }
  return fmt::format("{}:{:016x}.{}", op.mnemonic(), std::hash<std::string>{}(text), result);
}

}  // namespace

ValueIndex::ValueIndex(const ir::Function& fn) {
  const auto names = printed_result_names(fn);
  std::unordered_map<const ir::ValueData*, std::string> keys;
  std::map<std::string, int> seen;
  for (const auto& arg : fn.args) keys[arg.data()] = "arg:" + arg->name;
  for (size_t i = 0; i < fn.ops.size(); ++i) {
    const ir::Op& op = *fn.ops[i];
    if (names[i].size() != op.results.size())
      throw Error(fmt::format("diff: op {} of @{} ({}) printed {} result names for {} results", i, fn.name,
                              op.mnemonic(), names[i].size(), op.results.size()));
    for (size_t r = 0; r < op.results.size(); ++r) {
      const std::string& name = names[i][r];
      std::string key;
      if (op.kind == ir::OpKind::Weight) key = "weight:" + *ir::weight_symbol(op);
      else if (!is_number(name)) key = "name:" + name;
      else key = structural_key(op, r, keys);
      if (int n = seen[key]++; n > 0) key += fmt::format("#{}", n);
      keys[op.results[r].data()] = key;
      info_[op.results[r].data()] = {name, key, op_label(op), {}, i};
    }
    for (const auto& v : op.operands) {
      auto it = info_.find(v.data());
      if (it == info_.end()) continue;
      std::vector<std::string>& users = it->second.users;
      const std::string user(op.mnemonic());
      if (std::find(users.begin(), users.end(), user) == users.end()) users.push_back(user);
    }
  }
}

const ValueInfo* ValueIndex::find(const ir::ValueData* value) const {
  auto it = info_.find(value);
  return it == info_.end() ? nullptr : &it->second;
}

}  // namespace vtc::diff
