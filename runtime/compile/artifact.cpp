#include "runtime/compile/artifact.h"

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "frontends/gguf/model_summary.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "support/error.h"
#include "support/hash.h"

namespace vtc {
namespace {

using nlohmann::json;

constexpr char kMagic[8] = {'V', 'T', 'C', 'A', 'R', 'T', 'F', '\0'};
constexpr uint64_t kHeaderBytes = 24;
constexpr uint64_t kPackAlignment = 4096;

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

passes::FunctionPlan plan_from_json(const json& j) {
  passes::FunctionPlan p;
  p.function = j.at("function").get<std::string>();
  p.bindings = j.at("bindings").get<std::map<std::string, int64_t>>();
  p.alignment = j.at("alignment").get<uint64_t>();
  p.host_arena_bytes = j.at("host_arena_bytes").get<uint64_t>();
  p.device_arena_bytes = j.at("device_arena_bytes").get<uint64_t>();
  p.naive_bytes = j.at("naive_bytes").get<uint64_t>();
  for (const auto& b : j.at("buffers")) {
    passes::PlannedBuffer pb;
    pb.key = b.at("key").get<std::string>();
    pb.value = b.at("value").get<std::string>();
    pb.op = b.at("op").get<std::string>();
    pb.placement = b.at("placement").get<std::string>() == "host" ? ir::Placement::Host : ir::Placement::Device;
    pb.bytes = b.at("bytes").get<uint64_t>();
    pb.offset = b.at("offset").get<uint64_t>();
    pb.first = b.at("first").get<int64_t>();
    pb.last = b.at("last").get<int64_t>();
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

std::map<std::string, StepCounts> counts_from_json(const json& j) {
  std::map<std::string, StepCounts> out;
  for (const auto& [step, c] : j.items())
    out[step] = {c.at("ops").get<size_t>(), c.at("kernels").get<size_t>(), c.at("regions").get<size_t>(),
                 c.at("body_ops").get<size_t>()};
  return out;
}

json manifest_of(const CompiledModel& m, bool pack) {
  json steps = json::object();
  for (const auto& f : m.module.functions) steps[f->name] = {{"ir", ir::print(*f)}};
  for (const auto& p : m.plans) steps[p.function]["memory_plan"] = plan_to_json(p);
  for (const auto& [step, kernels] : m.kernels) {
    json list = json::array();
    for (const auto& k : kernels) list.push_back({{"entry", k.entry}, {"what", k.what}, {"source", k.source}});
    steps[step]["kernels"] = list;
  }
  const gguf::GgufFile& g = m.file;
  return {
      {"format_version", kArtifactFormat},
      {"vtc_version", VTC_VERSION_STRING},
      {"target", m.target},
      {"pipeline", m.pipeline},
      {"model", json::parse(gguf::summary_json(g, {0, 8}))},
      {"chat_template", g.get_string("tokenizer.chat_template").value_or("")},
      {"gguf",
       {{"path", g.path()}, {"size", g.file_size()}, {"header_checksum", hex64(gguf_header_checksum(g))}, {"packed", pack}}},
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

void save_artifact(const CompiledModel& m, const std::string& path, const SaveOptions& options) {
  json manifest = manifest_of(m, options.pack);
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
      write_all(out, m.file.bytes().data(), m.file.file_size());
    }
    if (!out.flush()) throw Error(fmt::format("{}: write failed", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw Error(fmt::format("{}: cannot rename to {}: {}", tmp, path, std::strerror(errno)));
}

namespace {

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
    throw Error(fmt::format("{}: artifact format version {} but this vtc reads version {}; recompile with `vtc compile`",
                            path, version, kArtifactFormat));
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  if (length > size - kHeaderBytes)
    throw Error(fmt::format("{}: manifest length {} at byte 16 runs past the end of the file ({} bytes)", path, length, size));
  std::string text(length, '\0');
  in.seekg(static_cast<std::streamoff>(kHeaderBytes));
  in.read(text.data(), static_cast<std::streamsize>(length));
  json manifest = json::parse(text, nullptr, false);
  if (manifest.is_discarded() || !manifest.is_object()) throw Error(fmt::format("{}: the manifest is not valid JSON", path));
  return manifest;
}

// The GGUF an artifact refers to, checked against the recorded size and
// header checksum, or the packed copy inside the artifact.
gguf::GgufFile open_weights(const std::string& path, const json& ref) {
  if (ref.at("packed").get<bool>())
    return gguf::GgufFile::open(path, ref.at("offset").get<uint64_t>(), ref.at("size").get<uint64_t>());
  const std::string gguf_path = ref.at("path").get<std::string>();
  gguf::GgufFile file = gguf::GgufFile::open(gguf_path);
  const uint64_t want_size = ref.at("size").get<uint64_t>();
  const std::string want_sum = ref.at("header_checksum").get<std::string>();
  const std::string got_sum = hex64(gguf_header_checksum(file));
  if (file.file_size() != want_size || got_sum != want_sum)
    throw Error(fmt::format("{}: the model changed since {} was compiled: size {} (compiled: {}), header checksum {} "
                            "(compiled: {}); recompile with `vtc compile`",
                            gguf_path, path, file.file_size(), want_size, got_sum, want_sum));
  return file;
}

}  // namespace

CompiledModel load_artifact(const std::string& path) {
  json manifest = read_manifest(path);
  try {
    CompiledModel m{open_weights(path, manifest.at("gguf")), {}, {}, manifest.at("target").get<std::string>(),
                    manifest.at("pipeline").get<std::string>(), counts_from_json(manifest.at("ops_before")),
                    counts_from_json(manifest.at("ops_after")), manifest.at("report").get<std::vector<std::string>>(),
                    manifest.at("compile_seconds").get<double>()};
    try {
      m.module = ir::parse(manifest.at("module_ir").get<std::string>());
      ir::verify(m.module);
    } catch (const Error& e) {
      throw Error(fmt::format("{}: the lowered IR does not load: {}", path, e.what()));
    }
    for (const auto& [step, s] : manifest.at("steps").items()) {
      if (s.contains("memory_plan")) m.plans.push_back(plan_from_json(s.at("memory_plan")));
      if (s.contains("kernels"))
        for (const auto& k : s.at("kernels"))
          m.kernels[step].push_back({k.at("entry").get<std::string>(), k.at("what").get<std::string>(),
                                     k.at("source").get<std::string>()});
    }
    return m;
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: malformed manifest: {}", path, e.what()));
  }
}

}  // namespace vtc
