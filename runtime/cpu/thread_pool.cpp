// ThreadPool: see thread_pool.h.
//
// Protocol. The caller publishes a job (fn, n_items, chunk count, next
// chunk = 0), sets `pending` to the number of helper threads (all of them),
// and bumps `generation` (release). Each worker waits for the generation to
// change (spin, then atomic::wait), takes chunks with fetch_add on
// `next_chunk` until it passes the count, and decrements `pending`
// (acq_rel); the last one notifies. The caller takes chunks the same way,
// then waits for `pending` to reach zero (spin, then atomic::wait). All job fields
// are written before the release increment and read after the acquire load,
// so the pool is data-race free under TSan.
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
  std::atomic<int> pending{0};

  std::mutex error_mutex;
  std::exception_ptr error;
};

ThreadPool::ThreadPool(int n_threads) : state_(new State) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  state_->threads.reserve(static_cast<size_t>(n_threads - 1));
  for (int i = 1; i < n_threads; ++i) state_->threads.emplace_back([this, i] { worker_main(i); });
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

void ThreadPool::worker_main(int /*index*/) {
  t_inside_pool = this;
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = state_->generation.load(std::memory_order_acquire);
    for (int spin = 0; g == seen && spin < kSpinIterations; ++spin) {
      VTC_CPU_RELAX();
      g = state_->generation.load(std::memory_order_acquire);
    }
    while (g == seen) {
      state_->generation.wait(seen, std::memory_order_acquire);
      g = state_->generation.load(std::memory_order_acquire);
    }
    seen = g;
    if (state_->stop) return;
    // Every worker acknowledges every job, even one that left no chunk for
    // it, so the caller never rewrites the job fields while a worker reads
    // them.
    run_chunks();
    if (state_->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) state_->pending.notify_one();
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
  s.pending.store(n_threads_ - 1, std::memory_order_relaxed);
  s.generation.fetch_add(1, std::memory_order_release);
  s.generation.notify_all();

  const ThreadPool* outer = t_inside_pool;
  t_inside_pool = this;
  run_chunks();
  t_inside_pool = outer;

  int p = s.pending.load(std::memory_order_acquire);
  for (int spin = 0; p != 0 && spin < kSpinIterations; ++spin) {
    VTC_CPU_RELAX();
    p = s.pending.load(std::memory_order_acquire);
  }
  while (p != 0) {
    s.pending.wait(p, std::memory_order_acquire);
    p = s.pending.load(std::memory_order_acquire);
  }
  s.fn = nullptr;
  if (s.error) {
    std::exception_ptr e = std::move(s.error);
    s.error = nullptr;
    std::rethrow_exception(e);
  }
}

}  // namespace vtc::cpu
