// What a kernel is, read from its name: the work it does (GEMM, convolution,
// attention, communication, ...) and the number format of its matrix math.
//
// The rules are kernel-name families of cuBLAS, cuDNN, CUTLASS, FlashAttention,
// PyTorch, vLLM/TensorRT-LLM and rocBLAS from Volta to Blackwell; see
// docs/formats.md for the table. A name that matches no rule is `kUnknown`
// precision, never guessed.
#pragma once

#include <string_view>

namespace gputriage {

enum class KernelClass {
  kGemm,            // dense matrix multiply (cuBLAS, CUTLASS, nvjet, rocBLAS Cijk)
  kConvolution,     // cuDNN / MIOpen convolution engines
  kAttentionFused,  // one fused attention kernel (flash, memory-efficient, cuDNN SDPA, fmha)
  kSoftmax,         // a softmax kernel (part of unfused "math" attention when beside batched GEMMs)
  kCommunication,   // NCCL / RCCL / custom all-reduce
  kMemory,          // copies, fills, layout transposes
  kOther,           // elementwise, reductions, norms, ...
};
const char* KernelClassName(KernelClass c);
/// Families whose time goes to moving bytes: elementwise, reductions, norms,
/// softmax, copies (arithmetic intensity far below any GPU's ridge point).
inline bool IsMemoryBoundClass(KernelClass c) {
  return c == KernelClass::kOther || c == KernelClass::kMemory || c == KernelClass::kSoftmax;
}

enum class Precision { kFp64, kFp32Simt, kTf32, kFp16, kBf16, kFp8, kFp4, kInt8, kTensorUnknown, kUnknown };
constexpr int kNumPrecisions = 10;
const char* PrecisionName(Precision p);
/// True for formats executed on tensor/matrix cores.
bool UsesTensorCores(Precision p);

enum class AttentionBackend { kNone, kFlash, kMemoryEfficient, kCudnn, kOtherFused };
const char* AttentionBackendName(AttentionBackend b);

struct KernelKind {
  KernelClass cls = KernelClass::kOther;
  Precision precision = Precision::kUnknown;  // meaningful for matrix classes
  AttentionBackend attention = AttentionBackend::kNone;
  bool batched = false;  // a batched GEMM (bmm) — the matmuls of unfused attention
};

/// Classifies a kernel by its (demangled) name.
KernelKind ClassifyKernelName(std::string_view name);

/// Precision from a framework input type ("float", "c10::BFloat16", "c10::Half", ...),
/// used when a matrix kernel's name does not say (e.g. nvjet). kUnknown if unknown.
Precision PrecisionFromInputType(std::string_view type, bool tensor_core_kernel);

/// The kind of a kernel no name rule knows (a mangled or custom GEMM, an FP4/FP8
/// decode kernel) when a matrix or attention operator launched it: that operator's
/// matrix kernel, in the precision of its input dtype, unless the name says it is
/// elementwise work (a bias add, a cast). `op` is the operator ("aten::mm"), `dtype`
/// its first input's type. Returns `kind` unchanged when it does not apply.
KernelKind KindFromLaunchingOperator(const KernelKind& kind, std::string_view kernel_name, std::string_view op,
                                     std::string_view dtype);

inline bool IsMatrixClass(KernelClass c) {
  return c == KernelClass::kGemm || c == KernelClass::kConvolution || c == KernelClass::kAttentionFused;
}

}  // namespace gputriage
