// The cost model's counts (runtime/cuda/sim/profiler.h, runtime/cuda/
// cost_model.h) on hand-written kernels whose sectors, DRAM bytes and bank
// conflicts this file computes by hand. Runs under VTC_CUDA_DEVICE=sim and
// VTC_CUDA_SIM_PROFILE=1 (ctest sets both).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <vector>

#include "runtime/cuda/cost_model.h"
#include "runtime/cuda/driver.h"
#include "support/error.h"
#include "tests/cuda/sim_fixture.h"

using namespace vtc::cuda;

namespace {

struct ProfiledSim : test::Sim {
  ProfiledSim() {
    if (!std::getenv("VTC_CUDA_SIM_PROFILE")) FAIL("run with VTC_CUDA_SIM_PROFILE=1 (ctest sets it)");
  }
  // One launch of `fn` (grid x blocks of `threads`) with buffers x and y,
  // inside its own profile window; returns the window.
  const VtcSimProfile& profile(void* fn, unsigned blocks, unsigned threads, DevPtr x, DevPtr y) {
    sim_profile_begin();
    void* params[] = {&x, &y};
    dev->launch(fn, blocks, 1, threads, params, stream);
    dev->sync(stream);
    return sim_profile_end();
  }
};

constexpr const char* kParams = "const float* __restrict__ x, float* __restrict__ y";

}  // namespace

TEST_CASE("coalesced 16-byte loads: 16 sectors a request, every byte once from DRAM", "[cost]") {
  ProfiledSim s;
  // 32 lanes x 4 loads of 16 bytes: 2048 bytes, 64 sectors, 4 requests.
  void* fn = s.kernel("coalesced16", kParams, R"(
  typedef float Q __attribute__((vector_size(16)));  // one 16-byte load on the host, as float4 on a GPU
  const Q* q = (const Q*)x;
  float sum = 0.0f;
  for (int k = 0; k < 4; ++k) { Q v = q[threadIdx.x + 32 * k]; sum += v[0] + v[1] + v[2] + v[3]; }
  y[threadIdx.x] = sum;)");
  DevPtr x = s.dev->alloc(2048), y = s.dev->alloc(128);
  s.dev->upload(x, std::vector<float>(512, 1.0f).data(), 2048, s.stream);
  const VtcSimProfile& p = s.profile(fn, 1, 32, x, y);
  REQUIRE(p.launches == 1);
  const VtcSimLaunchProfile& r = p.records[0];
  CHECK(r.load_requests == 4);
  CHECK(r.load_sectors == 64);  // 16 per request: 512 bytes each
  CHECK(r.load_bytes == 2048);
  CHECK(r.store_requests == 1);
  CHECK(r.store_sectors == 4);  // 32 lanes x 4 bytes
  CHECK(r.distinct_sectors == 68);
  CHECK(r.l1_miss_sectors == 64);  // nothing re-read: every load sector goes to L2
  CHECK(r.first_load_sectors == 64);
  CHECK(r.first_store_sectors == 4);
  const StepCost c = predict_step("test", p, nullptr, {}, find_gpu("h200"), 0);
  REQUIRE(c.kernels.size() == 1);
  CHECK(c.kernels[0].dram_bytes == 2176);
  CHECK(c.kernels[0].sectors / c.kernels[0].requests == Approx(68.0 / 5));
  s.dev->free(x);
  s.dev->free(y);
}

TEST_CASE("a 128-byte stride: every lane its own sector", "[cost]") {
  ProfiledSim s;
  void* fn = s.kernel("stride128", kParams, "y[threadIdx.x] = x[threadIdx.x * 32];");
  DevPtr x = s.dev->alloc(4096), y = s.dev->alloc(128);
  const VtcSimProfile& p = s.profile(fn, 1, 32, x, y);
  REQUIRE(p.launches == 1);
  const VtcSimLaunchProfile& r = p.records[0];
  CHECK(r.load_requests == 1);
  CHECK(r.load_sectors == 32);
  CHECK(r.load_bytes == 128);  // 4 bytes asked for, 32 fetched per lane
  CHECK(r.first_load_sectors == 32);
  s.dev->free(x);
  s.dev->free(y);
}

TEST_CASE("a re-read sector: one sector a request, and a second launch finds it in L2", "[cost]") {
  ProfiledSim s;
  // Every lane of each of 4 warps reads x[0..3] (one sector).
  void* fn = s.kernel("reread", kParams, R"(
  float v = 0.0f;
  for (int k = 0; k < 4; ++k) v += x[k];
  y[threadIdx.x] = v;)");
  DevPtr x = s.dev->alloc(128), y = s.dev->alloc(512);
  sim_profile_begin();
  void* params[] = {&x, &y};
  s.dev->launch(fn, 1, 1, 128, params, s.stream);
  s.dev->launch(fn, 1, 1, 128, params, s.stream);
  s.dev->sync(s.stream);
  const VtcSimProfile& p = sim_profile_end();
  REQUIRE(p.launches == 2);
  for (const VtcSimLaunchProfile* r : {&p.records[0], &p.records[1]}) {
    CHECK(r->load_requests == 16);  // 4 warps x 4 loads
    CHECK(r->load_sectors == 16);   // each request one sector
  }
  CHECK(p.records[0].first_load_sectors == 1);
  CHECK(p.records[0].l1_miss_sectors == 1);  // the first request brings the sector into the block's L1
  CHECK(p.records[1].l1_miss_sectors == 1);  // a new block, a cold L1
  CHECK(p.records[1].first_load_sectors == 0);
  // The second launch re-reads the sector after the first touched 1 + 16 sectors.
  unsigned long long reused = 0;
  for (unsigned long long n : p.records[1].reuse) reused += n;
  CHECK(reused == 1);
  const StepCost c = predict_step("test", p, nullptr, {}, find_gpu("h200"), 0);
  CHECK(c.kernels[0].dram_bytes == 32 + 512);  // the sector, then y's 16 sectors written
  CHECK(c.kernels[1].dram_bytes == 0);         // x from L2, y already counted
  s.dev->free(x);
  s.dev->free(y);
}

TEST_CASE("shared-memory bank conflicts: none, 2-way and 32-way", "[cost]") {
  ProfiledSim s;
  // One warp. Three stores of 4 bytes: stride 1 word (1 wavefront), stride
  // 2 words (2 words in each even bank: 2 wavefronts), stride 32 words
  // (32 words in bank 0: 32 wavefronts); then one conflict-free read.
  void* fn = s.kernel("banks", kParams, R"(
  __shared__ float a[32], b[64], c[1024];
  const int t = threadIdx.x;
  a[t] = x[t];
  b[2 * t] = x[t];
  c[32 * t] = x[t];
  __syncthreads();
  y[t] = a[(t + 3) % 32] + b[2 * ((t + 1) % 32)] + c[32 * ((t + 2) % 32)];)");
  DevPtr x = s.dev->alloc(128), y = s.dev->alloc(128);
  const VtcSimProfile& p = s.profile(fn, 1, 32, x, y);
  REQUIRE(p.launches == 1);
  const VtcSimLaunchProfile& r = p.records[0];
  CHECK(r.shared_requests == 6);
  CHECK(r.shared_ideal_wavefronts == 6);
  // stores 1 + 2 + 32, loads 1 + 2 + 32
  CHECK(r.shared_wavefronts == 70);
  const StepCost c = predict_step("test", p, nullptr, {}, find_gpu("h200"), 0);
  CHECK(c.kernels[0].shared_conflicts == 64);
  CHECK(r.block_barriers == 1);
  s.dev->free(x);
  s.dev->free(y);
}

TEST_CASE("copies and host waits are counted and the GPU table refuses an unknown name", "[cost]") {
  ProfiledSim s;
  DevPtr x = s.dev->alloc(4096);
  std::vector<float> host(1024, 2.0f);
  sim_profile_begin();
  s.dev->upload(x, host.data(), 4096, s.stream);
  s.dev->download(host.data(), x, 4096, s.stream);  // pageable: the call waits
  s.dev->sync(s.stream);
  const VtcSimProfile& p = sim_profile_end();
  CHECK(p.copies_in == 1);
  CHECK(p.copies_out == 1);
  CHECK(p.bytes_in + p.bytes_out == 8192);
  CHECK(p.pageable_copies == 2);
  CHECK(p.host_waits == 2);
  s.dev->free(x);
  CHECK_THROWS_WITH(find_gpu("v100"), Catch::Contains("h200"));
}

TEST_CASE("a sampled window runs one block in N and scales the counts to the whole grid", "[cost]") {
  ProfiledSim s;
  // 64 blocks of 32 lanes, each reading its own 128 contiguous bytes.
  void* fn = s.kernel("blocks64", kParams, "y[blockIdx.x * 32 + threadIdx.x] = x[blockIdx.x * 32 + threadIdx.x];");
  DevPtr x = s.dev->alloc(64 * 128), y = s.dev->alloc(64 * 128);
  s.dev->upload(x, std::vector<float>(64 * 32, 1.0f).data(), 64 * 128, s.stream);
  void* params[] = {&x, &y};
  sim_profile_begin(4);
  s.dev->launch(fn, 64, 1, 32, params, s.stream);
  s.dev->sync(s.stream);
  const VtcSimProfile& p = sim_profile_end();
  REQUIRE(p.launches == 1);
  CHECK(p.records[0].total_blocks == 64);
  CHECK(p.records[0].sampled_blocks == 16);  // blocks 0, 4, 8, ...
  CHECK(p.records[0].load_sectors == 16 * 4);
  const StepCost c = predict_step("test", p, nullptr, {}, find_gpu("h200"), 0);
  CHECK(c.kernels[0].dram_bytes == 2 * 64 * 128);  // x read and y written, whole grid
  CHECK(c.kernels[0].requests == 2 * 64);
  // Only the sampled blocks ran: block 1 wrote nothing.
  const std::vector<float> out = [&] {
    std::vector<float> v(64 * 32);
    s.dev->download(v.data(), y, v.size() * 4, s.stream);
    return v;
  }();
  CHECK(out[0] == 1.0f);
  CHECK(out[32] == 0.0f);
  s.dev->free(x);
  s.dev->free(y);
}
