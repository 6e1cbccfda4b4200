// Grid execution on host fibers (see block_runner.h for the algorithm).
#include "runtime/cuda/sim/block_runner.h"

#include <fmt/format.h>
#include <dlfcn.h>
#include <signal.h>
#include <setjmp.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "runtime/cuda/sim/fiber.h"
#include "runtime/cuda/sim/memory.h"
#include "runtime/cuda/sim/profiler.h"

namespace vtc::cuda::sim {
namespace {

constexpr size_t kFiberStackBytes = 128 << 10;
constexpr int kWarp = 32;

enum class Collective : int8_t { None = -1, Barrier = 0, Exchange = 1, Ballot = 2, Matrix = 3 };
const char* collective_name(Collective c) {
  switch (c) {
    case Collective::Barrier: return "__syncwarp";
    case Collective::Exchange: return "a __shfl_*_sync";
    case Collective::Ballot: return "a vote (__ballot/__any/__all_sync)";
    case Collective::Matrix: return "a matrix instruction (mma.sync/ldmatrix)";
    default: return "none";
  }
}

struct Barrier {
  int arrived = 0;
  uint64_t generation = 0;
  Collective kind = Collective::None;
};

enum class Status : uint8_t { Fresh, Ready, Waiting, Done };

struct BlockRun;

// A cp.async copy the thread issued and has not waited for.
struct PendingCopy {
  void* dst;
  const void* src;  // null: zero-fill
  unsigned bytes;
  uint64_t group;   // the commit group it belongs to
};

struct Fiber {
  VtcSimThread thread{};
  std::vector<PendingCopy> copies;  // issue order
  uint64_t groups_committed = 0;    // the open group's number
  Context context;
  Status status = Status::Fresh;
  Barrier* waiting = nullptr;
  uint64_t wait_generation = 0;
  int warp = 0, lane = 0;
  BlockRun* run = nullptr;
};

// Checked mode: the last write to a 4-byte word of `__shared__` memory.
struct SharedWrite {
  int writer = -1;  // fiber index
  uint64_t block_generation = 0, warp_generation = 0;
};

struct BlockRun {
  const Launch* launch = nullptr;
  // Checked mode: this worker's copy of the kernel's `__shared__` memory
  // (found on first use) and its writes since the block started.
  uintptr_t shared_begin = 0, shared_end = 0;
  std::unordered_map<uintptr_t, SharedWrite> shared_writes;
  // Checked mode: allocations this block touched lately (the registry takes a lock).
  std::array<std::pair<uintptr_t, uintptr_t>, 4> recent{};
  size_t recent_next = 0;
  std::vector<Stack*> stacks;  // the worker's, one per fiber
  std::vector<Fiber> fibers;
  int live = 0, done = 0;
  std::vector<int> warp_live;
  std::vector<uint32_t> warp_exited;  // lanes that returned, per warp
  Barrier block;
  std::vector<Barrier> warps;
  std::vector<uint64_t> slots;  // [warp][generation parity][lane]
  std::vector<uint64_t> slot_generation;  // the barrier generation each slot was posted in
  std::vector<std::array<uint64_t, 4>> wide_slots;  // matrix instructions' posts, as `slots`
  Context scheduler;
  size_t next = 0;        // where the scheduler looks first
  std::string error;
  BlockProfiler profile;  // profile mode (profiler.h)
};

// Per host thread that runs blocks.
struct Worker {
  std::vector<std::unique_ptr<Stack>> stacks;
  BlockRun run;
  sigjmp_buf fault_jump;
  volatile sig_atomic_t in_kernel = 0;
  Fiber* current = nullptr;
  std::string fault;
  std::unique_ptr<char[]> signal_stack;
};

thread_local Worker* tls_worker = nullptr;

std::string where_block(const Fiber& f) {
  const auto& t = f.thread;
  return fmt::format("kernel {}: block ({},{},{})", f.run->launch->entry, t.block_idx.x, t.block_idx.y, t.block_idx.z);
}

std::string where(const Fiber& f) {
  const auto& t = f.thread;
  return fmt::format("{} thread {}", where_block(f),
                     t.thread_idx.x + t.block_dim.x * (t.thread_idx.y + t.block_dim.y * t.thread_idx.z));
}

// Ends the calling fiber's block with an error; never returns.
[[noreturn]] void fail(Fiber* f, std::string message) {
  BlockRun& r = *f->run;
  if (r.error.empty()) r.error = std::move(message);
  f->status = Status::Done;
  switch_to(f->context, r.scheduler);
  std::abort();  // the scheduler never resumes a failed block
}

bool runnable(const Fiber& f) {
  switch (f.status) {
    case Status::Fresh:
    case Status::Ready: return true;
    case Status::Waiting: return f.waiting->generation != f.wait_generation;
    default: return false;
  }
}

void fiber_main(void* arg);

// Saves the running context in `from` and switches straight to the next
// runnable fiber after the last one started (fiber to fiber: half the
// switches of going through the scheduler), or to the scheduler when no
// fiber can run: the block is done, failed or deadlocked.
void resume_next(BlockRun& r, Context& from) {
  const size_t n = r.fibers.size();
  if (r.error.empty())
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (r.next + k) % n;
      Fiber& g = r.fibers[i];
      if (!runnable(g)) continue;
      if (g.status == Status::Fresh) prepare(g.context, *r.stacks[i], fiber_main, &g);
      g.status = Status::Ready;
      r.next = (i + 1) % n;
      tls_worker->current = &g;
      switch_to(from, g.context);
      return;
    }
  switch_to(from, r.scheduler);
}

// Every thread of `b`'s group has arrived: the next generation starts. In
// profile mode the group's pending accesses become requests here (its lanes
// met, so each has issued every access before the collective).
void released(BlockRun& r, Barrier& b, int warp, Collective kind) {
  b.arrived = 0;
  ++b.generation;
  if (!r.profile.sampled()) return;
  if (&b == &r.block) {
    int warps = 0;
    for (size_t w = 0; w < r.warps.size(); ++w) {
      r.profile.flush_warp(int(w));
      warps += r.warp_live[w] > 0;
    }
    r.profile.count_block_barrier(warps);
    return;
  }
  r.profile.flush_warp(warp);
  r.profile.count_warp_collective(int(kind));
}

// The calling fiber arrives at `b`, a barrier of `expected` live threads
// starting at fiber `first`; it returns once all have arrived.
void arrive(Fiber* f, Barrier& b, int expected, int first, Collective kind) {
  BlockRun& r = *f->run;
  if (b.arrived == 0) b.kind = kind;
  else if (b.kind != kind)
    fail(f, fmt::format("{}: lanes of warp {} are at different warp collectives ({} and {}): divergent code "
                        "reaches collectives a GPU leaves undefined",
                        where(*f), f->warp, collective_name(b.kind), collective_name(kind)));
  if (++b.arrived >= expected) {
    released(r, b, f->warp, kind);
    r.next = size_t(first);
    return;
  }
  f->waiting = &b;
  f->wait_generation = b.generation;
  f->status = Status::Waiting;
  resume_next(r, f->context);
}

void release_if_complete(BlockRun& r, Barrier& b, int live, int first, int warp) {
  if (b.arrived > 0 && b.arrived >= live) {
    released(r, b, warp, b.kind);
    r.next = size_t(first);
  }
}

void check_mask(Fiber* f, unsigned mask) {
  const uint32_t exited = f->run->warp_exited[size_t(f->warp)] & mask;
  if (exited)
    fail(f, fmt::format("{}: a warp collective with mask {:#010x} names lane {} of warp {}, which has already "
                        "returned (undefined on a GPU)",
                        where(*f), mask, __builtin_ctz(exited), f->warp));
}

Fiber* self_fiber(const VtcSimThread* self) { return static_cast<Fiber*>(self->fiber); }

std::string name_parameter(const Launch& l, uintptr_t address);

void sync_block(const VtcSimThread* self) {
  Fiber* f = self_fiber(self);
  arrive(f, f->run->block, f->run->live, 0, Collective::Barrier);
}

void sync_warp(const VtcSimThread* self, unsigned mask) {
  Fiber* f = self_fiber(self);
  check_mask(f, mask);
  BlockRun& r = *f->run;
  arrive(f, r.warps[size_t(f->warp)], r.warp_live[size_t(f->warp)], f->warp * kWarp, Collective::Barrier);
}

int lanes_in_warp(const BlockRun& r, int warp) {
  return std::min<int>(kWarp, int(r.fibers.size()) - warp * kWarp);
}

int source_lane(int lane, int mode, int arg, int width, int lanes) {
  if (width <= 0 || width > kWarp || (width & (width - 1))) width = kWarp;
  const int segment = lane & ~(width - 1);
  int src = lane;
  switch (mode) {
    case VTC_SIM_SHFL_IDX: src = segment + (arg & (width - 1)); break;
    case VTC_SIM_SHFL_UP: src = lane - arg < segment ? lane : lane - arg; break;
    case VTC_SIM_SHFL_DOWN: src = lane + arg >= segment + width ? lane : lane + arg; break;
    case VTC_SIM_SHFL_XOR: src = (lane ^ arg) >= segment + width ? lane : (lane ^ arg); break;
    default: break;
  }
  return src < lanes ? src : lane;
}

// Posts `value`, waits for the warp, returns the slots of this generation.
const uint64_t* post_and_wait(Fiber* f, unsigned mask, uint64_t value, Collective kind) {
  check_mask(f, mask);
  BlockRun& r = *f->run;
  Barrier& b = r.warps[size_t(f->warp)];
  const size_t base = (size_t(f->warp) * 2 + (b.generation & 1)) * kWarp;
  r.slots[base + size_t(f->lane)] = value;
  r.slot_generation[base + size_t(f->lane)] = b.generation;
  arrive(f, b, r.warp_live[size_t(f->warp)], f->warp * kWarp, kind);
  return &r.slots[base];
}

void exchange(const VtcSimThread* self, unsigned mask, const void* in, void* out, unsigned bytes, int mode, int arg,
              int width) {
  Fiber* f = self_fiber(self);
  uint64_t v = 0;
  std::memcpy(&v, in, bytes);
  const uint64_t* slots = post_and_wait(f, mask, v, Collective::Exchange);
  v = slots[source_lane(f->lane, mode, arg, width, lanes_in_warp(*f->run, f->warp))];
  std::memcpy(out, &v, bytes);
}

unsigned ballot(const VtcSimThread* self, unsigned mask, int predicate) {
  Fiber* f = self_fiber(self);
  BlockRun& r = *f->run;
  const uint64_t generation = r.warps[size_t(f->warp)].generation;
  const uint64_t* slots = post_and_wait(f, mask, predicate != 0, Collective::Ballot);
  // The lanes that voted in this generation (a lane may have returned since).
  const uint64_t* posted = &r.slot_generation[size_t(slots - r.slots.data())];
  unsigned bits = 0;
  for (int l = 0; l < lanes_in_warp(r, f->warp); ++l)
    if (posted[l] == generation && slots[l]) bits |= 1u << l;
  return bits & mask;
}

// mma.sync and ldmatrix are .aligned: the whole warp executes them together.
void gather(const VtcSimThread* self, const void* in, unsigned bytes, void* out) {
  Fiber* f = self_fiber(self);
  BlockRun& r = *f->run;
  if (lanes_in_warp(r, f->warp) != kWarp)
    fail(f, fmt::format("{}: a matrix instruction (mma.sync/ldmatrix) in warp {} of {} threads: it needs all 32 "
                        "lanes",
                        where(*f), f->warp, lanes_in_warp(r, f->warp)));
  Barrier& b = r.warps[size_t(f->warp)];
  const size_t base = (size_t(f->warp) * 2 + (b.generation & 1)) * kWarp;
  std::memcpy(r.wide_slots[base + size_t(f->lane)].data(), in, std::min<unsigned>(bytes, 32));
  arrive(f, b, r.warp_live[size_t(f->warp)], f->warp * kWarp, Collective::Matrix);
  for (int l = 0; l < kWarp; ++l)
    std::memcpy(static_cast<char*>(out) + size_t(l) * bytes, r.wide_slots[base + size_t(l)].data(), bytes);
}

void access(const VtcSimThread* self, const void* address, unsigned long bytes, int is_write, const void* site);
// access()'s is_write for a load that bypasses L1 (cp.async.cg).
constexpr int kLoadL2Only = 2;

// One cp.async copy done: checked and counted as the kernel's own global
// read and shared write (one access each, as a GPU's 4/8/16-byte copy).
// The read is cp.async.cg's: cached in L2, not in L1.
void complete_copy(Fiber* f, const PendingCopy& c) {
  static const char site_load = 0, site_store = 0;  // one call site each for profile mode's requests
  if (checked_mode() || f->run->profile.sampled()) {
    if (c.src) access(&f->thread, c.src, c.bytes, kLoadL2Only, &site_load);
    access(&f->thread, c.dst, c.bytes, 1, &site_store);
  }
  if (c.src) std::memcpy(c.dst, c.src, c.bytes);
  else std::memset(c.dst, 0, c.bytes);
}

void cp_async(const VtcSimThread* self, int op, void* dst, const void* src, unsigned bytes) {
  Fiber* f = self_fiber(self);
  switch (op) {
    case VTC_SIM_CP_ISSUE:
      if (bytes != 4 && bytes != 8 && bytes != 16)
        fail(f, fmt::format("{}: cp.async of {} bytes (4, 8 or 16)", where(*f), bytes));
      if ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & (bytes - 1))
        fail(f, fmt::format("{}: cp.async of {} bytes from {} to {}: both must be {}-byte aligned", where(*f), bytes,
                            src, dst, bytes));
      f->copies.push_back({dst, src, bytes, f->groups_committed});
      return;
    case VTC_SIM_CP_COMMIT: ++f->groups_committed; return;
    default: {
      // Groups numbered below committed - n are complete after the wait.
      const uint64_t keep = bytes, done_below = f->groups_committed > keep ? f->groups_committed - keep : 0;
      size_t kept = 0;
      for (size_t i = 0; i < f->copies.size(); ++i) {
        if (f->copies[i].group < done_below) complete_copy(f, f->copies[i]);
        else f->copies[kept++] = f->copies[i];
      }
      f->copies.resize(kept);
    }
  }
}

// --- checked mode: every access of the kernel ---------------------------------

extern const VtcSimRuntime kRuntime;

bool inside(uintptr_t a, size_t bytes, uintptr_t begin, uintptr_t end) { return a >= begin && a + bytes <= end; }

// This worker's thread-local block of the kernel object: its __shared__ arrays.
void find_shared(BlockRun& r) {
  const ModuleMemory* m = r.launch->module;
  if (r.shared_begin || !m || !m->tls_bytes) return;
  void* block = nullptr;
  if (dlinfo(m->handle, RTLD_DI_TLS_DATA, &block) == 0 && block) {
    r.shared_begin = reinterpret_cast<uintptr_t>(block);
    r.shared_end = r.shared_begin + m->tls_bytes;
  }
}

// A read or write of another thread's write to the same word since the
// last __syncthreads is a race, unless a collective of their warp came
// between (warp-synchronous code after __syncwarp or a shuffle).
void check_shared(Fiber* f, uintptr_t address, size_t bytes, bool is_write) {
  BlockRun& r = *f->run;
  const int me = int(f - r.fibers.data());
  const uint64_t warp_generation = r.warps[size_t(f->warp)].generation;
  for (uintptr_t word = address & ~uintptr_t(3); word < address + bytes; word += 4) {
    SharedWrite& w = r.shared_writes[word];
    if (w.writer >= 0 && w.writer != me && w.block_generation == r.block.generation) {
      const Fiber& other = r.fibers[size_t(w.writer)];
      if (!(other.warp == f->warp && w.warp_generation != warp_generation))
        fail(f, fmt::format("{}: shared-memory race: it {} the __shared__ word at byte {} of the kernel's shared memory, "
                            "which thread {} wrote since the last __syncthreads (a barrier is missing between them)",
                            where(*f), is_write ? "writes" : "reads", word - r.shared_begin, w.writer));
    }
    if (is_write) w = {me, r.block.generation, warp_generation};
  }
}

// Checks the access (checked mode), then, in profile mode, records it by
// the memory it lies in: shared and global accesses become requests; the
// thread's stack is a GPU's registers or local memory, counted apart; the
// kernel object's constants are the constant cache, not counted.
void access(const VtcSimThread* self, const void* address, unsigned long bytes, int is_write, const void* site) {
  Fiber* f = self_fiber(self);
  BlockRun& r = *f->run;
  const auto a = reinterpret_cast<uintptr_t>(address);
  // threadIdx and its kin read the thread's own coordinates; profile mode's
  // counting helpers, inlined into the kernel, read the runtime table.
  if (inside(a, bytes, reinterpret_cast<uintptr_t>(self), reinterpret_cast<uintptr_t>(self + 1)) ||
      inside(a, bytes, reinterpret_cast<uintptr_t>(&kRuntime), reinterpret_cast<uintptr_t>(&kRuntime + 1)))
    return;
  const bool profiled = r.profile.sampled();
  auto record = [&](Space space) {
    if (profiled)
      r.profile.record(f->warp, f->lane, reinterpret_cast<uintptr_t>(site), a, unsigned(bytes), is_write == 1, space);
  };
  const Space global = is_write == kLoadL2Only ? Space::GlobalL2Only : Space::Global;
  // Most accesses are global: the allocations this block touched lately
  // come first (they overlap nothing below).
  for (const auto& [begin, end] : r.recent)
    if (inside(a, bytes, begin, end)) return record(global);
  find_shared(r);
  if (inside(a, bytes, r.shared_begin, r.shared_end)) {
    record(Space::Shared);
    if (checked_mode()) check_shared(f, a, bytes, is_write != 0);  // profile mode alone only counts
    return;
  }
  if (r.stacks[size_t(f - r.fibers.data())]->contains(address)) {
    if (profiled) r.profile.count_local();
    return;
  }
  if (const ModuleMemory* m = r.launch->module)
    for (const auto& [begin, end] : m->segments)
      if (inside(a, bytes, begin, end)) return;
  if (auto alloc = find_allocation(a, bytes)) {
    r.recent[r.recent_next++ % r.recent.size()] = {alloc->base, alloc->base + alloc->size};
    return record(global);
  }
  fail(f, fmt::format("{}: {} {} bytes at {:#x}, outside every buffer: {}{}", where(*f), is_write == 1 ? "writes" : "reads",
                      bytes, a, describe_address(a), name_parameter(*r.launch, a)));
}

void count(const VtcSimThread* self, int cls, unsigned long n) {
  BlockRun& r = *self_fiber(self)->run;
  if (r.profile.sampled()) r.profile.count_work(cls, n);
}

const VtcSimRuntime kRuntime = {sync_block, sync_warp, exchange, ballot, access, count, gather, cp_async};

void fiber_main(void* arg) {
  fiber_started();
  Fiber* f = static_cast<Fiber*>(arg);
  BlockRun& r = *f->run;
  r.launch->fn(r.launch->params, &f->thread);
  // Copies still in flight land anyway, as on a GPU.
  for (const PendingCopy& c : f->copies) complete_copy(f, c);
  f->copies.clear();
  f->status = Status::Done;
  ++r.done;
  --r.live;
  --r.warp_live[size_t(f->warp)];
  r.warp_exited[size_t(f->warp)] |= 1u << f->lane;
  release_if_complete(r, r.block, r.live, 0, f->warp);
  release_if_complete(r, r.warps[size_t(f->warp)], r.warp_live[size_t(f->warp)], f->warp * kWarp, f->warp);
  if (r.warp_live[size_t(f->warp)] == 0 && r.profile.sampled()) r.profile.flush_warp(f->warp);
  resume_next(r, f->context);
  std::abort();  // a finished fiber is never resumed
}

std::string deadlock_message(const BlockRun& r) {
  int at_block = 0, at_warp = 0;
  for (const auto& f : r.fibers)
    if (f.status == Status::Waiting) (f.waiting == &r.block ? at_block : at_warp) += 1;
  return fmt::format("{}: deadlock: {} thread(s) wait at __syncthreads and {} at a warp collective that the other {} "
                     "live thread(s) never reach (a barrier in divergent code; a GPU would hang or misbehave)",
                     where_block(r.fibers.front()), at_block, at_warp, r.live - at_block - at_warp);
}

void reset(Worker& w, const Launch& l, unsigned bx, unsigned by, unsigned bz, uint64_t linear) {
  BlockRun& r = w.run;
  const unsigned n = l.block.x * l.block.y * l.block.z;
  const size_t warps = (n + kWarp - 1) / kWarp;
  while (w.stacks.size() < n) w.stacks.push_back(std::make_unique<Stack>(kFiberStackBytes, unsigned(w.stacks.size())));
  r.launch = &l;
  r.stacks.resize(n);
  for (unsigned i = 0; i < n; ++i) r.stacks[i] = w.stacks[i].get();
  r.fibers.assign(n, Fiber{});
  r.live = int(n);
  r.done = 0;
  r.warp_live.assign(warps, 0);
  r.warp_exited.assign(warps, 0);
  r.block = Barrier{};
  r.warps.assign(warps, Barrier{});
  r.slots.assign(warps * 2 * kWarp, 0);
  r.slot_generation.assign(warps * 2 * kWarp, ~uint64_t(0));
  r.wide_slots.assign(warps * 2 * kWarp, {});
  r.next = 0;
  r.error.clear();
  r.shared_begin = r.shared_end = 0;
  r.shared_writes.clear();
  r.recent = {};
  r.profile.start(int(warps), profile_mode() && block_sampled(linear));
  for (unsigned i = 0; i < n; ++i) {
    Fiber& f = r.fibers[i];
    f.thread.thread_idx = {i % l.block.x, i / l.block.x % l.block.y, i / (l.block.x * l.block.y)};
    f.thread.block_idx = {bx, by, bz};
    f.thread.block_dim = l.block;
    f.thread.grid_dim = l.grid;
    f.thread.fiber = &f;
    f.warp = int(i / kWarp);
    f.lane = int(i % kWarp);
    f.run = &r;
    ++r.warp_live[i / kWarp];
  }
}

std::string run_block(Worker& w, const Launch& l, unsigned bx, unsigned by, unsigned bz, uint64_t linear) {
  reset(w, l, bx, by, bz, linear);
  BlockRun& r = w.run;
  const size_t n = r.fibers.size();
  set_native_stack(r.scheduler);
  if (sigsetjmp(w.fault_jump, 1)) {
    w.in_kernel = 0;
    return w.fault;
  }
  w.in_kernel = 1;
  resume_next(r, r.scheduler);  // returns when no fiber can run
  if (r.error.empty() && r.done < int(n)) r.error = deadlock_message(r);
  w.in_kernel = 0;
  w.current = nullptr;
  if (r.error.empty()) r.profile.finish_block();
  return r.error;
}

// --- faults -------------------------------------------------------------------

struct sigaction g_previous_segv, g_previous_bus;

std::string name_parameter(const Launch& l, uintptr_t address) {
  if (!l.param_info) return "";
  const VtcSimParams& p = *l.param_info;
  const char* best = nullptr;
  uintptr_t best_value = 0;
  for (unsigned i = 0; i < p.count; ++i) {
    if (!p.is_pointer[i]) continue;
    uintptr_t v = 0;
    std::memcpy(&v, l.params[i], sizeof v);
    if (v && v <= address && v >= best_value) best = p.names[i], best_value = v;
  }
  if (!best) return "";
  return fmt::format("; the nearest pointer parameter below it is `{}`, {} bytes before the address", best,
                     address - best_value);
}

void on_fault(int sig, siginfo_t* info, void*) {
  Worker* w = tls_worker;
  if (!w || !w->in_kernel || !w->current) {
    // Not a kernel's fault: let the previous disposition handle it (the
    // faulting instruction runs again once this handler returns).
    sigaction(sig, sig == SIGSEGV ? &g_previous_segv : &g_previous_bus, nullptr);
    return;
  }
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  std::string what;
  for (const auto& s : w->stacks)
    if (s->contains(info->si_addr) || (address + 8192 > reinterpret_cast<uintptr_t>(s->top()) - kFiberStackBytes &&
                                       address < reinterpret_cast<uintptr_t>(s->top()) - kFiberStackBytes))
      what = fmt::format("the thread overflowed its {} KiB stack", kFiberStackBytes >> 10);
  if (what.empty())
    what = fmt::format("invalid memory access at {:#x}: {}{}", address, describe_address(address),
                       name_parameter(*w->run.launch, address));
  w->fault = fmt::format("{}: {}", where(*w->current), what);
  w->in_kernel = 0;
  siglongjmp(w->fault_jump, 1);
}

void install_fault_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_previous_segv);
    sigaction(SIGBUS, &sa, &g_previous_bus);
  });
}

Worker& this_worker() {
  if (!tls_worker) {
    thread_local Worker worker;
    constexpr size_t kSignalStack = 256 << 10;
    worker.signal_stack.reset(new char[kSignalStack]);
    stack_t ss{};
    ss.ss_sp = worker.signal_stack.get();
    ss.ss_size = kSignalStack;
    sigaltstack(&ss, nullptr);
    tls_worker = &worker;
  }
  return *tls_worker;
}

// --- the pool -----------------------------------------------------------------

class Pool {
 public:
  Pool() {
    int n = int(std::thread::hardware_concurrency());
    if (const char* e = std::getenv("VTC_CUDA_SIM_THREADS"); e && std::atoi(e) > 0) n = std::atoi(e);
    for (int i = 1; i < std::max(n, 1); ++i) threads_.emplace_back([this] { serve(); });
  }

  std::string run(const Launch& l) {
    std::lock_guard<std::mutex> one_launch(launch_mu_);
    install_fault_handler();
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = &l;
      next_ = 0;
      total_ = uint64_t(l.grid.x) * l.grid.y * l.grid.z;
      busy_ = int(threads_.size());
      error_.clear();
      ++round_;
    }
    cv_.notify_all();
    work(l);
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return busy_ == 0; });
    job_ = nullptr;
    return error_;
  }

 private:
  void serve() {
    uint64_t seen = 0;
    for (;;) {
      const Launch* l;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return round_ != seen; });
        seen = round_;
        l = job_;
      }
      work(*l);
      std::lock_guard<std::mutex> lock(mu_);
      if (--busy_ == 0) done_cv_.notify_all();
    }
  }

  void work(const Launch& l) {
    Worker& w = this_worker();
    for (;;) {
      const uint64_t b = next_.fetch_add(1);
      if (b >= total_) return;
      if (profile_mode() && skip_unsampled_blocks() && !block_sampled(b)) continue;  // a sampled window
      std::string e = run_block(w, l, unsigned(b % l.grid.x), unsigned(b / l.grid.x % l.grid.y),
                                unsigned(b / (uint64_t(l.grid.x) * l.grid.y)), b);
      if (!e.empty()) {
        std::lock_guard<std::mutex> lock(mu_);
        if (error_.empty()) error_ = std::move(e);
        next_ = total_;  // a failed launch stops handing out blocks
      }
    }
  }

  std::vector<std::thread> threads_;
  std::mutex launch_mu_, mu_;
  std::condition_variable cv_, done_cv_;
  const Launch* job_ = nullptr;
  std::atomic<uint64_t> next_{0};
  uint64_t total_ = 0, round_ = 0;
  int busy_ = 0;
  std::string error_;
};

}  // namespace

std::string run_grid(const Launch& launch) {
  static Pool* pool = new Pool();  // workers live until exit
  if (uint64_t(launch.grid.x) * launch.grid.y * launch.grid.z == 0) return "";
  if (!profile_mode()) return pool->run(launch);
  const unsigned grid[3] = {launch.grid.x, launch.grid.y, launch.grid.z};
  const unsigned block[3] = {launch.block.x, launch.block.y, launch.block.z};
  launch_begin(launch.entry, grid, block, launch.module ? launch.module->tls_bytes : 0);
  std::string error = pool->run(launch);
  launch_end();
  return error;
}

const VtcSimRuntime* runtime_table() { return &kRuntime; }

}  // namespace vtc::cuda::sim
