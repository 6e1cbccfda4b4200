// The arena planner and the state store.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

#include "ir/module.h"
#include "passes/buffer_plan.h"
#include "runtime/state/host_states.h"
#include "runtime/state/state_store.h"
#include "support/error.h"

using namespace vtc;

TEST_CASE("buffers with disjoint lifetimes share memory, and overlapping ones do not", "[buffer_plan]") {
  std::vector<BufferRequest> reqs = {{1000, 0, 1}, {1000, 2, 3}, {500, 1, 2}};
  BufferPlan plan = plan_buffers(reqs, 64);
  CHECK(plan.offsets[0] == plan.offsets[1]);      // [0,1] and [2,3] never meet
  CHECK(plan.offsets[2] >= 1024);                 // meets both, placed after them (aligned)
  CHECK(plan.arena_bytes == 1024 + 512);
  CHECK(plan.naive_bytes == 2500);
  CHECK(plan_is_valid(reqs, plan));
}

TEST_CASE("random lifetimes always give a valid plan no larger than the naive sum", "[buffer_plan]") {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<BufferRequest> reqs(size_t(1 + rng() % 40));
    for (auto& r : reqs) {
      r.bytes = 1 + rng() % 5000;
      r.def = int64_t(rng() % 50);
      r.last_use = r.def + int64_t(rng() % 20);
    }
    BufferPlan plan = plan_buffers(reqs, 64);
    REQUIRE(plan_is_valid(reqs, plan));
    uint64_t aligned_naive = 0;
    for (const auto& r : reqs) aligned_naive += (r.bytes + 63) / 64 * 64;
    CHECK(plan.arena_bytes <= aligned_naive);
  }
}

TEST_CASE("a deliberately overlapping plan is detected", "[buffer_plan]") {
  std::vector<BufferRequest> reqs = {{100, 0, 5}, {100, 3, 4}};
  BufferPlan plan = plan_buffers(reqs);
  plan.offsets[1] = 50;
  CHECK_FALSE(plan_is_valid(reqs, plan));
}

TEST_CASE("the state store follows the declarations", "[state]") {
  ir::Module m;
  const ir::Dim S = ir::Dim::symbol("S"), P = ir::Dim::symbol("P");
  m.add_state("kv.0", ir::StateKind::Paged, {ir::ElemType::F16, {2, P, 16, 2, 8}, ir::Placement::Host});
  m.add_state("last_ids", ir::StateKind::Plain, {ir::ElemType::I32, {S}, ir::Placement::Host});
  StateStore store(m, {3, 32});
  HostStates host(store);
  REQUIRE(store.layouts().size() == 2);
  auto& kv = host.buffer("kv.0");
  CHECK(kv.row_elems == 16);
  CHECK(kv.rows_per_slot == 32);
  CHECK(store.page_size() == 16);
  CHECK(store.n_pages() == 3 * 2);  // default pool: every slot's full context
  CHECK(store.total_bytes() == 2 * 6 * 16 * 16 * 2 + 3 * 4);
  auto ids = host.slot_bytes(host.buffer("last_ids"), 1);
  ids[0] = 7;
  REQUIRE(store.reserve(1, 20));
  CHECK(store.page_table(1).size() == 2);
  CHECK(store.free_pages() == 4);
  host.kv_row(kv, 1, 1, 17)[0] = 9;
  const int32_t page_of_17 = store.page_table(1)[1];
  store.reset_slot(1);
  CHECK(ids[0] == 0);  // the store told the storage: the slot's row is empty again
  CHECK(store.free_pages() == 6);
  CHECK(store.page_table(1).empty());
  CHECK_THROWS_WITH(host.kv_row(kv, 1, 0, 0), Catch::Contains("no KV page for position 0"));
  CHECK_THROWS_WITH(host.slot_bytes(kv, 0), Catch::Contains("is paged"));
  CHECK_THROWS_WITH(host.slot_bytes(host.buffer("last_ids"), 3), Catch::Contains("slot 3 out of range [0, 3)"));
  CHECK_THROWS_WITH(host.buffer("nope"), Catch::Contains("no state @nope"));
  CHECK_THROWS_WITH(store.layout("nope"), Catch::Contains("no state @nope"));
  // A page handed out again is zeroed in the storage, whoever held it.
  REQUIRE(store.reserve(0, 32));
  const auto& table = store.page_table(0);
  REQUIRE(std::find(table.begin(), table.end(), page_of_17) != table.end());
  for (int half = 0; half < 2; ++half)
    for (int64_t p = 0; p < 32; ++p) CHECK(host.kv_row(kv, 0, half, p)[0] == 0);
}

// Checkpoints (prefix reuse on recurrent models): a slot's plain and ring
// rows copied out and back into another slot, paged states untouched; a
// checkpoint of another storage is refused.
TEST_CASE("a slot checkpoint copies the plain and ring rows into another slot", "[state]") {
  ir::Module m;
  const ir::Dim S = ir::Dim::symbol("S"), P = ir::Dim::symbol("P");
  m.add_state("kv.0", ir::StateKind::Paged, {ir::ElemType::F16, {2, P, 16, 2, 8}, ir::Placement::Host});
  m.add_state("conv", ir::StateKind::Plain, {ir::ElemType::F32, {S, 3, 4}, ir::Placement::Host});
  m.add_state("history", ir::StateKind::Ring, {ir::ElemType::I32, {S, 5}, ir::Placement::Host});
  StateStore store(m, {2, 32});
  HostStates host(store);
  CHECK(store.slot_state_bytes() == 3 * 4 * 4 + 5 * 4);
  auto conv0 = host.slot_bytes(host.buffer("conv"), 0), hist0 = host.slot_bytes(host.buffer("history"), 0);
  for (size_t i = 0; i < conv0.size(); ++i) conv0[i] = uint8_t(i + 1);
  for (size_t i = 0; i < hist0.size(); ++i) hist0[i] = uint8_t(100 + i);
  const auto checkpoint = store.save_checkpoint(0);
  store.reset_slot(0);
  CHECK(hist0[0] == 0xFF);  // emptied: the checkpoint is a copy, not a view
  store.restore_checkpoint(1, *checkpoint);
  auto conv1 = host.slot_bytes(host.buffer("conv"), 1), hist1 = host.slot_bytes(host.buffer("history"), 1);
  for (size_t i = 0; i < conv1.size(); ++i) CHECK(conv1[i] == uint8_t(i + 1));
  for (size_t i = 0; i < hist1.size(); ++i) CHECK(hist1[i] == uint8_t(100 + i));
  // Saved into itself (a verify step's checkpoint): the same object, now
  // holding the slot's latest rows.
  const SlotCheckpoint* first = checkpoint.get();
  for (size_t i = 0; i < conv1.size(); ++i) conv1[i] = uint8_t(200 - i);
  auto again = store.save_checkpoint(1, std::unique_ptr<SlotCheckpoint>(nullptr));
  again = store.save_checkpoint(1, std::move(again));
  const SlotCheckpoint* reused = again.get();
  again = store.save_checkpoint(1, std::move(again));
  CHECK(again.get() == reused);
  store.restore_checkpoint(0, *again);
  for (size_t i = 0; i < conv0.size(); ++i) CHECK(conv0[i] == uint8_t(200 - i));
  CHECK(first != reused);
  StateStore other_store(m, {2, 32});
  HostStates other(other_store);
  CHECK_THROWS_WITH(other_store.restore_checkpoint(0, *checkpoint), Catch::Contains("another storage"));
  // Another storage's checkpoint is not overwritten: a new one is made.
  auto mine = other_store.save_checkpoint(0, std::move(again));
  CHECK_NOTHROW(other_store.restore_checkpoint(1, *mine));
  StateStore bare(m, {2, 32});
  CHECK_THROWS_WITH(bare.save_checkpoint(0), Catch::Contains("no storage attached"));
}

namespace {
// VmRSS of this process in bytes.
int64_t resident_bytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return -1;
}
}  // namespace

// The paged pool is reserved, not touched: a pool for every slot's whole
// context (here 4.3 GB) costs memory only where rows are written, and a
// page handed out again reads zeros whether its OS pages were given back
// (the interior) or cleared (its edges: pages of 16 rows of 2000 bytes do
// not start on 4 KiB boundaries).
TEST_CASE("the KV pool is resident only where written, and a reused page reads zeros", "[state]") {
  ir::Module m;
  const ir::Dim P = ir::Dim::symbol("P");
  m.add_state("kv.0", ir::StateKind::Paged, {ir::ElemType::F16, {2, P, 16, 1, 1000}, ir::Placement::Host});
  const int64_t before = resident_bytes();
  StateStore store(m, {4, 16 * 16800});  // 4 slots, 2 halves x 67200 pages x 16 x 2000 B
  HostStates host(store);
  REQUIRE(store.total_bytes() > (uint64_t{4} << 30));
  CHECK(resident_bytes() - before < (int64_t{64} << 20));
  auto& kv = host.buffer("kv.0");
  const int64_t rows = 16 * 1000;  // 1000 pages: 64 MB over both halves
  REQUIRE(store.reserve(0, rows));
  for (int64_t pos = 0; pos < rows; ++pos)
    for (int half = 0; half < 2; ++half) std::memset(host.kv_row(kv, 0, half, pos), 0x5a, 2000);
  CHECK(resident_bytes() - before > (int64_t{60} << 20));
  CHECK(resident_bytes() - before < (int64_t{200} << 20));
  store.reset_slot(0);
  REQUIRE(store.reserve(1, rows));  // the same pages, handed out again
  size_t nonzero = 0;
  for (int64_t pos = 0; pos < rows; ++pos)
    for (int half = 0; half < 2; ++half) {
      const uint8_t* row = host.kv_row(kv, 1, half, pos);
      nonzero += size_t(std::count_if(row, row + 2000, [](uint8_t b) { return b != 0; }));
    }
  CHECK(nonzero == 0);
}

// A pool the machine can never back fails at start-up (the kernel's
// overcommit check refuses the mapping; Session turns the bad_alloc into
// "cannot allocate the state store ... out of memory"), not on a later
// write. Where overcommit is "always" (vm.overcommit_memory = 1) the
// kernel accepts any mapping, and there is nothing to check.
TEST_CASE("a KV pool larger than the machine can back is refused at allocation", "[state]") {
  std::ifstream mode_file("/proc/sys/vm/overcommit_memory");
  int mode = 1;
  if (!(mode_file >> mode) || mode == 1) {
    WARN("vm.overcommit_memory is 1 (or unreadable): any mapping is accepted; not checked here");
    return;
  }
  ir::Module m;
  const ir::Dim P = ir::Dim::symbol("P");
  m.add_state("kv.0", ir::StateKind::Paged, {ir::ElemType::F16, {2, P, 16, 1, 65536}, ir::Placement::Host});
  StateStore store(m, {1, 16 * 262144});  // 262144 pages of 2 x 2 MiB: 1 TiB
  REQUIRE(store.total_bytes() >= (uint64_t{1} << 40));
  CHECK_THROWS_AS(HostStates(store), std::bad_alloc);
}
