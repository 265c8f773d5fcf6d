// The roofline model (Williams, Waterman and Patterson, CACM 2009) per operator, as
// TraceLens's GEMM/SDPA perf tables apply it to PyTorch traces: an operator that
// does F FLOPs while moving at least B bytes cannot run faster than
// max(F / peak_flops, B / peak_bandwidth). Its arithmetic intensity F / B against
// the ridge point peak_flops / peak_bandwidth says which bound holds: below the
// ridge the operator waits on DRAM however busy the GPU looks. Decode-like work
// (GEMMs with a small M, attention over one query token) sits far below it.
//
// B counts each operand read once and the output written once: the least traffic
// the operator needs, so the intensity is an upper bound and an operator called
// memory-bound here is memory-bound in fact. Attention FLOPs count the full score
// matrix (a causal mask halves them): again an upper bound on intensity.
#include "src/analysis/roofline.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "src/analysis/gpu_specs.h"
#include "src/analysis/shapes.h"
#include "src/util/strings.h"

namespace gputriage::analysis {
namespace {

/// Dimension `i` of input `input` (negative i counts from the end), -1 when absent.
int64_t InputDim(const MatrixOpShapes& s, int input, int i) {
  if (input >= s.inputs) return -1;
  const int rank = s.rank[static_cast<size_t>(input)];
  const int at = i >= 0 ? i : rank + i;
  if (rank == 0 || at < 0 || at >= rank) return -1;
  return s.dims[static_cast<size_t>(input)][static_cast<size_t>(at)];
}

int InputRank(const MatrixOpShapes& s, int input) { return input < s.inputs ? s.rank[static_cast<size_t>(input)] : 0; }

/// Elements of input `input`, 0 when it is not a plain tensor.
double Elements(const MatrixOpShapes& s, int input) {
  const int rank = InputRank(s, input);
  if (rank == 0) return 0;
  double n = 1;
  for (int i = 0; i < rank; ++i) n *= static_cast<double>(std::max<int64_t>(0, InputDim(s, input, i)));
  return n;
}

/// Product of the leading dimensions of input `input` up to (not including) `end_from_back`.
double Leading(const MatrixOpShapes& s, int input, int end_from_back) {
  double n = 1;
  for (int i = 0; i < InputRank(s, input) - end_from_back; ++i) n *= static_cast<double>(InputDim(s, input, i));
  return n;
}

bool IsAttentionOp(std::string_view op) {
  return op == "aten::scaled_dot_product_attention" || op == "aten::_scaled_dot_product_flash_attention" ||
         op == "aten::_scaled_dot_product_efficient_attention" || op == "aten::_scaled_dot_product_cudnn_attention" ||
         op == "aten::_flash_attention_forward" || op == "aten::_efficient_attention_forward";
}

/// A GEMM [batch x M x K] @ [K x N]: FLOPs and operand + output bytes.
/// `weight_elements`: the second operand's, `extra_elements`: a bias's.
OpCost Gemm(double batch, double m, double k, double n, double weight_elements, int eb, double extra_elements = 0) {
  OpCost c;
  c.flops = 2.0 * batch * m * n * k;
  c.weight_bytes = static_cast<double>(eb) * weight_elements;
  c.bytes = static_cast<double>(eb) * (batch * (m * k + m * n) + extra_elements) + c.weight_bytes;
  return c;
}

struct OpTime {
  TimeNs ns = 0;         // every kernel the operator launched
  TimeNs matrix_ns = 0;  // its matrix-class kernels
  std::array<TimeNs, kNumPrecisions> by_precision{};
};

/// The precision an operator's peak is taken from: its matrix kernels' (by time),
/// else its dtype's on tensor cores where the dtype only runs there.
Precision OpPrecision(const OpTime& t, std::string_view dtype) {
  int best = -1;
  for (int p = 0; p < kNumPrecisions; ++p) {
    const auto prec = static_cast<Precision>(p);
    if (prec == Precision::kUnknown || prec == Precision::kTensorUnknown || t.by_precision[static_cast<size_t>(p)] == 0) continue;
    if (best < 0 || t.by_precision[static_cast<size_t>(p)] > t.by_precision[static_cast<size_t>(best)]) best = p;
  }
  if (best >= 0) return static_cast<Precision>(best);
  // A float operator on unknown kernels is judged against the fp32 SIMT peak: the
  // lowest ridge, so an operator is called memory-bound only when it is so at any peak.
  return PrecisionFromInputType(dtype, /*tensor_core_kernel=*/false);
}

/// Kernel-time weighted median of values: the kernel time of each value, summed
/// exactly (one entry per distinct value, whatever the number of operators).
double WeightedMedian(const std::map<double, TimeNs>& weights) {
  if (weights.empty()) return NAN;
  TimeNs total = 0;
  for (const auto& [x, w] : weights) total += w;
  TimeNs run = 0;
  for (const auto& [x, w] : weights)
    if (2 * (run += w) >= total) return x;
  return weights.rbegin()->first;
}

}  // namespace

int DtypeBytes(std::string_view dtype) {
  const std::string l = AsciiLower(dtype);
  if (Contains(l, "bfloat16") || Contains(l, "half") || l == "float16" || l == "short") return 2;
  if (Contains(l, "float8") || l == "signed char" || l == "unsigned char" || l == "int8" || l == "uint8") return 1;
  if (l == "float" || l == "int" || l == "float32") return 4;
  if (l == "double" || l == "long int" || l == "long") return 8;
  return 0;
}

bool MatrixOpCost(std::string_view op, const MatrixOpShapes& s, int eb, OpCost& out) {
  if (eb <= 0) return false;
  const auto positive = [](std::initializer_list<int64_t> v) {
    return std::all_of(v.begin(), v.end(), [](int64_t x) { return x > 0; });
  };
  if (op == "aten::mm" || op == "aten::_scaled_mm") {  // A [M, K], B [K, N]
    const int64_t m = InputDim(s, 0, 0), k = InputDim(s, 0, 1), n = InputDim(s, 1, 1);
    if (InputRank(s, 0) != 2 || InputRank(s, 1) != 2 || !positive({m, k, n}) || InputDim(s, 1, 0) != k) return false;
    out = Gemm(1, static_cast<double>(m), static_cast<double>(k), static_cast<double>(n), static_cast<double>(k * n), eb);
    return true;
  }
  if (op == "aten::addmm") {  // bias, A [M, K], B [K, N]
    const int64_t m = InputDim(s, 1, 0), k = InputDim(s, 1, 1), n = InputDim(s, 2, 1);
    if (InputRank(s, 1) != 2 || InputRank(s, 2) != 2 || !positive({m, k, n}) || InputDim(s, 2, 0) != k) return false;
    out = Gemm(1, static_cast<double>(m), static_cast<double>(k), static_cast<double>(n), static_cast<double>(k * n), eb, Elements(s, 0));
    return true;
  }
  if (op == "aten::linear") {  // input [..., K], weight [N, K], bias [N]
    const int64_t k = InputDim(s, 0, -1), n = InputDim(s, 1, 0);
    if (InputRank(s, 0) < 1 || InputRank(s, 1) != 2 || !positive({k, n}) || InputDim(s, 1, 1) != k) return false;
    const double m = Leading(s, 0, 1);
    if (m <= 0) return false;
    out = Gemm(1, m, static_cast<double>(k), static_cast<double>(n), static_cast<double>(k * n), eb, Elements(s, 2));
    return true;
  }
  if (op == "aten::bmm" || op == "aten::baddbmm") {  // [bias,] [B, M, K], [B, K, N]
    const int a = op == "aten::bmm" ? 0 : 1;
    const int64_t b = InputDim(s, a, 0), m = InputDim(s, a, 1), k = InputDim(s, a, 2), n = InputDim(s, a + 1, 2);
    if (InputRank(s, a) != 3 || InputRank(s, a + 1) != 3 || !positive({b, m, k, n}) || InputDim(s, a + 1, 1) != k) return false;
    out = Gemm(static_cast<double>(b), static_cast<double>(m), static_cast<double>(k), static_cast<double>(n),
               static_cast<double>(b * k * n), eb, a == 1 ? Elements(s, 0) : 0.0);
    return true;
  }
  if (op == "aten::matmul") {
    const int ra = InputRank(s, 0), rb = InputRank(s, 1);
    if (ra < 1 || rb < 1) return false;
    const int64_t k = InputDim(s, 0, -1);
    if (rb == 1) {  // matrix-vector: [..., K] @ [K]
      if (InputDim(s, 1, 0) != k || k <= 0) return false;
      out = Gemm(1, Leading(s, 0, 1), static_cast<double>(k), 1, static_cast<double>(k), eb);
      return true;
    }
    const int64_t n = InputDim(s, 1, -1);
    if (InputDim(s, 1, -2) != k || !positive({k, n})) return false;
    if (rb == 2) {  // [..., M, K] @ [K, N]: the leading dims fold into M
      out = Gemm(1, Leading(s, 0, 1), static_cast<double>(k), static_cast<double>(n), static_cast<double>(k * n), eb);
      return true;
    }
    if (ra < 2 || ra != rb) return false;  // broadcast batches: not modelled
    const double batch = Leading(s, 0, 2);
    if (batch != Leading(s, 1, 2)) return false;
    const double m = static_cast<double>(InputDim(s, 0, -2));
    out = Gemm(batch, m, static_cast<double>(k), static_cast<double>(n), batch * static_cast<double>(k * n), eb);
    return true;
  }
  if (IsAttentionOp(op)) {
    if (InputRank(s, 0) != 4 || InputRank(s, 1) != 4 || InputRank(s, 2) != 4) return false;
    // SDPA: [B, H, L, D]; the flash/efficient forward kernels' own ops: [B, L, H, D].
    const bool bhld = StartsWith(op, "aten::scaled_dot") || StartsWith(op, "aten::_scaled_dot");
    const int64_t b = InputDim(s, 0, 0), d = InputDim(s, 0, 3);
    const int64_t h = InputDim(s, 0, bhld ? 1 : 2), lq = InputDim(s, 0, bhld ? 2 : 1), lk = InputDim(s, 1, bhld ? 2 : 1);
    if (!positive({b, d, h, lq, lk})) return false;
    out.flops = 4.0 * static_cast<double>(b) * static_cast<double>(h) * static_cast<double>(lq) *
                static_cast<double>(lk) * static_cast<double>(d);
    out.bytes = static_cast<double>(eb) * (2 * Elements(s, 0) + Elements(s, 1) + Elements(s, 2));
    return true;
  }
  return false;  // convolutions and others: not modelled (their bytes depend on the algorithm)
}

StatusOr<Roofline> MeasureRoofline(const TraceEvents& events, const SortedSpill<ShapeKernelTime, BySeq>& kernel_time,
                                   const Device& device) {
  Roofline out;
  if (events.matrix_shape_count() == 0) return out;
  const Recording& rec = events.recording();
  const auto spec = FindGpuSpec(device.name);
  if (!spec || spec->memory_bandwidth_gbs <= 0) {
    out.unavailable_reason = device.name.empty()
                                 ? "the GPU model is unknown (no deviceProperties): no peak, no ridge point"
                                 : fmt::format("no published peaks for '{}': no ridge point", device.name);
    return out;
  }
  out.gpu_model = spec->model;
  out.peak_bandwidth_gbs = spec->memory_bandwidth_gbs;

  // Kernel time of the operators the model covers, by external id (joins.cc).
  bool any_covered = false;
  // By operator, dtype and shapes (compared as numbers: the text is made for the top few only).
  using OpKey = std::tuple<NameId, NameId, uint8_t, std::array<uint8_t, MatrixOpShapes::kMaxInputs>,
                           std::array<std::array<int64_t, MatrixOpShapes::kMaxRank>, MatrixOpShapes::kMaxInputs>>;
  std::map<OpKey, std::pair<RooflineOp, MatrixOpShapes>> ops;
  std::map<double, TimeNs> intensities, ridges;
  double mb_bytes = 0, mb_seconds = 0, cb_peak_seconds = 0, cb_seconds = 0;
  bool any_shape = false;
  auto shapes = events.matrix_shapes();
  SeqZip<ShapeKernelTime> times(kernel_time);
  int64_t seq = 0;
  for (const MatrixOpShapes* sp = shapes.Next(); sp != nullptr; sp = shapes.Next(), ++seq) {
    const MatrixOpShapes& s = *sp;
    const ShapeKernelTime* found = s.external_id >= 0 ? times.At(seq) : nullptr;
    any_covered = any_covered || (found != nullptr && found->roofline_found);
    if (found == nullptr || !found->roofline_found || found->roofline_ns == 0) continue;  // a wrapper whose inner operator launched the kernels
    OpTime time;
    time.ns = found->roofline_ns;
    time.matrix_ns = found->roofline_matrix_ns;
    time.by_precision = found->roofline_by_precision;
    const OpTime* it_second = &time;
    any_shape = true;
    const std::string_view name = rec.names.View(s.name), dtype = rec.names.View(s.dtype);
    OpCost cost;
    if (!MatrixOpCost(name, s, DtypeBytes(dtype), cost) || cost.bytes <= 0 || cost.flops <= 0) continue;
    const Precision precision = OpPrecision(*it_second, dtype);
    const double peak = PeakTflops(*spec, precision);
    if (peak <= 0) continue;  // this GPU's peak for the format is not published: not judged
    const double ridge = peak * 1e12 / (spec->memory_bandwidth_gbs * 1e9);
    const double intensity = cost.flops / cost.bytes;
    const TimeNs ns = it_second->ns;
    const double seconds = static_cast<double>(ns) * 1e-9;
    const bool memory_bound = intensity < ridge;
    out.checked_ns += ns;
    out.flops_by_precision[static_cast<size_t>(precision)] += cost.flops;
    intensities[intensity] += ns;
    ridges[ridge] += ns;
    if (memory_bound) {
      out.memory_bound_ns += ns;
      out.memory_bound_matrix_ns += it_second->matrix_ns;
      mb_bytes += cost.bytes;
      mb_seconds += seconds;
      if (DtypeBytes(dtype) >= 2) out.memory_bound_weight_bytes_16bit += cost.weight_bytes;
    } else {
      cb_peak_seconds += cost.flops / (peak * 1e12);
      cb_seconds += seconds;
    }
    auto& [op, first] = ops[OpKey{s.name, s.dtype, s.inputs, s.rank, s.dims}];
    if (op.calls == 0) {
      first = s;
      op.precision = PrecisionName(precision);
      op.flops = cost.flops;
      op.bytes = cost.bytes;
      op.intensity = intensity;
      op.ridge = ridge;
      op.memory_bound = memory_bound;
    }
    ++op.calls;
    op.kernel_ns += ns;
  }
  RETURN_IF_ERROR(shapes.status());
  RETURN_IF_ERROR(times.status());
  if (!any_covered || !any_shape) return out;
  if (out.checked_ns == 0) {
    out.unavailable_reason = "no recorded matrix or attention operator has shapes the model covers and a known peak";
    return out;
  }
  out.available = true;
  out.memory_bound_percent_of_checked = 100.0 * static_cast<double>(out.memory_bound_ns) / static_cast<double>(out.checked_ns);
  out.memory_bound_bytes = mb_bytes;
  if (mb_seconds > 0) out.memory_bound_bandwidth_percent = 100.0 * mb_bytes / mb_seconds / (spec->memory_bandwidth_gbs * 1e9);
  if (cb_seconds > 0) out.compute_bound_percent_of_peak = 100.0 * cb_peak_seconds / cb_seconds;
  out.intensity_p50 = WeightedMedian(intensities);
  out.ridge_p50 = WeightedMedian(ridges);
  std::vector<std::pair<RooflineOp, MatrixOpShapes>*> order;
  for (auto& [key, entry] : ops) order.push_back(&entry);
  // Ties keep the map's (numeric key) order: deterministic.
  std::stable_sort(order.begin(), order.end(),
                   [](const auto* a, const auto* b) { return a->first.kernel_ns > b->first.kernel_ns; });
  if (order.size() > 5) order.resize(5);
  for (auto* entry : order) {
    RooflineOp op = std::move(entry->first);
    const MatrixOpShapes& s = entry->second;
    op.name = std::string(rec.names.View(s.name));
    op.dtype = std::string(rec.names.View(s.dtype));
    op.shapes = ShapesText(s);
    const double seconds = static_cast<double>(op.kernel_ns) * 1e-9;
    op.achieved_tflops = op.flops * static_cast<double>(op.calls) / seconds / 1e12;
    op.achieved_bandwidth_gbs = op.bytes * static_cast<double>(op.calls) / seconds / 1e9;
    out.top.push_back(std::move(op));
  }
  return out;
}

}  // namespace gputriage::analysis
