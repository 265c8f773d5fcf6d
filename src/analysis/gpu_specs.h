// Peak dense throughput of common accelerators, used to turn measured time into an
// expected gain (e.g. fp32 SIMT → bf16 tensor cores). Figures are the vendors'
// datasheet numbers without structured sparsity; a format a chip lacks is 0.
#pragma once

#include <optional>
#include <string_view>

#include "src/analysis/kernel_taxonomy.h"

namespace gputriage {

struct GpuSpec {
  const char* model;       // canonical name
  double fp32_tflops;      // non-tensor (SIMT / vector) fp32
  double tf32_tflops;      // tensor-core tf32 (AMD: xf32/matrix fp32), 0 if none
  double fp16_tflops;      // tensor-core fp16
  double bf16_tflops;      // tensor-core bf16, 0 if none
  double fp8_tflops;       // tensor-core fp8, 0 if none
  const char* source;      // where the figures come from
};

/// Looks up a device by its reported name ("Tesla V100-DGXS-32GB", "NVIDIA H100 80GB HBM3").
std::optional<GpuSpec> FindGpuSpec(std::string_view device_name);

/// Peak for a precision on this spec, 0 when unknown.
double PeakTflops(const GpuSpec& spec, Precision p);

}  // namespace gputriage
