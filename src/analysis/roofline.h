// The roofline of a trace's matrix and attention operators (roofline.cc): FLOPs and
// bytes per operator from its recorded input shapes and dtype, arithmetic intensity
// against the GPU's ridge point for the precision it ran in.
#pragma once

#include <string_view>
#include <vector>

#include "gputriage/diagnosis.h"
#include "src/analysis/joins.h"
#include "src/analysis/kernel_taxonomy.h"
#include "src/analysis/trace_events.h"

namespace gputriage::analysis {

/// Bytes per element of a framework dtype ("c10::BFloat16" 2, "float" 4), 0 unknown.
int DtypeBytes(std::string_view dtype);

/// FLOPs and minimum bytes of one call of a matrix/attention operator from its
/// shapes; false when the operator or its shapes are not ones the model covers.
struct OpCost {
  double flops = 0;
  double bytes = 0;
  double weight_bytes = 0;  // of `bytes`, the second GEMM operand (a linear layer's weight); 0 for attention
};
bool MatrixOpCost(std::string_view op, const MatrixOpShapes& shapes, int element_bytes, OpCost& out);

/// The roofline of the recorded matrix operators, each with the kernel time its
/// external id launched (joins.h: ShapeJoin, in the shapes' file order).
StatusOr<Roofline> MeasureRoofline(const TraceEvents& events, const SortedSpill<ShapeKernelTime, BySeq>& kernel_time,
                                   const Device& device);

}  // namespace gputriage::analysis
