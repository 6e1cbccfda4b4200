// Micro-benchmark for the CPU matmul kernels:
//   vtc-bench-kernels [rows cols] [--tokens N] [--dram] [--isa scalar|avx2|avxvnni|avx512vnni|avx512bf16] [--types q4_K,f16,...]
//   (a type name ending in _x8, e.g. q4_K_x8, runs the interleaved-8 layout)
//   vtc-bench-kernels --pool     (cost of one empty parallel_for per pool size)
//   --dram: rotate over copies of W that together pass 1 GiB, so each call
//   streams its weights from DRAM as a decode step does (without it a small
//   W stays in cache and the GB/s figure is a cache bandwidth).
// For each weight type and thread count (1, 2, ..., hardware), times
// matmul(W[rows][cols], x[tokens][cols]) and reports GFLOP/s and GB/s of
// weight bytes streamed. Weights hold random codes with sane scales.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "frontends/gguf/dequant.h"
#include "runtime/cpu/kernels/kernels.h"
#include "support/ggml_type.h"

using namespace vtc;
using namespace vtc::cpu;

static std::vector<uint8_t> make_weights(GgmlType t, int64_t rows, int64_t cols) {
  const auto& tr = ggml_traits(t);
  const size_t bytes = static_cast<size_t>(rows * cols / tr.block_size * tr.block_bytes);
  std::vector<uint8_t> w(bytes);
  std::mt19937 rng(1);
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  // Make every 16-bit word a small finite half: fine for f16, and for the
  // quantized types the scale fields become finite too.
  if (t == GgmlType::F16 || tr.quantized) {
    for (size_t i = 0; i + 1 < bytes; i += 2) w[i + 1] = static_cast<uint8_t>(w[i + 1] & 0x23);
  }
  if (t == GgmlType::F32) {
    for (size_t i = 0; i + 3 < bytes; i += 4) {
      const float f = static_cast<float>(rng() % 2001) / 1000.0f - 1.0f;
      std::memcpy(&w[i], &f, 4);
    }
  }
  return w;
}

// The pool's synchronisation cost: median time of a parallel_for whose
// chunks do nothing, the floor under every op of a decode step.
static int bench_pool() {
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int n = 2; n <= std::max(2, hw); ++n) {
    ThreadPool pool(n);
    std::vector<double> us;
    for (int rep = 0; rep < 21; ++rep) {
      constexpr int kCalls = 20000;
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kCalls; ++i) pool.parallel_for(64, [](int64_t, int64_t) {});
      us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kCalls);
    }
    std::sort(us.begin(), us.end());
    std::printf("pool threads=%d  empty parallel_for(64): median %.2f us, min %.2f, max %.2f (21 x 20000 calls)\n", n,
                us[us.size() / 2], us.front(), us.back());
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--pool") return bench_pool();
  int64_t rows = 4096, cols = 4096, tokens = 1;
  bool dram = false;
  std::vector<std::string> types = {"q4_K", "f16", "q8_0", "q4_0", "q6_K"};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--tokens" && i + 1 < argc) tokens = std::atoll(argv[++i]);
    else if (a == "--dram") dram = true;
    else if (a == "--isa" && i + 1 < argc) {
      Isa isa{};
      if (!isa_from_name(argv[++i], isa)) {
        std::fprintf(stderr, "unknown --isa %s\n", argv[i]);
        return 2;
      }
      set_active_isa(isa);
    }
    else if (a == "--types" && i + 1 < argc) {
      types.clear();
      std::string s = argv[++i];
      for (size_t p = 0; p <= s.size();) {
        const size_t q = std::min(s.find(',', p), s.size());
        types.push_back(s.substr(p, q - p));
        p = q + 1;
      }
    } else if (i + 1 < argc && std::isdigit(static_cast<unsigned char>(a[0]))) {
      rows = std::atoll(argv[i]);
      cols = std::atoll(argv[++i]);
    }
  }
  std::printf("matmul %lldx%lld, %lld token(s), isa %s%s\n", static_cast<long long>(rows), static_cast<long long>(cols),
              static_cast<long long>(tokens), isa_name(active_isa()), dram ? ", weights from DRAM" : "");
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<float> x(static_cast<size_t>(cols * tokens));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i)) * 0.5f;
  std::vector<float> y(static_cast<size_t>(rows * tokens));
  for (const auto& name : types) {
    const bool x8 = name.size() > 3 && name.compare(name.size() - 3, 3, "_x8") == 0;
    const WeightLayout layout = x8 ? WeightLayout::Interleaved8 : WeightLayout::Rows;
    const auto t = ggml_type_from_name(x8 ? name.substr(0, name.size() - 3) : name);
    if (!t) {
      std::printf("unknown type %s\n", name.c_str());
      continue;
    }
    auto w = make_weights(*t, rows, cols);
    if (x8) {
      auto rows_layout = w;
      repack_weight(*t, layout, rows_layout.data(), rows, cols, w.data());
    }
    // --dram: w grows to n_copies copies of itself, called in turn.
    const size_t w_bytes = w.size();
    const size_t n_copies = dram ? (size_t{1} << 30) / w_bytes + 1 : 1;
    w.resize(w_bytes * n_copies);
    for (size_t c = 1; c < n_copies; ++c) std::memcpy(w.data() + c * w_bytes, w.data(), w_bytes);
    size_t next_copy = 0;
    auto weights = [&] { return w.data() + (next_copy++ % n_copies) * w_bytes; };
    for (int n = 1; n <= hw; n = (n == hw ? hw + 1 : std::min(hw, n * 2))) {
      ThreadPool pool(n);
      matmul(*t, weights(), rows, cols, x.data(), tokens, y.data(), pool, layout);  // warm up
      int iters = 0;
      const auto t0 = std::chrono::steady_clock::now();
      double secs = 0;
      do {
        matmul(*t, weights(), rows, cols, x.data(), tokens, y.data(), pool, layout);
        ++iters;
        secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      } while (secs < 0.5);
      const double per = secs / iters;
      const double flops = 2.0 * static_cast<double>(rows) * static_cast<double>(cols) * static_cast<double>(tokens);
      std::printf("  %-6s threads=%d  %8.3f ms  %7.2f GFLOP/s  %7.2f GB/s weights\n", name.c_str(), n, per * 1e3,
                  flops / per * 1e-9, static_cast<double>(w_bytes) / per * 1e-9);
    }
  }
  return 0;
}
