#include "passes/pass_manager.h"

#include <fmt/format.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <regex>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/bind_state.h"
#include "passes/canonicalize.h"
#include "passes/fuse.h"
#include "passes/memory_plan.h"
#include "passes/placement.h"
#include "passes/weight_layout.h"
#include "support/error.h"

namespace vtc::passes {

std::string PassOptions::get(std::string_view key, std::string fallback) const {
  auto it = values.find(std::string(key));
  return it == values.end() ? fallback : it->second;
}

int64_t PassOptions::get_int(std::string_view key, int64_t fallback) const {
  auto it = values.find(std::string(key));
  if (it == values.end()) return fallback;
  int64_t v = 0;
  const std::string& s = it->second;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size())
    throw Error(fmt::format("pass option {}={}: expected an integer", key, s));
  return v;
}

Target PassOptions::get_target(std::string_view pass, Target fallback) const {
  auto it = values.find("target");
  if (it == values.end()) return fallback;
  try {
    return parse_target(it->second);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", pass, e.what()));
  }
}

namespace {
std::string trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\n"), e = s.find_last_not_of(" \t\n");
  return b == std::string_view::npos ? std::string() : std::string(s.substr(b, e - b + 1));
}
}  // namespace

std::vector<PipelineElement> parse_pipeline(std::string_view text) {
  std::vector<PipelineElement> out;
  size_t i = 0;
  auto fail = [&](const std::string& why) {
    throw Error(fmt::format("pipeline '{}', at column {}: {}", text, i + 1, why));
  };
  while (i < text.size()) {
    size_t name_end = text.find_first_of(",{", i);
    if (name_end == std::string_view::npos) name_end = text.size();
    PipelineElement e;
    e.name = trim(text.substr(i, name_end - i));
    if (e.name.empty()) fail("expected a pass name");
    i = name_end;
    if (i < text.size() && text[i] == '{') {
      size_t close = text.find('}', i);
      if (close == std::string_view::npos) fail("missing '}'");
      std::string_view body = text.substr(i + 1, close - i - 1);
      size_t j = 0;
      while (j <= body.size() && !trim(body).empty()) {
        size_t comma = body.find(',', j);
        if (comma == std::string_view::npos) comma = body.size();
        std::string_view kv = body.substr(j, comma - j);
        size_t eq = kv.find('=');
        if (eq == std::string_view::npos) fail(fmt::format("option '{}' of {} is not KEY=VALUE", trim(kv), e.name));
        std::string key = trim(kv.substr(0, eq)), value = trim(kv.substr(eq + 1));
        if (key.empty()) fail("empty option name");
        if (!e.options.values.emplace(key, value).second) fail(fmt::format("option {} given twice", key));
        j = comma + 1;
        if (comma == body.size()) break;
      }
      i = close + 1;
    }
    out.push_back(std::move(e));
    if (i < text.size()) {
      if (text[i] != ',') fail("expected ',' between passes");
      ++i;
      if (i == text.size()) fail("trailing ','");
    }
  }
  return out;
}

const std::vector<PassRegistration>& registered_passes() {
  static const std::vector<PassRegistration> passes = {
      {"canonicalize", "folds view chains, CSE of pure ops, DCE", create_canonicalize},
      {"fuse", "the fusion partitioner: qk_rope, swiglu, norm_matmul, matmul_epilogue, elementwise regions from one table [kinds=K1+K2, target=cpu|cuda]",
       create_fuse},
      {"weight-layout", "target=cpu: q4_0/q8_0/q4_k/q6_k matmul weights into the CPU's x8 layout (recorded in their type)",
       create_weight_layout},
      {"placement", "host/device per value for target=cpu|cuda; inserts and reports transfers", create_placement},
      {"memory-plan", "liveness intervals and arena offsets per step for given symbol bindings", create_memory_plan},
      {"bind-state", "state-store slot table, checked against the declarations", create_bind_state},
  };
  return passes;
}

void require_no_options(std::string_view pass, const PassOptions& options) {
  if (!options.values.empty())
    throw Error(fmt::format("{} takes no options (got {})", pass, options.values.begin()->first));
}

std::unique_ptr<Pass> create_pass(const PipelineElement& element) {
  std::string known;
  for (const auto& r : registered_passes()) {
    if (r.name == element.name) return r.create(element.options);
    known += (known.empty() ? "" : ", ") + r.name;
  }
  throw Error(fmt::format("unknown pass '{}' (known: {})", element.name, known));
}

uint64_t fingerprint(const ir::Module& module) { return std::hash<std::string>{}(ir::print(module)); }

std::string print_with_artifacts(const ir::Module& module, const PassContext& context) {
  std::string out = ir::print(module);
  for (const auto& [name, artifact] : context.artifacts) {
    out += "\n";
    for (const auto& line : artifact.lines) out += "// " + line + "\n";
  }
  return out;
}

PassManager::PassManager(PassManagerOptions options) : options_(std::move(options)) {
#ifndef NDEBUG
  options_.check_no_change = true;
#endif
}

void PassManager::add(std::unique_ptr<Pass> pass) { passes_.push_back(std::move(pass)); }

void PassManager::add_pipeline(std::string_view text) {
  for (const auto& e : parse_pipeline(text)) add(create_pass(e));
}

std::ostream& PassManager::log() const { return options_.log ? *options_.log : std::cerr; }

void PassManager::dump(const ir::Module& module, size_t index, std::string_view pass_name) const {
  if (options_.dump_dir.empty()) return;
  if (!options_.dump_pass.empty() && index != 0 &&
      !std::regex_search(std::string(pass_name), std::regex(options_.dump_pass)))
    return;
  // Declarations are everything the printer writes before the first function.
  std::string full = ir::print(module);
  size_t first_func = full.rfind("func @", 0) == 0 ? 0 : full.find("\nfunc @");
  std::string decls = first_func == std::string::npos ? full : full.substr(0, first_func + (first_func ? 1 : 0));
  for (const auto& f : module.functions) {
    auto dir = std::filesystem::path(options_.dump_dir) / f->name;
    std::filesystem::create_directories(dir);
    auto path = dir / fmt::format("{:02}-{}.vtcir", index, pass_name);
    std::ofstream out(path);
    if (!out) throw Error("cannot write " + path.string());
    out << "// after " << pass_name << "\n" << decls << (decls.empty() ? "" : "\n") << ir::print(*f);
    for (const auto& [name, artifact] : context_.artifacts) {
      out << "\n";
      for (const auto& line : artifact.lines) out << "// " << line << "\n";
    }
  }
}

bool PassManager::run(ir::Module& module) {
  auto errors = ir::verify_all(module);
  if (!errors.empty()) {
    std::string joined;
    for (const auto& e : errors) joined += "\n" + e;
    throw Error("input module does not verify:" + joined);
  }
  dump(module, 0, "input");
  bool any = false;
  for (size_t i = 0; i < passes_.size(); ++i) {
    Pass& pass = *passes_[i];
    PassRun record{std::string(pass.name())};
    bool disabled = false;
    for (const auto& d : options_.disabled_passes) disabled = disabled || d == pass.name();
    if (disabled) {
      record.disabled = true;
      runs_.push_back(record);
      continue;
    }
    uint64_t before = options_.check_no_change ? fingerprint(module) : 0;
    size_t remarks_before = context_.remarks.size();
    std::map<std::string, Artifact> artifacts_before = context_.artifacts;
    auto start = std::chrono::steady_clock::now();
    context_.debug_log = options_.debug_passes ? &log() : nullptr;
    bool changed = pass.run(module, context_);
    record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    record.changed = changed;
    for (size_t r = remarks_before; r < context_.remarks.size(); ++r) log() << context_.remarks[r] << "\n";
    if (changed) {
      any = true;
      errors = ir::verify_all(module);
      if (!errors.empty()) {
        std::string joined;
        for (const auto& e : errors) joined += "\n" + e;
        throw Error(fmt::format("module does not verify after pass '{}':{}", pass.name(), joined));
      }
      // Artifacts of earlier passes describe IR that no longer exists.
      for (const auto& [name, a] : artifacts_before)
        if (context_.artifacts.count(name) && context_.artifacts[name].pass != pass.name() &&
            context_.artifacts[name].lines == a.lines)
          context_.artifacts.erase(name);
    } else if (options_.check_no_change && fingerprint(module) != before) {
      throw Error(fmt::format("pass '{}' reported no change but changed the module", pass.name()));
    }
    runs_.push_back(record);
    dump(module, i + 1, pass.name());
  }
  if (options_.print_timing) {
    double total = 0;
    for (const auto& r : runs_) total += r.seconds;
    log() << "pass timing:\n";
    for (const auto& r : runs_)
      log() << fmt::format("  {:>9.3f} ms  {}{}\n", r.seconds * 1e3, r.name,
                           r.disabled ? " (disabled)" : r.changed ? "" : " (no change)");
    log() << fmt::format("  {:>9.3f} ms  total\n", total * 1e3);
  }
  return any;
}

}  // namespace vtc::passes
