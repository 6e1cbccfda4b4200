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

// Hopper (sm_90): 132 SMs (SXM5), 1.98 GHz boost, 50 MB L2, 228 KB shared
// memory per SM, FP32 128 FMA/clk/SM (66.9 TFLOPS), 989.4 TFLOPS dense
// f16/bf16 and 1978.9 TOPS dense int8; PCIe Gen5 x16.
GpuSpec hopper(std::string name, std::string title, double hbm_tb_s, std::string sheet) {
  GpuSpec g;
  g.name = std::move(name);
  g.title = std::move(title);
  g.hbm_bytes_per_s = hbm_tb_s * kTB;
  g.l2_bytes = 50 * kMiB;
  g.l2_bytes_per_s = 5.5 * kTB;
  g.sms = 132;
  g.clock_hz = 1.98e9;
  g.fp32_flops = 66.9e12;
  g.f16_mma_flops = 989.4e12;
  g.s8_mma_ops = 1978.9e12;
  g.dp4a_per_clk_sm = 64;
  g.pcie_bytes_per_s = 50 * kGB;
  g.shared_bytes_sm = 228 * kKiB;
  g.sources = sheet +
              "; NVIDIA H100 Tensor Core GPU Architecture whitepaper (132 SMs, 50 MB L2, 228 KB shared/SM); CUDA C++ "
              "Programming Guide, arithmetic instruction throughput, cc 9.0; L2 bandwidth: Chips and Cheese, 'Nvidia's "
              "H100: Funny L2, and Tons of Bandwidth' (about 5.5 TB/s, estimate)";
  return g;
}

std::vector<GpuSpec> build() {
  std::vector<GpuSpec> v;
  v.push_back(hopper("h200", "NVIDIA H200 SXM (141 GB HBM3e)", 4.8, "NVIDIA H200 Tensor Core GPU data sheet (4.8 TB/s HBM3e)"));
  v.push_back(hopper("h100", "NVIDIA H100 SXM5 (80 GB HBM3)", 3.35, "NVIDIA H100 Tensor Core GPU data sheet (3.35 TB/s HBM3)"));
  {
    GpuSpec g;
    g.name = "a100";
    g.title = "NVIDIA A100 SXM4 (80 GB HBM2e)";
    g.hbm_bytes_per_s = 2.039 * kTB;
    g.l2_bytes = 40 * kMiB;
    g.l2_bytes_per_s = 4.8 * kTB;
    g.sms = 108;
    g.clock_hz = 1.41e9;
    g.fp32_flops = 19.5e12;
    g.f16_mma_flops = 312e12;
    g.s8_mma_ops = 624e12;
    g.dp4a_per_clk_sm = 64;
    g.pcie_bytes_per_s = 25 * kGB;
    g.shared_bytes_sm = 164 * kKiB;
    g.sources = "NVIDIA A100 Tensor Core GPU data sheet (2,039 GB/s, 312 TFLOPS f16, 624 TOPS int8, 19.5 TFLOPS fp32); "
                "NVIDIA A100 Tensor Core GPU Architecture whitepaper (108 SMs, 1410 MHz, 40 MB L2, 164 KB shared/SM); "
                "CUDA C++ Programming Guide, cc 8.0; L2 bandwidth: microbenchmark estimate";
    v.push_back(g);
  }
  {
    GpuSpec g;
    g.name = "l40s";
    g.title = "NVIDIA L40S (48 GB GDDR6)";
    g.hbm_bytes_per_s = 864 * kGB;
    g.l2_bytes = 96 * kMiB;
    g.l2_bytes_per_s = 5.0 * kTB;
    g.sms = 142;
    g.clock_hz = 2.52e9;
    g.fp32_flops = 91.6e12;
    g.f16_mma_flops = 362.05e12;
    g.s8_mma_ops = 733e12;
    g.dp4a_per_clk_sm = 64;
    g.pcie_bytes_per_s = 25 * kGB;
    g.max_threads_sm = 1536;
    g.max_blocks_sm = 24;
    g.shared_bytes_sm = 100 * kKiB;
    g.sources = "NVIDIA L40S GPU data sheet (864 GB/s, 362.05 TFLOPS f16 dense, 733 TOPS int8 dense, 91.6 TFLOPS fp32, "
                "142 SMs); NVIDIA Ada GPU Architecture whitepaper (AD102: 96 MB L2, 100 KB shared/SM); CUDA C++ "
                "Programming Guide, cc 8.9; L2 bandwidth: microbenchmark estimate";
    v.push_back(g);
  }
  {
    GpuSpec g;
    g.name = "rtx4090";
    g.title = "NVIDIA GeForce RTX 4090 (24 GB GDDR6X)";
    g.hbm_bytes_per_s = 1008 * kGB;
    g.l2_bytes = 72 * kMiB;
    g.l2_bytes_per_s = 5.0 * kTB;
    g.sms = 128;
    g.clock_hz = 2.52e9;
    g.fp32_flops = 82.6e12;
    g.f16_mma_flops = 165.2e12;  // f32 accumulate (330.3 with f16 accumulate)
    g.s8_mma_ops = 660.6e12;
    g.dp4a_per_clk_sm = 64;
    g.pcie_bytes_per_s = 25 * kGB;
    g.max_threads_sm = 1536;
    g.max_blocks_sm = 24;
    g.shared_bytes_sm = 100 * kKiB;
    g.sources = "NVIDIA Ada GPU Architecture whitepaper, RTX 4090 (128 SMs, 2520 MHz boost, 1008 GB/s, 72 MB L2, 82.6 "
                "TFLOPS fp32, 165.2 TFLOPS f16 with f32 accumulate, 660.6 TOPS int8 dense); CUDA C++ Programming Guide, "
                "cc 8.9; L2 bandwidth: microbenchmark estimate";
    v.push_back(g);
  }
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
