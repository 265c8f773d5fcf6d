#include "src/analysis/kernel_taxonomy.h"

#include <string>

namespace gputriage {
namespace {

bool Has(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

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
  return Lower(head);
}

/// Explicit number-format tokens in the name (kernel families spell them out).
Precision PrecisionToken(const std::string& l) {
  if (Has(l, "e2m1") || Has(l, "fp4") || Has(l, "nvf4") || Has(l, "mxf4")) return Precision::kFp4;
  if (Has(l, "e4m3") || Has(l, "e5m2") || Has(l, "fp8") || Has(l, "float8")) return Precision::kFp8;
  if (Has(l, "bf16") || Has(l, "bfloat16")) return Precision::kBf16;
  if (Has(l, "tf32")) return Precision::kTf32;
  if (Has(l, "fp16") || Has(l, "f16f16") || Has(l, "half") || Has(l, "__half") || Has(l, "hmma") ||
      Has(l, "h884") || Has(l, "hcudnn") || Has(l, "h1688") || Has(l, "h16816") || Has(l, "s884") || Has(l, "s16816gemm_fp16"))
    return Precision::kFp16;
  // CUTLASS/cuBLAS "s1688"/"s16816" without a 16-bit token: fp32 data on TF32 tensor cores (Ampere+).
  if (Has(l, "s1688") || Has(l, "s16816") || Has(l, "s16832")) return Precision::kTf32;
  if (Has(l, "i8816") || Has(l, "i16832") || Has(l, "imma") || Has(l, "int8") || Has(l, "s8s8")) return Precision::kInt8;
  if (Has(l, "dgemm") || Has(l, "dcudnn") || Has(l, "<double") || Has(l, "fp64") || Has(l, "f64")) return Precision::kFp64;
  if (Has(l, "sgemm") || Has(l, "scudnn") || Has(l, "_simt_") || Has(l, "<float")) return Precision::kFp32Simt;
  return Precision::kUnknown;
}

/// rocBLAS/hipBLASLt "Cijk_Ailk_Bljk_BBS_BH_..." kernels: the type letters follow the layout.
Precision RocblasPrecision(std::string_view name) {
  const std::string l(name);
  if (Has(l, "_BBS_") || Has(l, "_BSS_") || Has(l, "_BB_") || Has(l, "_BBH_")) return Precision::kBf16;
  if (Has(l, "_HHS_") || Has(l, "_HSS_") || Has(l, "_HH_")) return Precision::kFp16;
  if (Has(l, "_F8") || Has(l, "_B8")) return Precision::kFp8;
  if (Has(l, "_I8") || Has(l, "_4xi8")) return Precision::kInt8;
  if (Has(l, "_DD_") || Has(l, "_D_")) return Precision::kFp64;
  if (Has(l, "_SS_") || Has(l, "_S_") || Has(l, "_SB_")) return Has(l, "_MI") ? Precision::kTf32 : Precision::kFp32Simt;
  return Precision::kUnknown;
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
  const std::string l = Lower(name);
  const std::string base = BaseName(name);

  // Communication first: NCCL/RCCL kernels and custom all-reduce (vLLM, symmetric memory).
  if (Has(base, "nccl") || Has(base, "rccl") || Has(l, "ncclkernel") || Has(l, "nccldevkernel") ||
      Has(l, "all_reduce_kernel") || Has(l, "allreduce") || Has(l, "cross_device_reduce") ||
      Has(l, "multimem_all_reduce") || Has(l, "all_gather_kernel") || Has(l, "reduce_scatter_kernel")) {
    kind.cls = KernelClass::kCommunication;
    return kind;
  }

  // Fused attention: FlashAttention 1/2/3, xFormers/PyTorch memory-efficient (CUTLASS
  // fmha), cuDNN SDPA, TensorRT-LLM/FlashInfer fmha.
  if (Has(l, "flash_fwd") || Has(l, "flash_bwd") || Has(l, "flash::") || Has(l, "flashattn") ||
      Has(l, "flash_attn") || Has(l, "flashinfer")) {
    kind.cls = KernelClass::kAttentionFused;
    kind.attention = AttentionBackend::kFlash;
  } else if (Has(l, "efficient_attention") || Has(l, "fmha_cutlass") || Has(l, "attentionkernel") ||
             Has(l, "mem_efficient")) {
    kind.cls = KernelClass::kAttentionFused;
    kind.attention = AttentionBackend::kMemoryEfficient;
  } else if (Has(l, "cudnn_generated_fort_native_sdpa") || (Has(l, "sdpa") && Has(l, "cudnn"))) {
    kind.cls = KernelClass::kAttentionFused;
    kind.attention = AttentionBackend::kCudnn;
  } else if (Has(l, "fmha") || Has(l, "attn_fwd") || Has(l, "attn_bwd") || Has(l, "paged_attention") ||
             Has(l, "mha_fwd") || Has(l, "mha_bwd")) {
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

  if (Has(base, "softmax")) {
    kind.cls = KernelClass::kSoftmax;
    return kind;
  }

  // Convolutions: cuDNN engines (dgrad/wgrad/fprop, implicit GEMM, winograd, FFT),
  // XMMA fprop/dgrad/wgrad, MIOpen.
  const bool conv = Has(l, "conv") || Has(l, "scudnn") || Has(l, "hcudnn") || Has(l, "dcudnn") || Has(l, "dgrad") || Has(l, "wgrad") || Has(l, "fprop") ||
                    Has(l, "winograd") || Has(l, "miopen") || Has(l, "implicit_gemm") ||
                    Has(l, "implicit_convolve") || Has(l, "precomputed_convolve") ||
                    Has(l, "fft2d") || (Has(l, "fft_") && Has(l, "cudnn"));
  // GEMMs: cuBLAS (sgemm/hgemm, gemv, gemmSN, splitK), CUTLASS, XMMA, nvjet (cuBLAS on
  // Hopper/Blackwell), TRT-LLM bmm_*, rocBLAS/hipBLASLt Cijk_*.
  const bool gemm = Has(l, "gemm") || Has(l, "gemv") || Has(l, "nvjet") || Has(l, "cutlass") ||
                    Has(l, "xmma") || Has(base, "bmm_") || name.substr(0, 5) == "Cijk_" ||
                    Has(l, "splitkreduce") || Has(l, "matmul") || Has(l, "cublaslt");
  const bool layout_only = Has(l, "nchwtonhwc") || Has(l, "nhwctonchw") || Has(l, "transpose") ||
                           Has(l, "computeoffsets") || Has(l, "im2col");
  if (layout_only) {
    kind.cls = KernelClass::kMemory;
    return kind;
  }
  if (conv || gemm) {
    kind.cls = conv && !Has(l, "gemmsn") ? KernelClass::kConvolution : KernelClass::kGemm;
    if (name.substr(0, 5) == "Cijk_") {
      kind.precision = RocblasPrecision(name);
      kind.batched = Has(l, "_b_") || Has(l, "batched");
    } else {
      kind.precision = PrecisionToken(l);
      if (kind.precision == Precision::kUnknown &&
          (Has(l, "nvjet") || Has(l, "tensorop") || Has(l, "xmma") || Has(l, "sm90_") || Has(l, "sm100_") ||
           Has(l, "wgmma") || Has(l, "hgmma")))
        kind.precision = Precision::kTensorUnknown;
      kind.batched = Has(l, "batched") || Has(base, "bmm") || Has(l, "strided_batched");
    }
    // cuDNN convolution engines templated on float without a tensor-core token are
    // fp32 SIMT (e.g. dgrad_engine<float,...>, wgrad_alg0_engine<float,...>).
    if (kind.cls == KernelClass::kConvolution && kind.precision == Precision::kUnknown && Has(l, "<float"))
      kind.precision = Precision::kFp32Simt;
    return kind;
  }

  if (Has(l, "memcpy") || Has(l, "memset") || Has(l, "copy_kernel") || Has(l, "fillfunctor") ||
      Has(l, "catarraybatchedcopy"))
    kind.cls = KernelClass::kMemory;
  return kind;
}

Precision PrecisionFromInputType(std::string_view type, bool tensor_core_kernel) {
  const std::string l = Lower(type);
  if (Has(l, "bfloat16")) return Precision::kBf16;
  if (Has(l, "half") || l == "float16") return Precision::kFp16;
  if (Has(l, "float8")) return Precision::kFp8;
  if (l == "double") return Precision::kFp64;
  if (l == "float") return tensor_core_kernel ? Precision::kTf32 : Precision::kFp32Simt;
  return Precision::kUnknown;
}

}  // namespace gputriage
