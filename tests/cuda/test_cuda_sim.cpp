// The simulated CUDA device itself (runtime/cuda/sim), through the same
// wrappers the executor uses (runtime/cuda/driver.h, codegen/cuda/nvrtc.h),
// on hand-written kernels whose results the test computes on its own:
// warp shuffles and votes, barriers and shared memory, graph capture and
// replay, and what the simulator reports where a GPU would hang or go
// silently wrong (a divergent barrier, mismatched warp collectives, a
// pointer into no allocation, a compile error). The [checked] cases run
// under VTC_CUDA_SIM_CHECK=1 (ctest sets it): an out-of-bounds access and a
// shared-memory race are named with the kernel and the thread.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "codegen/cuda/nvrtc.h"
#include "runtime/cuda/driver.h"
#include "support/error.h"
#include "tests/cuda/sim_fixture.h"

using namespace vtc::cuda;
using vtc::cuda::test::Sim;

namespace {

// Runs `fn` on one block of `threads` with one device buffer of `n` ints
// and returns the buffer.
std::vector<int> run_ints(Sim& s, void* fn, unsigned threads, size_t n) {
  DevPtr y = s.dev->alloc(n * 4);
  void* params[] = {&y};
  s.dev->launch(fn, 1, 1, threads, params, s.stream);
  std::vector<int> out = s.read<int>(y, n);
  s.dev->free(y);
  return out;
}

}  // namespace

TEST_CASE("the simulated device names itself and runs a grid", "[sim]") {
  Sim s;
  CHECK(s.dev->simulated());
  CHECK(s.dev->name() == "CUDA (simulated device)");
  void* fn = s.kernel("grid_ids", "int* y", "  y[blockIdx.x * blockDim.x + threadIdx.x] = blockIdx.x * 1000 + threadIdx.x;");
  DevPtr y = s.dev->alloc(5 * 96 * 4);
  void* params[] = {&y};
  s.dev->launch(fn, 5, 1, 96, params, s.stream);
  const auto got = s.read<int>(y, 5 * 96);
  for (int b = 0; b < 5; ++b)
    for (int t = 0; t < 96; ++t) REQUIRE(got[size_t(b * 96 + t)] == b * 1000 + t);
  s.dev->free(y);
}

TEST_CASE("warp shuffles and votes read the named lane", "[sim]") {
  Sim s;
  void* fn = s.kernel("shuffles", "int* y", R"(  const int lane = threadIdx.x & 31, v = threadIdx.x * 3 + 1;
  int sum = v;
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  y[threadIdx.x * 5 + 0] = sum;
  y[threadIdx.x * 5 + 1] = __shfl_down_sync(0xffffffffu, v, 3);
  y[threadIdx.x * 5 + 2] = __shfl_up_sync(0xffffffffu, v, 2);
  y[threadIdx.x * 5 + 3] = __shfl_sync(0xffffffffu, v, 7);
  y[threadIdx.x * 5 + 4] = (int)__ballot_sync(0xffffffffu, lane % 3 == 0);)");
  const auto got = run_ints(s, fn, 64, 64 * 5);
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32, warp0 = t - lane;
    int sum = 0;
    for (int l = 0; l < 32; ++l) sum += (warp0 + l) * 3 + 1;
    INFO("thread " << t);
    CHECK(got[size_t(t * 5)] == sum);
    CHECK(got[size_t(t * 5 + 1)] == (lane + 3 < 32 ? (t + 3) * 3 + 1 : t * 3 + 1));
    CHECK(got[size_t(t * 5 + 2)] == (lane >= 2 ? (t - 2) * 3 + 1 : t * 3 + 1));
    CHECK(got[size_t(t * 5 + 3)] == (warp0 + 7) * 3 + 1);
    unsigned ballot = 0;
    for (int l = 0; l < 32; ++l) ballot |= (l % 3 == 0 ? 1u : 0u) << l;
    CHECK(unsigned(got[size_t(t * 5 + 4)]) == ballot);
  }
}

TEST_CASE("__syncthreads orders shared memory across the block", "[sim]") {
  Sim s;
  void* fn = s.kernel("reverse", "int* y", R"(  __shared__ int buf[256];
  buf[threadIdx.x] = threadIdx.x * 7;
  __syncthreads();
  y[threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];)");
  const auto got = run_ints(s, fn, 256, 256);
  for (int t = 0; t < 256; ++t) REQUIRE(got[size_t(t)] == (255 - t) * 7);
}

TEST_CASE("a graph replays what it captured, and synchronizing a capturing stream is an error", "[sim]") {
  Sim s;
  void* fn = s.kernel("add_value", "int* y, long long v", "  y[threadIdx.x] += (int)v;");
  DevPtr y = s.dev->alloc(32 * 4);
  long long v = 5;
  void* params[] = {&y, &v};
  s.dev->begin_capture(s.stream);
  s.dev->launch(fn, 1, 1, 32, params, s.stream);
  void* graph = s.dev->end_capture(s.stream);
  v = 1000;  // parameters were copied at the captured call
  CHECK(s.read<int>(y, 32) == std::vector<int>(32, 0));  // capture ran nothing
  s.dev->launch_graph(graph, s.stream);
  s.dev->launch_graph(graph, s.stream);
  CHECK(s.read<int>(y, 32) == std::vector<int>(32, 10));
  s.dev->destroy_graph(graph);
  s.dev->begin_capture(s.stream);
  CHECK_THROWS_WITH(s.dev->sync(s.stream), Catch::Contains("capturing"));
  CHECK_THROWS_WITH(s.dev->end_capture(s.stream), Catch::Contains("invalidated"));
  s.dev->free(y);
}

TEST_CASE("what a GPU would hang on or leave undefined is an error naming the kernel", "[sim]") {
  SECTION("a barrier in divergent code") {
    Sim s;
    // Half of warp 0 waits for the block, the other half for its warp.
    void* fn = s.kernel("divergent_barrier", "int* y",
                        "  if (threadIdx.x < 16) __syncthreads();\n  else __syncwarp();\n  y[threadIdx.x] = 1;");
    CHECK_THROWS_WITH(run_ints(s, fn, 64, 64),
                      Catch::Contains("kernel divergent_barrier") && Catch::Contains("deadlock"));
  }
  SECTION("lanes at different warp collectives") {
    Sim s;
    void* fn = s.kernel("mixed_collectives", "int* y",
                        "  int v = threadIdx.x;\n  if (threadIdx.x < 16) __syncwarp();\n  else v = __shfl_xor_sync(0xffffffffu, v, 1);\n"
                        "  y[threadIdx.x] = v;");
    CHECK_THROWS_WITH(run_ints(s, fn, 32, 32),
                      Catch::Contains("kernel mixed_collectives") && Catch::Contains("different warp collectives"));
  }
  SECTION("a pointer parameter into no allocation") {
    Sim s;
    void* fn = s.kernel("wild_pointer", "int* y", "  y[threadIdx.x] = 1;");
    static int host[32];  // host memory, never a device allocation
    DevPtr wild = DevPtr(reinterpret_cast<uintptr_t>(host));
    void* params[] = {&wild};
    // Launches are asynchronous: the error may come back from the launch
    // itself (the stream already ran it) or from the next synchronization.
    auto launch_and_sync = [&] {
      s.dev->launch(fn, 1, 1, 32, params, s.stream);
      s.dev->sync(s.stream);
    };
    CHECK_THROWS_WITH(launch_and_sync(), Catch::Contains("kernel wild_pointer") && Catch::Contains("parameter `y`"));
  }
  SECTION("a compile error, in NVRTC's form with the source line") {
    Sim s;
    CHECK_THROWS_WITH(s.kernel("bad_source", "int* y", "  y[threadIdx.x] = undeclared_name;"),
                      Catch::Contains("bad_source") && Catch::Contains("undeclared_name") && Catch::Contains(">"));
  }
}

TEST_CASE("checked mode names an access past a buffer and a shared-memory race", "[sim][checked]") {
  REQUIRE(std::getenv("VTC_CUDA_SIM_CHECK"));  // ctest sets it for these cases
  SECTION("one element past the end") {
    Sim s;
    void* fn = s.kernel("past_the_end", "int* y", "  y[threadIdx.x + 1] = 1;");
    CHECK_THROWS_WITH(run_ints(s, fn, 64, 64), Catch::Contains("kernel past_the_end") && Catch::Contains("thread 63") &&
                                                   Catch::Contains("past the end") && Catch::Contains("`y`"));
  }
  SECTION("a read of a word another thread wrote, without a barrier") {
    Sim s;
    void* fn = s.kernel("missing_barrier", "int* y",
                        "  __shared__ int buf[64];\n  buf[threadIdx.x] = threadIdx.x;\n  y[threadIdx.x] = buf[63 - threadIdx.x];");
    CHECK_THROWS_WITH(run_ints(s, fn, 64, 64),
                      Catch::Contains("kernel missing_barrier") && Catch::Contains("shared-memory race"));
  }
}
