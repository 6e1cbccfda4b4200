// CUDA executor (see executor.h for the per-step algorithm).
#include "runtime/cuda/executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "codegen/cuda/kernel.h"
#include "codegen/cuda/nvrtc.h"
#include "passes/buffer_plan.h"
#include "passes/memory_plan.h"
#include "runtime/cuda/driver.h"
#include "runtime/step_symbols.h"
#include "support/error.h"

namespace vtc::cuda {
namespace {

int64_t eval(const ir::Dim& d, const SymbolEnv& env, const std::string& what) {
  auto v = d.evaluate(lookup_symbol, &env);
  if (!v || *v < 0) throw Error(fmt::format("cuda: cannot size {}: {} is unbound or negative", what, d.str()));
  return *v;
}

uint64_t value_bytes(const ir::TensorType& t, const SymbolEnv& env) {
  int64_t n = 1;
  for (const auto& d : t.shape) n *= eval(d, env, t.str());
  return storage_bytes(t.elem, n);
}

struct Step {
  StepKernels kernels;
  std::vector<void*> fns;  // parallel to kernels.kernels
};

// A step's bound buffers: every root value's device address.
struct Bound {
  SymbolEnv env;
  std::unordered_map<const ir::ValueData*, DevPtr> ptr;
  std::vector<std::pair<const ir::ValueData*, DevPtr>> guards;  // sentinel regions (tests)
};

constexpr uint64_t kGuardBytes = 256;
constexpr uint8_t kGuardByte = 0xA5;

}  // namespace

struct Executor::Impl final : StateStorage {
  const ir::Module& module;
  const gguf::GgufFile& file;
  StateStore& states;
  ExecutorOptions options;
  std::unique_ptr<Device> dev;
  std::unique_ptr<Nvrtc> nvrtc;
  void* stream = nullptr;
  std::vector<void*> modules;
  std::map<std::string, void*> fn_by_entry;
  std::map<std::string, Step> steps;
  std::map<std::string, DevPtr> weights, state_bufs;
  DevPtr arena = 0, scratch = 0, slots_buf = 0, pt_buf = 0;
  uint64_t arena_size = 0, scratch_size = 0, slots_cap = 0, pt_cap = 0;
  std::map<std::string, void*> graphs;
  // Device sampling.
  // Sampled ids copied out asynchronously (run_sampled).
  static constexpr size_t kMaxSampledRows = 4096;
  int32_t* tokens_host = nullptr;
  void* tokens_event = nullptr;
  size_t pending = 0;
  OpObserver observer;  // diffs only: set_observer()

  Impl(const BackendInputs& in, const ExecutorOptions& o)
      : module(in.module), file(in.file), states(in.states), options(o) {
    const ir::Module& m = module;
    std::string why;
    dev = Device::open(o.device, &why);
    if (!dev) throw Error("cuda target unavailable: " + why);
    nvrtc = Nvrtc::load(&why);
    if (!nvrtc) throw Error("cuda target unavailable: " + why);
    stream = dev->create_stream();
    std::map<std::string, Step> generated;
    for (const auto& fn : m.functions) {
      Step st{generate_step(m, *fn), {}};
      if (o.stored_kernels) {
        auto stored = o.stored_kernels->find(fn->name);
        check_stored_kernels(st.kernels, stored == o.stored_kernels->end() ? std::vector<KernelSource>{} : stored->second);
      }
      generated.emplace(fn->name, std::move(st));
    }
    compile_all(generated);
    for (auto& [name, st] : generated) {
      for (const auto& k : st.kernels.kernels) st.fns.push_back(load(k));
      steps.emplace(name, std::move(st));
    }
    upload_weights();
    for (const auto& l : states.layouts()) {
      state_bufs[l.decl->name] = dev->alloc(l.bytes);  // zeroed
      if (!l.paged() && StateStore::empty_byte(*l.decl) != 0)
        dev->memset(state_bufs[l.decl->name], StateStore::empty_byte(*l.decl), l.bytes, stream);
    }
    states.attach(this);
    tokens_host = static_cast<int32_t*>(dev->alloc_host(kMaxSampledRows * 4));
    tokens_event = dev->create_event();
    dev->sync(stream);
  }

  ~Impl() override {
    states.attach(nullptr);
    if (!dev) return;
    try {
      dev->sync(stream);
    } catch (const Error&) {
      // A failed kernel left the context's error sticky: it was reported by
      // the call that saw it; release what can be released.
    }
    for (auto& [k, g] : graphs) dev->destroy_graph(g);
    for (DevPtr p : {arena, scratch, slots_buf, pt_buf}) dev->free(p);
    for (auto& [n, p] : weights) dev->free(p);
    for (auto& [n, p] : state_bufs) dev->free(p);
    dev->free_host(tokens_host);
    dev->destroy_event(tokens_event);
    for (void* m : modules) dev->unload_module(m);
    dev->destroy_stream(stream);
  }

  // Compiles every distinct kernel of every step, a few at a time: NVRTC
  // (and the simulated device's host compiler) takes 0.1-0.5 s a kernel and
  // a hybrid model has a few hundred. Compiled images wait in `compiled`.
  std::map<std::string, std::string> compiled;
  void compile_all(const std::map<std::string, Step>& generated) {
    std::vector<const Kernel*> todo;
    std::set<std::string> seen;
    for (const auto& [name, st] : generated)
      for (const Kernel* k : st.kernels.unique())
        if (seen.insert(k->entry).second) todo.push_back(k);
    std::atomic<size_t> next{0};
    std::mutex mu;
    std::exception_ptr failure;
    auto work = [&] {
      for (size_t i; (i = next.fetch_add(1)) < todo.size();) {
        try {
          CompiledKernel c = nvrtc->compile(*todo[i], dev->arch(), CodeKind::Cubin);
          std::lock_guard<std::mutex> lock(mu);
          compiled[c.entry] = std::move(c.image);
        } catch (...) {
          std::lock_guard<std::mutex> lock(mu);
          if (!failure) failure = std::current_exception();
          next = todo.size();
        }
      }
    };
    const size_t n = std::min<size_t>(todo.size(), std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8));
    std::vector<std::thread> threads;
    for (size_t t = 1; t < n; ++t) threads.emplace_back(work);
    work();
    for (auto& t : threads) t.join();
    if (failure) std::rethrow_exception(failure);
  }

  void* load(const Kernel& k) {
    if (auto it = fn_by_entry.find(k.entry); it != fn_by_entry.end()) return it->second;
    auto image = compiled.find(k.entry);
    if (image == compiled.end()) image = compiled.emplace(k.entry, nvrtc->compile(k, dev->arch(), CodeKind::Cubin).image).first;
    void* m = dev->load_module(image->second);
    compiled.erase(image);
    modules.push_back(m);
    return fn_by_entry[k.entry] = dev->function(m, k.entry);
  }

  void upload_weights() {
    for (const auto& w : module.weights) {
      const gguf::TensorInfo* t = file.find_tensor(w.source);
      if (!t) throw Error(fmt::format("cuda: weight @{}: tensor '{}' is not in {}", w.name, w.source, file.path()));
      if (t->stored_layout != WeightLayout::Rows || w.type.elem.layout() != WeightLayout::Rows)
        throw Error(fmt::format("cuda: weight @{}: tensor '{}' is stored in the {} layout and declared {}; the CUDA kernels "
                                "read the rows layout (a model packed by `vtc compile --pack --target cpu` runs on the CPU)",
                                w.name, w.source, weight_layout_name(t->stored_layout), w.type.elem.name()));
      DevPtr p = dev->alloc(t->n_bytes);
      dev->upload(p, t->data, t->n_bytes, stream);
      weights[w.name] = p;
    }
  }

  // StateStorage: the store handed out `page` (zero it in every paged
  // state) or emptied `slot`. Ordered on the stream before the next step.
  void zero_page(int32_t page) override {
    for (const auto& l : states.layouts()) {
      if (!l.paged()) continue;
      const uint64_t bytes = l.page_bytes(states.page_size());
      for (int half = 0; half < l.halves; ++half)
        dev->memset(state_bufs.at(l.decl->name) + DevPtr(half) * l.half_bytes() + DevPtr(page) * bytes, 0, bytes, stream);
    }
  }
  void clear_slot(int32_t slot) override {
    // Ordered after any copy of sampled ids still in flight on the stream.
    for (const auto& l : states.layouts())
      if (!l.paged())
        dev->memset(slot_row(l, slot), StateStore::empty_byte(*l.decl), l.row_bytes(), stream);
  }
  DevPtr slot_row(const StateStore::Layout& l, int32_t slot) {
    states.check_slot(slot);
    if (l.paged()) throw Error(fmt::format("cuda: state @{} is paged; it has no slot rows", l.decl->name));
    return state_bufs.at(l.decl->name) + DevPtr(slot) * l.row_bytes();
  }

  void ensure(DevPtr& p, uint64_t& cap, uint64_t need) {
    if (need <= cap) return;
    dev->sync(stream);
    dev->free(p);
    cap = std::max<uint64_t>(need, cap * 2);
    p = dev->alloc(cap);
    for (auto& [k, g] : graphs) dev->destroy_graph(g);  // they captured the old address
    graphs.clear();
  }

  SymbolEnv bind_symbols(const ir::Function& fn, const StepRequest& req) {
    SymbolEnv env = bind_step_symbols(fn, req, "cuda");
    int64_t stride = 1;
    for (int32_t s : req.slots) stride = std::max<int64_t>(stride, int64_t(states.page_table(s).size()));
    env["PT_STRIDE"] = stride;
    return env;
  }

  // Roots, lifetimes (kernel indices), the arena plan, uploads of the
  // arguments, slots and page tables.
  Bound prepare(const ir::Function& fn, const Step& st, const StepRequest& req) {
    Bound b{bind_symbols(fn, req), {}, {}};
    std::unordered_map<const ir::ValueData*, std::pair<const ir::ValueData*, ir::Dim>> alias;
    for (const auto& a : st.kernels.aliases) alias[a.value] = {a.source, a.offset_elems};
    std::unordered_map<const ir::ValueData*, std::string> weight_of;
    for (const auto& w : st.kernels.weights) weight_of[w.value] = w.weight;
    auto root = [&](const ir::ValueData* v) {
      while (alias.count(v)) v = alias.at(v).first;
      return v;
    };
    std::vector<BufferRequest> requests;
    std::vector<const ir::ValueData*> owners;
    std::unordered_map<const ir::ValueData*, size_t> request_of;
    auto touch = [&](const ir::ValueData* v, int64_t at) {
      v = root(v);
      if (weight_of.count(v)) return;
      auto [it, fresh] = request_of.emplace(v, requests.size());
      if (fresh) {
        requests.push_back({(value_bytes(v->type, b.env) + 255) / 256 * 256 + (options.sentinels ? kGuardBytes : 0), at, at});
        owners.push_back(v);
      }
      BufferRequest& r = requests[it->second];
      r.def = std::min(r.def, at);
      r.last_use = std::max(r.last_use, at);
    };
    for (const auto& a : fn.args) touch(a.data(), -1);
    const int64_t n = int64_t(st.kernels.kernels.size());
    for (int64_t i = 0; i < n; ++i)
      for (const auto& a : st.kernels.kernels[size_t(i)].args)
        if (a.kind == KernelArg::Kind::Value) touch(a.value, i);
    for (const auto* v : st.kernels.returns) touch(v, n);
    // No reuse with sentinels (a guard is damaged only by an overflow) or an
    // observer (every result must survive until it is copied out at the end).
    if (options.sentinels || observer)
      for (auto& r : requests) r.def = -1, r.last_use = n;
    BufferPlan plan = plan_buffers(requests, 256);
    ensure(arena, arena_size, plan.arena_bytes + 256);
    for (size_t i = 0; i < owners.size(); ++i) {
      b.ptr[owners[i]] = arena + plan.offsets[i];
      if (!options.sentinels) continue;
      const DevPtr guard = arena + plan.offsets[i] + requests[i].bytes - kGuardBytes;
      dev->memset(guard, kGuardByte, kGuardBytes, stream);
      b.guards.emplace_back(owners[i], guard);
    }
    for (const auto& [v, w] : weight_of) b.ptr[v] = weights.at(w);
    // Aliases resolve lazily (address of the root plus the view offset).
    std::function<DevPtr(const ir::ValueData*)> addr = [&](const ir::ValueData* v) -> DevPtr {
      if (auto it = b.ptr.find(v); it != b.ptr.end()) return it->second;
      if (!alias.count(v)) return 0;  // an alias of a value no kernel touches: unused
      auto [src, off] = alias.at(v);
      return b.ptr[v] = addr(src) + DevPtr(eval(off, b.env, "view offset") * v->type.elem.scalar_bytes());
    };
    for (const auto& [v, a] : alias) addr(v);
    for (const auto& a : fn.args) {
      const HostTensor& t = req.args.at(a->name);
      dev->upload(b.ptr.at(a.data()), t.bytes.data(), t.bytes.size(), stream);
    }
    ensure(slots_buf, slots_cap, req.slots.size() * 4 + 4);
    dev->upload(slots_buf, req.slots.data(), req.slots.size() * 4, stream);
    const int64_t stride = b.env.at("PT_STRIDE");
    std::vector<int32_t> table(req.slots.size() * size_t(stride), 0);
    for (size_t i = 0; i < req.slots.size(); ++i) {
      const auto& t = states.page_table(req.slots[i]);
      std::copy(t.begin(), t.end(), table.begin() + int64_t(i) * stride);
    }
    ensure(pt_buf, pt_cap, table.size() * 4 + 4);
    dev->upload(pt_buf, table.data(), table.size() * 4, stream);
    uint64_t need_scratch = 0;
    for (const auto& k : st.kernels.kernels) need_scratch = std::max<uint64_t>(need_scratch, uint64_t(eval(k.scratch_bytes, b.env, "scratch")));
    ensure(scratch, scratch_size, need_scratch + 256);
    return b;
  }

  // A paged state holds `halves` equal pools (K and V, or one side cache).
  DevPtr state_base(const KernelArg& a) {
    const DevPtr base = state_bufs.at(a.state);
    if (a.kind != KernelArg::Kind::StatePool) return base;
    const StateStore::Layout& buf = states.layout(a.state);
    if (a.half < 0 || a.half >= buf.halves)
      throw Error(fmt::format("cuda: state @{} has {} half(s), a kernel asks for half {}", a.state, buf.halves,
                              a.half));
    return base + DevPtr(a.half) * DevPtr(buf.half_bytes());
  }

  void launch(const Kernel& k, void* fn, const Bound& b, const std::map<std::string, DevPtr>& extra = {}) {
    std::vector<uint64_t> vals;
    vals.reserve(k.args.size());
    for (const auto& a : k.args) {
      switch (a.kind) {
        case KernelArg::Kind::Value: vals.push_back(b.ptr.at(a.value)); break;
        case KernelArg::Kind::Symbol: vals.push_back(uint64_t(eval(ir::Dim::symbol(a.name), b.env, a.name))); break;
        case KernelArg::Kind::StateRows:
        case KernelArg::Kind::StatePool: vals.push_back(state_base(a)); break;
        case KernelArg::Kind::Slots: vals.push_back(slots_buf); break;
        case KernelArg::Kind::PageTable: vals.push_back(pt_buf); break;
        case KernelArg::Kind::Scratch: vals.push_back(scratch); break;
        case KernelArg::Kind::Extra: vals.push_back(extra.at(a.name)); break;
      }
    }
    std::vector<void*> params;
    for (auto& v : vals) params.push_back(&v);
    const int64_t threads = eval(k.threads_x, b.env, k.entry), rows = eval(k.rows_y, b.env, k.entry);
    if (threads <= 0 || rows <= 0) return;
    const int64_t gx = std::min<int64_t>((threads + k.block - 1) / k.block, 0x7fffffff);
    const int64_t gy = std::clamp<int64_t>((rows + k.rows_per_block_y - 1) / k.rows_per_block_y, 1, 65535);
    dev->launch(fn, unsigned(gx), unsigned(gy), unsigned(k.block), params.data(), stream);
  }

  std::string graph_key(const std::string& step, const Bound& b) {
    std::string key = fmt::format("{}:{}:{}:{}:{}", step, arena, scratch, slots_buf, pt_buf);
    std::vector<std::pair<std::string, int64_t>> syms(b.env.begin(), b.env.end());
    std::sort(syms.begin(), syms.end());
    for (const auto& [s, v] : syms) key += fmt::format(":{}={}", s, v);
    return key;
  }

  Bound execute(const StepRequest& req) {
    const ir::Function* fn = module.find_function(req.step);
    if (!fn) throw Error(fmt::format("cuda: the module has no step @{}", req.step));
    for (int32_t s : req.slots) states.check_slot(s);
    const Step& st = steps.at(req.step);
    Bound b = prepare(*fn, st, req);
    auto launch_all = [&] {
      for (size_t i = 0; i < st.kernels.kernels.size(); ++i) launch(st.kernels.kernels[i], st.fns[i], b);
    };
    if (!options.graphs || observer || req.step != "decode") {
      launch_all();
      return b;
    }
    const std::string key = graph_key(req.step, b);
    auto it = graphs.find(key);
    if (it == graphs.end()) {
      dev->begin_capture(stream);
      launch_all();
      it = graphs.emplace(key, dev->end_capture(stream)).first;
    }
    dev->launch_graph(it->second, stream);
    return b;
  }

  // With sentinels the plan has no reuse, so any damaged guard is an overflow.
  void check_guards(const Bound& b) {
    if (!options.sentinels) return;
    std::vector<uint8_t> bytes(kGuardBytes);
    for (const auto& [v, guard] : b.guards) {
      dev->download(bytes.data(), guard, kGuardBytes, stream);
      dev->sync(stream);
      for (uint8_t x : bytes)
        if (x != kGuardByte)
          throw Error(fmt::format("cuda: a kernel wrote past the end of %{} ({}): sentinel damaged", v->name, v->type.str()));
    }
  }

  // Diffs: the results of every computing top-level op, in op order (see
  // executor.h). Buffers were not reused this step, so each still holds the
  // value its op wrote. Synchronous: a diff is not a fast path.
  void notify(const StepRequest& req, const Bound& b) {
    if (!observer) return;
    const ir::Function& fn = *module.find_function(req.step);
    for (const auto& op : fn.ops) {
      // As the CPU interpreter: no weights, aliases or return.
      if (op->info().is_alias() || op->kind == ir::OpKind::Weight) continue;
      std::vector<std::optional<HostTensor>> results;
      for (const auto& r : op->results) {
        auto it = b.ptr.find(r.data());
        if (it == b.ptr.end() || it->second == 0) {
          results.emplace_back();
          continue;
        }
        HostTensor t;
        t.elem = r.type().elem;
        for (const auto& d : r.type().shape) t.shape.push_back(eval(d, b.env, "an observed result"));
        t.bytes.resize(value_bytes(r.type(), b.env));
        if (!t.bytes.empty()) dev->download(t.bytes.data(), it->second, t.bytes.size(), stream);
        results.push_back(std::move(t));
      }
      dev->sync(stream);
      observer(*op, results);
    }
  }

  std::vector<HostTensor> copy_returns(const StepRequest& req, const Bound& b) {
    check_guards(b);
    const Step& st = steps.at(req.step);
    std::vector<HostTensor> out;
    for (const auto* v : st.kernels.returns) {
      HostTensor t;
      t.elem = v->type.elem;
      for (const auto& d : v->type.shape) t.shape.push_back(eval(d, b.env, "a result"));
      t.bytes.resize(value_bytes(v->type, b.env));
      dev->download(t.bytes.data(), b.ptr.at(v), t.bytes.size(), stream);
      out.push_back(std::move(t));
    }
    dev->sync(stream);
    return out;
  }

  std::vector<int32_t> collect() {
    if (!pending) return {};
    dev->wait(tokens_event);
    std::vector<int32_t> out(tokens_host, tokens_host + pending);
    pending = 0;
    return out;
  }

#ifdef VTC_TEST_HOOKS
  // The seed's failure (seed-pr-2550), for tests/cuda/test_cuda_ops.cpp:
  // VTC_TEST_CUDA_POISON_HOST_IDS=1 overwrites the host copy of the last
  // sampled ids (the pinned buffer) with id 0 once collected, as that runner
  // left its host copy stale; VTC_TEST_CUDA_FEED_HOST_IDS=1 is the broken
  // executor: it uploads that host copy into @last_ids before the decode.
  void seed_bug_hooks(const StepRequest& req) {
    const bool poison = std::getenv("VTC_TEST_CUDA_POISON_HOST_IDS") != nullptr;
    const bool feed = std::getenv("VTC_TEST_CUDA_FEED_HOST_IDS") != nullptr;
    if (poison) std::fill(tokens_host, tokens_host + kMaxSampledRows, 0);
    if (!feed) return;
    const StateStore::Layout& ids = states.layout("last_ids");
    for (size_t i = 0; i < req.slots.size(); ++i) dev->upload(slot_row(ids, req.slots[i]), tokens_host + i, 4, stream);
  }
#endif

  // The step's last result is the sampled ids (the @decode contract): only
  // they are copied out, into pinned memory, without waiting for them.
  std::vector<int32_t> run_sampled(const StepRequest& req) {
    if (req.slots.empty() || req.slots.size() > kMaxSampledRows)
      throw Error(fmt::format("cuda: a sampled step takes 1..{} sequences", kMaxSampledRows));
    std::vector<int32_t> previous = collect();
#ifdef VTC_TEST_HOOKS
    seed_bug_hooks(req);
#endif
    Bound b = execute(req);
    const ir::ValueData* ids = steps.at(req.step).kernels.returns.back();
    if (!(ids->type.elem == ir::ElemType::I32) || ids->type.rank() != 1)
      throw Error(fmt::format("cuda: @{} does not return sampled ids last (got {})", req.step, ids->type.str()));
    dev->download(tokens_host, b.ptr.at(ids), req.slots.size() * 4, stream);
    dev->record(tokens_event, stream);
    pending = req.slots.size();
    return previous;
  }
};

Executor::Executor(const BackendInputs& inputs, const ExecutorOptions& o) : impl_(std::make_unique<Impl>(inputs, o)) {}
Executor::~Executor() = default;
const Device& Executor::device() const { return *impl_->dev; }
std::string Executor::describe() const {
  if (impl_->dev->simulated())
    return fmt::format("CUDA executor on CUDA (simulated device): kernels compiled by the host C++ compiler and run on "
                       "the CPU with sm_{} semantics (VTC_CUDA_DEVICE=sim), graphs {}",
                       impl_->dev->arch(), impl_->options.graphs ? "on" : "off");
  return fmt::format("CUDA executor on {} (sm_{}), graphs {}", impl_->dev->name(), impl_->dev->arch(),
                     impl_->options.graphs ? "on" : "off");
}

std::vector<HostTensor> Executor::run(const StepRequest& request) {
  Bound b = impl_->execute(request);
  impl_->notify(request, b);
  return impl_->copy_returns(request, b);
}
std::vector<int32_t> Executor::run_sampled(const StepRequest& request) { return impl_->run_sampled(request); }
std::vector<int32_t> Executor::wait_sampled() { return impl_->collect(); }

std::vector<uint8_t> Executor::read_slot_row(const StateStore::Layout& state, int32_t slot) {
  std::vector<uint8_t> row(state.row_bytes());
  impl_->dev->download(row.data(), impl_->slot_row(state, slot), row.size(), impl_->stream);
  impl_->dev->sync(impl_->stream);
  return row;
}
void Executor::write_slot_row(const StateStore::Layout& state, int32_t slot, std::span<const uint8_t> bytes) {
  if (bytes.size() != state.row_bytes())
    throw Error(fmt::format("state @{}: a slot row holds {} bytes, got {}", state.decl->name, state.row_bytes(), bytes.size()));
  impl_->dev->upload(impl_->slot_row(state, slot), bytes.data(), bytes.size(), impl_->stream);
  impl_->dev->sync(impl_->stream);  // `bytes` may not outlive the call
}
std::vector<uint8_t> Executor::read_page(const StateStore::Layout& state, int half, int32_t page) {
  if (!state.paged() || half < 0 || half >= state.halves || page < 0 || page >= impl_->states.n_pages())
    throw Error(fmt::format("cuda: state @{} has no page {} in half {}", state.decl->name, page, half));
  const uint64_t bytes = state.page_bytes(impl_->states.page_size());
  std::vector<uint8_t> out(bytes);
  impl_->dev->download(out.data(), impl_->state_bufs.at(state.decl->name) + DevPtr(half) * state.half_bytes() + DevPtr(page) * bytes,
                       bytes, impl_->stream);
  impl_->dev->sync(impl_->stream);
  return out;
}
void Executor::set_observer(OpObserver observer) { impl_->observer = std::move(observer); }

std::string cuda_unavailable_reason() {
  std::string why;
  if (!Device::open(0, &why)) return why;
  if (!Nvrtc::load(&why)) return why;
  return "";
}

}  // namespace vtc::cuda
