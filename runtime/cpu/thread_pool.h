// A fixed-size thread pool for the CPU kernels.
//
// The pool has `size()` workers: the calling thread is worker 0 and
// size() - 1 threads are started once, in the constructor. parallel_for splits
// [0, n_items) into n_chunks(n_items) contiguous chunks (chunk c is
// [n*c/C, n*(c+1)/C)) and hands them out dynamically: each worker takes the
// next untaken chunk from a shared atomic counter until none is left. A
// worker that is descheduled for a moment therefore delays only the chunk it
// holds, while the others take the rest (a static one-chunk-per-worker split
// made the whole call wait for it), and one that has not woken up yet when
// the chunks run out takes no part at all: the caller does not wait for it. The chunk boundaries depend only on
// n_items and the pool size, and kernels compute each item independently of
// its chunk, so every kernel output is the same arithmetic whatever the
// thread count and whichever worker ran it. Workers spin briefly on a
// generation counter before sleeping in std::atomic::wait, so back-to-back
// small calls (a decode step issues hundreds) do not pay a futex round trip
// each; the cost of one call is measured by `vtc-bench-kernels --pool`.
//
// An exception thrown by the callback in any worker is captured; the first
// one is rethrown in the caller after every chunk has finished. A
// parallel_for issued from inside a worker (nesting) runs inline on that
// worker. Calls from different outside threads are serialized.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace vtc::cpu {

// A non-owning reference to a callable `void(int64_t begin, int64_t end)`.
// Cheap to pass by value; the callable must outlive the call.
class RangeFn {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, RangeFn>>>
  RangeFn(F&& f)  // NOLINT(google-explicit-constructor): used like std::function
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, int64_t b, int64_t e) { (*static_cast<std::remove_reference_t<F>*>(o))(b, e); }) {}
  void operator()(int64_t begin, int64_t end) const { call_(obj_, begin, end); }

 private:
  void* obj_;
  void (*call_)(void*, int64_t, int64_t);
};

class ThreadPool {
 public:
  // n_threads <= 0 means std::thread::hardware_concurrency() (at least 1).
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(begin, end) once for each chunk(n_items, c, n_chunks(n_items)),
  // c < n_chunks, on whichever worker takes it, and returns when all are
  // done. A worker may run several chunks, one after the other.
  void parallel_for(int64_t n_items, RangeFn fn);

  // Chunks per call: kChunksPerWorker per worker, at most one per item.
  static constexpr int kChunksPerWorker = 4;
  int64_t n_chunks(int64_t n_items) const {
    return n_threads_ == 1 ? 1 : std::min<int64_t>(n_items, int64_t{n_threads_} * kChunksPerWorker);
  }
  // Chunk c of n_chunks for n_items (exposed for tests).
  static std::pair<int64_t, int64_t> chunk(int64_t n_items, int64_t c, int64_t n_chunks) {
    return {n_items * c / n_chunks, n_items * (c + 1) / n_chunks};
  }

 private:
  struct State;
  void worker_main();
  void run_chunks() noexcept;

  int n_threads_;
  State* state_;
};

}  // namespace vtc::cpu
