// ThreadPool: coverage of every item exactly once in its fixed chunks,
// dynamic hand-out (a stalled worker does not hold back the others),
// exception propagation, nesting, many small calls, concurrent callers.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/cpu/thread_pool.h"

using vtc::cpu::ThreadPool;

TEST_CASE("thread pool: every item exactly once, in its fixed contiguous chunks", "[thread_pool]") {
  for (int n_threads : {1, 2, 3, 5}) {
    ThreadPool pool(n_threads);
    REQUIRE(pool.size() == n_threads);
    for (int64_t n : {0, 1, 2, 3, 7, 64, 1000, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> calls{0}, bad_chunks{0};
      // (Catch2 assertions are not thread-safe: record, check afterwards.)
      pool.parallel_for(n, [&](int64_t b, int64_t e) {
        calls.fetch_add(1);
        // A non-empty chunk, one of the fixed chunks (or everything, inline).
        bool found = b == 0 && e == n;
        const int64_t chunks = pool.n_chunks(n);
        for (int64_t c = 0; c < chunks; ++c) found |= ThreadPool::chunk(n, c, chunks) == std::pair<int64_t, int64_t>{b, e};
        if (b >= e || !found) bad_chunks.fetch_add(1);
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      });
      CHECK(bad_chunks.load() == 0);
      INFO("threads " << n_threads << " items " << n);
      for (auto& h : hits) CHECK(h.load() == 1);
      CHECK(calls.load() == (n == 0 ? 0 : n == 1 || n_threads == 1 ? 1 : pool.n_chunks(n)));
    }
  }
}

TEST_CASE("thread pool: the first exception reaches the caller, and the pool keeps working", "[thread_pool]") {
  ThreadPool pool(3);
  for (int round = 0; round < 3; ++round) {
    CHECK_THROWS_WITH(pool.parallel_for(9,
                                        [&](int64_t b, int64_t) {
                                          if (b >= 3) throw std::runtime_error("boom");
                                        }),
                      "boom");
    std::atomic<int64_t> sum{0};
    pool.parallel_for(100, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum += i;
    });
    CHECK(sum.load() == 4950);
  }
  // Thrown by the caller's own chunk (chunk 0).
  CHECK_THROWS_AS(pool.parallel_for(6,
                                    [&](int64_t b, int64_t) {
                                      if (b == 0) throw std::logic_error("first");
                                    }),
                  std::logic_error);
}

TEST_CASE("thread pool: nested calls run inline", "[thread_pool]") {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  pool.parallel_for(6, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      pool.parallel_for(10, [&](int64_t b2, int64_t e2) { total += e2 - b2; });
  });
  CHECK(total.load() == 60);
}

TEST_CASE("thread pool: many small calls", "[thread_pool]") {
  ThreadPool pool(3);
  int64_t expected = 0;
  std::atomic<int64_t> sum{0};
  for (int call = 0; call < 20000; ++call) {
    const int64_t n = 1 + call % 5;
    pool.parallel_for(n, [&](int64_t b, int64_t e) { sum += e - b; });
    expected += n;
  }
  CHECK(sum.load() == expected);
}

TEST_CASE("thread pool: callers on different threads are serialized", "[thread_pool]") {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  auto work = [&] {
    for (int i = 0; i < 500; ++i)
      pool.parallel_for(8, [&](int64_t b, int64_t e) { sum += e - b; });
  };
  std::thread a(work), b(work);
  a.join();
  b.join();
  CHECK(sum.load() == 2 * 500 * 8);
}

TEST_CASE("thread pool: default size is the hardware concurrency", "[thread_pool]") {
  ThreadPool pool;
  CHECK(pool.size() >= 1);
  CHECK(pool.size() == static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

TEST_CASE("thread pool: chunks are handed out dynamically, so a stalled worker delays only its own chunk",
          "[thread_pool]") {
  // The first chunk taken sleeps; with a static split its worker would also
  // own a quarter/half of the items. Here the other workers run everything
  // else, so the stalled call ends up with exactly one chunk.
  ThreadPool pool(2);
  const int64_t n = 64, chunks = pool.n_chunks(n);
  REQUIRE(chunks == 2 * ThreadPool::kChunksPerWorker);
  std::atomic<bool> first{true};
  std::atomic<int64_t> stalled_items{0}, other_items{0};
  pool.parallel_for(n, [&](int64_t b, int64_t e) {
    if (first.exchange(false)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      stalled_items += e - b;
    } else {
      other_items += e - b;
    }
  });
  CHECK(stalled_items.load() == n / chunks);
  CHECK(other_items.load() == n - n / chunks);
}
