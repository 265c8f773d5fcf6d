// Tensor-core tile alignment of matrix operators and the device memory a trace
// shows in use (shapes.cc).
#pragma once

#include <vector>

#include "gputriage/diagnosis.h"
#include "src/analysis/joins.h"
#include "src/analysis/kernel_taxonomy.h"
#include "src/analysis/trace_events.h"

namespace gputriage::analysis {

/// The input shapes of a matrix operator as text: "[[8, 1024], [1024, 4096]]".
std::string ShapesText(const MatrixOpShapes& shapes);

/// The dimensions of a matrix operator off the tensor-core tile for its dtype, as
/// "N=1000 K=30 " text; empty when aligned or when no tile rule applies.
std::string OffTileDims(std::string_view op, std::string_view dtype, const MatrixOpShapes& shapes);

/// Matrix kernel time of 16/8-bit operators whose tiled dimensions miss the tile:
/// alignment of the recorded matrix operators, each with the kernel time its
/// external id launched (joins.h: ShapeJoin, in the shapes' file order).
StatusOr<ShapeAlignment> MeasureShapeAlignment(const TraceEvents& events,
                                               const SortedSpill<ShapeKernelTime, BySeq>& kernel_time,
                                               TimeNs matrix_total_ns);

/// Peak memory the caching allocator held on `device`, against its total.
TraceMemory MeasureTraceMemory(const Recording& rec, const Device& device);

}  // namespace gputriage::analysis
