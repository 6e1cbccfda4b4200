#include "runtime/compile/artifact.h"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <tuple>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "frontends/gguf/model_summary.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/bind_state.h"
#include "runtime/cpu/kernels/kernels.h"
#include "support/error.h"
#include "support/hash.h"

namespace vtc {
namespace {

using nlohmann::json;

constexpr char kMagic[8] = {'V', 'T', 'C', 'A', 'R', 'T', 'F', '\0'};
constexpr uint64_t kHeaderBytes = 24;
constexpr uint64_t kPackAlignment = 4096;
constexpr uint64_t kMaxManifestBytes = uint64_t(1) << 30;

std::string hex64(uint64_t v) { return fmt::format("{:016x}", v); }

json plan_to_json(const passes::FunctionPlan& p) {
  json buffers = json::array();
  for (const auto& b : p.buffers)
    buffers.push_back({{"key", b.key}, {"value", b.value}, {"op", b.op},
                       {"placement", std::string(ir::placement_name(b.placement))}, {"bytes", b.bytes},
                       {"offset", b.offset}, {"first", b.first}, {"last", b.last}});
  return {{"function", p.function}, {"bindings", p.bindings}, {"alignment", p.alignment},
          {"host_arena_bytes", p.host_arena_bytes}, {"device_arena_bytes", p.device_arena_bytes},
          {"naive_bytes", p.naive_bytes}, {"buffers", buffers}};
}

// Strict getters: a value of the wrong JSON type (a negative size, a
// fraction, a string) is an error naming the field, not a silent cast.
// A manifest value that fails validation. load_artifact() adds the
// artifact's path and the advice to recompile.
class FieldError : public Error {
 public:
  using Error::Error;
};

[[noreturn]] void bad_field(const std::string& field, const std::string& what) {
  throw FieldError(fmt::format("{} {}", field, what));
}

// A value for a message: a scalar as written (shortened), else its type;
// never a recursive dump of untrusted nesting.
std::string shown(const json& v) {
  if (!v.is_primitive()) return std::string("a JSON ") + v.type_name();
  std::string text = v.dump();
  if (text.size() > 64) text = text.substr(0, 61) + "...";
  return text;
}

const json& member(const json& j, const char* key, const std::string& field) {
  if (!j.is_object()) bad_field(field, "must be a JSON object");
  auto it = j.find(key);
  if (it == j.end()) bad_field(field + "." + key, "is missing");
  return *it;
}

uint64_t get_u64(const json& j, const char* key, const std::string& field) {
  const json& v = member(j, key, field);
  if (!v.is_number_unsigned()) bad_field(field + "." + key, fmt::format("must be a non-negative integer, got {}", shown(v)));
  return v.get<uint64_t>();
}

int64_t get_i64(const json& j, const char* key, const std::string& field) {
  const json& v = member(j, key, field);
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)))
    bad_field(field + "." + key, fmt::format("must be an integer, got {}", shown(v)));
  return v.get<int64_t>();
}

std::string get_str(const json& j, const char* key, const std::string& field) {
  const json& v = member(j, key, field);
  if (!v.is_string()) bad_field(field + "." + key, fmt::format("must be a string, got {}", shown(v)));
  return v.get<std::string>();
}

bool get_bool(const json& j, const char* key, const std::string& field) {
  const json& v = member(j, key, field);
  if (!v.is_boolean()) bad_field(field + "." + key, fmt::format("must be true or false, got {}", shown(v)));
  return v.get<bool>();
}

passes::FunctionPlan plan_from_json(const json& j, const std::string& field) {
  passes::FunctionPlan p;
  p.function = get_str(j, "function", field);
  const json& bindings = member(j, "bindings", field);
  if (!bindings.is_object()) bad_field(field + ".bindings", "must be a JSON object");
  for (const auto& [k, v] : bindings.items()) p.bindings[k] = get_i64(bindings, k.c_str(), field + ".bindings");
  p.alignment = get_u64(j, "alignment", field);
  p.host_arena_bytes = get_u64(j, "host_arena_bytes", field);
  p.device_arena_bytes = get_u64(j, "device_arena_bytes", field);
  p.naive_bytes = get_u64(j, "naive_bytes", field);
  const json& buffers = member(j, "buffers", field);
  if (!buffers.is_array()) bad_field(field + ".buffers", "must be a JSON array");
  for (size_t i = 0; i < buffers.size(); ++i) {
    const json& b = buffers[i];
    const std::string f = fmt::format("{}.buffers[{}]", field, i);
    passes::PlannedBuffer pb;
    pb.key = get_str(b, "key", f);
    pb.value = get_str(b, "value", f);
    pb.op = get_str(b, "op", f);
    const std::string placement = get_str(b, "placement", f);
    if (placement != "host" && placement != "device")
      bad_field(f + ".placement", fmt::format("must be host or device, got '{}'", placement));
    pb.placement = placement == "host" ? ir::Placement::Host : ir::Placement::Device;
    pb.bytes = get_u64(b, "bytes", f);
    pb.offset = get_u64(b, "offset", f);
    pb.first = get_i64(b, "first", f);
    pb.last = get_i64(b, "last", f);
    p.buffers.push_back(std::move(pb));
  }
  return p;
}

json counts_to_json(const std::map<std::string, StepCounts>& counts) {
  json j = json::object();
  for (const auto& [step, c] : counts)
    j[step] = {{"ops", c.ops}, {"kernels", c.kernels}, {"regions", c.regions}, {"body_ops", c.body_ops}};
  return j;
}

std::map<std::string, StepCounts> counts_from_json(const json& j, const std::string& field) {
  if (!j.is_object()) bad_field(field, "must be a JSON object");
  std::map<std::string, StepCounts> out;
  for (const auto& [step, c] : j.items()) {
    const std::string f = field + "." + step;
    out[step] = {get_u64(c, "ops", f), get_u64(c, "kernels", f), get_u64(c, "regions", f), get_u64(c, "body_ops", f)};
  }
  return out;
}

// XXH64 (Collet's xxHash, 64-bit variant): four independent lanes over
// 32-byte stripes, several GB/s on one core, so checking the weights of a
// model costs about what reading them from the page cache does. Streaming:
// update() takes the bytes in any pieces (a packed GGUF is hashed as it is
// written, tensor by tensor), digest() gives the hash of them all.
class Xxh64 {
 public:
  explicit Xxh64(uint64_t seed = 0) : seed_(seed), v_{seed + kP1 + kP2, seed + kP2, seed, seed - kP1} {}

  static uint64_t hash(std::span<const uint8_t> bytes, uint64_t seed = 0) {
    Xxh64 h(seed);
    h.update(bytes);
    return h.digest();
  }

  void update(std::span<const uint8_t> bytes) {
    const uint8_t* p = bytes.data();
    size_t n = bytes.size();
    total_ += n;
    if (buffered_ > 0) {
      const size_t take = std::min(n, size_t(32) - buffered_);
      std::memcpy(buffer_ + buffered_, p, take);
      buffered_ += take;
      p += take;
      n -= take;
      if (buffered_ < 32) return;
      stripe(buffer_);
      buffered_ = 0;
    }
    for (; n >= 32; p += 32, n -= 32) stripe(p);
    std::memcpy(buffer_, p, n);
    buffered_ = n;
  }

  uint64_t digest() const {
    uint64_t h;
    if (total_ >= 32) {
      h = rotl(v_[0], 1) + rotl(v_[1], 7) + rotl(v_[2], 12) + rotl(v_[3], 18);
      for (uint64_t v : v_) h = (h ^ round(0, v)) * kP1 + kP4;
    } else {
      h = seed_ + kP5;
    }
    h += total_;
    const uint8_t* p = buffer_;
    const uint8_t* const end = buffer_ + buffered_;
    for (; p + 8 <= end; p += 8) h = rotl(h ^ round(0, read64(p)), 27) * kP1 + kP4;
    if (p + 4 <= end) {
      h = rotl(h ^ (uint64_t(read32(p)) * kP1), 23) * kP2 + kP3;
      p += 4;
    }
    for (; p < end; ++p) h = rotl(h ^ (uint64_t(*p) * kP5), 11) * kP1;
    h ^= h >> 33;
    h *= kP2;
    h ^= h >> 29;
    h *= kP3;
    h ^= h >> 32;
    return h;
  }

 private:
  static constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull, kP2 = 0xC2B2AE3D27D4EB4Full, kP3 = 0x165667B19E3779F9ull,
                            kP4 = 0x85EBCA77C2B2AE63ull, kP5 = 0x27D4EB2F165667C5ull;
  static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
  static uint64_t round(uint64_t acc, uint64_t input) { return rotl(acc + input * kP2, 31) * kP1; }
  static uint64_t read64(const uint8_t* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  static uint32_t read32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  void stripe(const uint8_t* p) {
    for (int i = 0; i < 4; ++i) v_[i] = round(v_[i], read64(p + 8 * i));
  }

  uint64_t seed_;
  uint64_t v_[4];
  uint8_t buffer_[32] = {};
  size_t buffered_ = 0;
  uint64_t total_ = 0;
};

std::string weights_checksum_text(uint64_t sum) { return "xxh64:" + hex64(sum); }

namespace fs = std::filesystem;

// How the artifact names its GGUF: an absolute path stays absolute; a
// relative one is stored relative to the artifact's own directory, so the
// two can move together and the artifact loads from any working directory.
std::string stored_gguf_path(const std::string& gguf_path, const std::string& artifact_path) {
  const fs::path g(gguf_path);
  if (g.is_absolute()) return g.string();
  std::error_code ec;
  const fs::path abs_g = fs::absolute(g, ec).lexically_normal();
  if (ec) return gguf_path;
  const fs::path base = fs::absolute(fs::path(artifact_path), ec).parent_path().lexically_normal();
  if (ec) return abs_g.string();
  const fs::path rel = abs_g.lexically_relative(base);
  return rel.empty() ? abs_g.string() : rel.string();
}

std::string resolve_gguf_path(const std::string& stored, const std::string& artifact_path) {
  const fs::path g(stored);
  if (g.is_absolute()) return stored;
  return (fs::path(artifact_path).parent_path() / g).lexically_normal().string();
}

// The packed GGUF's bytes in file order, handed to `sink` in pieces: the
// original bytes, except that each tensor named in `layouts` is rearranged
// into its layout (same size; header and tensor table unchanged).
void for_each_packed_piece(const gguf::GgufFile& f, const std::map<std::string, WeightLayout>& layouts,
                           const std::function<void(std::span<const uint8_t>)>& sink) {
  const std::span<const uint8_t> bytes = f.bytes();
  std::vector<std::pair<uint64_t, std::pair<const gguf::TensorInfo*, WeightLayout>>> tensors;
  for (const auto& [name, layout] : layouts) {
    const gguf::TensorInfo* t = f.find_tensor(name);
    tensors.push_back({uint64_t(t->data - bytes.data()), {t, layout}});
  }
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<uint8_t> scratch;
  uint64_t at = 0;
  for (const auto& [begin, tl] : tensors) {
    const auto& [t, layout] = tl;
    sink(bytes.subspan(at, begin - at));
    scratch.resize(t->n_bytes);
    cpu::repack_weight(t->type, layout, t->data, int64_t(t->dims[1]), int64_t(t->dims[0]), scratch.data());
    sink(scratch);
    at = begin + t->n_bytes;
  }
  sink(bytes.subspan(at));
}

// --- A CUDA step's launches --------------------------------------------
// What the executor runs (cuda::StepKernels), stored so that nothing is
// generated at load: per kernel its entry (its source is in the step's
// "kernels" list), arguments, grid and scratch as dims over the step
// symbols; the aliases, weight bindings and returns. Values are named by
// their position in the function, as the memory plan's keys ("arg#0",
// "op#5.r#0", "op#7.body.op#1.r#0"), plus "op#7.body.arg#0" for a fused
// body's arguments. Loading checks that every name, entry, state and dim
// resolves; it cannot check that a launch matches its kernel's code any
// more than it can check the code: a kernel runs as stored, like a weight.

constexpr const char* kRowsGuards[] = {"always", "few_rows", "many_rows"};  // cuda::RowsGuard
constexpr const char* kArgKinds[] = {"value",      "symbol",  "state_rows", "state_pool", "slots",
                                     "page_table", "scratch", "extra",      "counters"};

// Each op of `f` by position: "op#5", "op#7.body.op#1" (Kernel::op).
std::map<const ir::Op*, std::string> op_names(const ir::Function& f) {
  std::map<const ir::Op*, std::string> out;
  for (size_t i = 0; i < f.ops.size(); ++i) {
    out[f.ops[i].get()] = fmt::format("op#{}", i);
    if (const auto& body = f.ops[i]->body)
      for (size_t j = 0; j < body->ops.size(); ++j) out[body->ops[j].get()] = fmt::format("op#{}.body.op#{}", i, j);
  }
  return out;
}

std::map<const ir::ValueData*, std::string> value_names(const ir::Function& f) {
  std::map<const ir::ValueData*, std::string> out;
  for (const auto& [key, v] : passes::plan_keys(f)) out[v] = key;
  for (size_t i = 0; i < f.ops.size(); ++i)
    if (const auto& body = f.ops[i]->body)
      for (size_t a = 0; a < body->args.size(); ++a) out[body->args[a].data()] = fmt::format("op#{}.body.arg#{}", i, a);
  return out;
}

json launches_to_json(const cuda::StepKernels& step, const ir::Function& f) {
  const auto names = value_names(f);
  const auto ops = op_names(f);
  auto name = [&](const ir::ValueData* v) { return names.at(v); };
  json kernels = json::array();
  for (const auto& k : step.kernels) {
    json args = json::array();
    for (const auto& a : k.args) {
      json j = {{"kind", kArgKinds[size_t(a.kind)]}, {"name", a.name}, {"ctype", a.ctype}};
      if (a.kind == cuda::KernelArg::Kind::Value) j["value"] = name(a.value);
      if (!a.state.empty()) j["state"] = a.state, j["half"] = a.half;
      args.push_back(std::move(j));
    }
    kernels.push_back({{"entry", k.entry}, {"what", k.what}, {"args", std::move(args)}, {"threads_x", k.threads_x.str()},
                       {"rows_y", k.rows_y.str()}, {"rows_per_block_y", k.rows_per_block_y}, {"block", k.block},
                       {"scratch_bytes", k.scratch_bytes.str()}, {"counter_ints", k.counter_ints.str()},
                       {"op", k.op ? ops.at(k.op) : ""}, {"launched", kRowsGuards[size_t(k.guard)]}});
  }
  json aliases = json::array(), weights = json::array(), returns = json::array();
  for (const auto& a : step.aliases) aliases.push_back({name(a.value), name(a.source), a.offset_elems.str()});
  for (const auto& w : step.weights) weights.push_back({name(w.value), w.weight});
  for (const auto* v : step.returns) returns.push_back(name(v));
  return {{"kernels", std::move(kernels)}, {"aliases", std::move(aliases)}, {"weights", std::move(weights)}, {"returns", std::move(returns)}};
}

// Dim::str()'s text back into a Dim: terms joined by + and -, each a
// product of symbols and one number. Null unless it prints back the same.
std::optional<ir::Dim> parse_dim_text(const std::string& s) {
  ir::Dim out = 0;
  size_t i = 0;
  try {
    while (i < s.size()) {
      int64_t sign = 1;
      if (s[i] == '-') sign = -1, ++i;
      else if (s[i] == '+' && i > 0) ++i;
      else if (i > 0) return std::nullopt;
      ir::Dim term = sign;
      for (bool more = true; more;) {
        const size_t end = s.find_first_of("*+-", i);
        const std::string factor = s.substr(i, end == std::string::npos ? std::string::npos : end - i);
        if (!factor.empty() && std::all_of(factor.begin(), factor.end(), ::isdigit) && factor.size() <= 18)
          term = term * ir::Dim(std::stoll(factor));
        else if (ir::is_symbol_name(factor))
          term = term * ir::Dim::symbol(factor);
        else
          return std::nullopt;
        i = end == std::string::npos ? s.size() : end;
        more = i < s.size() && s[i] == '*';
        i += more ? 1 : 0;
      }
      out = out + term;
    }
  } catch (const Error&) {
    return std::nullopt;  // past the dim bounds
  }
  if (s.empty() || out.str() != s) return std::nullopt;
  return out;
}

ir::Dim get_dim(const json& j, const char* key, const std::string& field) {
  const std::string text = get_str(j, key, field);
  auto d = parse_dim_text(text);
  if (!d) bad_field(field + "." + key, fmt::format("is not a dim: {}", shown(json(text))));
  return *d;
}

cuda::KernelArg arg_from_json(const json& j, const ir::Module& m, const std::map<std::string, const ir::ValueData*>& values,
                              const std::string& f) {
  cuda::KernelArg a;
  const std::string kind = get_str(j, "kind", f);
  const auto* k = std::find(std::begin(kArgKinds), std::end(kArgKinds), kind);
  if (k == std::end(kArgKinds)) bad_field(f + ".kind", fmt::format("is not a kernel argument kind: {}", shown(json(kind))));
  a.kind = cuda::KernelArg::Kind(k - std::begin(kArgKinds));
  a.name = get_str(j, "name", f);
  a.ctype = get_str(j, "ctype", f);
  if (a.kind == cuda::KernelArg::Kind::Value) {
    auto v = values.find(get_str(j, "value", f));
    if (v == values.end()) bad_field(f + ".value", "names no value of the step");
    a.value = v->second;
  }
  if (a.kind == cuda::KernelArg::Kind::Symbol && !ir::is_symbol_name(a.name)) bad_field(f + ".name", "is not a symbol");
  if (a.kind == cuda::KernelArg::Kind::StateRows || a.kind == cuda::KernelArg::Kind::StatePool) {
    a.state = get_str(j, "state", f);
    if (!m.find_state(a.state)) bad_field(f + ".state", fmt::format("names no declared state: {}", shown(json(a.state))));
    a.half = int(get_i64(j, "half", f));
  }
  return a;
}

cuda::Kernel kernel_from_json(const json& j, const ir::Module& m, const std::map<std::string, const ir::ValueData*>& values,
                              const std::map<std::string, const ir::Op*>& ops, const std::vector<KernelSource>& sources,
                              const std::string& f) {
  cuda::Kernel k;
  k.entry = get_str(j, "entry", f);
  auto src = std::find_if(sources.begin(), sources.end(), [&](const KernelSource& s) { return s.entry == k.entry; });
  if (src == sources.end()) bad_field(f + ".entry", "is not in the step's kernels");
  // One source per entry: kernels that differ only in their header comment
  // (the op they were made for) share it.
  k.source = src->source;
  k.what = get_str(j, "what", f);
  if (const std::string op = get_str(j, "op", f); !op.empty()) {
    auto it = ops.find(op);
    if (it == ops.end()) bad_field(f + ".op", "names no op of the step");
    k.op = it->second;
  }
  const json& args = member(j, "args", f);
  if (!args.is_array()) bad_field(f + ".args", "must be a JSON array");
  for (size_t i = 0; i < args.size(); ++i) k.args.push_back(arg_from_json(args[i], m, values, fmt::format("{}.args[{}]", f, i)));
  k.threads_x = get_dim(j, "threads_x", f);
  k.rows_y = get_dim(j, "rows_y", f);
  k.scratch_bytes = get_dim(j, "scratch_bytes", f);
  // Absent in artifacts from before the Counters argument: none.
  if (j.is_object() && j.contains("counter_ints")) k.counter_ints = get_dim(j, "counter_ints", f);
  // Absent in artifacts from before @prefill's decode form: always.
  if (j.is_object() && j.contains("launched")) {
    const std::string g = get_str(j, "launched", f);
    auto it = std::find(std::begin(kRowsGuards), std::end(kRowsGuards), g);
    if (it == std::end(kRowsGuards))
      bad_field(f + ".launched", fmt::format("must be always, few_rows or many_rows, not {}", shown(json(g))));
    k.guard = cuda::RowsGuard(it - std::begin(kRowsGuards));
  }
  k.rows_per_block_y = int(get_i64(j, "rows_per_block_y", f));
  k.block = int(get_i64(j, "block", f));
  if (k.block < 1 || k.block > 1024) bad_field(f + ".block", "must be in [1, 1024]");
  if (k.rows_per_block_y < 1) bad_field(f + ".rows_per_block_y", "must be at least 1");
  return k;
}

// A stored list of [name, ...] rows: each row's first `n` entries strings.
const json& rows_of(const json& j, const char* key, size_t n, const std::string& f) {
  const json& rows = member(j, key, f);
  if (!rows.is_array()) bad_field(f + "." + key, "must be a JSON array");
  for (size_t i = 0; i < rows.size(); ++i)
    if (n ? !rows[i].is_array() || rows[i].size() != n : !rows[i].is_string())
      bad_field(fmt::format("{}.{}[{}]", f, key, i), n ? fmt::format("must be an array of {} strings", n) : "must be a string");
  return rows;
}

cuda::StepKernels launches_from_json(const json& j, const ir::Module& m, const ir::Function& fn,
                                     const std::vector<KernelSource>& sources, const std::string& f) {
  std::map<std::string, const ir::ValueData*> values;
  for (const auto& [v, name] : value_names(fn)) values[name] = v;
  std::map<std::string, const ir::Op*> ops;
  for (const auto& [op, name] : op_names(fn)) ops[name] = op;
  auto value = [&](const json& name, const std::string& field) {
    auto it = name.is_string() ? values.find(name.get<std::string>()) : values.end();
    if (it == values.end()) bad_field(field, "names no value of the step");
    return it->second;
  };
  cuda::StepKernels st;
  st.function = fn.name;
  const json& kernels = member(j, "kernels", f);
  if (!kernels.is_array()) bad_field(f + ".kernels", "must be a JSON array");
  for (size_t i = 0; i < kernels.size(); ++i)
    st.kernels.push_back(kernel_from_json(kernels[i], m, values, ops, sources, fmt::format("{}.kernels[{}]", f, i)));
  const json& aliases = rows_of(j, "aliases", 3, f);
  for (size_t i = 0; i < aliases.size(); ++i) {
    const std::string at = fmt::format("{}.aliases[{}]", f, i);
    auto off = aliases[i][2].is_string() ? parse_dim_text(aliases[i][2].get<std::string>()) : std::nullopt;
    if (!off) bad_field(at, "has no offset dim");
    st.aliases.push_back({value(aliases[i][0], at), value(aliases[i][1], at), *off});
  }
  const json& weights = rows_of(j, "weights", 2, f);
  for (size_t i = 0; i < weights.size(); ++i) {
    const std::string at = fmt::format("{}.weights[{}]", f, i);
    if (!weights[i][1].is_string() || !m.find_weight(weights[i][1].get<std::string>())) bad_field(at, "names no weight");
    st.weights.push_back({value(weights[i][0], at), weights[i][1].get<std::string>()});
  }
  const json& returns = rows_of(j, "returns", 0, f);
  for (size_t i = 0; i < returns.size(); ++i) st.returns.push_back(value(returns[i], fmt::format("{}.returns[{}]", f, i)));
  return st;
}

json manifest_of(const CompiledModel& m, const std::string& artifact_path, bool pack, std::optional<uint64_t> weights_sum,
                 const std::map<std::string, WeightLayout>& stored_layouts) {
  json steps = json::object();
  for (const auto& f : m.module.functions) steps[f->name] = {{"ir", ir::print(*f)}};
  for (const auto& p : m.plans) steps[p.function]["memory_plan"] = plan_to_json(p);
  for (const auto& [step, kernels] : m.kernels) {
    json list = json::array();
    for (const auto& k : kernels) list.push_back({{"entry", k.entry}, {"what", k.what}, {"source", k.source}});
    steps[step]["kernels"] = list;
  }
  for (const auto& st : m.cuda_steps)
    if (const ir::Function* f = m.module.find_function(st.function)) steps[st.function]["launches"] = launches_to_json(st, *f);
  const gguf::GgufFile& g = m.file;
  json ref = {{"path", pack ? std::string() : stored_gguf_path(g.path(), artifact_path)},
              {"size", g.file_size()},
              {"header_checksum", hex64(gguf_header_checksum(g))},
              {"packed", pack}};
  if (weights_sum) ref["weights_checksum"] = weights_checksum_text(*weights_sum);
  if (pack) {
    json layouts = json::object();
    for (const auto& [name, layout] : stored_layouts) layouts[name] = std::string(weight_layout_name(layout));
    ref["stored_layouts"] = layouts;
  }
  return {
      {"format_version", kArtifactFormat},
      {"vtc_version", VTC_VERSION_STRING},
      {"target", target_name(m.target)},
      {"pipeline", m.pipeline},
      {"model", json::parse(gguf::summary_json(g, {0, 8}))},
      {"chat_template", g.get_string("tokenizer.chat_template").value_or("")},
      {"gguf", ref},
      {"module_ir", ir::print(m.module)},
      {"steps", steps},
      {"ops_before", counts_to_json(m.before)},
      {"ops_after", counts_to_json(m.after)},
      {"report", m.report},
      {"compile_seconds", m.seconds},
  };
}

void write_all(std::ofstream& out, const void* data, uint64_t size) {
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}

}  // namespace

bool is_artifact(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  return in.read(magic, 8) && std::memcmp(magic, kMagic, 8) == 0;
}

uint64_t gguf_header_checksum(const gguf::GgufFile& file) {
  return fnv1a64(file.bytes().first(std::min<uint64_t>(file.data_offset(), file.file_size())));
}

uint64_t gguf_content_checksum(const gguf::GgufFile& file) { return Xxh64::hash(file.bytes()); }

uint64_t xxh64(std::span<const uint8_t> bytes, uint64_t seed) { return Xxh64::hash(bytes, seed); }

std::map<std::string, WeightLayout> packed_layouts(const CompiledModel& m) {
  std::map<std::string, WeightLayout> out;
  std::map<std::string, const ir::WeightDecl*> first_of;  // by tensor
  for (const auto& w : m.module.weights) {
    const WeightLayout layout = w.type.elem.layout();
    auto [it, fresh] = first_of.emplace(w.source, &w);
    if (!fresh && it->second->type.elem.layout() != layout)
      throw Error(fmt::format("pack: weights @{} ({}) and @{} ({}) read tensor '{}' in two layouts; one tensor is stored "
                              "in one layout", it->second->name, it->second->type.elem.name(), w.name, w.type.elem.name(),
                              w.source));
    if (layout == WeightLayout::Rows) continue;
    const gguf::TensorInfo* t = m.file.find_tensor(w.source);
    if (!t) throw Error(fmt::format("pack: weight @{}: tensor '{}' is not in {}", w.name, w.source, m.file.path()));
    if (t->dims.size() != 2 || t->type != w.type.elem.quant_type() ||
        !cpu::matmul_layout_supported(t->type, layout, int64_t(t->dims[1])))
      throw Error(fmt::format("pack: weight @{} is {} but tensor '{}' is a {}-D {} tensor that the {} layout cannot hold",
                              w.name, w.type.str(), w.source, t->dims.size(), ggml_type_name(t->type),
                              weight_layout_name(layout)));
    out[w.source] = layout;
  }
  return out;
}

SaveInfo save_artifact(const CompiledModel& m, const std::string& path, const SaveOptions& options) {
  SaveInfo info;
  std::map<std::string, WeightLayout> layouts;
  if (options.pack) {
    layouts = packed_layouts(m);
    info.packed_weights = layouts.size();
    for (const auto& [name, layout] : layouts) info.packed_bytes += m.file.find_tensor(name)->n_bytes;
  }
  if (options.checksum_weights.value_or(options.pack)) {
    // Over the bytes as written: a packed GGUF's rearranged tensors included.
    const auto t0 = std::chrono::steady_clock::now();
    if (options.pack) {
      Xxh64 h;
      for_each_packed_piece(m.file, layouts, [&](std::span<const uint8_t> piece) { h.update(piece); });
      info.weights_checksum = h.digest();
    } else {
      info.weights_checksum = gguf_content_checksum(m.file);
    }
    info.checksum_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  json manifest = manifest_of(m, path, options.pack, info.weights_checksum, layouts);
  uint64_t pack_offset = 0;
  std::string text = manifest.dump();
  if (options.pack) {
    // The offset depends on the manifest length, which depends on the
    // offset's digits: settle it in two rounds.
    for (int round = 0; round < 2; ++round) {
      pack_offset = (kHeaderBytes + text.size() + kPackAlignment - 1) / kPackAlignment * kPackAlignment;
      manifest["gguf"]["offset"] = pack_offset;
      text = manifest.dump();
    }
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(fmt::format("{}: cannot write: {}", tmp, std::strerror(errno)));
    uint32_t version = kArtifactFormat, zero = 0;
    uint64_t length = text.size();
    write_all(out, kMagic, 8);
    write_all(out, &version, 4);
    write_all(out, &zero, 4);
    write_all(out, &length, 8);
    write_all(out, text.data(), text.size());
    if (options.pack) {
      std::string pad(pack_offset - kHeaderBytes - text.size(), '\0');
      write_all(out, pad.data(), pad.size());
      const auto t0 = std::chrono::steady_clock::now();
      for_each_packed_piece(m.file, layouts, [&](std::span<const uint8_t> piece) { write_all(out, piece.data(), piece.size()); });
      info.pack_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    if (!out.flush()) throw Error(fmt::format("{}: write failed", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw Error(fmt::format("{}: cannot rename to {}: {}", tmp, path, std::strerror(errno)));
  return info;
}

namespace {

[[noreturn]] void bad(const std::string& field, const std::string& what) { bad_field(field, what); }

json read_manifest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  char magic[8] = {};
  uint32_t version = 0, zero = 0;
  uint64_t length = 0;
  in.read(magic, 8);
  in.read(reinterpret_cast<char*>(&version), 4);
  in.read(reinterpret_cast<char*>(&zero), 4);
  in.read(reinterpret_cast<char*>(&length), 8);
  if (!in || std::memcmp(magic, kMagic, 8) != 0) throw Error(fmt::format("{}: not a vtc artifact (bad magic)", path));
  if (version != kArtifactFormat)
    throw Error(fmt::format("{}: artifact format version {} but this vtc reads version {}{}; recompile with `vtc compile`",
                            path, version, kArtifactFormat,
                            version < kArtifactFormat ? " (version 3 stores packed weights in their IR layout)" : ""));
  if (zero != 0) throw Error(fmt::format("{}: bytes 12..15 of the header must be zero, got {}", path, zero));
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  if (length > kMaxManifestBytes)
    throw Error(fmt::format("{}: manifest length {} at byte 16 is beyond the limit of {} bytes", path, length,
                            kMaxManifestBytes));
  if (length > size - kHeaderBytes)
    throw Error(fmt::format("{}: manifest length {} at byte 16 runs past the end of the file ({} bytes)", path, length, size));
  std::string text(length, '\0');
  in.seekg(static_cast<std::streamoff>(kHeaderBytes));
  in.read(text.data(), static_cast<std::streamsize>(length));
  if (!in) throw Error(fmt::format("{}: cannot read the manifest ({} bytes at byte 24)", path, length));
  json manifest = json::parse(text, nullptr, false);
  if (manifest.is_discarded() || !manifest.is_object()) throw Error(fmt::format("{}: the manifest is not valid JSON", path));
  return manifest;
}

// gguf.stored_layouts of a packed artifact: tensor name -> layout name, for
// the tensors `vtc compile --pack` rearranged. Each must name a tensor of
// the GGUF, a known layout, and one the tensor's type and rows can take.
void apply_stored_layouts(gguf::GgufFile& file, const json& ref, bool packed) {
  if (!ref.contains("stored_layouts")) {
    if (packed) bad("gguf.stored_layouts", "is missing");
    return;
  }
  const json& layouts = ref.at("stored_layouts");
  if (!layouts.is_object()) bad("gguf.stored_layouts", "must be a JSON object");
  if (!packed && !layouts.empty())
    bad("gguf.stored_layouts", "must be empty: only a packed GGUF has rearranged tensors");
  for (const auto& [name, value] : layouts.items()) {
    const std::string field = fmt::format("gguf.stored_layouts[\"{}\"]", name.size() > 64 ? name.substr(0, 61) + "..." : name);
    if (!value.is_string()) bad(field, fmt::format("must be a layout name, got {}", shown(value)));
    const std::string text = value.get<std::string>();
    const auto layout = weight_layout_from_name(text);
    if (!layout) bad(field, fmt::format("is '{}', not a weight layout (rows, x8)", text.size() > 64 ? text.substr(0, 61) + "..." : text));
    const gguf::TensorInfo* t = file.find_tensor(name);
    if (!t) bad(field, "names no tensor of the packed GGUF");
    if (t->dims.size() != 2 || !cpu::matmul_layout_supported(t->type, *layout, int64_t(t->dims[1])))
      bad(field, fmt::format("is {}, a layout tensor '{}' ({}-D {}) cannot be stored in", text, name, t->dims.size(),
                             ggml_type_name(t->type)));
    file.set_stored_layout(name, *layout);
  }
}

// Every weight's declared layout is the one its tensor is stored in. A
// referenced GGUF is all rows (the interpreter repacks at load); a packed
// one stores every non-rows weight rearranged, so a missing entry would
// have its rearranged bytes read as rows.
void check_stored_layouts(const ir::Module& m, const gguf::GgufFile& file, bool packed) {
  for (const auto& w : m.weights) {
    const gguf::TensorInfo* t = file.find_tensor(w.source);
    if (!t || t->stored_layout == w.type.elem.layout()) continue;
    if (!packed && t->stored_layout == WeightLayout::Rows) continue;
    bad(fmt::format("gguf.stored_layouts[\"{}\"]", w.source),
        fmt::format("is {} but the lowered IR declares @{} as {}{}", t->stored_layout == WeightLayout::Rows ? "missing (rows)"
                    : weight_layout_name(t->stored_layout), w.name, w.type.elem.name(),
                    packed ? "; a packed artifact stores every weight in its declared layout" : ""));
  }
}

// The GGUF an artifact refers to, checked against the recorded size,
// header checksum and, when recorded, the checksum of all its bytes; or
// the packed copy inside the artifact, checked the same way.
gguf::GgufFile open_weights(const std::string& path, const json& ref) {
  const bool packed = get_bool(ref, "packed", "gguf");
  const uint64_t want_size = get_u64(ref, "size", "gguf");
  const std::string want_sum = get_str(ref, "header_checksum", "gguf");
  std::string gguf_path = path;
  std::optional<gguf::GgufFile> opened;
  if (packed) {
    const uint64_t offset = get_u64(ref, "offset", "gguf");
    try {
      opened.emplace(gguf::GgufFile::open(path, offset, want_size));
    } catch (const Error& e) {
      throw Error(fmt::format("the packed GGUF (gguf.offset {}, gguf.size {}) does not load: {}", offset, want_size, e.what()));
    }
  } else {
    const std::string stored = get_str(ref, "path", "gguf");
    gguf_path = resolve_gguf_path(stored, path);
    try {
      opened.emplace(gguf::GgufFile::open(gguf_path));
    } catch (const Error& e) {
      throw Error(fmt::format("{} (the artifact names its GGUF '{}'{})", e.what(), stored,
                              fs::path(stored).is_absolute() ? "" : ", relative to the artifact's directory"));
    }
  }
  gguf::GgufFile file = std::move(*opened);
  apply_stored_layouts(file, ref, packed);
  const std::string what = packed ? fmt::format("the GGUF packed in {}", path) : gguf_path;
  const std::string got_sum = hex64(gguf_header_checksum(file));
  if (file.file_size() != want_size || got_sum != want_sum)
    throw Error(fmt::format("{}: the model changed since {} was compiled: size {} (compiled: {}), header checksum {} "
                            "(compiled: {}); recompile with `vtc compile`",
                            what, path, file.file_size(), want_size, got_sum, want_sum));
  if (ref.contains("weights_checksum")) {
    const std::string want = get_str(ref, "weights_checksum", "gguf");
    if (want.rfind("xxh64:", 0) != 0) bad("gguf.weights_checksum", fmt::format("must be xxh64:<16 hex digits>, got '{}'", want));
    const std::string got = weights_checksum_text(gguf_content_checksum(file));
    if (got != want)
      throw Error(fmt::format("{}: the weights changed since {} was compiled: content checksum {} (compiled: {}): a different or "
                              "modified GGUF with the same header and size; recompile with `vtc compile`",
                              what, path, got, want));
  }
  return file;
}

uint64_t physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return UINT64_MAX;
  return uint64_t(pages) * uint64_t(page);
}

// Bounds of a stored plan: the step symbols `vtc compile` accepts
// (--max-step-tokens <= 2^20, --max-sequences <= 4096), and element counts
// far below any overflow of a byte size.
constexpr int64_t kMaxBinding = int64_t(1) << 20;
constexpr int64_t kMaxElems = int64_t(1) << 44;

std::optional<int64_t> lookup_binding(std::string_view symbol, const void* env) {
  const auto& m = *static_cast<const std::map<std::string, int64_t>*>(env);
  auto it = m.find(std::string(symbol));
  if (it == m.end()) return std::nullopt;
  return it->second;
}

uint64_t align_up(uint64_t v, uint64_t a) { return v > UINT64_MAX - a ? UINT64_MAX : (v + a - 1) / a * a; }

// A stored memory plan checked against the IR it is for: the plan the
// planner makes for that IR at the stored bounds must have the same
// buffers (key, placement, size, liveness); the stored offsets must be
// aligned, inside their arena, and no two buffers live at the same time may
// overlap; each arena is at most the sum of its buffers and fits in this
// machine's memory. Descriptive fields are taken from the IR.
void validate_plan(const ir::Function& fn, passes::FunctionPlan& p, const std::string& field) {
  for (const auto& [symbol, value] : p.bindings)
    if (value < 1 || value > kMaxBinding)
      bad(fmt::format("{}.bindings.{}", field, symbol), fmt::format("is {}; a bound must be in [1, {}]", value, kMaxBinding));
  if (p.alignment < 8 || p.alignment > 4096 || (p.alignment & (p.alignment - 1)) != 0)
    bad(field + ".alignment", fmt::format("is {}; it must be a power of two in [8, 4096]", p.alignment));
  // Element counts first, so no byte size below can wrap.
  for (const auto& [key, v] : passes::plan_keys(fn)) {
    auto elems = ir::product(v->type.shape).evaluate(lookup_binding, &p.bindings);
    if (elems && (*elems < 0 || *elems > kMaxElems))
      bad(field + ".bindings", fmt::format("size %{} ({}) of @{} at {} elements, beyond {}", v->name, v->type.str(), fn.name,
                                           *elems, kMaxElems));
  }
  passes::FunctionPlan want;
  try {
    want = passes::plan_function(fn, p.bindings, p.alignment);
  } catch (const Error& e) {
    bad(field + ".bindings", fmt::format("do not plan @{}: {}", fn.name, e.what()));
  }
  if (p.buffers.size() != want.buffers.size())
    bad(field + ".buffers", fmt::format("has {} entries but @{} has {} planned values", p.buffers.size(), fn.name,
                                        want.buffers.size()));
  const uint64_t memory = physical_memory();
  uint64_t sum[2] = {0, 0};
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    passes::PlannedBuffer& b = p.buffers[i];
    const passes::PlannedBuffer& w = want.buffers[i];
    const std::string f = fmt::format("{}.buffers[{}]", field, i);
    if (b.key != w.key) bad(f + ".key", fmt::format("is '{}' but planned value {} of @{} is '{}'", b.key, i, fn.name, w.key));
    if (b.placement != w.placement)
      bad(f + ".placement", fmt::format("is {} but {} ({}) is {}", ir::placement_name(b.placement), w.key, w.value,
                                        ir::placement_name(w.placement)));
    if (b.bytes != w.bytes)
      bad(f + ".bytes", fmt::format("is {} but {} ({}, {}) needs {} bytes at the plan's bindings", b.bytes, w.key, w.value,
                                    w.op, w.bytes));
    if (b.first != w.first || b.last != w.last)
      bad(f + (b.first != w.first ? ".first" : ".last"),
          fmt::format("gives {} ({}) the live range [{}, {}] but the IR's is [{}, {}]", w.key, w.value, b.first, b.last,
                      w.first, w.last));
    b.value = w.value;
    b.op = w.op;
    if (b.offset % p.alignment != 0)
      bad(f + ".offset", fmt::format("{} is not a multiple of the alignment {}", b.offset, p.alignment));
    const bool host = b.placement == ir::Placement::Host;
    const uint64_t arena = host ? p.host_arena_bytes : p.device_arena_bytes;
    if (b.bytes > arena || b.offset > arena - b.bytes)
      bad(f + ".offset", fmt::format("{} + {} bytes ({} {}) runs past {}.{}_arena_bytes {}", b.offset, b.bytes, w.key,
                                     w.value, field, host ? "host" : "device", arena));
    uint64_t& s = sum[host ? 0 : 1];
    s = std::min(UINT64_MAX - p.alignment, s) + align_up(b.bytes, p.alignment);
  }
  if (p.naive_bytes != want.naive_bytes)
    bad(field + ".naive_bytes", fmt::format("is {} but the buffers of @{} sum to {}", p.naive_bytes, fn.name, want.naive_bytes));
  const std::pair<const char*, uint64_t> arenas[2] = {{"host_arena_bytes", p.host_arena_bytes},
                                                      {"device_arena_bytes", p.device_arena_bytes}};
  for (int k = 0; k < 2; ++k) {
    if (arenas[k].second > sum[k])
      bad(field + "." + arenas[k].first, fmt::format("is {}, more than all its buffers take together ({})", arenas[k].second,
                                                     sum[k]));
    if (arenas[k].second > memory)
      bad(field + "." + arenas[k].first,
          fmt::format("is {} bytes but this machine has {} bytes of memory", arenas[k].second, memory));
  }
  // No two buffers live at the same time share a byte: sweep in offset
  // order, comparing each buffer with those that start before it ends.
  std::vector<size_t> order(p.buffers.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto &x = p.buffers[a], &y = p.buffers[b];
    return std::tie(x.placement, x.offset) < std::tie(y.placement, y.offset);
  });
  for (size_t i = 0; i < order.size(); ++i) {
    const passes::PlannedBuffer& a = p.buffers[order[i]];
    if (a.bytes == 0) continue;
    for (size_t j = i + 1; j < order.size(); ++j) {
      const passes::PlannedBuffer& b = p.buffers[order[j]];
      if (b.placement != a.placement || b.offset >= a.offset + a.bytes) break;
      if (b.bytes == 0 || b.last < a.first || a.last < b.first) continue;
      bad(fmt::format("{}.buffers[{}].offset", field, std::max(order[i], order[j])),
          fmt::format("makes {} ({}, bytes [{}, +{}), live [{}, {}]) overlap {} ({}, bytes [{}, +{}), live [{}, {}]) while "
                      "both are live",
                      b.key, b.value, b.offset, b.bytes, b.first, b.last, a.key, a.value, a.offset, a.bytes, a.first, a.last));
    }
  }
}

// Every state's per-row size is bounded by this machine's memory, so the
// state store's products cannot overflow.
void validate_states(const ir::Module& m) {
  const uint64_t memory = physical_memory();
  for (const auto& s : m.states) {
    uint64_t bytes = uint64_t(std::max<int64_t>(s.type.elem.scalar_bytes(), 1));
    for (const auto& d : s.type.shape) {
      auto c = d.constant();
      if (!c) continue;
      if (*c < 1 || uint64_t(*c) > memory / bytes)
        bad(fmt::format("module_ir: state @{}", s.name),
            fmt::format("{} has a row larger than this machine's memory ({} bytes)", s.type.str(), memory));
      bytes *= uint64_t(*c);
    }
  }
}

CompiledModel load_manifest(const std::string& path, const json& manifest) {
  if (get_u64(manifest, "format_version", "manifest") != kArtifactFormat)
    bad("format_version", fmt::format("is {} but the header says {}", shown(manifest.at("format_version")), kArtifactFormat));
  const std::string target_text = get_str(manifest, "target", "manifest");
  Target target = Target::Cpu;
  try {
    target = parse_target(target_text);
  } catch (const Error& e) {
    bad("target", fmt::format("must name a target: {}", e.what()));
  }
  const json& report = member(manifest, "report", "manifest");
  if (!report.is_array()) bad("report", "must be an array of strings");
  std::vector<std::string> lines;
  for (const auto& line : report) {
    if (!line.is_string()) bad("report", "must be an array of strings");
    lines.push_back(line.get<std::string>());
  }
  const json& seconds = member(manifest, "compile_seconds", "manifest");
  if (!seconds.is_number()) bad("compile_seconds", "must be a number");
  CompiledModel m{open_weights(path, member(manifest, "gguf", "manifest")), {}, {}, target,
                  get_str(manifest, "pipeline", "manifest"), counts_from_json(member(manifest, "ops_before", "manifest"), "ops_before"),
                  counts_from_json(member(manifest, "ops_after", "manifest"), "ops_after"), std::move(lines),
                  seconds.get<double>()};
  try {
    m.module = ir::parse(get_str(manifest, "module_ir", "manifest"));
    ir::verify(m.module);
    // Every state access bound to its declaration again (the types the
    // state store allocates), as the pipeline's bind-state did.
    passes::BindStatePass bind_state;
    passes::PassContext context;
    bind_state.run(m.module, context);
  } catch (const FieldError&) {
    throw;
  } catch (const Error& e) {
    throw Error(fmt::format("the lowered IR does not load: {}", e.what()));
  }
  validate_states(m.module);
  check_stored_layouts(m.module, m.file, get_bool(member(manifest, "gguf", "manifest"), "packed", "gguf"));
  const json& steps = member(manifest, "steps", "manifest");
  if (!steps.is_object()) bad("steps", "must be a JSON object");
  for (const auto& [step, s] : steps.items()) {
    const std::string field = "steps." + step;
    if (!s.is_object()) bad(field, "must be a JSON object");
    if (s.contains("memory_plan")) {
      const ir::Function* fn = m.module.find_function(step);
      if (!fn) bad(field + ".memory_plan", fmt::format("is for @{}, which the lowered IR does not define", step));
      passes::FunctionPlan plan = plan_from_json(s.at("memory_plan"), field + ".memory_plan");
      if (plan.function != step)
        bad(field + ".memory_plan.function", fmt::format("is '{}' but the plan is stored under step '{}'", plan.function, step));
      validate_plan(*fn, plan, field + ".memory_plan");
      m.plans.push_back(std::move(plan));
    }
    if (s.contains("kernels")) {
      // The sources of the step's launches (below); NVRTC compiles them at load.
      const json& kernels = s.at("kernels");
      if (!kernels.is_array()) bad(field + ".kernels", "must be a JSON array");
      for (size_t k = 0; k < kernels.size(); ++k) {
        const std::string f = fmt::format("{}.kernels[{}]", field, k);
        m.kernels[step].push_back({get_str(kernels[k], "entry", f), get_str(kernels[k], "what", f), get_str(kernels[k], "source", f)});
      }
    }
    if (s.contains("launches")) {
      const ir::Function* fn = m.module.find_function(step);
      if (!fn) bad(field + ".launches", fmt::format("are for @{}, which the lowered IR does not define", step));
      m.cuda_steps.push_back(launches_from_json(s.at("launches"), m.module, *fn, m.kernels[step], field + ".launches"));
    }
  }
  // The executor runs the stored launches of every step, or generates all.
  if (!m.cuda_steps.empty() && m.cuda_steps.size() != m.module.functions.size())
    bad("steps", "store the launches of some steps but not of all");
  return m;
}

}  // namespace

CompiledModel load_artifact(const std::string& path) {
  json manifest = read_manifest(path);
  try {
    return load_manifest(path, manifest);
  } catch (const FieldError& e) {
    throw Error(fmt::format("{}: manifest field {}; the artifact is corrupt or was edited: recompile it with `vtc compile`",
                            path, e.what()));
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: malformed manifest: {}", path, e.what()));
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind(path + ":", 0) == 0) throw;
    throw Error(fmt::format("{}: {}", path, what));
  }
}

}  // namespace vtc
