// The evaluator: walks the syntax tree against a scope chain and writes text.
//
// Scopes follow Jinja2: the template's top level is one scope; a for loop
// body and a macro call each get a child scope, so `set` inside them does
// not leak out (namespace() objects are how templates carry state out of a
// loop). `if` opens no scope. Macros are closures over the scope they were
// defined in.
//
// Bounds: the work budget (template.h) charges a step per node evaluation
// and loop iteration, the bytes of output, concatenations and what filters,
// methods and calls read and return, and the elements lookups and
// comparisons visit; nested evaluation is capped by max_depth; every output
// buffer and every string or list an operator builds is capped by
// max_output_bytes.
//
// Concatenation is linear. binary() appends to its left operand in place
// when that Value is the only owner of its string (a temporary: the inner
// `a ~ b` of `a ~ b ~ c`). For `{% set s = s ~ x %}` (and ns.s, and chains
// s ~ x ~ y) the variable itself holds a reference, so exec_set evaluates
// the operands, then clears the variable before folding (it is about to be
// overwritten): s's buffer then has one owner and grows geometrically, as
// CPython does for `s = s + x`. An alias (`{% set t = s %}`) keeps a second
// owner, and the first append copies, as it must.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <unordered_map>

#include "serve/jinja/ast.h"
#include "serve/jinja/builtins.h"
#include "serve/jinja/template.h"

namespace vtc::jinja {

TemplateError::TemplateError(const std::string& message, int line, bool raised)
    : vtc::Error(line > 0 ? fmt::format("template line {}: {}", line, message) : message),
      line_(line),
      raised_(raised),
      bare_(message) {}

namespace {

enum class Flow { Normal, Break, Continue };

class Interpreter final : public Renderer {
 public:
  explicit Interpreter(const RenderOptions& options) : Renderer(options) {}

  void render_root(const Node& root, const ScopePtr& scope, std::string& out) {
    Flow f = exec(root, scope, out);
    if (f != Flow::Normal) fail(f == Flow::Break ? "'break' outside a loop" : "'continue' outside a loop");
  }

 private:
  std::vector<ScopePtr> macro_scopes_;

  struct Guard {
    Interpreter& r;
    int saved_line;
    Guard(Interpreter& in, int line) : r(in), saved_line(in.line_) {
      if (++r.depth_ > r.options_.max_depth) {
        --r.depth_;
        r.fail(fmt::format("template recursion deeper than {}", r.options_.max_depth));
      }
      r.line_ = line;
      r.charge_steps(1);
    }
    ~Guard() {
      --r.depth_;
      r.line_ = saved_line;
    }
  };

  void append(std::string& out, std::string_view s) {
    charge_bytes(s.size());
    out += s;
    if (out.size() > options_.max_output_bytes)
      fail(fmt::format("template output exceeds {} bytes", options_.max_output_bytes));
  }

  // Errors raised below the tree walk without a line (value printing) get
  // the line of the node being evaluated.
  [[noreturn]] static void relocate(const TemplateError& e, int line) {
    if (e.line() == 0 && line > 0) throw TemplateError(e.bare_message(), line, e.raised());
    throw;
  }

  Flow exec(const Node& n, const ScopePtr& scope, std::string& out) {
    try {
      return exec_node(n, scope, out);
    } catch (const TemplateError& e) {
      relocate(e, n.line);
    }
  }

  Flow exec_node(const Node& n, const ScopePtr& scope, std::string& out) {
    Guard g(*this, n.line);
    switch (n.kind) {
      case Node::Kind::Body:
        for (auto& k : n.kids) {
          Flow f = exec(*k, scope, out);
          if (f != Flow::Normal) return f;
        }
        return Flow::Normal;
      case Node::Kind::Text:
        append(out, n.value.as_string());
        return Flow::Normal;
      case Node::Kind::Output: {
        Value v = eval(*n.kids[0], scope);
        append(out, v.output(options_.max_output_bytes));
        return Flow::Normal;
      }
      case Node::Kind::If:
        for (size_t i = 0; i < n.kids.size(); i += 2) {
          if (!n.kids[i] || eval(*n.kids[i], scope).truthy()) return exec(*n.kids[i + 1], scope, out);
        }
        return Flow::Normal;
      case Node::Kind::For:
        exec_for(n, scope, out);
        return Flow::Normal;
      case Node::Kind::Set:
        exec_set(n, scope);
        return Flow::Normal;
      case Node::Kind::Macro: {
        // The closure holds the scope weakly (the scope holds the macro);
        // macro_scopes_ keeps it alive until the render ends.
        const Node* macro = &n;
        macro_scopes_.push_back(scope);
        Scope* closure = scope.get();
        scope->vars[n.name] = Value::callable(
            [this, macro, closure](Args& args) { return call_macro(*macro, closure->shared_from_this(), args); },
            n.name);
        return Flow::Normal;
      }
      case Node::Kind::FilterBlock: {
        std::string body;
        Flow f = exec(*n.kids[1], scope, body);
        auto s = std::make_shared<Scope>();
        s->parent = scope;
        s->vars[std::string(kFilterInput)] = Value(std::move(body));
        append(out, eval(*n.kids[0], s).output(options_.max_output_bytes));
        return f;
      }
      case Node::Kind::CallBlock: {
        // caller(...) renders the block's body in a child of this scope.
        const Node* block = &n;
        macro_scopes_.push_back(scope);
        Scope* outer = scope.get();
        Value caller = Value::callable(
            [this, block, outer](Args& args) {
              Guard g(*this, block->line);
              auto s = std::make_shared<Scope>();
              s->parent = outer->shared_from_this();
              for (size_t i = 0; i < block->names.size(); ++i)
                s->vars[block->names[i]] = i < args.positional.size() ? args.positional[i] : Value();
              std::string body;
              if (exec(*block->kids[1], s, body) != Flow::Normal)
                fail("'break'/'continue' outside a loop in a call block");
              return Value(std::move(body));
            },
            "caller");
        const Node& call = *n.kids[0];
        Value callee = eval(*call.kids[0], scope);
        if (!callee.is_callable()) fail(fmt::format("'{}' is not a macro", describe(*call.kids[0])));
        Args args = eval_args(call, scope);
        args.keyword.emplace_back("caller", caller);
        append(out, callee.as_function()(args).output(options_.max_output_bytes));
        return Flow::Normal;
      }
      case Node::Kind::Break:
        return Flow::Break;
      case Node::Kind::Continue:
        return Flow::Continue;
      default:
        fail("internal error: expression node in statement position");
    }
  }

  void exec_for(const Node& n, const ScopePtr& scope, std::string& out) {
    Value iterable = eval(*n.kids[0], scope);
    std::vector<Value> items = iterate(iterable);
    auto s = std::make_shared<Scope>();
    s->parent = scope;
    const Node* cond = n.kids[1].get();
    if (cond) {  // "for x in xs if cond": filter first, so loop.length counts kept items
      std::vector<Value> kept;
      for (auto& item : items) {
        bind_targets(n.names, item, *s);
        if (eval(*cond, s).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    const int64_t len = static_cast<int64_t>(items.size());
    // One loop.cycle per loop, reading the current index (Jinja2's loop is
    // one object too); a fresh dict of the other fields per iteration,
    // built from shared keys without lookups.
    static const Value kKeys[] = {"index", "index0", "revindex", "revindex0", "first",    "last",
                                  "length", "depth", "depth0",   "previtem",  "nextitem", "cycle"};
    auto index = std::make_shared<int64_t>(0);
    const Value cycle = Value::callable(
        [index](Args& a) {
          if (a.positional.empty()) return Value();
          return a.positional[static_cast<size_t>(*index) % a.positional.size()];
        },
        "loop.cycle");
    for (int64_t i = 0; i < len; ++i) {
      charge_steps(kLoopIterationSteps);
      *index = i;
      bind_targets(n.names, items[static_cast<size_t>(i)], *s);
      const Value fields[] = {Value(i + 1),
                              Value(i),
                              Value(len - i),
                              Value(len - i - 1),
                              Value(i == 0),
                              Value(i == len - 1),
                              Value(len),
                              Value(1),
                              Value(0),
                              i > 0 ? items[static_cast<size_t>(i - 1)] : Value(),
                              i + 1 < len ? items[static_cast<size_t>(i + 1)] : Value(),
                              cycle};
      Value::Dict d;
      d.reserve(std::size(kKeys));
      for (size_t k = 0; k < std::size(kKeys); ++k) d.emplace_back(kKeys[k], fields[k]);
      s->vars["loop"] = Value::dict(std::move(d));
      Flow f = exec(*n.kids[2], s, out);
      if (f == Flow::Break) break;
    }
    if (len == 0 && n.kids[3]) exec(*n.kids[3], scope, out);
  }

  void bind_targets(const std::vector<std::string>& names, const Value& item, Scope& s) {
    if (names.size() == 1) {
      s.vars[names[0]] = item;
      return;
    }
    std::vector<Value> parts = iterate(item);
    if (parts.size() != names.size())
      fail(fmt::format("cannot unpack {} value(s) into {} names", parts.size(), names.size()));
    for (size_t i = 0; i < names.size(); ++i) s.vars[names[i]] = parts[i];
  }

  // `{% set s = s ~ x ~ y %}` or `{% set ns.s = ns.s ~ x %}` (~ or +):
  // evaluates s and the operands in order, then clears the variable (it is
  // about to be overwritten) so that s's buffer has one owner left and the
  // folds append in place (see the top of the file). False, with nothing
  // evaluated, for any other right-hand side.
  bool eval_accumulation(const Node& n, const ScopePtr& scope, Value& result) {
    std::vector<const Node*> chain;  // outermost first
    const Node* leaf = n.kids[0].get();
    while (leaf->kind == Node::Kind::Binary && (leaf->name == "~" || leaf->name == "+")) {
      chain.push_back(leaf);
      leaf = leaf->kids[0].get();
    }
    if (chain.empty()) return false;
    const bool own_variable = !n.is_attr && n.names.size() == 1 && leaf->kind == Node::Kind::Name &&
                              leaf->name == n.names[0] && scope->vars.count(n.names[0]);
    const bool own_attribute = n.is_attr && leaf->kind == Node::Kind::Attr && leaf->name == n.names[1] &&
                               leaf->kids[0]->kind == Node::Kind::Name && leaf->kids[0]->name == n.names[0];
    if (!own_variable && !own_attribute) return false;
    Value acc = eval(*leaf, scope);
    std::vector<Value> operands;
    for (size_t k = chain.size(); k-- > 0;) operands.push_back(eval(*chain[k]->kids[1], scope));
    if (acc.is_string() || acc.is_list()) {
      if (own_variable) {
        scope->vars[n.names[0]] = Value();
      } else if (Value obj = lookup(n.names[0], scope); obj.is_dict()) {
        if (Value* slot = obj.find(n.names[1])) *slot = Value();  // the key keeps its place
      }
    }
    for (size_t j = 0; j < operands.size(); ++j) {
      const Node& op = *chain[chain.size() - 1 - j];
      try {
        Guard g(*this, op.line);
        acc = binary(op.name, std::move(acc), operands[j]);
      } catch (const TemplateError& e) {
        relocate(e, op.line);
      }
    }
    result = std::move(acc);
    return true;
  }

  void exec_set(const Node& n, const ScopePtr& scope) {
    Value v;
    if (n.kids[0]) {
      if (!eval_accumulation(n, scope, v)) v = eval(*n.kids[0], scope);
    } else {
      std::string body;
      Flow f = exec(*n.kids[1], scope, body);
      if (f != Flow::Normal) fail("'break'/'continue' inside a set block");
      v = Value(std::move(body));
      if (n.kids[2]) {
        auto s = std::make_shared<Scope>();
        s->parent = scope;
        s->vars[std::string(kFilterInput)] = v;
        v = eval(*n.kids[2], s);
      }
    }
    if (n.is_attr) {
      Value obj = lookup(n.names[0], scope);
      if (!obj.is_dict())
        fail(fmt::format("cannot assign attribute '{}' of {} '{}'", n.names[1], obj.type_name(), n.names[0]));
      check_no_cycle(obj, v);
      obj.set(Value(n.names[1]), v);
      return;
    }
    bind_targets(n.names, v, *scope);
  }

  Value call_macro(const Node& m, const ScopePtr& closure, Args& args) {
    Guard g(*this, m.line);
    auto s = std::make_shared<Scope>();
    s->parent = closure;
    const size_t np = m.names.size();
    if (args.positional.size() > np)
      fail(fmt::format("macro '{}' takes {} argument(s), {} given", m.name, np, args.positional.size()));
    for (auto& [k, v] : args.keyword) {
      if (k == "caller" && v.is_callable()) {
        s->vars["caller"] = v;  // from a {% call %} block
        continue;
      }
      if (std::find(m.names.begin(), m.names.end(), k) == m.names.end())
        fail(fmt::format("macro '{}' has no parameter '{}'", m.name, k));
    }
    for (size_t i = 0; i < np; ++i) {
      Value v;
      bool have = false;
      if (i < args.positional.size()) {
        v = args.positional[i];
        have = true;
      } else {
        for (auto& [k, kv] : args.keyword)
          if (k == m.names[i]) {
            v = kv;
            have = true;
          }
      }
      if (!have && m.kids[i + 1]) v = eval(*m.kids[i + 1], s);
      s->vars[m.names[i]] = v;
    }
    std::string out;
    Flow f = exec(*m.kids[0], s, out);
    if (f != Flow::Normal) fail("'break'/'continue' outside a loop in a macro");
    return Value(std::move(out));
  }

  Value lookup(const std::string& name, const ScopePtr& scope) {
    for (const Scope* s = scope.get(); s; s = s->parent.get()) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return it->second;
    }
    Value g = global(name);
    return g;
  }

  Args eval_args(const Node& n, const ScopePtr& scope) {
    Args args;
    for (size_t i = 1; i < n.kids.size(); ++i) {
      Value v = eval(*n.kids[i], scope);
      if (n.arg_names[i - 1].empty())
        args.positional.push_back(std::move(v));
      else
        args.keyword.emplace_back(n.arg_names[i - 1], std::move(v));
    }
    return args;
  }

  Value eval(const Node& n, const ScopePtr& scope) {
    try {
      return eval_node(n, scope);
    } catch (const TemplateError& e) {
      relocate(e, n.line);
    }
  }

  Value eval_node(const Node& n, const ScopePtr& scope) {
    Guard g(*this, n.line);
    switch (n.kind) {
      case Node::Kind::Literal:
        return n.value;
      case Node::Kind::Name:
        return lookup(n.name, scope);
      case Node::Kind::List:
      case Node::Kind::Tuple: {
        Value::List items;
        for (auto& k : n.kids) items.push_back(eval(*k, scope));
        return Value::list(std::move(items));
      }
      case Node::Kind::Dict: {
        Value d = Value::dict();
        for (size_t i = 0; i + 1 < n.kids.size(); i += 2) {
          Value k = eval(*n.kids[i], scope);
          d.set(k, eval(*n.kids[i + 1], scope));
        }
        return d;
      }
      case Node::Kind::Attr: {
        // An attribute of undefined is undefined (llama.cpp's engine; Jinja2
        // would raise), except the few builtins it binds there (get_attr).
        Value obj = eval(*n.kids[0], scope);
        return get_attr(obj, n.name);
      }
      case Node::Kind::Item: {
        Value obj = eval(*n.kids[0], scope);
        Value key = eval(*n.kids[1], scope);
        return get_item(obj, key);
      }
      case Node::Kind::Slice: {
        Value obj = eval(*n.kids[0], scope);
        Value parts[3];
        for (int i = 0; i < 3; ++i)
          if (n.kids[static_cast<size_t>(i) + 1]) parts[i] = eval(*n.kids[static_cast<size_t>(i) + 1], scope);
        return slice(obj, parts[0], parts[1], parts[2]);
      }
      case Node::Kind::Call: {
        // obj.method(...) calls the method even when a dict has a key of
        // that name (Jinja looks attributes up before items).
        if (n.kids[0]->kind == Node::Kind::Attr) {
          const Node& attr = *n.kids[0];
          Value obj = eval(*attr.kids[0], scope);
          if (has_method(obj, attr.name)) {
            Args args = eval_args(n, scope);
            Value result = call_method(obj, attr.name, args);
            charge_call(obj, args, result);
            return result;
          }
          Value callee = get_attr(obj, attr.name);
          if (!callee.is_callable()) {
            if (obj.is_undefined())
              fail(fmt::format("'{}' is undefined, so it has no method '{}'", describe(*attr.kids[0]), attr.name));
            fail(fmt::format("'{}' ({}) has no method '{}'", describe(*attr.kids[0]), obj.type_name(), attr.name));
          }
          return call_value(n, callee, scope);
        }
        return call_value(n, eval(*n.kids[0], scope), scope);
      }
      case Node::Kind::Filter: {
        Value operand = eval(*n.kids[0], scope);
        Args args = eval_args(n, scope);
        Value result = apply_filter(n.name, operand, args);
        charge_call(operand, args, result);
        return result;
      }
      case Node::Kind::Test: {
        Value operand = eval(*n.kids[0], scope);
        Args args = eval_args(n, scope);
        Value result(apply_test(n.name, operand, args) != n.negated);
        charge_call(operand, args, Value());
        return result;
      }
      case Node::Kind::Unary: {
        Value v = eval(*n.kids[0], scope);
        if (n.name == "not") return Value(!v.truthy());
        return unary(n.name, v);
      }
      case Node::Kind::Binary: {
        Value l = eval(*n.kids[0], scope);
        if (n.name == "and") return l.truthy() ? eval(*n.kids[1], scope) : l;
        if (n.name == "or") return l.truthy() ? l : eval(*n.kids[1], scope);
        Value r = eval(*n.kids[1], scope);
        if (n.name == "in" || n.name == "not in") charge_value(r);  // a scan of r
        return binary(n.name, std::move(l), r);
      }
      case Node::Kind::Cond:
        if (eval(*n.kids[0], scope).truthy()) return eval(*n.kids[1], scope);
        return n.kids[2] ? eval(*n.kids[2], scope) : Value();
      default:
        fail("internal error: statement node in expression position");
    }
  }

  Value call_value(const Node& n, const Value& callee, const ScopePtr& scope) {
    if (!callee.is_callable()) {
      if (n.kids[0]->kind == Node::Kind::Attr)
        fail(fmt::format("'{}' has no method '{}'", describe(*n.kids[0]->kids[0]), n.kids[0]->name));
      fail(fmt::format("'{}' is {}, not callable", describe(*n.kids[0]),
                       callee.is_undefined() ? "undefined" : callee.type_name()));
    }
    Args args = eval_args(n, scope);
    Value result = callee.as_function()(args);
    charge_call(Value(), args, result);
    return result;
  }

  // A filter, test, method or call pays for the values it reads and returns.
  void charge_call(const Value& operand, const Args& args, const Value& result) {
    charge_value(operand);
    for (auto& a : args.positional) charge_value(a);
    for (auto& [k, a] : args.keyword) charge_value(a);
    charge_value(result);
  }

  static std::string describe(const Node& n) {
    switch (n.kind) {
      case Node::Kind::Name:
        return n.name;
      case Node::Kind::Attr:
        return describe(*n.kids[0]) + "." + n.name;
      case Node::Kind::Item:
        return describe(*n.kids[0]) + "[...]";
      case Node::Kind::Call:
        return describe(*n.kids[0]) + "(...)";
      default:
        return "expression";
    }
  }
};

}  // namespace

Template Template::parse(std::string_view text) {
  Template t;
  try {
    t.root_ = parse_template(text);
  } catch (const TemplateError&) {
    throw;
  } catch (const std::exception& e) {
    throw TemplateError(std::string("internal error while parsing: ") + e.what(), 0);
  }
  return t;
}

// The JSON text size of a context, about: what its share of the budget is
// proportional to.
template <typename Json>
static uint64_t json_size(const Json& j) {
  if (j.is_string()) return j.template get_ref<const std::string&>().size() + 2;
  uint64_t n = 2;
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it) n += it.key().size() + 4 + json_size(it.value());
  else if (j.is_array())
    for (auto& v : j) n += 1 + json_size(v);
  else
    n = 4;
  return n;
}

template <typename Json>
static std::string render_with(const Node& root, const Json& context, const RenderOptions& options) {
  if (!context.is_object() && !context.is_null()) throw TemplateError("render context must be a JSON object", 0);
  Interpreter interp(options);
  struct Report {  // fills options.stats however the render ends
    const Interpreter& interp;
    RenderStats* stats;
    ~Report() {
      if (stats) *stats = interp.stats();
    }
  } report{interp, options.stats};
  const uint64_t size = json_size(context);
  interp.grant(size > UINT64_MAX / std::max<uint64_t>(1, options.steps_per_context_byte)
                   ? UINT64_MAX
                   : size * options.steps_per_context_byte);
  auto scope = std::make_shared<Scope>();
  if (context.is_object())
    for (auto it = context.begin(); it != context.end(); ++it) scope->vars[it.key()] = Value::from_json(it.value());
  std::string out;
  try {
    interp.render_root(root, scope, out);
  } catch (const TemplateError&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw TemplateError("out of memory while rendering", 0);
  } catch (const std::exception& e) {  // a safety net: every failure is a TemplateError
    throw TemplateError(std::string("internal error while rendering: ") + e.what(), 0);
  }
  return out;
}

std::string Template::render(const nlohmann::json& context, const RenderOptions& options) const {
  return render_with(*root_, context, options);
}
std::string Template::render(const nlohmann::ordered_json& context, const RenderOptions& options) const {
  return render_with(*root_, context, options);
}

}  // namespace vtc::jinja
