// The value model of vtc's Jinja engine: what template expressions evaluate
// to. It follows Python's data model as Jinja2 exposes it to templates:
//
//   undefined  a missing variable or key; prints as "", is falsy, iterates
//              as empty; an attribute or item of it is undefined (as in
//              llama.cpp's engine), arithmetic on it or calling it an error.
//   none bool int float string   Python's None/True/int/float/str.
//   list       a shared, mutable sequence (tuples are lists here).
//   dict       a shared, mutable mapping that keeps insertion order, as
//              Python's dict does. A namespace() object is a dict too.
//   callable   a macro, a builtin global, a bound method.
//
// Lists and dicts have reference semantics, like Python objects: copying a
// Value shares the container, so `ns.x = ...` or `list.append(...)` is seen
// through every name that refers to it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vtc::jinja {

class Value;

// Arguments of a call: positional, then keyword (name=value) in source order.
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using Function = std::function<Value(Args&)>;

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Callable };
  using List = std::vector<Value>;
  using Dict = std::vector<std::pair<Value, Value>>;  // insertion order

  Value() = default;  // undefined
  static Value none();
  Value(bool b);
  Value(int64_t i);
  Value(int i) : Value(static_cast<int64_t>(i)) {}
  Value(double d);
  Value(std::string s);
  Value(const char* s) : Value(std::string(s)) {}
  static Value list(List items = {});
  static Value dict(Dict items = {});
  static Value callable(Function f, std::string name);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_callable() const { return kind_ == Kind::Callable; }
  // Python's "is iterable": strings, lists, dicts.
  bool is_iterable() const { return is_string() || is_list() || is_dict(); }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }
  double as_float() const { return kind_ == Kind::Int ? static_cast<double>(i_) : d_; }
  const std::string& as_string() const { return *s_; }
  List& as_list() const { return *list_; }
  Dict& as_dict() const { return *dict_; }
  const Function& as_function() const { return *fn_; }
  const std::string& callable_name() const { return *s_; }

  // Python truthiness: empty containers/strings, 0, None and undefined are false.
  bool truthy() const;

  // The string or list itself when this Value is its only owner, else
  // nullptr: a concatenation appends to it in place (no one can see the
  // change), which makes `s = s ~ x` in a loop linear (render.cpp).
  std::string* unique_string() { return kind_ == Kind::String && s_.use_count() == 1 ? s_.get() : nullptr; }
  List* unique_list() { return kind_ == Kind::List && list_.use_count() == 1 ? list_.get() : nullptr; }

  // Dict access; nullptr when absent.
  Value* find(const Value& key) const;
  Value* find(std::string_view key) const;
  Value* find(const std::string& key) const { return find(std::string_view(key)); }
  Value* find(const char* key) const { return find(std::string_view(key)); }
  void set(const Value& key, Value v) const;

  // Python str() (what ~, |string and str methods see) and repr() (how
  // str() shows nested items).
  std::string str() const;
  std::string repr() const;
  // What {{ }} prints, as llama.cpp's engine prints it (it gathers the
  // string parts of the values): None, undefined, dicts and callables print
  // nothing, a list prints its items one after another, a float prints as
  // format_float(), the rest as str(). Python would print "None" and
  // "[1, 'a']". Longer than max_bytes is a TemplateError.
  std::string output(size_t max_bytes) const;
  // Python's type name, for error messages: "str", "list", "NoneType", ...
  std::string type_name() const;

  // Python ==: 1 == 1.0, True == 1; containers compare element-wise.
  friend bool operator==(const Value& a, const Value& b);

  // Objects keep their key order with ordered_json (as Python's json.loads
  // does); nlohmann::json has already sorted them.
  static Value from_json(const nlohmann::json& j);
  static Value from_json(const nlohmann::ordered_json& j);
  nlohmann::json to_json() const;  // callables and undefined become null

 private:
  Kind kind_ = Kind::Undefined;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::shared_ptr<std::string> s_;  // string, or a callable's name
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Function> fn_;
};

// Elements visited by dict lookups and == on this thread, ever: a render's
// work budget charges the difference over the render (render.cpp).
uint64_t& value_scan_count();

// A float as llama.cpp's engine prints it (str(), repr(), {{ }}; not
// tojson): C's "%f", six decimals, less its trailing zeros, one kept:
// "1.5", "2.0", "0.00001", "0.333333". Python would print the shortest
// round trip ("1e-05", "0.3333333333333333").
std::string format_float(double d);

// json.dumps(value, ensure_ascii=..., indent=..., separators=...,
// sort_keys=...), as HF transformers' tojson filter calls it (there
// ensure_ascii defaults to False). indent < 0 means None: one line, default
// separators ", " and ": "; with an indent, items go one per line and the
// default item separator is ",". Floats are written as llama.cpp's engine
// writes them, "%g" ("21" for 21.0, "3.14159"), not as json.dumps would.
struct JsonStyle {
  int indent = -1;
  bool sort_keys = false;
  bool ensure_ascii = false;
  const char* item_sep = nullptr;  // null: the default for the indent
  const char* key_sep = nullptr;
};
std::string dump_json(const Value& v, const JsonStyle& style = {});

}  // namespace vtc::jinja
