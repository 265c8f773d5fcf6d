// Published figures of common accelerators, used for MFU, "below theoretical"
// verdicts, expected gains and power-headroom checks. Compute peaks are dense
// (no structured sparsity) at boost clock; a figure the vendor does not publish
// is 0 and reported as unknown, never guessed. Every row names its source.
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "src/analysis/kernel_taxonomy.h"

namespace gputriage {

struct GpuSpec {
  const char* model;           // canonical name
  const char* match;           // name fragment matched against the reported device name
  double fp32_tflops;          // non-tensor (SIMT / vector) fp32
  double tf32_tflops;          // tensor-core tf32 (AMD: xf32), 0 if none
  double fp16_tflops;          // tensor-core fp16 with fp32 accumulate
  double bf16_tflops;          // tensor-core bf16, 0 if none
  double fp8_tflops;           // tensor-core fp8, 0 if none
  double memory_bandwidth_gbs; // GB/s
  double memory_gb;
  double board_power_w;        // TDP / max board power
  double boost_clock_mhz;      // maximum SM (boost) clock, 0 if not published
  const char* tensor_cores;    // generation, e.g. "4th gen (Hopper)"; "none"
  const char* source;          // where the figures come from
};

/// Looks up a device by its reported name ("Tesla V100-DGXS-32GB",
/// "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"); most specific row first.
std::optional<GpuSpec> FindGpuSpec(std::string_view device_name);

/// Peak for a precision on this spec, 0 when unknown.
double PeakTflops(const GpuSpec& spec, Precision p);

/// The peak MFU is measured against: dense bf16 on tensor cores, fp16 where the
/// GPU has no bf16; 0 when neither is known.
inline double MfuPeakTflops(const GpuSpec& spec) { return spec.bf16_tflops > 0 ? spec.bf16_tflops : spec.fp16_tflops; }

/// The whole table (docs, JSON, tests).
std::span<const GpuSpec> AllGpuSpecs();

}  // namespace gputriage
