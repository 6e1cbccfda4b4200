// CUDA executor (see executor.h for the algorithm).
#include "runtime/cuda/executor.h"

#include <fmt/format.h>
#include <llvm/ADT/DenseMap.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "codegen/cuda/device_drafts.h"
#include "codegen/cuda/kernel.h"
#include "codegen/cuda/nvrtc.h"
#include "passes/buffer_plan.h"
#include "runtime/cuda/driver.h"
#include "ir/op_attrs.h"
#include "ir/step_interface.h"
#include "runtime/step_symbols.h"
#include "support/error.h"
#include "support/mutation.h"

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

uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }
constexpr uint64_t kWeightTailBytes = 32;

uint64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// A decode bucket: the smallest power of two holding `rows`, at most `cap`.
int64_t bucket_rows(int64_t rows, int64_t cap) {
  int64_t b = 1;
  while (b < rows) b *= 2;
  return std::max(rows, std::min(b, cap));
}

constexpr uint64_t kGuardBytes = 256;
constexpr uint8_t kGuardByte = 0xA5;
constexpr size_t kMaxSampledRows = 4096;
// @prefill buckets run as CUDA graphs (each owning its arena) per step; past
// it the other few-row buckets run eagerly.
constexpr size_t kMaxPrefillGraphs = 32;
constexpr size_t kMaxEagerBuckets = 64;  // per step; past it the cache starts over

// One launch, its parameter words resolved once (params points into words).
struct Launch {
  void* fn = nullptr;
  unsigned gx = 0, gy = 0, block = 0;
  std::vector<uint64_t> words;
  std::vector<void*> params;
};

// A (step, bucket) made ready to replay (executor.h).
struct Prepared {
  int64_t rows = 0;  // S of the bucket (real rows plus padding)
  SymbolEnv env;     // the bucket's bindings, PT_STRIDE included
  std::vector<size_t> kernels;  // the step's kernels this bucket launches (RowsGuard), in order
  bool owns_arena = false;
  DevPtr arena = 0, scratch = 0, slots = 0, table = 0;
  DevPtr counters = 0;  // zeroed once; kernels leave them at zero (KernelArg::Kind::Counters)
  llvm::DenseMap<const ir::ValueData*, DevPtr> ptr;              // every value's address
  std::vector<std::pair<const ir::ValueData*, DevPtr>> guards;  // sentinel regions (tests)
  std::vector<Launch> launches;
  std::vector<DevPtr> arg_dst;          // parallel to the function's arguments
  std::vector<uint64_t> arg_bytes;      // at the bucket
  std::vector<uint64_t> stage_offset;   // args..., slots, table: offsets in the staging buffer
  uint64_t stage_bytes = 0;
  void* graph = nullptr;

  // The address of a value a kernel, an argument or a return uses.
  DevPtr at(const ir::ValueData* v) const {
    auto it = ptr.find(v);
    if (it == ptr.end()) throw Error(fmt::format("cuda: value %{} has no address in this step", v->name));
    return it->second;
  }
};

// Where a step symbol's value comes from: the slot count (arg -1) or an
// argument's dim.
struct SymbolSource {
  std::string name;
  int arg = -1;
  size_t dim = 0;
};

struct Step {
  const ir::Function* fn = nullptr;
  StepKernels kernels;
  std::vector<void*> fns;  // parallel to kernels.kernels
  std::vector<SymbolSource> symbols;  // sorted by name; the bucket key's order
  size_t s_index = 0;                 // of "S" in symbols
  std::optional<size_t> t_index;      // of "T" in symbols, if the step has it
  // Per argument and dim: a constant (>= 0) or -1 - the symbol's index.
  std::vector<std::vector<int64_t>> arg_dims;
  bool simple_args = true;  // every argument dim is a constant or one symbol
  bool paddable = false;    // @decode over S only, every argument [S, ...]
  std::map<std::vector<int64_t>, std::unique_ptr<Prepared>> prepared[2];  // [observing]
  DevPtr shared = 0;  // the eager buckets' arena and scratch (they run one at a time)
  uint64_t shared_cap = 0;
};

// A pinned staging buffer and the ids copied out, double-buffered.
struct Stage {
  uint8_t* host = nullptr;
  uint64_t cap = 0;
  int32_t* ids = nullptr;
  void* done = nullptr;  // recorded after the step that used this stage
  bool used = false;
  uint64_t seq = 0;  // that step's number
};

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
  int64_t pt_stride = 1;  // PT_STRIDE: the most pages a slot can hold
  Stage stage[2];
  int cur = 0;               // the stage the next step uses
  int pending_stage = -1;    // the stage holding uncollected sampled ids
  size_t pending = 0;        // their count
  std::vector<int32_t> held;  // ids collected early (their stage was needed)
  uint64_t last_seq = 0;  // steps queued so far
  uint64_t wait_ns = 0;   // this thread's CPU time inside waits (not the executor's own)
  ExecutorStats stats;
  OpObserver observer;  // diffs only: set_observer()

  Impl(const BackendInputs& in, const ExecutorOptions& o)
      : module(in.module), file(in.file), states(in.states), options(o) {
    std::string why;
    dev = Device::open(o.device, &why);
    if (!dev) throw Error("cuda target unavailable: " + why);
    nvrtc = Nvrtc::load(&why);
    if (!nvrtc) throw Error("cuda target unavailable: " + why);
    stream = dev->create_stream();
    pt_stride = std::max<int64_t>(1, states.pages_for(states.config().n_ctx));
    load_steps();
    upload_weights();
    for (const auto& l : states.layouts()) {
      state_bufs[l.decl->name] = dev->alloc(device_bytes(l));  // zeroed
      if (!l.paged() && StateStore::empty_byte(*l.decl) != 0)
        dev->memset(state_bufs[l.decl->name], StateStore::empty_byte(*l.decl), device_bytes(l), stream);
    }
    states.attach(this);
    for (Stage& s : stage) {
      s.ids = static_cast<int32_t*>(dev->alloc_host(kMaxSampledRows * 4));
      s.done = dev->create_event();
    }
    sync();
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
    for (auto& [name, st] : steps) {
      for (auto& cache : st.prepared)
        for (auto& [key, p] : cache) release(*p);
      dev->free(st.shared);
    }
    for (auto& [n, p] : weights) dev->free(p);
    for (auto& [n, p] : state_bufs) dev->free(p);
    for (Stage& s : stage) {
      dev->free_host(s.host);
      dev->free_host(s.ids);
      dev->destroy_event(s.done);
    }
    for (void* m : modules) dev->unload_module(m);
    dev->destroy_stream(stream);
  }

  // --- waits, all counted -------------------------------------------------

  // Waits run on this thread's CPU clock (the simulated device may work
  // while a host thread waits): that time is the device's, not host_ns'.
  void sync() {
    ++stats.host_waits;
    const uint64_t t0 = thread_cpu_ns();
    dev->sync(stream);
    wait_ns += thread_cpu_ns() - t0;
  }
  // Waits for `event`; `pipelined`: newer work is queued behind it.
  void wait(void* event, bool pipelined) {
    if (dev->event_done(event)) return;
    ++(pipelined ? stats.collect_waits : stats.host_waits);
    const uint64_t t0 = thread_cpu_ns();
    dev->wait(event);
    wait_ns += thread_cpu_ns() - t0;
  }

  // --- load ---------------------------------------------------------------

  // The compile pipeline's kernels, or (a module built by hand) generated
  // here and counted; then compiled and loaded.
  void load_steps() {
    for (const auto& fn : module.functions) {
      Step st;
      st.fn = fn.get();
      st.kernels = take_kernels(*fn);
      describe_symbols(st);
      steps.emplace(fn->name, std::move(st));
    }
    compile_all();
    for (auto& [name, st] : steps)
      for (const auto& k : st.kernels.kernels) st.fns.push_back(load(k));
  }

  StepKernels take_kernels(const ir::Function& fn) {
    if (options.kernels) {
      for (const auto& k : *options.kernels)
        if (k.function == fn.name) return k;
      throw Error(fmt::format("cuda: the compiled kernels have no step @{}", fn.name));
    }
    StepKernels st = generate_step(module, fn);
    stats.kernels_generated_at_load += st.unique().size();
    if (options.stored_kernels) {
      auto stored = options.stored_kernels->find(fn.name);
      check_stored_kernels(st, stored == options.stored_kernels->end() ? std::vector<KernelSource>{} : stored->second);
    }
    return st;
  }

  // The step's symbols, where each comes from, and whether @decode can pad.
  static void describe_symbols(Step& st) {
    std::map<std::string, SymbolSource> found{{"S", {"S", -1, 0}}};
    for (size_t a = 0; a < st.fn->args.size(); ++a) {
      const ir::Shape& shape = st.fn->args[a].type().shape;
      for (size_t d = 0; d < shape.size(); ++d)
        if (auto sym = shape[d].as_symbol()) found.try_emplace(*sym, SymbolSource{*sym, int(a), d});
    }
    for (auto& [name, src] : found) st.symbols.push_back(src);
    for (size_t i = 0; i < st.symbols.size(); ++i) {
      if (st.symbols[i].name == "S") st.s_index = i;
      if (st.symbols[i].name == "T") st.t_index = i;
    }
    st.paddable = st.fn->name == ir::step_name(ir::StepKind::Decode) && st.symbols.size() == 1;
    for (const auto& arg : st.fn->args) {
      std::vector<int64_t> dims;
      for (const auto& d : arg.type().shape) {
        if (auto c = d.constant()) {
          dims.push_back(*c);
        } else if (auto sym = d.as_symbol()) {
          dims.push_back(-1 - int64_t(std::find_if(st.symbols.begin(), st.symbols.end(),
                                                   [&](const SymbolSource& s) { return s.name == *sym; }) -
                                      st.symbols.begin()));
        } else {
          st.simple_args = false;
          dims.push_back(0);
        }
      }
      st.paddable = st.paddable && !dims.empty() && dims[0] == -1 - int64_t(st.s_index);
      st.arg_dims.push_back(std::move(dims));
    }
    st.paddable = st.paddable && st.simple_args;
  }

  // Compiles every distinct kernel of every step, a few at a time: NVRTC
  // (and the simulated device's host compiler) takes 0.1-0.5 s a kernel and
  // a hybrid model has a few hundred. Compiled images wait in `compiled`.
  std::map<std::string, std::string> compiled;
  void compile_all() {
    std::vector<const Kernel*> todo;
    std::set<std::string> seen;
    for (const auto& [name, st] : steps)
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

  // compile_all() compiled every entry: each image is loaded once.
  void* load(const Kernel& k) {
    if (auto it = fn_by_entry.find(k.entry); it != fn_by_entry.end()) return it->second;
    auto image = compiled.find(k.entry);
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
      // 32 readable bytes past the tensor: the prefill GEMM's decoders read
      // a chunk's bytes as the aligned 16-byte words that cover them
      // (codegen/cuda/emit_gemm.cpp), one word past the last chunk at most.
      DevPtr p = dev->alloc(t->n_bytes + kWeightTailBytes);
      dev->upload(p, t->data, t->n_bytes, stream);
      weights[w.name] = p;
    }
  }

  // --- states, with one padding slot and one padding page -----------------

  int32_t pad_slot() const { return states.config().n_slots; }
  int32_t pad_page() const { return int32_t(states.n_pages()); }
  // One pool (half) of a paged state on the device: the store's pages and
  // the padding page.
  uint64_t pool_bytes(const StateStore::Layout& l) const {
    return uint64_t(states.n_pages() + 1) * l.page_bytes(states.page_size());
  }
  uint64_t device_bytes(const StateStore::Layout& l) const {
    return l.paged() ? pool_bytes(l) * uint64_t(l.halves) : l.bytes + l.row_bytes();
  }
  DevPtr page_addr(const StateStore::Layout& l, int half, int32_t page) const {
    return state_bufs.at(l.decl->name) + DevPtr(half) * pool_bytes(l) + DevPtr(page) * l.page_bytes(states.page_size());
  }

  // StateStorage: the store handed out `page` (zero it in every paged
  // state) or emptied `slot`. Ordered on the stream before the next step.
  void zero_page(int32_t page) override {
    for (const auto& l : states.layouts())
      if (l.paged())
        for (int half = 0; half < l.halves; ++half)
          dev->memset(page_addr(l, half, page), 0, l.page_bytes(states.page_size()), stream);
  }
  void clear_slot(int32_t slot) override {
    // Ordered after any copy of sampled ids still in flight on the stream.
    for (const auto& l : states.layouts())
      if (!l.paged())
        dev->memset(slot_row(l, slot), StateStore::empty_byte(*l.decl), l.row_bytes(), stream);
  }
  // A checkpoint: the slot's plain rows, one after the other in layout order.
  struct DeviceCheckpoint final : SlotCheckpoint {
    Impl* owner = nullptr;
    DevPtr bytes = 0;
    ~DeviceCheckpoint() override {
      try {
        owner->dev->sync(owner->stream);  // a restore from it may still be queued
      } catch (const Error&) {
        // A failed kernel left the context's error sticky: nothing runs any more.
      }
      owner->dev->free(bytes);
    }
  };
  std::unique_ptr<SlotCheckpoint> save_slot(int32_t slot, std::unique_ptr<SlotCheckpoint> reuse) override {
    std::unique_ptr<DeviceCheckpoint> c;
    if (auto* mine = dynamic_cast<DeviceCheckpoint*>(reuse.get()); mine && mine->owner == this) {
      // Overwritten in stream order, after any restore still reading it.
      c.reset(mine);
      reuse.release();
    } else {
      c = std::make_unique<DeviceCheckpoint>();
      c->owner = this;
      c->bytes = dev->alloc(states.slot_state_bytes());
      ++stats.checkpoints_allocated;
    }
    copy_plain_rows(c->bytes, slot);
    return c;
  }
  // The slot's plain rows into `to`, one after the other in layout order
  // (a checkpoint's layout), on the stream.
  void copy_plain_rows(DevPtr to, int32_t slot) {
    for (const auto& l : states.layouts())
      if (!l.paged()) dev->copy(to, slot_row(l, slot), l.row_bytes(), stream), to += l.row_bytes();
  }
  void restore_slot(int32_t slot, const SlotCheckpoint& checkpoint) override {
    const auto* c = dynamic_cast<const DeviceCheckpoint*>(&checkpoint);
    if (!c || c->owner != this) throw Error("cuda: a checkpoint taken by another storage cannot be restored here");
    DevPtr from = c->bytes;
    for (const auto& l : states.layouts())
      if (!l.paged()) dev->copy(slot_row(l, slot), from, l.row_bytes(), stream), from += l.row_bytes();
  }
  DevPtr slot_row(const StateStore::Layout& l, int32_t slot) {
    states.check_slot(slot);
    if (l.paged()) throw Error(fmt::format("cuda: state @{} is paged; it has no slot rows", l.decl->name));
    return state_bufs.at(l.decl->name) + DevPtr(slot) * l.row_bytes();
  }

  // A paged state holds `halves` equal pools (K and V, or one side cache).
  DevPtr state_base(const KernelArg& a) {
    if (a.kind != KernelArg::Kind::StatePool) return state_bufs.at(a.state);
    const StateStore::Layout& buf = states.layout(a.state);
    if (a.half < 0 || a.half >= buf.halves)
      throw Error(fmt::format("cuda: state @{} has {} half(s), a kernel asks for half {}", a.state, buf.halves,
                              a.half));
    return page_addr(buf, a.half, 0);
  }

  // --- preparing a bucket (once) ------------------------------------------

  // The buffers the kernels touch: each root value (aliases resolved) with
  // its lifetime in launch indices, arguments from -1, returns to the end.
  struct Roots {
    llvm::DenseMap<const ir::ValueData*, std::pair<const ir::ValueData*, ir::Dim>> alias;
    llvm::DenseMap<const ir::ValueData*, std::string> weight_of;
    std::vector<const ir::ValueData*> owners;
    std::vector<std::pair<int64_t, int64_t>> life;
  };
  // Launch indices count the bucket's kernels only (Prepared::kernels).
  static Roots find_roots(const Step& st, const Prepared& p) {
    Roots r;
    for (const auto& a : st.kernels.aliases) r.alias[a.value] = {a.source, a.offset_elems};
    for (const auto& w : st.kernels.weights) r.weight_of[w.value] = w.weight;
    llvm::DenseMap<const ir::ValueData*, size_t> index;
    auto touch = [&](const ir::ValueData* v, int64_t at) {
      for (auto it = r.alias.find(v); it != r.alias.end(); it = r.alias.find(v)) v = it->second.first;
      if (r.weight_of.count(v)) return;
      auto [it, fresh] = index.try_emplace(v, r.owners.size());
      if (fresh) r.owners.push_back(v), r.life.push_back({at, at});
      auto& [def, last] = r.life[it->second];
      def = std::min(def, at), last = std::max(last, at);
    };
    for (const auto& a : st.fn->args) touch(a.data(), -1);
    const int64_t n = int64_t(p.kernels.size());
    for (int64_t i = 0; i < n; ++i)
      for (const auto& a : st.kernels.kernels[p.kernels[size_t(i)]].args)
        if (a.kind == KernelArg::Kind::Value) touch(a.value, i);
    for (const auto* v : st.kernels.returns) touch(v, n);
    return r;
  }

  // The arena plan of a bucket; no reuse with sentinels (a guard is
  // damaged only by an overflow) or an observer (every result must survive
  // until it is copied out at the end).
  BufferPlan plan_arena(const Roots& r, Prepared& p, bool observe) {
    std::vector<BufferRequest> requests;
    const int64_t n = int64_t(p.kernels.size());
    for (size_t i = 0; i < r.owners.size(); ++i) {
      const uint64_t bytes = align_up(value_bytes(r.owners[i]->type, p.env), 256) + (options.sentinels ? kGuardBytes : 0);
      if (options.sentinels || observe) requests.push_back({bytes, -1, n});
      else requests.push_back({bytes, r.life[i].first, r.life[i].second});
    }
    ++stats.plans_built;
    BufferPlan plan = plan_buffers(requests, 256);
    for (size_t i = 0; i < r.owners.size() && options.sentinels; ++i)
      p.guards.emplace_back(r.owners[i], plan.offsets[i] + requests[i].bytes - kGuardBytes);  // offsets until placed
    return plan;
  }

  // Arena and scratch: a graph's bucket owns them (the graph holds their
  // addresses); eager buckets share their step's, grown when one needs more.
  void place_arena(Step& st, Prepared& p, uint64_t arena_bytes, uint64_t scratch_bytes, bool graph) {
    const uint64_t need = align_up(arena_bytes + 256, 256) + scratch_bytes + 256;
    if (graph) {
      p.owns_arena = true;
      p.arena = dev->alloc(need);
    } else {
      if (need > st.shared_cap) {
        drop_eager(st, &p);  // their words hold the old address
        sync();
        dev->free(st.shared);
        st.shared_cap = std::max(need, st.shared_cap * 2);
        st.shared = dev->alloc(st.shared_cap);
      }
      p.arena = st.shared;
    }
    p.scratch = p.arena + align_up(arena_bytes + 256, 256);
  }

  // Every value's address: roots in the arena, weights, aliases at their
  // root's address plus the view offset.
  void bind_values(const Step& st, const Roots& r, const BufferPlan& plan, Prepared& p) {
    for (size_t i = 0; i < r.owners.size(); ++i) p.ptr[r.owners[i]] = p.arena + plan.offsets[i];
    for (auto& [v, guard] : p.guards) guard += p.arena;
    for (const auto& [v, w] : r.weight_of) p.ptr[v] = weights.at(w);
    std::function<DevPtr(const ir::ValueData*)> addr = [&](const ir::ValueData* v) -> DevPtr {
      if (auto it = p.ptr.find(v); it != p.ptr.end()) return it->second;
      auto alias = r.alias.find(v);
      if (alias == r.alias.end()) return 0;  // an alias of a value no kernel touches: unused
      const auto& [src, off] = alias->second;
      // Computed before p.ptr[v] inserts (DenseMap moves its entries as it grows).
      const DevPtr address = addr(src) + DevPtr(eval(off, p.env, "view offset") * v->type.elem.scalar_bytes());
      p.ptr[v] = address;
      return address;
    };
    for (const auto& a : st.kernels.aliases) addr(a.value);
  }

  // Each launch's parameter words and grid, at the bucket's bindings.
  void resolve_launches(const Step& st, Prepared& p) {
    for (size_t i : p.kernels) {
      const Kernel& k = st.kernels.kernels[i];
      const int64_t threads = eval(k.threads_x, p.env, k.entry), rows = eval(k.rows_y, p.env, k.entry);
      if (threads <= 0 || rows <= 0) continue;
      Launch l;
      l.fn = st.fns[i];
      l.gx = unsigned(std::min<int64_t>((threads + k.block - 1) / k.block, 0x7fffffff));
      l.gy = unsigned(std::clamp<int64_t>((rows + k.rows_per_block_y - 1) / k.rows_per_block_y, 1, 65535));
      l.block = unsigned(k.block);
      for (const auto& a : k.args) l.words.push_back(word(k, a, p));
      p.launches.push_back(std::move(l));
    }
    for (Launch& l : p.launches)
      for (uint64_t& w : l.words) l.params.push_back(&w);
  }

  uint64_t word(const Kernel& k, const KernelArg& a, const Prepared& p) {
    switch (a.kind) {
      case KernelArg::Kind::Value: return p.at(a.value);
      case KernelArg::Kind::Symbol: return uint64_t(eval(ir::Dim::symbol(a.name), p.env, a.name));
      case KernelArg::Kind::StateRows:
      case KernelArg::Kind::StatePool: return state_base(a);
      case KernelArg::Kind::Slots: return p.slots;
      case KernelArg::Kind::PageTable: return p.table;
      case KernelArg::Kind::Scratch: return p.scratch;
      case KernelArg::Kind::Counters: return p.counters;
      case KernelArg::Kind::Extra: break;
    }
    throw Error(fmt::format("cuda: kernel {} ({}) takes a pointer '{}' the executor does not supply", k.entry, k.what, a.name));
  }

  // Staging layout (arguments, slot list, page table) and the uploads' targets.
  void lay_out_staging(const Step& st, Prepared& p) {
    uint64_t off = 0;
    for (const auto& a : st.fn->args) {
      p.arg_dst.push_back(p.at(a.data()));
      p.arg_bytes.push_back(value_bytes(a.type(), p.env));
      p.stage_offset.push_back(off);
      off += align_up(p.arg_bytes.back(), 64);
    }
    p.stage_offset.push_back(off);
    off += align_up(uint64_t(p.rows) * 4, 64);
    p.stage_offset.push_back(off);
    p.stage_bytes = off + uint64_t(p.rows * pt_stride) * 4;
  }

  // `key`: the symbol values, then whether the bucket runs the decode form
  // past kDecodeFormRows rows (find_bucket).
  std::unique_ptr<Prepared> prepare(Step& st, const std::vector<int64_t>& key, bool observe, bool graph) {
    ++stats.buckets_prepared;
    auto p = std::make_unique<Prepared>();
    for (size_t i = 0; i < st.symbols.size(); ++i) p->env[st.symbols[i].name] = key[i];
    p->env["PT_STRIDE"] = pt_stride;
    p->rows = key[st.s_index];
    for (size_t i = 0; i < st.kernels.kernels.size(); ++i)
      if (launches_at(st.kernels.kernels[i], p->env, key.back() != 0)) p->kernels.push_back(i);
    const Roots r = find_roots(st, *p);
    const BufferPlan plan = plan_arena(r, *p, observe);
    uint64_t scratch = 0, counter_ints = 0;
    for (size_t i : p->kernels) {
      const Kernel& k = st.kernels.kernels[i];
      scratch = std::max<uint64_t>(scratch, uint64_t(eval(k.scratch_bytes, p->env, "scratch")));
      counter_ints = std::max<uint64_t>(counter_ints, uint64_t(eval(k.counter_ints, p->env, "counters")));
    }
    place_arena(st, *p, plan.arena_bytes, scratch, graph);
    if (counter_ints) {
      p->counters = dev->alloc(counter_ints * 4);
      dev->memset(p->counters, 0, counter_ints * 4, stream);
    }
    p->slots = dev->alloc(uint64_t(p->rows) * 4 + 4);
    p->table = dev->alloc(uint64_t(p->rows * pt_stride) * 4 + 4);
    bind_values(st, r, plan, *p);
    resolve_launches(st, *p);
    lay_out_staging(st, *p);
    return p;
  }

  void release(Prepared& p) {
    if (p.graph) dev->destroy_graph(p.graph);
    if (p.owns_arena) dev->free(p.arena);
    if (p.counters) dev->free(p.counters);
    dev->free(p.slots);
    dev->free(p.table);
  }

  // Drops the eager buckets of `st` (but `keep`), after the stream is idle.
  void drop_eager(Step& st, const Prepared* keep) {
    bool any = false;
    for (auto& cache : st.prepared)
      for (auto it = cache.begin(); it != cache.end();) {
        if (it->second->owns_arena || it->second.get() == keep) {
          ++it;
          continue;
        }
        if (!any) sync(), any = true;
        release(*it->second);
        it = cache.erase(it);
      }
  }

  void set_observer(OpObserver o) {
    observer = std::move(o);
    if (observer) return;
    bool any = false;  // the observed buckets (no reuse) are not needed again
    for (auto& [name, st] : steps) {
      for (auto& [key, p] : st.prepared[1]) {
        if (!any) sync(), any = true;
        release(*p);
      }
      st.prepared[1].clear();
    }
  }

  // --- running a step -----------------------------------------------------

  struct Call {
    Step* step = nullptr;
    Prepared* p = nullptr;
    int64_t rows = 0;  // real rows (S of the request)
    int stage = 0;
  };

  // The request's symbol values in the step's order (S: the slot count).
  static std::vector<int64_t> symbol_values(const Step& st, const StepRequest& req) {
    std::vector<int64_t> key;
    key.reserve(st.symbols.size());
    for (const auto& s : st.symbols) {
      if (s.arg < 0) {
        key.push_back(int64_t(req.slots.size()));
        continue;
      }
      auto it = req.args.find(st.fn->args[size_t(s.arg)]->name);
      key.push_back(it != req.args.end() && it->second.shape.size() > s.dim ? it->second.shape[s.dim] : -1);
    }
    return key;
  }

  // Whether every argument is there with its element type and the shape
  // the symbol values give (else bind_step_symbols says what is wrong).
  static bool args_match(const Step& st, const StepRequest& req, const std::vector<int64_t>& key) {
    if (!st.simple_args || req.args.size() != st.fn->args.size()) return false;
    for (size_t a = 0; a < st.fn->args.size(); ++a) {
      auto it = req.args.find(st.fn->args[a]->name);
      if (it == req.args.end() || !(it->second.elem == st.fn->args[a].type().elem)) return false;
      const std::vector<int64_t>& dims = st.arg_dims[a];
      if (it->second.shape.size() != dims.size()) return false;
      for (size_t d = 0; d < dims.size(); ++d)
        if (it->second.shape[d] != (dims[d] >= 0 ? dims[d] : key[size_t(-1 - dims[d])])) return false;
    }
    return true;
  }

  Prepared& find_bucket(Step& st, const StepRequest& req, bool& graph) {
    std::vector<int64_t> key = symbol_values(st, req);
    if (!args_match(st, req, key)) bind_step_symbols(*st.fn, req, Target::Cuda);  // throws naming the argument
    // A verify step of more rows than the decode form's usual bucket still
    // needs decode's bits: its own bucket runs the decode form (launches_in).
    key.push_back(req.rows_as_decode && st.t_index && key[*st.t_index] > kDecodeFormRows);
    const bool observe = bool(observer);
    graph = options.graphs && !observe && st.fn->name == ir::step_name(ir::StepKind::Decode);
    if (graph && st.paddable && !options.sentinels)
      key[st.s_index] = bucket_rows(key[st.s_index], states.config().n_slots);
    auto& cache = st.prepared[observe ? 1 : 0];
    if (auto it = cache.find(key); it != cache.end()) {
      graph = it->second->owns_arena;  // a graph's bucket owns its arena
      return *it->second;
    }
    graph = graph || (options.graphs && !observe && few_rows_prefill(st, key) && graph_buckets(st) < kMaxPrefillGraphs);
    if (!graph && cache.size() >= kMaxEagerBuckets) drop_eager(st, nullptr);
    return *cache.emplace(key, prepare(st, key, observe, graph)).first->second;
  }

  // A @prefill bucket of at most kDecodeFormRows rows: a verify step, or a
  // serving step of a few decode rows, runs decode's kernels (kernel.h,
  // RowsGuard) and is as launch-bound as @decode, so it runs as a graph too.
  static bool few_rows_prefill(const Step& st, const std::vector<int64_t>& key) {
    return st.fn->name == ir::step_name(ir::StepKind::Prefill) && st.t_index && key[*st.t_index] <= kDecodeFormRows;
  }
  static size_t graph_buckets(const Step& st) {
    return size_t(std::count_if(st.prepared[0].begin(), st.prepared[0].end(),
                                [](const auto& b) { return b.second->owns_arena; }));
  }

  // The stage this step uses, free for writing and at least `bytes` large.
  Stage& acquire(uint64_t bytes) {
    if (pending && pending_stage == cur) held = collect();  // its ids are still to be read
    Stage& s = stage[cur];
    if (s.used) wait(s.done, s.seq < last_seq);  // the step before last: done in steady decode
    if (s.cap < bytes) {
      dev->free_host(s.host);
      s.cap = std::max<uint64_t>(align_up(bytes, 4096), s.cap * 2);
      s.host = static_cast<uint8_t*>(dev->alloc_host(s.cap));
    }
    return s;
  }

  // Arguments (padding rows: zeros, %seq their own row; the decode
  // contract, ir/step_interface.h), slots (padding: the
  // padding slot) and page tables (padding: the padding page), staged and
  // uploaded.
  void stage_inputs(const Step& st, const Prepared& p, const StepRequest& req, Stage& s) {
    const int64_t real = int64_t(req.slots.size());
    for (size_t a = 0; a < st.fn->args.size(); ++a) {
      const HostTensor& t = req.args.find(st.fn->args[a]->name)->second;
      uint8_t* dst = s.host + p.stage_offset[a];
      std::memcpy(dst, t.bytes.data(), t.bytes.size());
      std::memset(dst + t.bytes.size(), 0, p.arg_bytes[a] - t.bytes.size());
      if (p.rows > real && st.fn->args[a]->name == ir::step::kSeq)
        for (int64_t r = real; r < p.rows; ++r) reinterpret_cast<int32_t*>(dst)[r] = int32_t(r);
    }
    auto* slots = reinterpret_cast<int32_t*>(s.host + p.stage_offset[st.fn->args.size()]);
    auto* table = reinterpret_cast<int32_t*>(s.host + p.stage_offset[st.fn->args.size() + 1]);
    std::copy(req.slots.begin(), req.slots.end(), slots);
    std::fill(slots + real, slots + p.rows, pad_slot());
    std::fill(table, table + real * pt_stride, 0);
    std::fill(table + real * pt_stride, table + p.rows * pt_stride, pad_page());
    for (int64_t i = 0; i < real; ++i) {
      const auto& t = states.page_table(req.slots[size_t(i)]);
      if (int64_t(t.size()) > pt_stride)
        throw Error(fmt::format("cuda: slot {} has {} pages, more than a slot can hold ({})", req.slots[size_t(i)],
                                t.size(), pt_stride));
      std::copy(t.begin(), t.end(), table + i * pt_stride);
    }
    for (size_t a = 0; a < st.fn->args.size(); ++a)
      dev->upload(p.arg_dst[a], s.host + p.stage_offset[a], p.arg_bytes[a], stream);
    dev->upload(p.slots, slots, uint64_t(p.rows) * 4, stream);
    dev->upload(p.table, table, uint64_t(p.rows * pt_stride) * 4, stream);
  }

  void launch_all(const Prepared& p) {
    for (const Launch& l : p.launches) dev->launch(l.fn, l.gx, l.gy, l.block, const_cast<void**>(l.params.data()), stream);
  }

  // Stages, uploads and launches one step (the graph of its bucket for
  // @decode and few-row @prefill, captured the first time); the caller
  // records the stage's event.
  Call execute(const StepRequest& req, const std::function<void(const Prepared&)>& before_launch = {}) {
    auto it = steps.find(req.step);
    if (it == steps.end()) throw Error(fmt::format("cuda: the module has no step @{}", req.step));
    for (int32_t s : req.slots) states.check_slot(s);
    ++stats.steps;
    Call c{&it->second, nullptr, int64_t(req.slots.size()), cur};
    bool graph = false;
    c.p = &find_bucket(*c.step, req, graph);
    Stage& s = acquire(c.p->stage_bytes);
    stage_inputs(*c.step, *c.p, req, s);
    for (const auto& [v, guard] : c.p->guards) dev->memset(guard, kGuardByte, kGuardBytes, stream);
    if (before_launch) before_launch(*c.p);
    if (!graph) {
      launch_all(*c.p);
    } else {
      if (!c.p->graph) {
        dev->begin_capture(stream);
        launch_all(*c.p);
        c.p->graph = dev->end_capture(stream);
        ++stats.graphs_captured;
      }
      dev->launch_graph(c.p->graph, stream);
    }
    cur ^= 1;
    return c;
  }

  void finish(const Call& c) {
    dev->record(stage[c.stage].done, stream);
    stage[c.stage].used = true;
    stage[c.stage].seq = ++last_seq;
  }

  // With sentinels the plan has no reuse, so any damaged guard is an overflow.
  void check_guards(const Prepared& p) {
    std::vector<uint8_t> bytes(kGuardBytes);
    for (const auto& [v, guard] : p.guards) {
      dev->download(bytes.data(), guard, kGuardBytes, stream);
      sync();
      for (uint8_t x : bytes)
        if (x != kGuardByte)
          throw Error(fmt::format("cuda: a kernel wrote past the end of %{} ({}): sentinel damaged", v->name, v->type.str()));
    }
  }

  // A returned value, its padding rows dropped (a leading S dim).
  HostTensor download(const ir::ValueData* v, const Call& c) {
    HostTensor t;
    t.elem = v->type.elem;
    for (const auto& d : v->type.shape) t.shape.push_back(eval(d, c.p->env, "a result"));
    t.bytes.resize(value_bytes(v->type, c.p->env));
    if (c.p->rows != c.rows && !t.shape.empty() && v->type.shape[0].as_symbol() == std::optional<std::string>("S")) {
      t.bytes.resize(t.bytes.size() / uint64_t(c.p->rows) * uint64_t(c.rows));
      t.shape[0] = c.rows;
    }
    dev->download(t.bytes.data(), c.p->at(v), t.bytes.size(), stream);
    return t;
  }

  std::vector<HostTensor> run(const StepRequest& req) {
    const Call c = execute(req);
    finish(c);
    notify(req, *c.p);
    check_guards(*c.p);
    std::vector<HostTensor> out;
    const uint64_t t0 = thread_cpu_ns();  // a copy to pageable memory waits for the stream
    for (const auto* v : c.step->kernels.returns) out.push_back(download(v, c));
    wait_ns += thread_cpu_ns() - t0;
    sync();
    return out;
  }

  // Diffs: the results of every computing top-level op, in op order (see
  // executor.h). Buffers were not reused this step, so each still holds the
  // value its op wrote. Synchronous: a diff is not a fast path.
  void notify(const StepRequest& req, const Prepared& p) {
    if (!observer) return;
    const ir::Function& fn = *module.find_function(req.step);
    for (const auto& op : fn.ops) {
      // As the CPU interpreter: no weights, aliases or return.
      if (op->info().is_alias() || op->kind == ir::OpKind::Weight) continue;
      std::vector<std::optional<HostTensor>> results;
      for (const auto& r : op->results) {
        auto it = p.ptr.find(r.data());
        if (it == p.ptr.end() || it->second == 0) {
          results.emplace_back();
          continue;
        }
        HostTensor t;
        t.elem = r.type().elem;
        for (const auto& d : r.type().shape) t.shape.push_back(eval(d, p.env, "an observed result"));
        t.bytes.resize(value_bytes(r.type(), p.env));
        if (!t.bytes.empty()) dev->download(t.bytes.data(), it->second, t.bytes.size(), stream);
        results.push_back(std::move(t));
      }
      sync();
      observer(*op, results);
    }
  }

  // The ids of the last sampled step, waiting for them if they are not in yet.
  std::vector<int32_t> collect() {
    if (!held.empty()) return std::exchange(held, {});
    if (!pending) return {};
    Stage& s = stage[pending_stage];
    wait(s.done, s.seq < last_seq);  // pipelined when a later step is queued behind it
    std::vector<int32_t> out(s.ids, s.ids + pending);
    pending = 0;
    pending_stage = -1;
    return out;
  }

#ifdef VTC_TEST_HOOKS
  // The seed's failure (seed-pr-2550), for tests/cuda/test_cuda_ops.cpp:
  // VTC_TEST_CUDA_POISON_HOST_IDS=1 overwrites the host copies of the last
  // sampled ids (the pinned buffers) with id 0 once collected, as that
  // runner left its host copy stale; VTC_TEST_CUDA_FEED_HOST_IDS=1 is the
  // broken executor: it uploads that host copy into @last_ids before the
  // decode.
  void seed_bug_hooks(const StepRequest& req) {
    const bool poison = std::getenv("VTC_TEST_CUDA_POISON_HOST_IDS") != nullptr;
    const bool feed = std::getenv("VTC_TEST_CUDA_FEED_HOST_IDS") != nullptr;
    if (!poison && !feed) return;
    if (pending) held = collect();  // the hooks reuse the pinned ids
    if (poison)
      for (Stage& s : stage) std::fill(s.ids, s.ids + kMaxSampledRows, 0);
    if (!feed) return;
    const StateStore::Layout& ids = states.layout(ir::step::kLastIds);
    for (size_t i = 0; i < req.slots.size(); ++i) dev->upload(slot_row(ids, req.slots[i]), stage[cur].ids + i, 4, stream);
  }
#endif

  // Launches this step, then collects the previous one's ids (the @decode
  // contract: the step's last result is the sampled ids; only they are
  // copied out, into the stage's pinned memory, behind its event).
  std::vector<int32_t> run_sampled(const StepRequest& req) {
    if (req.slots.empty() || req.slots.size() > kMaxSampledRows)
      throw Error(fmt::format("cuda: a sampled step takes 1..{} sequences", kMaxSampledRows));
#ifdef VTC_TEST_HOOKS
    seed_bug_hooks(req);
#endif
    const Call c = execute(req);
    const ir::ValueData* ids = c.step->kernels.returns.back();
    if (!(ids->type.elem == ir::ElemType::I32) || ids->type.rank() != 1)
      throw Error(fmt::format("cuda: @{} does not return sampled ids last (got {})", req.step, ids->type.str()));
    dev->download(stage[c.stage].ids, c.p->at(ids), uint64_t(c.rows) * 4, stream);
    finish(c);
    std::vector<int32_t> previous = collect_kind(false);
    pending_stage = c.stage;
    pending = size_t(c.rows);
    pending_outcome = false;
    return previous;
  }

  // An uncollected copy-out must be of the kind the caller reads next (the
  // sampled ids of @decode, or a device verify step's outcome words).
  void require_pending_kind(bool outcome) const {
    if ((pending || !held.empty()) && pending_outcome != outcome)
      throw Error(outcome ? "cuda: a device verify step was queued behind an uncollected sampled step"
                          : "cuda: a sampled step was queued behind an uncollected device verify step");
  }
  std::vector<int32_t> collect_kind(bool outcome) {
    require_pending_kind(outcome);
    return collect();
  }

  // --- drafting on the device (codegen/cuda/device_drafts.h) ---------------

  using Record = DeviceDraftRecord;
  void* spec_rows_fn = nullptr;
  void* spec_accept_fn = nullptr;
  void* spec_restore_fn = nullptr;
  void* spec_sample_partial_fn = nullptr;  // a sampled sequence's draws (sample_rows_kernels)
  void* spec_sample_fn = nullptr;
  int64_t sample_chunks = 0;
  DevPtr sample_scratch = 0;
  int64_t draft_vocab = 0;
  size_t draft_ids_arg = 0, draft_pos_arg = 0;   // @prefill's %ids and %pos, which spec_rows writes
  const ir::ValueData* draft_logits = nullptr;  // @prefill's logits, which spec_accept reads
  struct DraftSlot {
    DevPtr record = 0;
    bool sampled = false;   // draws its rows (temperature > 0) rather than taking their argmax
    DevPtr checkpoint = 0;  // the slot's plain states before the step in flight (a model with recurrent state)
  };
  std::map<int32_t, DraftSlot> draft_records;  // by slot
  bool pending_outcome = false;             // the pending copy-out is a verify outcome

  // spec_rows, spec_accept and spec_restore, compiled the first time a
  // sequence drafts here, and the @prefill values they touch.
  void load_draft_kernels() {
    if (spec_accept_fn) return;
    auto it = steps.find(std::string(ir::step_name(ir::StepKind::Prefill)));
    if (it == steps.end()) throw Error("cuda: drafting on the device needs a @prefill step");
    const Step& st = it->second;
    draft_logits = st.kernels.returns.at(0);
    const auto vocab = draft_logits->type.shape.at(1).constant();
    if (!vocab) throw Error("cuda: drafting on the device needs @prefill's logits to have a constant vocabulary");
    draft_vocab = *vocab;
    draft_ids_arg = arg_index(st, ir::step::kIds);
    draft_pos_arg = arg_index(st, ir::step::kPos);
    const Kernel rows = spec_rows_kernel(), accept = spec_accept_kernel(*vocab), restore = spec_restore_kernel();
    for (const Kernel* k : {&rows, &accept, &restore})
      compiled[k->entry] = nvrtc->compile(*k, dev->arch(), CodeKind::Cubin).image;
    spec_rows_fn = load(rows);
    spec_accept_fn = load(accept);
    spec_restore_fn = load(restore);
  }

  // The sampled rows' two kernels, the first time a sampled sequence
  // drafts here, at the bound on candidates of the module's `sample` op.
  void load_sample_kernels() {
    if (spec_sample_fn) return;
    std::optional<int64_t> max_k;
    for (const auto& [name, st] : steps)
      for (const auto& op : st.fn->ops)
        if (op->kind == ir::OpKind::Sample) max_k = ir::SampleAttrs::of(*op).max_k;
    if (!max_k) throw Error("cuda: a sampled sequence drafts on the device through the `sample` op, which no step has");
    const SampleRowsKernels k = sample_rows_kernels(draft_vocab, *max_k);
    for (const Kernel* kk : {&k.partial, &k.pick})
      compiled[kk->entry] = nvrtc->compile(*kk, dev->arch(), CodeKind::Cubin).image;
    spec_sample_partial_fn = load(k.partial);
    spec_sample_fn = load(k.pick);
    sample_chunks = k.chunks;
    sample_scratch = dev->alloc(uint64_t(k.scratch_bytes));
  }

  void launch_accept(DevPtr record, DevPtr logits, long long rows, bool sampled) {
    long long capacity = states.config().n_ctx, drawn = sampled ? 1 : 0;
    void* params[] = {&record, &logits, &rows, &capacity, &drawn};
    const auto [gx, gy] = spec_accept_grid(draft_vocab, rows, sampled);
    dev->launch(spec_accept_fn, gx, gy, 256, params, stream);
  }

  // A sampled sequence's rows drawn into its record (kDrawn): the `sample`
  // op's kernels at the record's settings and its rows' positions.
  void launch_draws(DevPtr record, DevPtr logits, long long rows) {
    DevPtr settings = record + Record::kSampling * 4, seed = record + Record::kSeed * 4,
           pos = record + Record::kRowPos * 4, drawn = record + Record::kDrawn * 4, scratch = sample_scratch;
    void* partial[] = {&logits, &settings, &scratch, &rows};
    dev->launch(spec_sample_partial_fn, unsigned(sample_chunks), unsigned(rows), 256, partial, stream);
    void* pick[] = {&settings, &seed, &pos, &drawn, &scratch, &rows};
    dev->launch(spec_sample_fn, unsigned(rows), 1, 256, pick, stream);
  }

  void start_drafts(int32_t slot, std::span<const int32_t> tokens, const DeviceSampling& sampling) {
    states.check_slot(slot);
    load_draft_kernels();
    const bool sampled = sampling.temperature > 0.0f;
    if (sampled) load_sample_kernels();
    if (pending_outcome && pending) collect();  // an earlier sequence's last step, no longer read
    DraftSlot& d = draft_records[slot];
    if (!d.record) d.record = dev->alloc(uint64_t(Record::words(states.config().n_ctx, draft_vocab)) * 4);  // zeroed
    const bool recurrent = states.carries_recurrent_state();
    for (const auto& l : states.layouts())
      if (recurrent && !l.paged() && l.row_bytes() % 4)  // spec_restore copies words
        throw Error(fmt::format("cuda: drafting on the device restores state @{}, whose rows of {} bytes are not "
                                "whole words", l.decl->name, l.row_bytes()));
    if (recurrent && !d.checkpoint) d.checkpoint = dev->alloc(states.slot_state_bytes());
    d.sampled = sampled;
    std::vector<int32_t> head(size_t(Record::kHistory) + tokens.size(), 0);
    head[Record::kLen] = int32_t(tokens.size());
    head[Record::kRun] = int32_t(tokens.size()) - 1;
    head[Record::kRecurrent] = recurrent ? 1 : 0;
    const std::array<float, 4> settings = sampling.op_params();
    std::memcpy(&head[Record::kSampling], settings.data(), sizeof settings);
    head[Record::kSeed] = int32_t(uint32_t(sampling.seed));
    head[Record::kSeed + 1] = int32_t(uint32_t(sampling.seed >> 32));
    std::copy(tokens.begin(), tokens.end(), head.begin() + Record::kHistory);
    dev->upload(d.record, head.data(), head.size() * 4, stream);
    launch_accept(d.record, 0, 0, false);  // drafts only
    sync();  // `head` is pageable and goes out of scope
  }

  // One drafting sequence of a device verify step: its record and rows.
  struct VerifyRows {
    DraftSlot slot;
    int32_t slot_index;
    int64_t first, rows;
  };

  // spec_restore for each plain state: the checkpoint (copy_plain_rows'
  // layout) back where the step rejected a draft (the record says so on
  // the device).
  void restore_if_rejected(const VerifyRows& v) {
    DevPtr from = v.slot.checkpoint, record = v.slot.record;
    for (const auto& l : states.layouts())
      if (!l.paged()) {
        DevPtr to = slot_row(l, v.slot_index);
        long long bytes = l.row_bytes();
        void* params[] = {&record, &to, &from, &bytes};
        dev->launch(spec_restore_fn, spec_restore_blocks(uint64_t(bytes)), 1, 256, params, stream);
        from += DevPtr(bytes);
      }
  }

  // The sequences of a device verify step, from its slots and %seq (each
  // slot's rows consecutive, 1..16 of them, every row with its logits).
  std::vector<VerifyRows> verify_rows(const StepRequest& req) const {
    if (req.step != ir::step_name(ir::StepKind::Prefill)) throw Error("cuda: a device verify step runs @prefill");
    const HostTensor& seq = req.args.at(std::string(ir::step::kSeq));
    const int64_t total = seq.numel();
    if (req.args.at(std::string(ir::step::kRows)).numel() != total || req.args.at(std::string(ir::step::kIds)).numel() != total)
      throw Error("cuda: every row of a device verify step returns its logits");
    std::vector<VerifyRows> out;
    for (int64_t r = 0; r < total; ++r) {
      const int32_t s = seq.i32_data()[r];
      if (s == int32_t(out.size())) {
        auto rec = s < int32_t(req.slots.size()) ? draft_records.find(req.slots[size_t(s)]) : draft_records.end();
        if (rec == draft_records.end())
          throw Error("cuda: a device verify step takes slots that start_device_drafts gave a history");
        out.push_back({rec->second, rec->first, r, 0});
      } else if (out.empty() || s != int32_t(out.size()) - 1) {
        throw Error("cuda: a device verify step takes each slot's rows together, in slot order");
      }
      ++out.back().rows;
    }
    if (out.size() != req.slots.size() || out.size() * size_t(Record::kOutcomeWords) > kMaxSampledRows)
      throw Error(fmt::format("cuda: a device verify step has rows for each of its {} slots", req.slots.size()));
    for (const VerifyRows& v : out)
      if (v.rows > Record::kMaxDrafts + 1)
        throw Error(fmt::format("cuda: a device verify step has 1..{} rows a slot", Record::kMaxDrafts + 1));
    return out;
  }

  // Queues spec_rows for each sequence, the step (a graph for up to 16
  // rows) and spec_accept for each, then the outcomes' copy-out behind the
  // stage's event; returns the previous verify step's outcomes.
  std::vector<DeviceVerifyOutcome> run_verify(const StepRequest& req) {
    const std::vector<VerifyRows> seqs = verify_rows(req);
    require_pending_kind(true);
    const Call c = execute(req, [&](const Prepared& p) {
      for (const VerifyRows& v : seqs) {
        DevPtr record = v.slot.record, ids = p.arg_dst[draft_ids_arg] + DevPtr(v.first * 4),
               pos = p.arg_dst[draft_pos_arg] + DevPtr(v.first * 4);
        long long n = v.rows;
        void* params[] = {&record, &ids, &pos, &n};
        dev->launch(spec_rows_fn, 1, 1, 32, params, stream);
        if (v.slot.checkpoint) copy_plain_rows(v.slot.checkpoint, v.slot_index);
      }
    });
    for (size_t i = 0; i < seqs.size(); ++i) {
      const VerifyRows& v = seqs[i];
      const DevPtr logits = c.p->at(draft_logits) + DevPtr(v.first * draft_vocab * 4);
      if (v.slot.sampled) launch_draws(v.slot.record, logits, v.rows);
      launch_accept(v.slot.record, logits, v.rows, v.slot.sampled);
      if (v.slot.checkpoint && !mutated(Mutation::SpecSkipStateRestore)) restore_if_rejected(v);
      dev->download(stage[c.stage].ids + i * Record::kOutcomeWords, v.slot.record + Record::kOutCount * 4,
                    Record::kOutcomeWords * 4, stream);
    }
    finish(c);
    std::vector<DeviceVerifyOutcome> previous = outcomes(collect());
    pending_stage = c.stage;
    pending = seqs.size() * size_t(Record::kOutcomeWords);
    pending_outcome = true;
    return previous;
  }

  static size_t arg_index(const Step& st, std::string_view name) {
    for (size_t a = 0; a < st.fn->args.size(); ++a)
      if (st.fn->args[a]->name == name) return a;
    throw Error(fmt::format("cuda: @{} has no argument %{}", st.fn->name, name));
  }

  // The outcomes from their copied words (each record's from kOutCount on).
  static std::vector<DeviceVerifyOutcome> outcomes(const std::vector<int32_t>& words) {
    std::vector<DeviceVerifyOutcome> out;
    for (size_t at = 0; at + size_t(Record::kOutcomeWords) <= words.size(); at += size_t(Record::kOutcomeWords)) {
      const auto word = [&](int64_t w) { return words.begin() + int64_t(at) + (w - Record::kOutCount); };  // by record word
      const int32_t count = *word(Record::kOutCount), replayed = *word(Record::kOutReplayed);
      if (count < (replayed > 0 ? 0 : 1) || count > Record::kMaxDrafts + 1)
        throw Error(fmt::format("cuda: a device verify step accepted {} tokens", count));
      out.push_back({*word(Record::kOutDrafted), std::vector<int32_t>(word(Record::kOut), word(Record::kOut) + count),
                     replayed});
    }
    return out;
  }
};

Executor::Executor(const BackendInputs& inputs, const ExecutorOptions& o) : impl_(std::make_unique<Impl>(inputs, o)) {}
Executor::~Executor() = default;
const Device& Executor::device() const { return *impl_->dev; }
const ExecutorStats& Executor::stats() const { return impl_->stats; }
std::string Executor::describe() const {
  if (impl_->dev->simulated())
    return fmt::format("CUDA executor on CUDA (simulated device): kernels compiled by the host C++ compiler and run on "
                       "the CPU with sm_{} semantics (VTC_CUDA_DEVICE=sim), graphs {}",
                       impl_->dev->arch(), impl_->options.graphs ? "on" : "off");
  return fmt::format("CUDA executor on {} (sm_{}), graphs {}", impl_->dev->name(), impl_->dev->arch(),
                     impl_->options.graphs ? "on" : "off");
}

// host_ns: the calling thread's CPU time, less its time inside waits, so
// neither the device's work nor the time blocked for it is in it.
std::vector<HostTensor> Executor::run(const StepRequest& request) {
  const uint64_t t0 = thread_cpu_ns(), w0 = impl_->wait_ns;
  std::vector<HostTensor> out = impl_->run(request);
  impl_->stats.host_ns += thread_cpu_ns() - t0 - (impl_->wait_ns - w0);
  return out;
}
std::vector<int32_t> Executor::run_sampled(const StepRequest& request) {
  const uint64_t t0 = thread_cpu_ns(), w0 = impl_->wait_ns;
  std::vector<int32_t> out = impl_->run_sampled(request);
  impl_->stats.host_ns += thread_cpu_ns() - t0 - (impl_->wait_ns - w0);
  return out;
}
std::vector<int32_t> Executor::wait_sampled() { return impl_->collect_kind(false); }

void Executor::start_device_drafts(int32_t slot, std::span<const int32_t> tokens, const DeviceSampling& sampling) {
  impl_->start_drafts(slot, tokens, sampling);
}
std::vector<DeviceVerifyOutcome> Executor::run_device_verify(const StepRequest& request) {
  const uint64_t t0 = thread_cpu_ns(), w0 = impl_->wait_ns;
  auto out = impl_->run_verify(request);
  impl_->stats.host_ns += thread_cpu_ns() - t0 - (impl_->wait_ns - w0);
  return out;
}
std::vector<DeviceVerifyOutcome> Executor::wait_device_verify() { return Impl::outcomes(impl_->collect_kind(true)); }

std::vector<uint8_t> Executor::read_slot_row(const StateStore::Layout& state, int32_t slot) {
  std::vector<uint8_t> row(state.row_bytes());
  impl_->dev->download(row.data(), impl_->slot_row(state, slot), row.size(), impl_->stream);
  impl_->sync();
  return row;
}
void Executor::write_slot_row(const StateStore::Layout& state, int32_t slot, std::span<const uint8_t> bytes) {
  if (bytes.size() != state.row_bytes())
    throw Error(fmt::format("state @{}: a slot row holds {} bytes, got {}", state.decl->name, state.row_bytes(), bytes.size()));
  impl_->dev->upload(impl_->slot_row(state, slot), bytes.data(), bytes.size(), impl_->stream);
  impl_->sync();  // `bytes` may not outlive the call
}
std::vector<uint8_t> Executor::read_page(const StateStore::Layout& state, int half, int32_t page) {
  if (!state.paged() || half < 0 || half >= state.halves || page < 0 || page >= impl_->states.n_pages())
    throw Error(fmt::format("cuda: state @{} has no page {} in half {}", state.decl->name, page, half));
  std::vector<uint8_t> out(state.page_bytes(impl_->states.page_size()));
  impl_->dev->download(out.data(), impl_->page_addr(state, half, page), out.size(), impl_->stream);
  impl_->sync();
  return out;
}
void Executor::set_observer(OpObserver observer) { impl_->set_observer(std::move(observer)); }

std::string cuda_unavailable_reason() {
  std::string why;
  if (!Device::open(0, &why)) return why;
  if (!Nvrtc::load(&why)) return why;
  return "";
}

}  // namespace vtc::cuda
