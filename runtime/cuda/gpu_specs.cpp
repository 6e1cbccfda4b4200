// The GPUs the cost model prices for (cost_model.h), from the vendor's data
// sheets and whitepapers. Tensor-core rates are dense (the data sheets'
// headline figures are with 2:4 sparsity, twice these). Per-SM rates are
// the CUDA C++ Programming Guide's "Arithmetic Instructions" throughput
// table for the compute capability. L2 bandwidth is in no data sheet: it is
// an estimate from published microbenchmarks and says so.
#include <fmt/format.h>

#include "runtime/cuda/cost_model.h"
#include "support/error.h"

namespace vtc::cuda {
namespace {

constexpr double kTB = 1e12, kGB = 1e9, kMiB = 1024.0 * 1024.0, kKiB = 1024.0;

// One GPU: rates in the data sheets' units (TB/s, MiB, GHz, TFLOPS/TOPS),
// limits per SM of its compute capability.
struct Sheet {
  const char *name, *title;
  double hbm_tb_s, l2_mib, l2_tb_s;
  int sms;
  double clock_ghz, fp32_tflops, f16_tflops, s8_tops, pcie_gb_s;
  int max_threads_sm, max_blocks_sm;
  double shared_kib_sm;
  const char* sources;
};

GpuSpec from_sheet(const Sheet& s) {
  GpuSpec g;
  g.name = s.name;
  g.title = s.title;
  g.hbm_bytes_per_s = s.hbm_tb_s * kTB;
  g.l2_bytes = s.l2_mib * kMiB;
  g.l2_bytes_per_s = s.l2_tb_s * kTB;
  g.sms = s.sms;
  g.clock_hz = s.clock_ghz * 1e9;
  g.fp32_flops = s.fp32_tflops * 1e12;
  g.f16_mma_flops = s.f16_tflops * 1e12;
  g.s8_mma_ops = s.s8_tops * 1e12;
  g.dp4a_per_clk_sm = 64;
  g.pcie_bytes_per_s = s.pcie_gb_s * kGB;
  g.max_threads_sm = s.max_threads_sm;
  g.max_blocks_sm = s.max_blocks_sm;
  g.shared_bytes_sm = s.shared_kib_sm * kKiB;
  g.sources = s.sources;
  return g;
}

// Hopper (sm_90): 132 SMs (SXM5), 1.98 GHz boost, 50 MB L2, 228 KB shared
// memory per SM, FP32 128 FMA/clk/SM (66.9 TFLOPS), 989.4 TFLOPS dense
// f16/bf16 and 1978.9 TOPS dense int8; PCIe Gen5 x16.
#define VTC_HOPPER_SOURCES                                                                                      \
  "; NVIDIA H100 Tensor Core GPU Architecture whitepaper (132 SMs, 50 MB L2, 228 KB shared/SM); CUDA C++ "      \
  "Programming Guide, arithmetic instruction throughput, cc 9.0; L2 bandwidth: Chips and Cheese, 'Nvidia's H100: " \
  "Funny L2, and Tons of Bandwidth' (about 5.5 TB/s, estimate)"

constexpr Sheet kSheets[] = {
    {"h200", "NVIDIA H200 SXM (141 GB HBM3e)", 4.8, 50, 5.5, 132, 1.98, 66.9, 989.4, 1978.9, 50, 2048, 32, 228,
     "NVIDIA H200 Tensor Core GPU data sheet (4.8 TB/s HBM3e)" VTC_HOPPER_SOURCES},
    {"h100", "NVIDIA H100 SXM5 (80 GB HBM3)", 3.35, 50, 5.5, 132, 1.98, 66.9, 989.4, 1978.9, 50, 2048, 32, 228,
     "NVIDIA H100 Tensor Core GPU data sheet (3.35 TB/s HBM3)" VTC_HOPPER_SOURCES},
    {"a100", "NVIDIA A100 SXM4 (80 GB HBM2e)", 2.039, 40, 4.8, 108, 1.41, 19.5, 312, 624, 25, 2048, 32, 164,
     "NVIDIA A100 Tensor Core GPU data sheet (2,039 GB/s, 312 TFLOPS f16, 624 TOPS int8, 19.5 TFLOPS fp32); "
     "NVIDIA A100 Tensor Core GPU Architecture whitepaper (108 SMs, 1410 MHz, 40 MB L2, 164 KB shared/SM); "
     "CUDA C++ Programming Guide, cc 8.0; L2 bandwidth: microbenchmark estimate"},
    {"l40s", "NVIDIA L40S (48 GB GDDR6)", 0.864, 96, 5.0, 142, 2.52, 91.6, 362.05, 733, 25, 1536, 24, 100,
     "NVIDIA L40S GPU data sheet (864 GB/s, 362.05 TFLOPS f16 dense, 733 TOPS int8 dense, 91.6 TFLOPS fp32, "
     "142 SMs); NVIDIA Ada GPU Architecture whitepaper (AD102: 96 MB L2, 100 KB shared/SM); CUDA C++ "
     "Programming Guide, cc 8.9; L2 bandwidth: microbenchmark estimate"},
    // f16 tensor: with f32 accumulate (330.3 with f16 accumulate).
    {"rtx4090", "NVIDIA GeForce RTX 4090 (24 GB GDDR6X)", 1.008, 72, 5.0, 128, 2.52, 82.6, 165.2, 660.6, 25, 1536,
     24, 100,
     "NVIDIA Ada GPU Architecture whitepaper, RTX 4090 (128 SMs, 2520 MHz boost, 1008 GB/s, 72 MB L2, 82.6 TFLOPS "
     "fp32, 165.2 TFLOPS f16 with f32 accumulate, 660.6 TOPS int8 dense); CUDA C++ Programming Guide, cc 8.9; L2 "
     "bandwidth: microbenchmark estimate"},
};
#undef VTC_HOPPER_SOURCES

std::vector<GpuSpec> build() {
  std::vector<GpuSpec> v;
  for (const Sheet& s : kSheets) v.push_back(from_sheet(s));
  return v;
}

}  // namespace

const std::vector<GpuSpec>& gpu_specs() {
  static const std::vector<GpuSpec> specs = build();
  return specs;
}

const GpuSpec& find_gpu(std::string_view name) {
  std::string known;
  for (const GpuSpec& g : gpu_specs()) {
    if (g.name == name) return g;
    known += (known.empty() ? "" : ", ") + g.name;
  }
  throw Error(fmt::format("unknown GPU '{}': the cost model knows {}", name, known));
}

}  // namespace vtc::cuda
