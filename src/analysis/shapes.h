// Tensor-core tile alignment of matrix operators and the device memory a trace
// shows in use (shapes.cc).
#pragma once

#include <vector>

#include "gputriage/diagnosis.h"
#include "src/analysis/kernel_taxonomy.h"

namespace gputriage::analysis {

/// Matrix kernel time of 16/8-bit operators whose tiled dimensions miss the tile.
/// `kinds[i]` classifies rec.kernels[i]; `device` the primary device (-1 any).
ShapeAlignment MeasureShapeAlignment(const Recording& rec, const std::vector<const KernelKind*>& kinds, int device,
                                     TimeNs matrix_total_ns);

/// Peak memory the caching allocator held on `device`, against its total.
TraceMemory MeasureTraceMemory(const Recording& rec, const Device& device);

}  // namespace gputriage::analysis
