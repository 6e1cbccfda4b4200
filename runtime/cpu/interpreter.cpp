// CPU interpreter driver. Per step:
//   1. bind symbols (T, S, R, ...) from the argument sizes and slot count;
//   2. take the step's memory plan (passes/memory_plan.h): the compiled one
//      when the module came with plans (the step must fit its bounds), or
//      one planned now for these symbols. Every planned value points into
//      the arena of its placement; weights point into the mapped file;
//      reshape/view, fused-body arguments and a body's returned values
//      share their root's storage (the plan's alias rules). The last few
//      placements of each step are kept and reused for the same symbols
//      (a decode step's repeat), only the arguments copied in again;
//   3. run the ops through the ops.def dispatch table; a fused op runs as
//      one kernel where fused_kernels.h knows its body, else its body op
//      by op; either way with the same bits, so fusion never changes a
//      result;
//   4. copy the returned values out.
// Binding a weight (once, at construction) compares the layout its IR type
// declares (weight-layout pass) with the one its bytes are stored in
// (TensorInfo::stored_layout; Rows except in a packed artifact): equal, the
// weight points into the mapped file; declared x8 over stored rows, it is
// repacked (cpu::repack_weight) into a buffer the interpreter owns, all such
// weights in one parallel_for with one progress line on stderr; anything
// else is an error naming the weight.
#include "runtime/cpu/interpreter.h"

#include <fmt/format.h>
#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/op_attrs.h"
#include "passes/memory_plan.h"
#include "runtime/cpu/exec_context.h"
#include "runtime/cpu/fused_kernels.h"
#include "runtime/cpu/kernels/kernels.h"
#include "runtime/step_symbols.h"
#include "support/error.h"

namespace vtc::cpu {

namespace {

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

// A weight whose bytes the interpreter rearranges at load.
struct PendingRepack {
  std::string name;
  const gguf::TensorInfo* tensor;
  WeightLayout layout;
};

struct AlignedFree {
  void operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t(64)); }
};
using AlignedBytes = std::unique_ptr<uint8_t[], AlignedFree>;

}  // namespace

struct Interpreter::Impl {
  using BufMap = llvm::DenseMap<const ir::ValueData*, Buf>;
  const ir::Module& module;
  HostStates& states;
  ThreadPool& pool;
  std::unordered_map<std::string, BoundWeight> weights;
  std::vector<AlignedBytes> repacked;  // weights rearranged at load (bind_weight)
  uint64_t repacked_bytes = 0;
  OpObserver observer;
  StepStats stats;
  bool profiling = false;
  OpProfile profile;
  std::vector<uint8_t> host_arena, device_arena;
  std::map<std::string, passes::FunctionPlan> compiled_plans;  // by step
  // Per-module tables keyed by IR pointers (DenseMap: pointer keys, no
  // iteration order needed). An entry is looked up while none is added,
  // since DenseMap moves its values when it grows.
  llvm::DenseMap<const ir::Function*, std::map<std::string, const ir::ValueData*>> plan_keys;
  // Per fused op, the body values written straight into its results
  // (fixed for the module's lifetime; computed on first use, not per step).
  using ResultHomes = decltype(passes::body_result_homes(std::declval<const ir::Op&>()));
  llvm::DenseMap<const ir::Op*, ResultHomes> result_homes;
  // Per fused op, its body's matmuls that read the same activations, keyed
  // by the first of each group (computed on first use).
  struct SharedMatmuls {
    llvm::DenseMap<const ir::Op*, std::vector<const ir::Op*>> by_first;
    llvm::DenseSet<const ir::Op*> later;  // members other than the first
  };
  llvm::DenseMap<const ir::Op*, SharedMatmuls> shared_matmuls;
  // Per fused op, its one-kernel form (null: op by op; fused_kernels.h).
  bool fused_kernels = true;
  llvm::DenseMap<const ir::Op*, std::unique_ptr<FusedKernel>> fused_kernel_of;
  // The last few placements of each step function: every value's shape and
  // arena address for one binding of its size symbols. A decode step's
  // sizes repeat from step to step, and describing and placing every value
  // anew took about 0.7 ms of a 15 ms step (0.56B bench model, 2 threads,
  // a loaded machine) while the pool's other thread waited. Valid while the
  // arenas keep their addresses (they only grow, so a placement whose bases
  // match still fits) and the compiled plans are the same (use_plans
  // clears them).
  struct Placement {
    SymbolEnv env;
    BufMap bufs;
    const uint8_t* host_base = nullptr;
    const uint8_t* device_base = nullptr;
    StepStats stats;
  };
  static constexpr size_t kPlacementsPerStep = 4;  // serving alternates a few step sizes
  std::unordered_map<const ir::Function*, std::vector<Placement>> placements;  // most recent last

  Impl(const ir::Module& m, const gguf::GgufFile& f, HostStates& s, ThreadPool& p) : module(m), states(s), pool(p) {
    std::vector<PendingRepack> pending;
    for (const auto& w : m.weights) bind_weight(w, f, pending);
    repack_weights(pending);
  }

  void bind_weight(const ir::WeightDecl& w, const gguf::GgufFile& f, std::vector<PendingRepack>& pending) {
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
    const WeightLayout declared_layout = w.type.elem.layout(), stored = t->stored_layout;
    weights[w.name] = {t->data, shape, w.type.elem};
    if (declared_layout == stored) return;
    if (stored != WeightLayout::Rows)
      throw Error(fmt::format("cpu: weight @{} is declared {} but tensor '{}' is stored in the {} layout", w.name,
                              w.type.str(), w.source, weight_layout_name(stored)));
    if (shape.size() != 2 || !matmul_layout_supported(t->type, declared_layout, shape[0]))
      throw Error(fmt::format("cpu: weight @{} is declared {}, a layout the CPU matmul does not read for a {}-row {} weight",
                              w.name, w.type.str(), shape[0], ggml_type_name(t->type)));
    pending.push_back({w.name, t, declared_layout});
  }

  // Rearranges every pending weight into a buffer of its own, weights
  // spread over the pool's workers.
  void repack_weights(const std::vector<PendingRepack>& pending) {
    if (pending.empty()) return;
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t total = 0;
    std::vector<uint8_t*> dst(pending.size());
    for (size_t i = 0; i < pending.size(); ++i) {
      const uint64_t n = pending[i].tensor->n_bytes;
      repacked.emplace_back(static_cast<uint8_t*>(::operator new[](std::max<uint64_t>(n, 1), std::align_val_t(64))));
      dst[i] = repacked.back().get();
      total += n;
    }
    std::string layouts;
    for (const auto& p : pending)
      if (layouts.find(weight_layout_name(p.layout)) == std::string::npos)
        layouts += (layouts.empty() ? "" : "/") + std::string(weight_layout_name(p.layout));
    fmt::print(stderr, "vtc: repacking {} weights ({:.0f} MiB) for the CPU's {} layout...", pending.size(),
               double(total) / 1048576.0, layouts);
    std::fflush(stderr);
    // Items of at most kRowsPerItem rows (whole groups: each group of a
    // layout is a contiguous run of bytes), so one large weight does not
    // leave the other workers idle.
    constexpr int64_t kRowsPerItem = 256;
    struct Item {
      size_t weight;
      int64_t row0, rows;
    };
    std::vector<Item> items;
    for (size_t i = 0; i < pending.size(); ++i) {
      const int64_t rows = int64_t(pending[i].tensor->dims[1]);
      const int64_t step = std::max(kRowsPerItem / weight_layout_rows(pending[i].layout), int64_t(1)) *
                           weight_layout_rows(pending[i].layout);
      for (int64_t r = 0; r < rows; r += step) items.push_back({i, r, std::min(step, rows - r)});
    }
    pool.parallel_for(int64_t(items.size()), [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) {
        const Item& it = items[size_t(k)];
        const PendingRepack& p = pending[it.weight];
        const gguf::TensorInfo& t = *p.tensor;
        const uint64_t row_bytes = t.n_bytes / t.dims[1];
        repack_weight(t.type, p.layout, t.data + uint64_t(it.row0) * row_bytes, it.rows, int64_t(t.dims[0]),
                      dst[it.weight] + uint64_t(it.row0) * row_bytes);
      }
    });
    for (size_t i = 0; i < pending.size(); ++i) weights.at(pending[i].name).data = dst[i];
    repacked_bytes = total;
    fmt::print(stderr, " {:.2f} s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }

  std::vector<HostTensor> run(const StepRequest& req);
  BufMap& placed_buffers(const ir::Function& fn, const SymbolEnv& env, const StepRequest& req);
  void copy_arguments(const ir::Function& fn, const StepRequest& req, BufMap& bufs);
  const passes::FunctionPlan& step_plan(const ir::Function& fn, const SymbolEnv& env, passes::FunctionPlan& local);
  void describe_values(const ir::Function& fn, const SymbolEnv& env, BufMap& bufs);
  void place_buffers(const ir::Function& fn, const SymbolEnv& env, const StepRequest& req, BufMap& bufs);
  std::vector<HostTensor> execute(const ir::Function& fn, const SymbolEnv& env, const StepRequest& req, BufMap& bufs);
  void exec_op(ExecContext& ctx, const ir::Op& op, const SymbolEnv& env);
  void run_fused(ExecContext& ctx, const ir::Op& op, const SymbolEnv& env);
  bool run_fused_kernel(ExecContext& ctx, const ir::Op& op, const SymbolEnv& env);
  void run_body_ops(ExecContext& ctx, const ir::Op& op, const SymbolEnv& env);
  void run_matmul_group(ExecContext& ctx, const std::vector<const ir::Op*>& group);
  static SharedMatmuls find_shared_matmuls(const ir::Function& body);
  void run_kernel(ExecContext& ctx, const ir::Op& op);
  void notify(ExecContext& ctx, const ir::Op& op);
};

namespace {
HostTensor copy_out(const Buf& b) {
  return {b.elem, b.shape, std::vector<uint8_t>(b.data, b.data + storage_bytes(b.elem, b.numel))};
}
}  // namespace

std::vector<HostTensor> Interpreter::Impl::run(const StepRequest& req) {
  const ir::Function* fn = module.find_function(req.step);
  if (!fn) throw Error(fmt::format("cpu: the module has no step @{}", req.step));
  for (int32_t slot : req.slots) states.store().check_slot(slot);
  const auto t0 = std::chrono::steady_clock::now();
  SymbolEnv env = bind_step_symbols(*fn, req, Target::Cpu);
  BufMap& bufs = placed_buffers(*fn, env, req);
  if (profiling) {  // the interpreter's own time per step, beside the ops'
    auto& e = profile.by_op["(placement)"];
    e.calls++;
    e.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return execute(*fn, env, req, bufs);
}

// The step's buffers with its arguments copied in: a kept placement of the
// same sizes (see `placements`), else a new one, which replaces the least
// recently used where kPlacementsPerStep are kept.
Interpreter::Impl::BufMap& Interpreter::Impl::placed_buffers(const ir::Function& fn, const SymbolEnv& env,
                                                             const StepRequest& req) {
  std::vector<Placement>& kept = placements[&fn];
  for (size_t i = kept.size(); i-- > 0;) {
    Placement& p = kept[i];
    if (p.env != env || p.host_base != host_arena.data() || p.device_base != device_arena.data()) continue;
    std::rotate(kept.begin() + ptrdiff_t(i), kept.begin() + ptrdiff_t(i) + 1, kept.end());
    Placement& reused = kept.back();
    stats = reused.stats;
    stats.reused_placement = true;
    copy_arguments(fn, req, reused.bufs);
    return reused.bufs;
  }
  if (kept.size() == kPlacementsPerStep) kept.erase(kept.begin());
  Placement& p = kept.emplace_back();
  stats.reused_placement = false;
  place_buffers(fn, env, req, p.bufs);
  p.env = env;
  p.host_base = host_arena.data();
  p.device_base = device_arena.data();
  p.stats = stats;
  return p.bufs;
}

void Interpreter::Impl::copy_arguments(const ir::Function& fn, const StepRequest& req, BufMap& bufs) {
  for (const auto& arg : fn.args) {
    const HostTensor& t = req.args.at(arg->name);
    std::memcpy(bufs[arg.data()].data, t.bytes.data(), t.bytes.size());
  }
}

// The plan for this step: the compiled one when the step fits its bounds,
// else one made now, by the same planner, for the step's own sizes.
const passes::FunctionPlan& Interpreter::Impl::step_plan(const ir::Function& fn, const SymbolEnv& env,
                                                         passes::FunctionPlan& local) {
  auto it = compiled_plans.find(fn.name);
  bool fits = it != compiled_plans.end();
  for (const auto& [symbol, value] : env) {
    if (!fits) break;
    auto bound = it->second.bindings.find(symbol);
    fits = bound == it->second.bindings.end() || value <= bound->second;
  }
  stats.compiled_plan = fits;
  if (fits) return it->second;
  local = passes::plan_function(fn, std::map<std::string, int64_t>(env.begin(), env.end()));
  return local;
}

// Concrete shapes of every value, fused bodies included.
void Interpreter::Impl::describe_values(const ir::Function& fn, const SymbolEnv& env, BufMap& bufs) {
  auto describe = [&](const ir::Value& v) {
    Buf& b = bufs[v.data()];
    b.shape = concrete_shape(v.type().shape, env, "%" + v->name, Target::Cpu);
    b.elem = v.type().elem;
    b.numel = product(b.shape);
  };
  for (const auto& arg : fn.args) describe(arg);
  for (const auto& op : fn.ops) {
    for (const auto& r : op->results) describe(r);
    if (op->body) describe_values(*op->body, env, bufs);
  }
}

// Step 2: every planned value gets its arena address (sizes checked against
// the plan); the arguments are copied in.
void Interpreter::Impl::place_buffers(const ir::Function& fn, const SymbolEnv& env, const StepRequest& req,
                                      BufMap& bufs) {
  describe_values(fn, env, bufs);
  passes::FunctionPlan local;
  const passes::FunctionPlan& plan = step_plan(fn, env, local);
  auto [keys, fresh] = plan_keys.try_emplace(&fn);
  if (fresh) keys->second = passes::plan_keys(fn);
  try {
    if (host_arena.size() < plan.host_arena_bytes) host_arena.resize(plan.host_arena_bytes);
    if (device_arena.size() < plan.device_arena_bytes) device_arena.resize(plan.device_arena_bytes);
  } catch (const std::bad_alloc&) {
    throw Error(fmt::format("cpu: cannot allocate the arena of @{} ({} bytes host, {} bytes device): out of memory",
                            fn.name, plan.host_arena_bytes, plan.device_arena_bytes));
  } catch (const std::length_error&) {
    throw Error(fmt::format("cpu: the arena of @{} ({} bytes host, {} bytes device) is too large", fn.name,
                            plan.host_arena_bytes, plan.device_arena_bytes));
  }
  stats.arena_bytes = plan.arena_bytes();
  stats.naive_bytes = plan.naive_bytes;
  for (const auto& b : plan.buffers) {
    auto k = keys->second.find(b.key);
    if (k == keys->second.end())
      throw Error(fmt::format("cpu: the memory plan of @{} does not match its IR: no value at {}", fn.name, b.key));
    Buf& buf = bufs[k->second];
    if (storage_bytes(buf.elem, buf.numel) > b.bytes)
      throw Error(fmt::format("cpu: @{} {} needs {} bytes but its plan gives {}", fn.name, b.value,
                              storage_bytes(buf.elem, buf.numel), b.bytes));
    auto& arena = b.placement == ir::Placement::Host ? host_arena : device_arena;
    buf.data = arena.data() + b.offset;
  }
  copy_arguments(fn, req, bufs);
}

// Steps 3 and 4: run every op; the `return` operands are copied out.
std::vector<HostTensor> Interpreter::Impl::execute(const ir::Function& fn, const SymbolEnv& env, const StepRequest& req,
                                                   BufMap& bufs) {
  ExecContext ctx{module, states, pool, req.slots, bufs,
                  req.rows_as_decode ? TokenOrder::EachAsOne : TokenOrder::Batched};
  std::vector<HostTensor> outputs;
  for (const auto& op_ptr : fn.ops) {
    if (op_ptr->kind == ir::OpKind::Return) {
      for (const auto& v : op_ptr->operands) outputs.push_back(copy_out(bufs[v.data()]));
    } else {
      exec_op(ctx, *op_ptr, env);
    }
  }
  return outputs;
}

// Weights and aliases resolve to pointers; fused ops run their body; every
// other op runs its kernel.
void Interpreter::Impl::exec_op(ExecContext& ctx, const ir::Op& op, const SymbolEnv& env) {
  BufMap& bufs = ctx.bufs;
  if (op.kind == ir::OpKind::Weight) {
    const BoundWeight& w = weights.at(*ir::weight_symbol(op));
    bufs[op.results[0].data()].data = const_cast<uint8_t*>(w.data);
  } else if (op.info().is_alias()) {
    uint8_t* const source = ctx.buf(op.operands[0].data()).data;
    Buf& r = bufs[op.results[0].data()];
    r.data = source;
    if (op.kind == ir::OpKind::View) {
      auto elems = ir::ViewAttrs::of(op).offset.evaluate(lookup_symbol, &env);
      if (!elems) throw Error("cpu: view offset is unbound");
      r.data += *elems * elem_bytes(r.elem);
    }
  } else if (op.body) {
    run_fused(ctx, op, env);
  } else {
    run_kernel(ctx, op);
  }
}

void Interpreter::Impl::run_fused(ExecContext& ctx, const ir::Op& op, const SymbolEnv& env) {
  BufMap& bufs = ctx.bufs;
  const ir::Function& body = *op.body;
  for (size_t a = 0; a < body.args.size(); ++a) bufs[body.args[a].data()].data = ctx.buf(op.operands[a].data()).data;
  auto [entry, fresh] = result_homes.try_emplace(&op);
  if (fresh) entry->second = passes::body_result_homes(op);
  const auto& homes = entry->second;
  for (const auto& [value, result] : homes) bufs[value].data = ctx.buf(result.data()).data;
  if (!run_fused_kernel(ctx, op, env)) run_body_ops(ctx, op, env);
  const ir::Op& ret = *body.ops.back();
  for (size_t k = 0; k < ret.operands.size(); ++k) {
    if (homes.count(ret.operands[k].data())) continue;
    const Buf& from = ctx.buf(ret.operands[k].data());
    std::memcpy(ctx.buf(op.results[k].data()).data, from.data, storage_bytes(from.elem, from.numel));
  }
  notify(ctx, op);  // body ops were reported as they ran
}

// The region as one kernel when it has that form (fused_kernels.h); every
// body value is then computed and reported as if its ops had run.
bool Interpreter::Impl::run_fused_kernel(ExecContext& ctx, const ir::Op& op, const SymbolEnv& env) {
  if (!fused_kernels) return false;
  auto [entry, fresh] = fused_kernel_of.try_emplace(&op);
  if (fresh) entry->second = FusedKernel::of(op);
  if (!entry->second) return false;
  for (const auto& inner : op.body->ops)
    if (inner->info().is_alias()) exec_op(ctx, *inner, env);
  const auto t0 = std::chrono::steady_clock::now();
  if (!entry->second->run(ctx, /*materialize=*/static_cast<bool>(observer))) return false;
  if (profiling) {
    auto& e = profile.by_op[fmt::format("fused {}", ir::enum_name(ir::FusedAttrs::of(op).kind))];
    e.calls++;
    e.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  for (const auto& inner : op.body->ops)
    if (inner->kind != ir::OpKind::Return && !inner->info().is_alias()) notify(ctx, *inner);
  return true;
}

void Interpreter::Impl::run_body_ops(ExecContext& ctx, const ir::Op& op, const SymbolEnv& env) {
  auto [shared_entry, fresh_shared] = shared_matmuls.try_emplace(&op);
  if (fresh_shared) shared_entry->second = find_shared_matmuls(*op.body);
  const SharedMatmuls& shared = shared_entry->second;
  for (const auto& inner : op.body->ops) {
    if (inner->kind == ir::OpKind::Return || shared.later.count(inner.get())) continue;
    if (auto g = shared.by_first.find(inner.get()); g != shared.by_first.end()) run_matmul_group(ctx, g->second);
    else exec_op(ctx, *inner, env);
  }
}

// A body's matmuls of one input (Q, K and V after their norm; gate and up)
// run as one matmul_shared_input when the first of them is reached: the
// activations are converted once and all their rows share one
// parallel_for. Running the later ones early is safe because they read only
// that input and weights, and the memory plan keeps every body value live
// across the whole fused op, so their results overwrite nothing.
Interpreter::Impl::SharedMatmuls Interpreter::Impl::find_shared_matmuls(const ir::Function& body) {
  llvm::DenseMap<const ir::ValueData*, std::vector<const ir::Op*>> by_input;
  std::vector<const ir::ValueData*> order;
  for (const auto& inner : body.ops) {
    if (inner->kind != ir::OpKind::Matmul) continue;
    auto& g = by_input[inner->operands[0].data()];
    if (g.empty()) order.push_back(inner->operands[0].data());
    g.push_back(inner.get());
  }
  SharedMatmuls shared;
  for (const ir::ValueData* input : order) {
    const auto& g = by_input[input];
    if (g.size() < 2) continue;
    shared.by_first[g.front()] = g;
    for (auto it = g.begin() + 1; it != g.end(); ++it) shared.later.insert(*it);
  }
  return shared;
}

void Interpreter::Impl::run_matmul_group(ExecContext& ctx, const std::vector<const ir::Op*>& group) {
  const auto t0 = std::chrono::steady_clock::now();
  exec_matmuls_shared_input(ctx, group);
  if (profiling) {
    auto& e = profile.by_op["matmul"];
    e.calls += static_cast<int64_t>(group.size());
    e.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  for (const ir::Op* op : group) notify(ctx, *op);
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
  notify(ctx, op);
}

void Interpreter::Impl::notify(ExecContext& ctx, const ir::Op& op) {
  if (!observer) return;
  std::vector<std::optional<HostTensor>> results;
  for (const auto& r : op.results) results.emplace_back(copy_out(ctx.buf(r.data())));
  observer(op, results);
}

Interpreter::Interpreter(const ir::Module& module, const gguf::GgufFile& file, HostStates& states, ThreadPool& pool)
    : impl_(std::make_unique<Impl>(module, file, states, pool)) {}
Interpreter::~Interpreter() = default;

std::vector<HostTensor> Interpreter::run(const StepRequest& request) { return impl_->run(request); }
void Interpreter::set_observer(OpObserver observer) { impl_->observer = std::move(observer); }
void Interpreter::use_plans(const std::vector<passes::FunctionPlan>& plans) {
  impl_->compiled_plans.clear();
  impl_->placements.clear();  // placed by the plans before
  for (const auto& p : plans) impl_->compiled_plans[p.function] = p;
}
void Interpreter::set_profiling(bool on) { impl_->profiling = on; }
void Interpreter::set_fused_kernels(bool on) { impl_->fused_kernels = on; }
size_t Interpreter::repacked_weights() const { return impl_->repacked.size(); }
uint64_t Interpreter::repacked_bytes() const { return impl_->repacked_bytes; }
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
