#include "src/analysis/gpu_specs.h"

#include <string>

namespace gputriage {
namespace {

// Dense peaks (TFLOP/s) from vendor datasheets at boost clock.
constexpr GpuSpec kSpecs[] = {
    // name fragment matched in order: more specific first.
    {"H200", 67.0, 494.7, 989.4, 989.4, 1978.9, "NVIDIA H200 datasheet (SXM)"},
    {"H100 PCIe", 51.2, 378.0, 756.0, 756.0, 1513.0, "NVIDIA H100 datasheet (PCIe)"},
    {"H100", 67.0, 494.7, 989.4, 989.4, 1978.9, "NVIDIA H100 datasheet (SXM)"},
    {"GH200", 67.0, 494.7, 989.4, 989.4, 1978.9, "NVIDIA GH200 datasheet"},
    {"B200", 0.0, 1100.0, 2250.0, 2250.0, 4500.0, "NVIDIA HGX B200 datasheet (per GPU)"},
    {"A100", 19.5, 156.0, 312.0, 312.0, 0.0, "NVIDIA A100 datasheet"},
    {"L40S", 91.6, 183.0, 362.0, 362.0, 733.0, "NVIDIA L40S datasheet"},
    {"V100-PCIE", 14.0, 0.0, 112.0, 0.0, 0.0, "NVIDIA V100 datasheet (PCIe)"},
    {"V100", 15.7, 0.0, 125.0, 0.0, 0.0, "NVIDIA V100 datasheet (SXM2/DGX)"},
    {"T4", 8.1, 0.0, 65.0, 0.0, 0.0, "NVIDIA T4 datasheet"},
    {"MI300X", 81.7, 653.7, 1307.4, 1307.4, 2614.9, "AMD Instinct MI300X datasheet"},
    {"MI250X", 47.9, 0.0, 383.0, 383.0, 0.0, "AMD Instinct MI250X datasheet"},
    {"MI250", 45.3, 0.0, 362.1, 362.1, 0.0, "AMD Instinct MI250 datasheet"},
};

}  // namespace

std::optional<GpuSpec> FindGpuSpec(std::string_view device_name) {
  const std::string name(device_name);
  for (const auto& spec : kSpecs) {
    if (name.find(spec.model) != std::string::npos) return spec;
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

}  // namespace gputriage
