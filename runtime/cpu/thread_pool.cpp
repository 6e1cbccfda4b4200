// ThreadPool: see thread_pool.h.
//
// Protocol. The caller publishes a job (fn, n_items, chunk count, next
// chunk = 0), opens it in `entry` and bumps `generation` (release). Each
// worker waits for the generation to change (spin, then atomic::wait),
// enters the job by incrementing the user count in `entry` (a CAS that
// fails once the job is closed or replaced), takes chunks with fetch_add on
// `next_chunk` until it passes the count, and leaves (decrement, notify).
// The caller takes chunks the same way; when none is left it waits for the
// users to leave and closes the job with a CAS from "open, 0 users".
//
// So the caller never waits for a worker that did not start: a worker that
// is descheduled when a job is published (another process holds its core)
// finds the job closed when it wakes and takes no part, while the caller
// has run its chunks. It waits only for chunks that a worker holds. All job
// fields are written before the release publication and read after an
// acquire load of the same job's `entry`, and the job is reused only after
// it is closed, so the pool is data-race free under TSan.
#include "runtime/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define VTC_CPU_RELAX() _mm_pause()
#else
#define VTC_CPU_RELAX() std::this_thread::yield()
#endif

namespace vtc::cpu {

namespace {
constexpr uint64_t kClosed = uint64_t{1} << 31;
constexpr uint64_t kUsers = kClosed - 1;
uint64_t open_entry(uint64_t generation) { return generation << 32; }
bool same_job(uint64_t entry, uint64_t generation) { return (entry >> 32) == (generation & 0xffffffffu); }
constexpr int kSpinIterations = 1 << 12;  // tens of microseconds of spinning before sleeping
thread_local const ThreadPool* t_inside_pool = nullptr;
}  // namespace

struct ThreadPool::State {
  std::vector<std::thread> threads;
  std::mutex call_mutex;  // serializes parallel_for from different outside threads

  // The current job; written by the caller before `generation` is bumped.
  const RangeFn* fn = nullptr;
  int64_t n_items = 0;
  int64_t n_chunks = 0;
  std::atomic<int64_t> next_chunk{0};
  bool stop = false;

  std::atomic<uint64_t> generation{0};
  // (generation mod 2^32) << 32 | kClosed bit | number of workers inside.
  std::atomic<uint64_t> entry{kClosed};

  std::mutex error_mutex;
  std::exception_ptr error;
};

ThreadPool::ThreadPool(int n_threads) : state_(new State) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  state_->threads.reserve(static_cast<size_t>(n_threads - 1));
  for (int i = 1; i < n_threads; ++i) state_->threads.emplace_back([this] { worker_main(); });
}

ThreadPool::~ThreadPool() {
  state_->stop = true;
  state_->generation.fetch_add(1, std::memory_order_release);
  state_->generation.notify_all();
  for (auto& t : state_->threads) t.join();
  delete state_;
}

void ThreadPool::run_chunks() noexcept {
  State& s = *state_;
  for (;;) {
    const int64_t c = s.next_chunk.fetch_add(1, std::memory_order_relaxed);
    if (c >= s.n_chunks) return;
    const auto [begin, end] = chunk(s.n_items, c, s.n_chunks);
    try {
      (*s.fn)(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(s.error_mutex);
      if (!s.error) s.error = std::current_exception();
    }
  }
}

void ThreadPool::worker_main() {
  t_inside_pool = this;
  State& s = *state_;
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = s.generation.load(std::memory_order_acquire);
    for (int spin = 0; g == seen && spin < kSpinIterations; ++spin) {
      VTC_CPU_RELAX();
      g = s.generation.load(std::memory_order_acquire);
    }
    while (g == seen) {
      s.generation.wait(seen, std::memory_order_acquire);
      g = s.generation.load(std::memory_order_acquire);
    }
    seen = g;
    if (s.stop) return;
    uint64_t e = s.entry.load(std::memory_order_acquire);
    while (same_job(e, g) && (e & kClosed) == 0) {
      if (s.entry.compare_exchange_weak(e, e + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
        run_chunks();
        if (((s.entry.fetch_sub(1, std::memory_order_acq_rel) - 1) & kUsers) == 0) s.entry.notify_one();
        break;
      }
    }
  }
}

void ThreadPool::parallel_for(int64_t n_items, RangeFn fn) {
  if (n_items <= 0) return;
  // Inline: a single worker, a single item, or a nested call from a worker.
  if (n_threads_ == 1 || n_items == 1 || t_inside_pool == this) {
    fn(0, n_items);
    return;
  }
  std::lock_guard<std::mutex> call_lock(state_->call_mutex);
  State& s = *state_;
  s.fn = &fn;
  s.n_items = n_items;
  s.n_chunks = n_chunks(n_items);
  s.next_chunk.store(0, std::memory_order_relaxed);
  s.error = nullptr;
  const uint64_t g = s.generation.load(std::memory_order_relaxed) + 1;
  s.entry.store(open_entry(g), std::memory_order_release);
  s.generation.store(g, std::memory_order_release);
  s.generation.notify_all();

  const ThreadPool* outer = t_inside_pool;
  t_inside_pool = this;
  run_chunks();
  t_inside_pool = outer;

  // Close the job once no worker is inside.
  uint64_t e = s.entry.load(std::memory_order_acquire);
  for (int spin = 0;; ++spin) {
    if ((e & kUsers) == 0) {
      if (s.entry.compare_exchange_weak(e, e | kClosed, std::memory_order_acq_rel, std::memory_order_acquire)) break;
      continue;
    }
    if (spin < kSpinIterations) {
      VTC_CPU_RELAX();
      e = s.entry.load(std::memory_order_acquire);
    } else {
      s.entry.wait(e, std::memory_order_acquire);
      e = s.entry.load(std::memory_order_acquire);
    }
  }
  s.fn = nullptr;
  if (s.error) {
    std::exception_ptr e = std::move(s.error);
    s.error = nullptr;
    std::rethrow_exception(e);
  }
}

}  // namespace vtc::cpu
