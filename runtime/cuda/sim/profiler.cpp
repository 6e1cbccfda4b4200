// Profile mode's counters (see profiler.h for the algorithm).
#include "runtime/cuda/sim/profiler.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "runtime/cuda/sim/memory.h"

namespace vtc::cuda::sim {
namespace {

constexpr unsigned kSectorBytes = 32;
constexpr int kBanks = 32;

struct Window {
  std::mutex mu;
  std::atomic<bool> open{false};
  VtcSimProfile summary{};
  std::vector<VtcSimLaunchProfile> records;
  // The launch being run.
  VtcSimLaunchProfile launch{};
  std::vector<uint64_t> launch_loads, launch_stores;
  // Each global sector's last launch (index into records) and the running
  // footprint total after each launch, for reuse distances.
  std::unordered_map<uint64_t, uint32_t> last_touch;
  std::vector<double> footprint_after;
  uint64_t sample_every = 1;  // this window's (vtcSimProfileBegin)
};

Window& window() {
  static Window* w = new Window();  // lives until exit, like the workers
  return *w;
}

uint64_t sample_from_environment() {
  const char* e = std::getenv("VTC_CUDA_SIM_PROFILE_SAMPLE");
  const long v = e ? std::atol(e) : 1;
  return uint64_t(v > 1 ? v : 1);
}

int reuse_bucket(double distance) {
  if (distance < VTC_SIM_REUSE_BASE) return 0;
  const int b = int(std::floor(4.0 * std::log2(distance / VTC_SIM_REUSE_BASE)));
  return std::min(b, VTC_SIM_REUSE_BUCKETS - 1);
}

void add_counters(VtcSimLaunchProfile& to, const VtcSimLaunchProfile& from) {
  // Every field after the launch's identity is a counter.
  auto* dst = &to.load_requests;
  const auto* src = &from.load_requests;
  const size_t n = size_t(reinterpret_cast<const char*>(&from + 1) - reinterpret_cast<const char*>(src)) /
                   sizeof(unsigned long long);
  for (size_t i = 0; i < n; ++i) dst[i] += src[i];
}

}  // namespace

bool profile_mode() {
  static const bool on = env_flag("VTC_CUDA_SIM_PROFILE");
  return on;
}

// --- one block ------------------------------------------------------------------

void BlockProfiler::start(int warps, bool sampled) {
  sampled_ = sampled && window().open.load(std::memory_order_relaxed);
  pending_.resize(size_t(warps));
  for (auto& p : pending_) p.clear();
  counters_ = {};
  load_sectors_.clear();
  store_sectors_.clear();
  if (sampled_) {
    seen_.assign(kSeenSlots * 2, ~uint64_t(0));  // loads, then stores
    l1_.assign(VTC_SIM_L1_SECTORS, ~uint64_t(0));
  }
}

void BlockProfiler::record(int warp, int lane, uintptr_t site, uintptr_t address, unsigned bytes, bool is_write,
                           Space space) {
  pending_[size_t(warp)].push_back(
      {site, address, 0, uint8_t(lane), uint8_t(std::min(bytes, 255u)), uint8_t(is_write), space});
}

void BlockProfiler::count_work(int cls, unsigned long n) {
  if (cls >= 0 && cls < VTC_SIM_WORK_SLOTS) counters_.work[cls] += n;
}

void BlockProfiler::count_warp_collective(int kind) {
  if (!sampled_) return;
  if (kind == 0) ++counters_.warp_syncs;
  else if (kind == 1) ++counters_.shuffles;
  else if (kind == 2) ++counters_.votes;
  // kind 3, a matrix instruction (mma, ldmatrix): counted as its work class
  // and its shared loads, not as a warp collective.
}

void BlockProfiler::flush_warp(int warp) {
  auto& acc = pending_[size_t(warp)];
  if (acc.empty()) return;
  // Each access's rank among its lane's accesses at the same site, in
  // program order (the order a lane appended them).
  std::unordered_map<uint64_t, uint32_t> seen;
  seen.reserve(acc.size());
  for (Access& a : acc) a.lane_rank = seen[(uint64_t(a.site) << 5) ^ a.lane]++;
  std::stable_sort(acc.begin(), acc.end(), [](const Access& x, const Access& y) {
    if (x.site != y.site) return x.site < y.site;
    if (x.lane_rank != y.lane_rank) return x.lane_rank < y.lane_rank;
    return x.space < y.space;
  });
  for (size_t i = 0; i < acc.size();) {
    size_t j = i + 1;
    while (j < acc.size() && acc[j].site == acc[i].site && acc[j].lane_rank == acc[i].lane_rank &&
           acc[j].space == acc[i].space)
      ++j;
    add_request(&acc[i], &acc[j - 1] + 1);
    i = j;
  }
  acc.clear();
}

bool BlockProfiler::l1_touch(uint64_t sector) {
  // The sector's set, from a hash of its address (as a GPU's caches hash
  // theirs: rows a power of two apart do not pile into one set), most
  // recently used first: a hit moves it to the front; a miss drops the
  // last and enters at the front.
  constexpr uint64_t kSets = VTC_SIM_L1_SECTORS / VTC_SIM_L1_WAYS;
  uint64_t* set = &l1_[((sector * 0x9E3779B97F4A7C15ull) >> 32) % kSets * VTC_SIM_L1_WAYS];
  int at = 0;
  while (at < VTC_SIM_L1_WAYS && set[at] != sector) ++at;
  const bool hit = at < VTC_SIM_L1_WAYS;
  for (int w = hit ? at : VTC_SIM_L1_WAYS - 1; w > 0; --w) set[w] = set[w - 1];
  set[0] = sector;
  return hit;
}

void BlockProfiler::add_request(const Access* first, const Access* last) {
  if (first->space == Space::Shared) add_shared(first, last);
  else add_global(first, last);
}

void BlockProfiler::add_global(const Access* first, const Access* last) {
  const bool is_write = first->is_write;
  uint64_t sectors[64];
  size_t n = 0;
  uint64_t bytes = 0;
  std::vector<uint64_t>& footprint = is_write ? store_sectors_ : load_sectors_;
  for (const Access* a = first; a != last; ++a) {
    bytes += a->bytes;
    const uint64_t lo = a->address / kSectorBytes, hi = (a->address + a->bytes - 1) / kSectorBytes;
    for (uint64_t s = lo; s <= hi; ++s) {
      if (std::find(sectors, sectors + n, s) != sectors + n) continue;
      if (n < 64) sectors[n++] = s;
      if (!is_write) {
        if (first->space == Space::GlobalL2Only || !l1_touch(s)) ++counters_.l1_miss_sectors;
      }
      uint64_t& slot = seen_[(is_write ? kSeenSlots : 0) + (s * 0x9E3779B97F4A7C15ull >> 52)];
      if (slot == s) continue;
      slot = s;
      footprint.push_back(s);
    }
  }
  if (is_write) {
    ++counters_.store_requests;
    counters_.store_sectors += n;
    counters_.store_bytes += bytes;
  } else {
    ++counters_.load_requests;
    counters_.load_sectors += n;
    counters_.load_bytes += bytes;
  }
}

void BlockProfiler::add_shared(const Access* first, const Access* last) {
  // Phases of 128 bytes: lanes are taken in lane order.
  const unsigned width = std::max<unsigned>(first->bytes, 1);
  const unsigned lanes_per_phase = width <= 4 ? 32 : 128 / width;
  uint64_t wavefronts = 0, phases = 0;
  const Access* a = first;
  while (a != last) {
    const unsigned phase = a->lane / lanes_per_phase;
    std::vector<uint64_t> words[kBanks];
    for (; a != last && a->lane / lanes_per_phase == phase; ++a)
      for (uint64_t w = a->address / 4; w <= (a->address + a->bytes - 1) / 4; ++w) {
        auto& bank = words[w % kBanks];
        if (std::find(bank.begin(), bank.end(), w) == bank.end()) bank.push_back(w);
      }
    size_t worst = 1;
    for (const auto& bank : words) worst = std::max(worst, bank.size());
    wavefronts += worst;
    ++phases;
  }
  ++counters_.shared_requests;
  counters_.shared_wavefronts += wavefronts;
  counters_.shared_ideal_wavefronts += phases;
}

void BlockProfiler::finish_block() {
  if (!sampled_) return;
  for (size_t w = 0; w < pending_.size(); ++w) flush_warp(int(w));
  auto dedupe = [](std::vector<uint64_t>& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  };
  dedupe(load_sectors_);
  dedupe(store_sectors_);
  Window& win = window();
  std::lock_guard<std::mutex> lock(win.mu);
  add_counters(win.launch, counters_);
  ++win.launch.sampled_blocks;
  win.launch_loads.insert(win.launch_loads.end(), load_sectors_.begin(), load_sectors_.end());
  win.launch_stores.insert(win.launch_stores.end(), store_sectors_.begin(), store_sectors_.end());
}

// --- the launch and the window ----------------------------------------------------

bool block_sampled(uint64_t linear) { return linear % window().sample_every == 0; }

bool profile_window_open() { return window().open.load(std::memory_order_relaxed); }

bool skip_unsampled_blocks() {
  const Window& win = window();
  return win.open.load(std::memory_order_relaxed) && win.sample_every > 1;
}

void launch_begin(const std::string& entry, const unsigned grid[3], const unsigned block[3], uint64_t shared_bytes) {
  Window& win = window();
  if (!win.open) return;
  std::lock_guard<std::mutex> lock(win.mu);
  win.launch = {};
  std::snprintf(win.launch.entry, sizeof win.launch.entry, "%s", entry.c_str());
  for (int i = 0; i < 3; ++i) win.launch.grid[i] = grid[i], win.launch.block[i] = block[i];
  win.launch.shared_bytes = shared_bytes;
  win.launch.total_blocks = uint64_t(grid[0]) * grid[1] * grid[2];
  win.launch_loads.clear();
  win.launch_stores.clear();
}

void launch_end() {
  Window& win = window();
  if (!win.open) return;
  std::lock_guard<std::mutex> lock(win.mu);
  VtcSimLaunchProfile& l = win.launch;
  auto& loads = win.launch_loads;
  auto& stores = win.launch_stores;
  std::sort(loads.begin(), loads.end());
  loads.erase(std::unique(loads.begin(), loads.end()), loads.end());
  std::sort(stores.begin(), stores.end());
  stores.erase(std::unique(stores.begin(), stores.end()), stores.end());
  const uint32_t index = uint32_t(win.records.size());
  // A sampled launch stands for all its blocks: its footprint too.
  const double scale = l.sampled_blocks ? double(l.total_blocks) / double(l.sampled_blocks) : 1.0;
  const double before = win.footprint_after.empty() ? 0.0 : win.footprint_after.back();
  auto touch = [&](uint64_t sector, bool is_load) {
    auto [it, fresh] = win.last_touch.try_emplace(sector, index);
    if (fresh) {
      ++(is_load ? l.first_load_sectors : l.first_store_sectors);
      return;
    }
    if (it->second == index) return;  // loaded and stored by this launch: counted with the loads
    if (is_load) ++l.reuse[reuse_bucket(before - win.footprint_after[it->second])];
    it->second = index;
  };
  for (uint64_t s : loads) touch(s, true);
  for (uint64_t s : stores) touch(s, false);
  std::vector<uint64_t> all;
  std::set_union(loads.begin(), loads.end(), stores.begin(), stores.end(), std::back_inserter(all));
  l.distinct_sectors = all.size();
  win.footprint_after.push_back(before + scale * double(all.size()) * kSectorBytes);
  win.records.push_back(l);
}

void note_copy(int kind, uint64_t bytes, bool pageable) {
  Window& win = window();
  if (!win.open) return;
  std::lock_guard<std::mutex> lock(win.mu);
  VtcSimProfile& s = win.summary;
  if (kind == 0) ++s.copies_in, s.bytes_in += bytes;
  else if (kind == 1) ++s.copies_out, s.bytes_out += bytes;
  else ++s.memsets, s.bytes_memset += bytes;
  if (pageable) ++s.pageable_copies;
}

void note_host_wait() {
  Window& win = window();
  if (!win.open) return;
  std::lock_guard<std::mutex> lock(win.mu);
  ++win.summary.host_waits;
}

void note_graph_launch() {
  Window& win = window();
  if (!win.open) return;
  std::lock_guard<std::mutex> lock(win.mu);
  ++win.summary.graph_launches;
}

}  // namespace vtc::cuda::sim

using namespace vtc::cuda::sim;

// The exported window (profile_abi.h). Begin fails (returns 1) outside
// profile mode, so vtc can say the kernels are not instrumented.
extern "C" __attribute__((visibility("default"))) int vtcSimProfileBegin(unsigned long long sample_every) {
  if (!profile_mode()) return 1;
  Window& win = window();
  std::lock_guard<std::mutex> lock(win.mu);
  win.sample_every = sample_every > 1 ? sample_every : sample_from_environment();
  win.summary = {};
  win.records.clear();
  win.last_touch.clear();
  win.footprint_after.clear();
  win.open = true;
  return 0;
}

extern "C" __attribute__((visibility("default"))) const VtcSimProfile* vtcSimProfileEnd(void) {
  Window& win = window();
  std::lock_guard<std::mutex> lock(win.mu);
  win.open = false;
  win.summary.launches = win.records.size();
  win.summary.records = win.records.data();
  return &win.summary;
}
