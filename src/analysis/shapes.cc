// Tensor-core tile alignment from recorded input shapes, and the device memory the
// caching allocator held. Tensor cores work on tiles: cuBLAS and cuDNN reach their
// tensor-core rates when the GEMM's N and K (a convolution's input and output
// channels) are multiples of 8 elements for fp16/bf16 and of 16 for fp8/int8
// (NVIDIA Deep Learning Performance Guide, "Matrix Multiplication Background" and
// "Tensor Core Requirements"); other sizes run padded or on slower paths.
#include "src/analysis/shapes.h"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "src/analysis/kernel_taxonomy.h"
#include "src/util/strings.h"

namespace gputriage::analysis {
namespace {

/// The tile multiple for a framework dtype, 0 when the rule does not apply.
int TileMultiple(std::string_view dtype) {
  if (dtype == "c10::Half" || dtype == "c10::BFloat16" || dtype == "half" || dtype == "bfloat16") return 8;
  if (Contains(dtype, "Float8") || dtype == "signed char" || dtype == "int8") return 16;
  return 0;
}

struct Dim {
  const char* what;
  int64_t value;
};

/// The dimensions tensor cores tile, by operator: GEMM N and K, convolution channels.
std::vector<Dim> TiledDims(std::string_view op, const MatrixOpShapes& s) {
  auto dim = [&](int input, int from_end) -> int64_t {
    if (input >= s.inputs) return -1;
    const int rank = s.rank[static_cast<size_t>(input)];
    const int i = from_end >= 0 ? rank - 1 - from_end : -from_end - 1;
    if (rank == 0 || i < 0 || i >= rank) return -1;
    return s.dims[static_cast<size_t>(input)][static_cast<size_t>(i)];
  };
  std::vector<Dim> out;
  if (op == "aten::linear") {  // input [..., K], weight [N, K]
    out = {{"K", dim(0, 0)}, {"N", dim(1, 1)}};
  } else if (op == "aten::addmm" || op == "aten::baddbmm" || op == "aten::addbmm") {  // bias, A [.., M, K], B [.., K, N]
    out = {{"K", dim(1, 0)}, {"N", dim(2, 0)}};
  } else if (op == "aten::mm" || op == "aten::bmm" || op == "aten::matmul" || op == "aten::_scaled_mm") {
    out = {{"K", dim(0, 0)}, {"N", dim(1, 0)}};
  } else if (StartsWith(op, "aten::conv") || op == "aten::_convolution" || op == "aten::cudnn_convolution") {
    out = {{"C_in", dim(0, -2)}, {"C_out", dim(1, -1)}};  // input [N, C, ...], weight [O, C/g, ...]
  }
  std::erase_if(out, [](const Dim& d) { return d.value <= 0; });
  return out;
}

}  // namespace

std::string ShapesText(const MatrixOpShapes& s) {
  std::string out = "[";
  for (int i = 0; i < s.inputs; ++i) {
    out += i ? ", [" : "[";
    for (int k = 0; k < s.rank[static_cast<size_t>(i)]; ++k)
      out += (k ? ", " : "") + std::to_string(s.dims[static_cast<size_t>(i)][static_cast<size_t>(k)]);
    out += "]";
  }
  return out + "]";
}

std::string OffTileDims(std::string_view op, std::string_view dtype, const MatrixOpShapes& shapes) {
  const int tile = TileMultiple(dtype);
  if (tile == 0) return "";
  std::string off;
  for (const auto& d : TiledDims(op, shapes))
    if (d.value % tile != 0) off += fmt::format("{}={} ", d.what, d.value);
  return off;
}

StatusOr<ShapeAlignment> MeasureShapeAlignment(const TraceEvents& events,
                                               const SortedSpill<ShapeKernelTime, BySeq>& kernel_time,
                                               TimeNs matrix_total_ns) {
  ShapeAlignment out;
  if (events.matrix_shape_count() == 0) return out;
  out.available = true;
  const Recording& rec = events.recording();
  std::unordered_map<std::string, MisalignedOp> misaligned;  // by operator, dtype and shapes
  auto shapes = events.matrix_shapes();
  SeqZip<ShapeKernelTime> times(kernel_time);
  int64_t seq = 0;
  for (const MatrixOpShapes* sp = shapes.Next(); sp != nullptr; sp = shapes.Next(), ++seq) {
    const MatrixOpShapes& s = *sp;
    const int tile = TileMultiple(rec.names.View(s.dtype));
    if (tile == 0) continue;
    const ShapeKernelTime* t = s.external_id >= 0 ? times.At(seq) : nullptr;
    if (t == nullptr || !t->alignment_found) continue;  // a wrapper (aten::linear) whose kernels the inner op (aten::addmm) launched
    const TimeNs ns = t->alignment_ns;
    out.checked_ns += ns;
    std::string off = OffTileDims(rec.names.View(s.name), rec.names.View(s.dtype), s);
    if (off.empty()) continue;
    out.misaligned_ns += ns;
    const std::string shapes_text = ShapesText(s);
    const std::string key = std::string(rec.names.View(s.name)) + "|" + std::string(rec.names.View(s.dtype)) + "|" + shapes_text;
    auto& m = misaligned[key];
    if (m.name.empty()) {
      m.name = std::string(rec.names.View(s.name));
      m.dtype = std::string(rec.names.View(s.dtype));
      m.shapes = shapes_text;
      off.pop_back();
      m.dims = fmt::format("{} (not a multiple of {})", off, tile);
    }
    ++m.calls;
    m.kernel_ns += ns;
  }
  RETURN_IF_ERROR(shapes.status());
  RETURN_IF_ERROR(times.status());
  if (matrix_total_ns > 0)
    out.misaligned_percent_of_matrix = 100.0 * static_cast<double>(out.misaligned_ns) / static_cast<double>(matrix_total_ns);
  for (auto& [key, m] : misaligned) out.top.push_back(std::move(m));
  std::sort(out.top.begin(), out.top.end(), [](const MisalignedOp& a, const MisalignedOp& b) { return a.kernel_ns > b.kernel_ns; });
  if (out.top.size() > 5) out.top.resize(5);
  return out;
}

TraceMemory MeasureTraceMemory(const Recording& rec, const Device& device) {
  TraceMemory out;
  out.devices = rec.memory_use;
  for (const auto& m : rec.memory_use) {
    // The GPU's figures, from the allocator's totals (a relative curve's level is not the GPU's).
    if (m.host || m.relative || (device.id >= 0 && m.device != device.id)) continue;
    out.available = true;
    out.peak_allocated_gib = std::max(out.peak_allocated_gib, static_cast<double>(m.peak_allocated) / (1 << 30));
    out.peak_reserved_gib = std::max(out.peak_reserved_gib, static_cast<double>(m.peak_reserved) / (1 << 30));
  }
  if (!out.available) return out;
  out.total_gib = static_cast<double>(device.total_memory_bytes) / (1 << 30);
  if (out.total_gib > 0) out.peak_reserved_percent = 100.0 * std::max(out.peak_reserved_gib, out.peak_allocated_gib) / out.total_gib;
  return out;
}

}  // namespace gputriage::analysis
