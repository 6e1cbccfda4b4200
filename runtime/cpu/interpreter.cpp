// CPU interpreter driver. Per step:
//   1. bind symbols (T, S, R, ...) from the argument sizes and slot count;
//   2. give every value a concrete shape; weights point into the mapped
//      file, alias ops (reshape, view, transfers) share their operand's
//      storage, everything else gets an arena buffer;
//   3. plan the arena from lifetimes (runtime/buffer_plan.h);
//   4. run the ops through the ops.def dispatch table;
//   5. copy the returned values out.
#include "runtime/cpu/interpreter.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <unordered_map>

#include "runtime/buffer_plan.h"
#include "runtime/cpu/exec_context.h"
#include "support/error.h"

namespace vtc::cpu {

HostTensor HostTensor::i32(const std::vector<int32_t>& values) {
  HostTensor t;
  t.elem = ir::ElemType::I32;
  t.shape = {int64_t(values.size())};
  t.bytes.resize(values.size() * 4);
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::vector<float> HostTensor::row(int64_t r) const {
  const int64_t cols = shape.back();
  return std::vector<float>(f32() + r * cols, f32() + (r + 1) * cols);
}

namespace {

using SymbolEnv = std::unordered_map<std::string, int64_t>;

std::optional<int64_t> lookup_symbol(std::string_view name, const void* env) {
  const auto& e = *static_cast<const SymbolEnv*>(env);
  auto it = e.find(std::string(name));
  if (it == e.end()) return std::nullopt;
  return it->second;
}

std::vector<int64_t> concrete_shape(const ir::Shape& shape, const SymbolEnv& env, const std::string& what) {
  std::vector<int64_t> out;
  for (const auto& d : shape) {
    auto v = d.evaluate(lookup_symbol, &env);
    if (!v || *v < 0) throw Error(fmt::format("cpu: cannot size {}: dim {} is unbound or negative", what, d.str()));
    out.push_back(*v);
  }
  return out;
}

int64_t product(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

struct BoundWeight {
  const uint8_t* data;
  std::vector<int64_t> shape;
  ir::ElemType elem;
};

}  // namespace

struct Interpreter::Impl {
  const ir::Module& module;
  StateStore& states;
  ThreadPool& pool;
  std::unordered_map<std::string, BoundWeight> weights;
  OpObserver observer;
  StepStats stats;
  bool profiling = false;
  OpProfile profile;
  std::vector<uint8_t> arena;

  Impl(const ir::Module& m, const gguf::GgufFile& f, StateStore& s, ThreadPool& p) : module(m), states(s), pool(p) {
    for (const auto& w : m.weights) bind_weight(w, f);
  }

  void bind_weight(const ir::WeightDecl& w, const gguf::GgufFile& f) {
    const gguf::TensorInfo* t = f.find_tensor(w.source);
    if (!t) throw Error(fmt::format("cpu: weight @{}: tensor '{}' is not in {}", w.name, w.source, f.path()));
    std::vector<int64_t> shape(t->dims.rbegin(), t->dims.rend());
    std::vector<int64_t> declared;
    for (const auto& d : w.type.shape) {
      auto c = d.constant();
      if (!c) throw Error(fmt::format("cpu: weight @{} has a symbolic shape", w.name));
      declared.push_back(*c);
    }
    if (declared != shape || ggml_type_of(w.type.elem) != t->type)
      throw Error(fmt::format("cpu: weight @{} is declared {} but tensor '{}' is {} [{}]", w.name, w.type.str(),
                              w.source, ggml_type_name(t->type), fmt::join(shape, ", ")));
    weights[w.name] = {t->data, shape, w.type.elem};
  }

  SymbolEnv bind_symbols(const ir::Function& fn, const StepRequest& req) {
    SymbolEnv env;
    env["S"] = int64_t(req.slots.size());
    for (const auto& arg : fn.args) {
      auto it = req.args.find(arg->name);
      if (it == req.args.end()) throw Error(fmt::format("cpu: step @{} needs argument %{}", fn.name, arg->name));
      const HostTensor& t = it->second;
      if (!(t.elem == arg.type().elem) || t.shape.size() != arg.type().rank())
        throw Error(fmt::format("cpu: argument %{} must be {}", arg->name, arg.type().str()));
      for (size_t i = 0; i < t.shape.size(); ++i) {
        const ir::Dim& d = arg.type().shape[i];
        if (auto sym = d.as_symbol()) {
          auto [pos, inserted] = env.emplace(*sym, t.shape[i]);
          if (!inserted && pos->second != t.shape[i])
            throw Error(fmt::format("cpu: argument %{} dim {} is {} but {} = {}", arg->name, i, t.shape[i], *sym,
                                    pos->second));
        }
      }
    }
    for (const auto& arg : fn.args)
      if (concrete_shape(arg.type().shape, env, "%" + arg->name) != req.args.at(arg->name).shape)
        throw Error(fmt::format("cpu: argument %{} must be {}", arg->name, arg.type().str()));
    return env;
  }

  using BufMap = std::unordered_map<const ir::ValueData*, Buf>;
  std::vector<HostTensor> run(const StepRequest& req);
  void place_buffers(const ir::Function& fn, const SymbolEnv& env, const StepRequest& req, BufMap& bufs);
  std::vector<HostTensor> execute(const ir::Function& fn, const SymbolEnv& env, const StepRequest& req, BufMap& bufs);
  void run_kernel(ExecContext& ctx, const ir::Op& op);
};

namespace {
HostTensor copy_out(const Buf& b) {
  return {b.elem, b.shape, std::vector<uint8_t>(b.data, b.data + storage_bytes(b.elem, b.numel))};
}
}  // namespace

std::vector<HostTensor> Interpreter::Impl::run(const StepRequest& req) {
  const ir::Function* fn = module.find_function(req.step);
  if (!fn) throw Error(fmt::format("cpu: the module has no step @{}", req.step));
  for (int32_t slot : req.slots) states.check_slot(slot);
  SymbolEnv env = bind_symbols(*fn, req);
  BufMap bufs;
  place_buffers(*fn, env, req, bufs);
  return execute(*fn, env, req, bufs);
}

// Steps 2 and 3: concrete shapes, alias roots, lifetimes, arena offsets;
// copies the arguments in.
void Interpreter::Impl::place_buffers(const ir::Function& fn, const SymbolEnv& env, const StepRequest& req,
                                      BufMap& bufs) {
  std::unordered_map<const ir::ValueData*, const ir::ValueData*> root;  // alias -> owner
  std::vector<const ir::ValueData*> owned;
  std::vector<BufferRequest> requests;
  std::unordered_map<const ir::ValueData*, size_t> request_of;

  auto own = [&](const ir::ValueData* v, int64_t def) {
    request_of[v] = requests.size();
    requests.push_back({storage_bytes(v->type.elem, bufs[v].numel), def, def});
    owned.push_back(v);
    root[v] = v;
  };
  auto describe = [&](const ir::ValueData* v) {
    Buf& b = bufs[v];
    b.shape = concrete_shape(v->type.shape, env, "%" + v->name);
    b.elem = v->type.elem;
    b.numel = product(b.shape);
  };
  auto extend_life = [&](const ir::ValueData* v, int64_t until) {
    if (auto it = request_of.find(root.at(v)); it != request_of.end())
      requests[it->second].last_use = std::max(requests[it->second].last_use, until);
  };
  for (const auto& arg : fn.args) {
    describe(arg.data());
    own(arg.data(), -1);
  }
  const int64_t n_ops = int64_t(fn.ops.size());
  for (int64_t i = 0; i < n_ops; ++i) {
    const ir::Op& op = *fn.ops[size_t(i)];
    // Returned values live to the end; everything else to its last reader.
    for (const auto& operand : op.operands) extend_life(operand.data(), op.kind == ir::OpKind::Return ? n_ops : i);
    for (const auto& r : op.results) {
      describe(r.data());
      if (op.kind == ir::OpKind::Weight) root[r.data()] = r.data();
      else if (is_alias_op(op.kind)) root[r.data()] = root.at(op.operands[0].data());
      else own(r.data(), i);
    }
  }
  BufferPlan plan = plan_buffers(requests);
  stats = {plan.arena_bytes, plan.naive_bytes};
  if (arena.size() < plan.arena_bytes) arena.resize(plan.arena_bytes);
  for (size_t k = 0; k < owned.size(); ++k) bufs[owned[k]].data = arena.data() + plan.offsets[k];
  for (const auto& arg : fn.args) {
    const HostTensor& t = req.args.at(arg->name);
    std::memcpy(bufs[arg.data()].data, t.bytes.data(), std::min<size_t>(t.bytes.size(), requests[request_of[arg.data()]].bytes));
  }
}

// Steps 4 and 5: weights and aliases resolve to pointers, every other op
// runs its kernel; the `return` operands are copied out.
std::vector<HostTensor> Interpreter::Impl::execute(const ir::Function& fn, const SymbolEnv& env, const StepRequest& req,
                                                   BufMap& bufs) {
  ExecContext ctx{module, states, pool, req.slots, bufs};
  std::vector<HostTensor> outputs;
  for (const auto& op_ptr : fn.ops) {
    const ir::Op& op = *op_ptr;
    if (op.kind == ir::OpKind::Weight) {
      const BoundWeight& w = weights.at(op.attr("name")->s);
      bufs[op.results[0].data()].data = const_cast<uint8_t*>(w.data);
    } else if (is_alias_op(op.kind)) {
      Buf& r = bufs[op.results[0].data()];
      r.data = bufs[op.operands[0].data()].data;
      if (const ir::Attr* offset = op.attr("offset")) {
        auto elems = offset->dim.evaluate(lookup_symbol, &env);
        if (!elems) throw Error("cpu: view offset is unbound");
        r.data += *elems * elem_bytes(r.elem);
      }
    } else if (op.kind == ir::OpKind::Return) {
      for (const auto& v : op.operands) outputs.push_back(copy_out(bufs[v.data()]));
    } else {
      run_kernel(ctx, op);
    }
  }
  return outputs;
}

void Interpreter::Impl::run_kernel(ExecContext& ctx, const ir::Op& op) {
  if (profiling) {
    auto t0 = std::chrono::steady_clock::now();
    exec_fn(op.kind)(ctx, op);
    auto& e = profile.by_op[std::string(op.mnemonic())];
    e.calls++;
    e.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } else {
    exec_fn(op.kind)(ctx, op);
  }
  if (observer) {
    std::vector<HostTensor> results;
    for (const auto& r : op.results) results.push_back(copy_out(ctx.bufs.at(r.data())));
    observer(op, results);
  }
}

Interpreter::Interpreter(const ir::Module& module, const gguf::GgufFile& file, StateStore& states, ThreadPool& pool)
    : impl_(std::make_unique<Impl>(module, file, states, pool)) {}
Interpreter::~Interpreter() = default;

std::vector<HostTensor> Interpreter::run(const StepRequest& request) { return impl_->run(request); }
void Interpreter::set_observer(OpObserver observer) { impl_->observer = std::move(observer); }
void Interpreter::set_profiling(bool on) { impl_->profiling = on; }
const OpProfile& Interpreter::profile() const { return impl_->profile; }

std::string OpProfile::table() const {
  std::vector<std::pair<std::string, Entry>> rows(by_op.begin(), by_op.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double total = 0;
  for (const auto& r : rows) total += r.second.seconds;
  std::string out = fmt::format("{:<14} {:>8} {:>10} {:>7}\n", "op", "calls", "ms", "share");
  for (const auto& [name, e] : rows)
    out += fmt::format("{:<14} {:>8} {:>10.2f} {:>6.1f}%\n", name, e.calls, e.seconds * 1e3, total > 0 ? 100 * e.seconds / total : 0);
  return out;
}
const StepStats& Interpreter::last_stats() const { return impl_->stats; }

}  // namespace vtc::cpu
