// A fixed-size thread pool for the CPU kernels.
//
// The pool has `size()` workers: the calling thread is worker 0 and
// size() - 1 threads are started once, in the constructor. parallel_for splits
// [0, n_items) into size() contiguous chunks (static chunking: worker t gets
// [n*t/N, n*(t+1)/N)), so a given item always lands in the same chunk for a
// given pool size and every kernel output is computed by the same arithmetic
// whatever the thread count. Workers spin briefly on a generation counter
// before sleeping in std::atomic::wait, so back-to-back small calls (a decode
// step issues hundreds) do not pay a futex round trip each.
//
// An exception thrown by the callback in any worker is captured; the first
// one is rethrown in the caller after every chunk has finished. A
// parallel_for issued from inside a worker (nesting) runs inline on that
// worker. Calls from different outside threads are serialized.
#pragma once

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

  // Calls fn(begin, end) on disjoint, contiguous, non-empty chunks covering
  // [0, n_items), at most one chunk per worker, and returns when all are done.
  void parallel_for(int64_t n_items, RangeFn fn);

  // The chunk worker `t` of `n_workers` gets for n_items (exposed for tests).
  static std::pair<int64_t, int64_t> chunk(int64_t n_items, int t, int n_workers) {
    return {n_items * t / n_workers, n_items * (t + 1) / n_workers};
  }

 private:
  struct State;
  void worker_main(int index);
  void run_chunk(int index) noexcept;

  int n_threads_;
  State* state_;
};

}  // namespace vtc::cpu
