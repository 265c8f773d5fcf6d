#include "src/analysis/kernel_taxonomy.h"

#include <string>

#include "src/util/strings.h"

namespace gputriage {
namespace {

/// The function name without template arguments and parameters, lower-cased:
/// "void cudnn::detail::dgrad_engine<float, ...>(...)" -> "cudnn::detail::dgrad_engine".
std::string BaseName(std::string_view full) {
  std::string without_anonymous(full);
  for (size_t at; (at = without_anonymous.find("(anonymous namespace)::")) != std::string::npos;)
    without_anonymous.erase(at, 23);
  std::string_view name = without_anonymous;
  size_t end = name.find_first_of("<(");
  std::string_view head = name.substr(0, end);
  if (head.substr(0, 5) == "void ") head.remove_prefix(5);
  return AsciiLower(head);
}

/// Explicit number-format tokens in the name (kernel families spell them out).
Precision PrecisionToken(const std::string& l) {
  if (Contains(l, "e2m1") || Contains(l, "fp4") || Contains(l, "nvf4") || Contains(l, "mxf4")) return Precision::kFp4;
  if (Contains(l, "e4m3") || Contains(l, "e5m2") || Contains(l, "fp8") || Contains(l, "float8")) return Precision::kFp8;
  // "DF16b"/"DF16_": std::bfloat16_t / _Float16 in a mangled name (Composable Kernel's templates).
  if (Contains(l, "bf16") || Contains(l, "bfloat16") || Contains(l, "df16b")) return Precision::kBf16;
  if (Contains(l, "tf32") || Contains(l, "tfloat32")) return Precision::kTf32;
  if (Contains(l, "df16_")) return Precision::kFp16;
  // CUTLASS names its element types: "cutlass_80_tensorop_f16_s16816gemm_relu_f16_..." is fp16 data (bf16 and
  // fp8 were matched above).
  if (Contains(l, "fp16") || Contains(l, "f16f16") || Contains(l, "_f16") || Contains(l, "half") || Contains(l, "__half") || Contains(l, "hmma") ||
      Contains(l, "h884") || Contains(l, "hcudnn") || Contains(l, "h1688") || Contains(l, "h16816") || Contains(l, "s884") || Contains(l, "s16816gemm_fp16"))
    return Precision::kFp16;
  // CUTLASS/cuBLAS "s1688"/"s16816" without a 16-bit token: fp32 data on TF32 tensor cores (Ampere+).
  if (Contains(l, "s1688") || Contains(l, "s16816") || Contains(l, "s16832")) return Precision::kTf32;
  if (Contains(l, "i8816") || Contains(l, "i16832") || Contains(l, "imma") || Contains(l, "int8") || Contains(l, "s8s8")) return Precision::kInt8;
  if (Contains(l, "dgemm") || Contains(l, "zgemm") || Contains(l, "dcudnn") || Contains(l, "<double") || Contains(l, "fp64") ||
      Contains(l, "f64"))
    return Precision::kFp64;
  // cgemm/gcgemm: complex single precision (cuDNN's FFT convolutions), SIMT.
  if (Contains(l, "sgemm") || Contains(l, "cgemm") || Contains(l, "scudnn") || Contains(l, "_simt_") || Contains(l, "<float"))
    return Precision::kFp32Simt;
  return Precision::kUnknown;
}

/// rocBLAS/hipBLASLt (Tensile) kernels name their types in the token after the two
/// layout tokens: "Cijk_Ailk_Bljk_BBS_BH_..." (bf16 in, bf16 out, fp32 compute),
/// hipBLASLt's "Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_..." (bf16 in; "HA_S" is the
/// fp32 accumulate of the epilogue, not the data), "..._HHS_..." fp16, "..._SB_..."
/// or "..._S_B_..." fp32 in, "F8"/"B8" fp8, "I8" int8, "D" fp64, "X" xf32. Only the
/// data type's token decides: other tokens hold letters of the epilogue's types.
Precision RocblasPrecision(std::string_view name) {
  size_t at = 0;
  for (int token = 0; token < 3 && at != std::string_view::npos; ++token) {
    at = name.find('_', at);
    if (at != std::string_view::npos) ++at;
  }
  if (at == std::string_view::npos || at >= name.size()) return Precision::kUnknown;
  const std::string_view types = name.substr(at, name.find('_', at) - at);
  const bool matrix_cores = name.find("_MI") != std::string_view::npos;
  if (types.size() >= 2 && (types.substr(0, 2) == "F8" || types.substr(0, 2) == "B8")) return Precision::kFp8;
  if (types.size() >= 2 && (types.substr(0, 2) == "I8" || types.substr(0, 3) == "4xi")) return Precision::kInt8;
  switch (types.empty() ? '\0' : types[0]) {
    case 'B': return Precision::kBf16;
    case 'H': return Precision::kFp16;
    case 'X': return Precision::kTf32;
    case 'D': return Precision::kFp64;
    case 'S': return matrix_cores ? Precision::kTf32 : Precision::kFp32Simt;
    default: return Precision::kUnknown;
  }
}

/// The lower-cased name without words that hold "gemm" or "conv" but name no matrix
/// work: FBGEMM's namespace (embedding lookups, quantize kernels), "convert" (casts).
std::string WithoutMisleadingWords(std::string l) {
  for (std::string_view word : {"fbgemm", "convert"})
    for (size_t at; (at = l.find(word)) != std::string::npos;) l.erase(at, word.size());
  return l;
}

/// Kernels that serve a matrix library without doing its math: TMA descriptor fills,
/// offset tables, index checks. Inductor's pointwise/reduction kernels list the aten
/// ops they were fused from ("triton_red_fused_add_addmm_..._fmha_...") but do none
/// of their matrix work (its matmul templates are triton_tem_* / triton_mm).
bool IsMatrixHelper(const std::string& l, const std::string& base) {
  return base.starts_with("triton_poi_") || base.starts_with("triton_red_") || base.starts_with("triton_per_") ||
         Contains(base, "tensormap") || Contains(base, "::utils::") || Contains(l, "offsetskernel") ||
         Contains(base, "bounds_check_indices") || Contains(base, "split_embedding");
}

}  // namespace

const char* KernelClassName(KernelClass c) {
  switch (c) {
    case KernelClass::kGemm: return "gemm";
    case KernelClass::kConvolution: return "convolution";
    case KernelClass::kAttentionFused: return "attention_fused";
    case KernelClass::kSoftmax: return "softmax";
    case KernelClass::kCommunication: return "communication";
    case KernelClass::kMemory: return "memory";
    case KernelClass::kOther: return "other";
  }
  return "other";
}

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp64: return "fp64";
    case Precision::kFp32Simt: return "fp32";
    case Precision::kTf32: return "tf32";
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
    case Precision::kFp8: return "fp8";
    case Precision::kFp4: return "fp4";
    case Precision::kInt8: return "int8";
    case Precision::kTensorUnknown: return "tensor_core_unknown";
    case Precision::kUnknown: return "unknown";
  }
  return "unknown";
}

bool UsesTensorCores(Precision p) {
  switch (p) {
    case Precision::kTf32:
    case Precision::kFp16:
    case Precision::kBf16:
    case Precision::kFp8:
    case Precision::kFp4:
    case Precision::kInt8:
    case Precision::kTensorUnknown: return true;
    default: return false;
  }
}

const char* AttentionBackendName(AttentionBackend b) {
  switch (b) {
    case AttentionBackend::kNone: return "none";
    case AttentionBackend::kFlash: return "flash";
    case AttentionBackend::kMemoryEfficient: return "memory_efficient";
    case AttentionBackend::kCudnn: return "cudnn";
    case AttentionBackend::kOtherFused: return "fused_other";
  }
  return "none";
}

KernelKind ClassifyKernelName(std::string_view name) {
  KernelKind kind;
  const std::string l = WithoutMisleadingWords(AsciiLower(name));
  const std::string base = BaseName(name);

  // Communication first: NCCL/RCCL kernels and custom all-reduce (vLLM, symmetric memory).
  if (Contains(base, "nccl") || Contains(base, "rccl") || Contains(l, "ncclkernel") || Contains(l, "nccldevkernel") ||
      Contains(l, "all_reduce_kernel") || Contains(l, "allreduce") || Contains(l, "cross_device_reduce") ||
      Contains(l, "multimem_all_reduce") || Contains(l, "all_gather_kernel") || Contains(l, "reduce_scatter_kernel")) {
    kind.cls = KernelClass::kCommunication;
    return kind;
  }

  if (IsMatrixHelper(l, base)) {
    if (Contains(l, "offsetskernel") || Contains(base, "tensormap")) kind.cls = KernelClass::kMemory;
    return kind;
  }

  // Fused attention: FlashAttention 1/2/3, xFormers/PyTorch memory-efficient (CUTLASS
  // fmha), cuDNN SDPA, TensorRT-LLM/FlashInfer fmha.
  if (Contains(l, "flash_fwd") || Contains(l, "flash_bwd") || Contains(l, "flash::") || Contains(l, "flashattn") ||
      Contains(l, "flash_attn") || Contains(l, "flashinfer")) {
    kind.cls = KernelClass::kAttentionFused;
    kind.attention = AttentionBackend::kFlash;
  } else if (Contains(l, "efficient_attention") || Contains(l, "fmha_cutlass") || Contains(l, "attentionkernel") ||
             Contains(l, "mem_efficient")) {
    kind.cls = KernelClass::kAttentionFused;
    kind.attention = AttentionBackend::kMemoryEfficient;
  } else if (Contains(l, "cudnn_generated_fort_native_sdpa") || (Contains(l, "sdpa") && Contains(l, "cudnn"))) {
    kind.cls = KernelClass::kAttentionFused;
    kind.attention = AttentionBackend::kCudnn;
  } else if (Contains(l, "fmha") || Contains(l, "attn_fwd") || Contains(l, "attn_bwd") || Contains(l, "paged_attention") ||
             Contains(l, "mha_fwd") || Contains(l, "mha_bwd")) {
    kind.cls = KernelClass::kAttentionFused;
    kind.attention = AttentionBackend::kOtherFused;
  }
  if (kind.cls == KernelClass::kAttentionFused) {
    kind.precision = PrecisionToken(l);
    // Fused attention kernels run only on 16-bit or narrower inputs on tensor cores.
    if (kind.precision == Precision::kUnknown || kind.precision == Precision::kFp32Simt)
      kind.precision = Precision::kTensorUnknown;
    return kind;
  }

  if (Contains(base, "softmax")) {
    kind.cls = KernelClass::kSoftmax;
    return kind;
  }

  // Convolutions: cuDNN engines (dgrad/wgrad/fprop, implicit GEMM, winograd, FFT),
  // XMMA fprop/dgrad/wgrad, MIOpen.
  const bool conv = Contains(l, "conv") || Contains(l, "scudnn") || Contains(l, "hcudnn") || Contains(l, "dcudnn") || Contains(l, "dgrad") || Contains(l, "wgrad") || Contains(l, "fprop") ||
                    Contains(l, "winograd") || Contains(l, "miopen") || Contains(l, "implicit_gemm") ||
                    Contains(l, "implicit_convolve") || Contains(l, "precomputed_convolve") ||
                    Contains(l, "fft2d") || (Contains(l, "fft_") && Contains(l, "cudnn"));
  // GEMMs: cuBLAS (sgemm/hgemm, gemv, gemmSN, splitK), CUTLASS, XMMA, nvjet (cuBLAS on
  // Hopper/Blackwell), TRT-LLM bmm_*, rocBLAS/hipBLASLt Cijk_*.
  const bool gemm = Contains(l, "gemm") || Contains(l, "gemv") || Contains(l, "nvjet") || Contains(l, "cutlass") ||
                    Contains(l, "xmma") || Contains(base, "bmm_") || name.substr(0, 5) == "Cijk_" ||
                    Contains(l, "splitkreduce") || Contains(l, "matmul") || Contains(l, "cublaslt");
  const bool layout_only = Contains(l, "nchwtonhwc") || Contains(l, "nhwctonchw") || Contains(l, "transpose") ||
                           Contains(l, "im2col");
  if (layout_only) {
    kind.cls = KernelClass::kMemory;
    return kind;
  }
  if (conv || gemm) {
    kind.cls = conv && !Contains(l, "gemmsn") ? KernelClass::kConvolution : KernelClass::kGemm;
    if (name.substr(0, 5) == "Cijk_") {
      kind.precision = RocblasPrecision(name);
      kind.batched = Contains(l, "_b_") || Contains(l, "batched");
    } else {
      kind.precision = PrecisionToken(l);
      if (kind.precision == Precision::kUnknown &&
          (Contains(l, "nvjet") || Contains(l, "tensorop") || Contains(l, "xmma") || Contains(l, "sm90_") || Contains(l, "sm100_") ||
           Contains(l, "wgmma") || Contains(l, "hgmma")))
        kind.precision = Precision::kTensorUnknown;
      kind.batched = Contains(l, "batched") || Contains(base, "bmm") || Contains(l, "strided_batched");
    }
    // cuDNN convolution engines templated on float without a tensor-core token are
    // fp32 SIMT (e.g. dgrad_engine<float,...>, wgrad_alg0_engine<float,...>).
    if (kind.cls == KernelClass::kConvolution && kind.precision == Precision::kUnknown && Contains(l, "<float"))
      kind.precision = Precision::kFp32Simt;
    return kind;
  }

  if (Contains(l, "memcpy") || Contains(l, "memset") || Contains(l, "copy_kernel") || Contains(l, "fillfunctor") ||
      Contains(l, "catarraybatchedcopy"))
    kind.cls = KernelClass::kMemory;
  return kind;
}

Precision PrecisionFromInputType(std::string_view type, bool tensor_core_kernel) {
  const std::string l = AsciiLower(type);
  if (Contains(l, "bfloat16")) return Precision::kBf16;
  if (Contains(l, "half") || l == "float16") return Precision::kFp16;
  if (Contains(l, "float8")) return Precision::kFp8;
  if (l == "double") return Precision::kFp64;
  if (l == "float") return tensor_core_kernel ? Precision::kTf32 : Precision::kFp32Simt;
  return Precision::kUnknown;
}

KernelKind KindFromLaunchingOperator(const KernelKind& kind, std::string_view kernel_name, std::string_view op,
                                     std::string_view dtype) {
  if (kind.cls != KernelClass::kOther) return kind;
  const bool attention = Contains(op, "attention");
  const bool gemm = op == "aten::mm" || op == "aten::addmm" || op == "aten::bmm" || op == "aten::baddbmm" ||
                    op == "aten::addbmm" || op == "aten::matmul" || op == "aten::linear" || op == "aten::_scaled_mm";
  if (!attention && !gemm) return kind;
  const std::string l = AsciiLower(kernel_name);
  for (const char* t : {"elementwise", "vectorized", "reduce", "fill", "copy", "cast", "norm", "act_and_mul", "silu",
                        "gelu", "relu", "rotary", "index", "scatter", "gather", "unrolled", "bias", "add_kernel",
                        "softmax", "quant"})
    if (Contains(l, t)) return kind;
  KernelKind out;
  out.cls = attention ? KernelClass::kAttentionFused : KernelClass::kGemm;
  if (attention) out.attention = AttentionBackend::kOtherFused;
  // 16- and 8-bit inputs run only on tensor cores; float could be either.
  const Precision p = PrecisionFromInputType(dtype, /*tensor_core_kernel=*/false);
  out.precision = p == Precision::kFp32Simt ? Precision::kUnknown : p;
  if (attention && (out.precision == Precision::kUnknown)) out.precision = Precision::kTensorUnknown;
  return out;
}

}  // namespace gputriage
