#include "src/analysis/gpu_specs.h"

#include <string>

#include "src/util/strings.h"

namespace gputriage {
namespace {

// Dense peaks (TFLOP/s), bandwidth (GB/s), memory (GB), board power (W), boost clock
// (MHz: the maximum SM clock the datasheet states; NVML's max clock on the board).
// Datasheets state tensor throughput "with sparsity"; the dense figure is half.
constexpr GpuSpec kSpecs[] = {
    // model, match, fp32, tf32, fp16, bf16, fp8, GB/s, GB, W, MHz, tensor cores, source
    {"H200 SXM", "H200", 67.0, 494.7, 989.4, 989.4, 1978.9, 4800, 141, 700, 1980, "4th gen (Hopper)",
     "NVIDIA H200 Tensor Core GPU datasheet (SXM)"},
    {"H100 PCIe", "H100 PCIe", 51.2, 378.0, 756.0, 756.0, 1513.0, 2000, 80, 350, 1755, "4th gen (Hopper)",
     "NVIDIA H100 Tensor Core GPU datasheet (PCIe)"},
    {"H100 NVL", "H100 NVL", 60.0, 417.5, 835.5, 835.5, 1670.5, 3900, 94, 400, 1785, "4th gen (Hopper)",
     "NVIDIA H100 Tensor Core GPU datasheet (NVL)"},
    {"GH200", "GH200", 67.0, 494.7, 989.4, 989.4, 1978.9, 4000, 96, 1000, 1980, "4th gen (Hopper)",
     "NVIDIA GH200 Grace Hopper Superchip datasheet (GPU figures; power is the module range's top)"},
    {"H100 SXM", "H100", 67.0, 494.7, 989.4, 989.4, 1978.9, 3350, 80, 700, 1980, "4th gen (Hopper)",
     "NVIDIA H100 Tensor Core GPU datasheet (SXM)"},
    {"B200", "B200", 0.0, 1125.0, 2250.0, 2250.0, 4500.0, 8000, 180, 1000, 0, "5th gen (Blackwell)",
     "NVIDIA HGX B200 datasheet, per GPU (platform figures / 8); fp32 not published per GPU"},
    {"A100 SXM4 80GB", "A100-SXM4-80GB", 19.5, 156.0, 312.0, 312.0, 0.0, 2039, 80, 400, 1410, "3rd gen (Ampere)",
     "NVIDIA A100 Tensor Core GPU datasheet (SXM 80GB)"},
    {"A100 PCIe 80GB", "A100 80GB PCIe", 19.5, 156.0, 312.0, 312.0, 0.0, 1935, 80, 300, 1410, "3rd gen (Ampere)",
     "NVIDIA A100 Tensor Core GPU datasheet (PCIe 80GB)"},
    {"A100 PCIe 40GB", "A100-PCIE-40GB", 19.5, 156.0, 312.0, 312.0, 0.0, 1555, 40, 250, 1410, "3rd gen (Ampere)",
     "NVIDIA A100 Tensor Core GPU datasheet (PCIe 40GB)"},
    {"A100 SXM4 40GB", "A100", 19.5, 156.0, 312.0, 312.0, 0.0, 1555, 40, 400, 1410, "3rd gen (Ampere)",
     "NVIDIA A100 Tensor Core GPU datasheet (SXM 40GB); other A100 names default here"},
    {"A10G", "A10G", 0.0, 0.0, 0.0, 0.0, 0.0, 0, 24, 0, 0, "3rd gen (Ampere)",
     "AWS EC2 G5 documentation (24 GB); NVIDIA publishes no A10G datasheet, so peaks are unknown"},
    {"A10", "A10", 31.2, 62.5, 125.0, 125.0, 0.0, 600, 24, 150, 1695, "3rd gen (Ampere)", "NVIDIA A10 Tensor Core GPU datasheet"},
    {"L40S", "L40S", 91.6, 183.0, 362.05, 362.05, 733.0, 864, 48, 350, 2520, "4th gen (Ada Lovelace)", "NVIDIA L40S datasheet"},
    {"L4", "L4", 30.3, 60.0, 121.0, 121.0, 242.5, 300, 24, 72, 2040, "4th gen (Ada Lovelace)", "NVIDIA L4 Tensor Core GPU datasheet"},
    {"V100 PCIe", "V100-PCIE", 14.0, 0.0, 112.0, 0.0, 0.0, 900, 32, 250, 1380, "1st gen (Volta)",
     "NVIDIA Tesla V100 datasheet (PCIe)"},
    {"V100 SXM2", "V100", 15.7, 0.0, 125.0, 0.0, 0.0, 900, 32, 300, 1530, "1st gen (Volta)",
     "NVIDIA Tesla V100 datasheet (SXM2; DGX Station parts default here)"},
    {"T4", "T4", 8.1, 0.0, 65.0, 0.0, 0.0, 320, 16, 70, 1590, "2nd gen (Turing)", "NVIDIA T4 Tensor Core GPU datasheet"},
    {"GeForce RTX 4090", "RTX 4090", 82.6, 82.6, 165.2, 165.2, 0.0, 1008, 24, 450, 2520, "4th gen (Ada Lovelace)",
     "NVIDIA Ada GPU architecture whitepaper, RTX 4090 (fp16/bf16 with fp32 accumulate, dense)"},
    {"GeForce RTX 3090", "RTX 3090", 35.6, 35.6, 71.0, 71.0, 0.0, 936, 24, 350, 1695, "3rd gen (Ampere)",
     "NVIDIA Ampere GA102 GPU architecture whitepaper, RTX 3090 (fp16 with fp32 accumulate, dense)"},
    {"GeForce RTX 2080 SUPER", "RTX 2080 SUPER", 11.2, 0.0, 44.6, 0.0, 0.0, 496, 8, 250, 1815, "2nd gen (Turing)",
     "NVIDIA GeForce RTX 2080 SUPER specifications (memory, power); peaks derived from 3072 CUDA cores x 1815 MHz "
     "boost (fp16 tensor with fp32 accumulate at the GeForce half rate)"},
    {"MI300X", "MI300X", 81.7, 653.7, 1307.4, 1307.4, 2614.9, 5300, 192, 750, 2100, "CDNA 3 matrix cores",
     "AMD Instinct MI300X datasheet"},
    {"MI250X", "MI250X", 47.9, 0.0, 383.0, 383.0, 0.0, 3277, 128, 560, 1700, "CDNA 2 matrix cores", "AMD Instinct MI250X datasheet"},
    {"MI250", "MI250", 45.3, 0.0, 362.1, 362.1, 0.0, 3277, 128, 560, 1700, "CDNA 2 matrix cores", "AMD Instinct MI250 datasheet"},
};

}  // namespace

std::optional<GpuSpec> FindGpuSpec(std::string_view device_name) {
  for (const auto& spec : kSpecs)
    if (ContainsToken(device_name, spec.match)) return spec;
  // Names without separators ("Tesla V100-SXM2-32GB" has them; some tools print
  // "A100SXM4"): a substring followed by a letter. Never by a digit: an L40 is not
  // an L4 and an RTX A1000 is not an A100.
  for (const auto& spec : kSpecs) {
    const std::string_view match = spec.match;
    for (size_t at = device_name.find(match); at != std::string_view::npos; at = device_name.find(match, at + 1)) {
      const size_t end = at + match.size();
      if (end == device_name.size() || !(device_name[end] >= '0' && device_name[end] <= '9')) return spec;
    }
  }
  return std::nullopt;
}

double PeakTflops(const GpuSpec& spec, Precision p) {
  switch (p) {
    case Precision::kFp32Simt: return spec.fp32_tflops;
    case Precision::kTf32: return spec.tf32_tflops;
    case Precision::kFp16: return spec.fp16_tflops;
    case Precision::kBf16: return spec.bf16_tflops;
    case Precision::kFp8: return spec.fp8_tflops;
    default: return 0.0;
  }
}

std::span<const GpuSpec> AllGpuSpecs() { return kSpecs; }

}  // namespace gputriage
