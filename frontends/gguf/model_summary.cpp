// Summaries of a GGUF file. Both forms are computed from one ModelFacts
// extraction so the text and JSON never disagree.
#include "frontends/gguf/model_summary.h"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>

namespace vtc::gguf {
namespace {

struct TypeTotals {
  uint64_t tensors = 0, elements = 0, bytes = 0;
};

struct ModelFacts {
  std::string arch;
  std::map<std::string, TypeTotals> by_type;
  uint64_t elements = 0, bytes = 0;
  size_t vocab = 0, merges = 0;
  std::string tokenizer_model;  // tokenizer.ggml.model, "" if absent
  bool no_vocab = false;        // "no_vocab" / "none": token ids only
};

ModelFacts collect(const GgufFile& f) {
  ModelFacts facts;
  facts.arch = f.architecture();
  for (const auto& t : f.tensors()) {
    auto& tt = facts.by_type[std::string(ggml_type_name(t.type))];
    tt.tensors++;
    tt.elements += t.n_elements;
    tt.bytes += t.n_bytes;
    facts.elements += t.n_elements;
    facts.bytes += t.n_bytes;
  }
  if (auto* v = f.find("tokenizer.ggml.tokens"); v && v->as_array()) facts.vocab = v->as_array()->items.size();
  if (auto* v = f.find("tokenizer.ggml.merges"); v && v->as_array()) facts.merges = v->as_array()->items.size();
  facts.tokenizer_model = f.get_string("tokenizer.ggml.model").value_or("");
  facts.no_vocab = facts.tokenizer_model == "no_vocab" || facts.tokenizer_model == "none";
  if (facts.no_vocab) {
    // The size the tokenizer takes (docs/tokenizer.md): <arch>.vocab_size,
    // else the rows of token_embd.weight.
    std::optional<int64_t> n;
    if (!facts.arch.empty()) n = f.get_int(facts.arch + ".vocab_size");
    const TensorInfo* embd = f.find_tensor("token_embd.weight");
    if (n && *n >= 0) facts.vocab = size_t(*n);
    else if (embd && embd->dims.size() >= 2) facts.vocab = size_t(embd->dims[1]);
  }
  return facts;
}

std::string human_bytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(b);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  return u == 0 ? fmt::format("{} B", b) : fmt::format("{:.2f} {}", v, units[u]);
}

std::string human_count(uint64_t n) {
  if (n >= 1000000000ull) return fmt::format("{:.2f}B", n / 1e9);
  if (n >= 1000000ull) return fmt::format("{:.2f}M", n / 1e6);
  if (n >= 1000ull) return fmt::format("{:.2f}K", n / 1e3);
  return fmt::format("{}", n);
}

std::string shape_string(const TensorInfo& t) {
  return fmt::format("[{}]", fmt::join(t.dims, ", "));
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

void append_metadata_section(std::string& out, const GgufFile& f, const std::string& title,
                             const std::string& prefix, const SummaryOptions& o) {
  std::string body;
  for (const auto& kv : f.metadata())
    if (starts_with(kv.key, prefix))
      body += fmt::format("  {:<44} {}\n", kv.key.substr(prefix.size()), kv.value.to_display(o.max_array_items));
  if (!body.empty()) out += fmt::format("{}:\n{}", title, body);
}

}  // namespace

std::string summary_text(const GgufFile& f, const SummaryOptions& o) {
  ModelFacts facts = collect(f);
  std::string out;
  out += fmt::format("file:         {} ({}, GGUF v{}, alignment {}, data at byte {})\n", f.path(),
                     human_bytes(f.file_size()), f.version(), f.alignment(), f.data_offset());
  out += fmt::format("architecture: {}\n", facts.arch.empty() ? "(none: vocab-only or unknown)" : facts.arch);
  if (auto name = f.get_string("general.name")) out += fmt::format("name:         {}\n", *name);
  out += fmt::format("parameters:   {} ({} elements in {} tensors, {} of tensor data)\n",
                     human_count(facts.elements), facts.elements, f.tensors().size(), human_bytes(facts.bytes));
  if (!facts.arch.empty()) append_metadata_section(out, f, "hparams (" + facts.arch + ".*)", facts.arch + ".", o);
  append_metadata_section(out, f, "general", "general.", o);
  if (facts.no_vocab)
    out += fmt::format("tokenizer:    none ({}), {} tokens without text: prompts are token ids\n",
                       facts.tokenizer_model, facts.vocab);
  else if (facts.vocab)
    out += fmt::format("tokenizer:    {} tokens, {} merges\n", facts.vocab, facts.merges);
  append_metadata_section(out, f, "tokenizer (tokenizer.*)", "tokenizer.", o);
  std::string other;
  for (const auto& kv : f.metadata())
    if (!starts_with(kv.key, "general.") && !starts_with(kv.key, "tokenizer.") &&
        (facts.arch.empty() || !starts_with(kv.key, facts.arch + ".")))
      other += fmt::format("  {:<44} {}\n", kv.key, kv.value.to_display(o.max_array_items));
  if (!other.empty()) out += "other metadata:\n" + other;

  if (!f.tensors().empty()) {
    out += fmt::format("tensors ({}):\n  {:<40} {:<8} {:<22} {:>12}\n", f.tensors().size(), "name", "type", "shape", "bytes");
    size_t shown = 0;
    for (const auto& t : f.tensors()) {
      if (o.max_tensors && shown == o.max_tensors) {
        out += fmt::format("  ... {} more (use --all-tensors)\n", f.tensors().size() - shown);
        break;
      }
      out += fmt::format("  {:<40} {:<8} {:<22} {:>12}\n", t.name, ggml_type_name(t.type), shape_string(t), t.n_bytes);
      ++shown;
    }
    out += "totals by type:\n";
    for (const auto& [type, tt] : facts.by_type)
      out += fmt::format("  {:<8} {:>5} tensors {:>14} elements {:>12}\n", type, tt.tensors, tt.elements, human_bytes(tt.bytes));
    out += fmt::format("  {:<8} {:>5} tensors {:>14} elements {:>12}\n", "all", f.tensors().size(), facts.elements, human_bytes(facts.bytes));
  }
  return out;
}

namespace {
nlohmann::json value_json(const Value& v, size_t max_items) {
  if (auto* a = v.as_array()) {
    nlohmann::json items = nlohmann::json::array();
    for (size_t i = 0; i < a->items.size() && i < max_items; ++i) items.push_back(value_json(a->items[i], max_items));
    return {{"type", "array"}, {"elem_type", value_type_name(a->elem_type)}, {"length", a->items.size()}, {"items", items}, {"truncated", a->items.size() > max_items}};
  }
  if (auto* s = v.as_string()) return *s;
  if (auto b = v.as_bool()) return *b;
  if (v.type() == ValueType::F32 || v.type() == ValueType::F64) return *v.as_float();
  if (auto i = v.as_int()) return *i;
  return std::get<uint64_t>(v.storage());  // u64 above INT64_MAX
}
}  // namespace

std::string summary_json(const GgufFile& f, const SummaryOptions& o) {
  ModelFacts facts = collect(f);
  nlohmann::json j;
  j["file"] = {{"path", f.path()}, {"bytes", f.file_size()}, {"version", f.version()}, {"alignment", f.alignment()}, {"data_offset", f.data_offset()}};
  j["architecture"] = facts.arch;
  nlohmann::json meta = nlohmann::json::object();
  for (const auto& kv : f.metadata()) meta[kv.key] = value_json(kv.value, o.max_array_items);
  j["metadata"] = meta;
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& t : f.tensors())
    tensors.push_back({{"name", t.name}, {"type", ggml_type_name(t.type)}, {"dims", t.dims}, {"elements", t.n_elements}, {"bytes", t.n_bytes}, {"offset", t.offset}});
  j["tensors"] = tensors;
  nlohmann::json by_type = nlohmann::json::object();
  for (const auto& [type, tt] : facts.by_type) by_type[type] = {{"tensors", tt.tensors}, {"elements", tt.elements}, {"bytes", tt.bytes}};
  j["tokenizer"] = {{"model", facts.tokenizer_model}, {"has_vocab", !facts.no_vocab}};
  j["totals"] = {{"tensors", f.tensors().size()}, {"elements", facts.elements}, {"bytes", facts.bytes}, {"by_type", by_type}, {"vocab_size", facts.vocab}, {"merges", facts.merges}};
  return j.dump(2);
}

}  // namespace vtc::gguf
