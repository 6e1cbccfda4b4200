// The runtime half of the engine that does not walk the tree: operators,
// attribute and item access, Python's str/list/dict methods, and the
// filters, tests and globals that chat templates use. The evaluator
// (render.cpp) derives from Renderer and adds the tree walk.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "serve/jinja/template.h"
#include "serve/jinja/value.h"

namespace vtc::jinja {

struct Scope : std::enable_shared_from_this<Scope> {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
};
using ScopePtr = std::shared_ptr<Scope>;

class Renderer {
 public:
  explicit Renderer(const RenderOptions& options) : options_(options) {}
  virtual ~Renderer() = default;

  // Throws a TemplateError at the line being evaluated.
  [[noreturn]] void fail(const std::string& message) const;
  // The work done so far (template.h's units).
  RenderStats stats() const;
  // Adds to the work budget (the context's share), saturating.
  void grant(uint64_t steps) { budget_ = budget_ + steps < budget_ ? UINT64_MAX : budget_ + steps; }

 protected:
  // A builtin global (range, namespace, raise_exception, ...), or undefined.
  Value global(const std::string& name);

  Value get_attr(const Value& obj, const std::string& name);
  Value get_item(const Value& obj, const Value& key);
  Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
  // The items a for loop visits: list items, dict keys, string characters.
  std::vector<Value> iterate(const Value& v);
  Value unary(const std::string& op, const Value& v);
  // l by value: a concatenation appends to l in place when l is the only
  // owner of its string (or list), instead of copying it.
  Value binary(const std::string& op, Value l, const Value& r);
  Value apply_filter(const std::string& name, const Value& v, Args& args);
  bool apply_test(const std::string& name, const Value& v, Args& args);

  // obj.name(...): Python's str/list/dict methods.
  bool has_method(const Value& obj, const std::string& name);
  // Fails if storing `item` into `container` would make it contain itself
  // (reference cycles would leak and make repr() endless).
  void check_no_cycle(const Value& container, const Value& item);
  Value call_method(const Value& obj, const std::string& name, Args& args);

  // The work budget (template.h): each charge fails the render once the
  // work passes options_.max_steps.
  void charge_steps(uint64_t n = 1) {
    steps_ += n;
    check_work();
  }
  void charge_bytes(uint64_t n) {
    bytes_ += n;
    check_work();
  }
  // What a filter or method pays to read or return v: its size.
  void charge_value(const Value& v);
  void check_work();

  RenderOptions options_;
  int line_ = 0;
  int depth_ = 0;
  uint64_t steps_ = 0;
  uint64_t bytes_ = 0;
  uint64_t scan_base_ = value_scan_count();  // the thread's count when the render began
  uint64_t budget_ = options_.max_steps;     // render_with adds the context's share

 private:
  bool less(const Value& a, const Value& b);
  Value attribute_path(const Value& v, const std::string& path);
  void check_size(size_t bytes);
  std::unordered_map<std::string, Value> globals_;
};

}  // namespace vtc::jinja
