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

 protected:
  // A builtin global (range, namespace, raise_exception, ...), or undefined.
  Value global(const std::string& name);

  Value get_attr(const Value& obj, const std::string& name);
  Value get_item(const Value& obj, const Value& key);
  Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
  // The items a for loop visits: list items, dict keys, string characters.
  std::vector<Value> iterate(const Value& v);
  Value unary(const std::string& op, const Value& v);
  Value binary(const std::string& op, const Value& l, const Value& r);
  Value apply_filter(const std::string& name, const Value& v, Args& args);
  bool apply_test(const std::string& name, const Value& v, Args& args);

  // obj.name(...): Python's str/list/dict methods.
  bool has_method(const Value& obj, const std::string& name);
  // Fails if storing `item` into `container` would make it contain itself
  // (reference cycles would leak and make repr() endless).
  void check_no_cycle(const Value& container, const Value& item);
  Value call_method(const Value& obj, const std::string& name, Args& args);

  RenderOptions options_;
  int line_ = 0;
  int depth_ = 0;
  uint64_t steps_ = 0;

 private:
  bool less(const Value& a, const Value& b);
  Value attribute_path(const Value& v, const std::string& path);
  void check_size(size_t bytes);
  std::unordered_map<std::string, Value> globals_;
};

}  // namespace vtc::jinja
