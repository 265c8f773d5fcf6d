#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "src/analysis/kernel_taxonomy.h"

namespace gputriage {
namespace {

struct Case {
  const char* name;
  KernelClass cls;
  Precision precision;
};

TEST(KernelTaxonomy, MatrixFamiliesVoltaToBlackwell) {
  const Case cases[] = {
      {"volta_sgemm_128x64_nn", KernelClass::kGemm, Precision::kFp32Simt},
      {"void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, true>(int)", KernelClass::kConvolution, Precision::kFp32Simt},
      {"void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int)", KernelClass::kConvolution, Precision::kFp32Simt},
      {"volta_scudnn_128x128_stridedB_splitK_small_nn_v1", KernelClass::kConvolution, Precision::kFp32Simt},
      {"volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nn", KernelClass::kGemm, Precision::kFp16},
      {"void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>(Params)", KernelClass::kGemm, Precision::kTf32},
      {"ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", KernelClass::kGemm, Precision::kBf16},
      {"ampere_fp16_s16816gemm_fp16_256x128_ldg8_f2f_stages_32x3_nn", KernelClass::kGemm, Precision::kFp16},
      {"sm80_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x16_stage4_warpsize2x2x1_tensor16x8x8_kernel", KernelClass::kGemm, Precision::kTf32},
      {"sm80_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x32", KernelClass::kConvolution, Precision::kBf16},
      {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas", KernelClass::kGemm, Precision::kBf16},
      {"nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT", KernelClass::kGemm, Precision::kTensorUnknown},
      {"bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32", KernelClass::kGemm, Precision::kFp4},
      {"bmm_E4m3_E4m3E4m3_Fp32_t128x8x128u2", KernelClass::kGemm, Precision::kFp8},
      {"Cijk_Ailk_Bljk_BBS_BH_MT128x128x32_MI32x32x8x1_SN", KernelClass::kGemm, Precision::kBf16},
      {"Cijk_Ailk_Bljk_SB_MT64x64x8_SN", KernelClass::kGemm, Precision::kFp32Simt},
      // hipBLASLt (TraceLens's MI300X traces): the data type is the token after the
      // layout; "HA_S" is the epilogue's fp32 accumulate, not the data.
      {"Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT256x128x64_MI16x16x1_SN_LDSB1_AFC1", KernelClass::kGemm,
       Precision::kBf16},
      {"Cijk_Ailk_Bljk_BBS_BH_Bias_HAS_SAV_UserArgs_MT16x16x256_MI16x16x1_SN_LDSB1", KernelClass::kGemm, Precision::kBf16},
      {"Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN", KernelClass::kGemm, Precision::kFp16},
      {"Cijk_Alik_Bljk_F8B8S_BH_MT128x128x64_MI32x32x16x1_SN", KernelClass::kGemm, Precision::kFp8},
  };
  for (const auto& c : cases) {
    const KernelKind k = ClassifyKernelName(c.name);
    EXPECT_EQ(k.cls, c.cls) << c.name;
    EXPECT_EQ(k.precision, c.precision) << c.name << " got " << PrecisionName(k.precision);
  }
}

TEST(KernelTaxonomy, AttentionBackends) {
  EXPECT_EQ(ClassifyKernelName("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>>(Flash_fwd_params)").attention,
            AttentionBackend::kFlash);
  EXPECT_EQ(ClassifyKernelName("void flash::flash_fwd_splitkv_kernel<X>(Flash_fwd_params)").attention, AttentionBackend::kFlash);
  EXPECT_EQ(ClassifyKernelName("fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<...>::Params)").attention,
            AttentionBackend::kMemoryEfficient);
  EXPECT_EQ(ClassifyKernelName("void attention_kernel_batched_impl<AttentionKernel<float>>(Params)").cls, KernelClass::kAttentionFused);
  EXPECT_EQ(ClassifyKernelName("fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext").cls,
            KernelClass::kAttentionFused);
  EXPECT_EQ(ClassifyKernelName("void (anonymous namespace)::softmax_warp_forward<float, float, float, 9, false, false>(float*)").cls,
            KernelClass::kSoftmax);
  EXPECT_TRUE(ClassifyKernelName("volta_sgemm_128x64_nn_batched").batched);
}

TEST(KernelTaxonomy, CommunicationAndOthers) {
  EXPECT_EQ(ClassifyKernelName("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)").cls,
            KernelClass::kCommunication);
  EXPECT_EQ(ClassifyKernelName("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)").cls, KernelClass::kCommunication);
  EXPECT_EQ(ClassifyKernelName("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*)").cls,
            KernelClass::kCommunication);
  EXPECT_EQ(ClassifyKernelName("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int)").cls,
            KernelClass::kOther);
  EXPECT_EQ(ClassifyKernelName("void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>(float)").cls, KernelClass::kOther);
  EXPECT_EQ(ClassifyKernelName("void nchwToNhwcKernel<float, float, float, true, false>(int)").cls, KernelClass::kMemory);
  EXPECT_EQ(ClassifyKernelName("triton_poi_fused_add_cos_sin_0").precision, Precision::kUnknown);
}

TEST(KernelTaxonomy, InputTypeFallback) {
  EXPECT_EQ(PrecisionFromInputType("c10::BFloat16", true), Precision::kBf16);
  EXPECT_EQ(PrecisionFromInputType("c10::Half", true), Precision::kFp16);
  EXPECT_EQ(PrecisionFromInputType("float", true), Precision::kTf32);
  EXPECT_EQ(PrecisionFromInputType("float", false), Precision::kFp32Simt);
  EXPECT_EQ(PrecisionFromInputType("long int", true), Precision::kUnknown);
}

}  // namespace
}  // namespace gputriage

namespace gputriage {
namespace {

// Every distinct matrix-looking kernel name of the public traces the invariant sweep
// reads, with the class and precision its name says (written down and reviewed in
// tests/data/kernels/matrix_kernel_precisions.tsv; its header gives the conventions).
TEST(KernelTaxonomy, EveryMatrixKernelNameOfTheSweepHasThePrecisionItsNameSays) {
  std::ifstream in(std::string(GPUTRIAGE_TEST_DATA_DIR) + "/kernels/matrix_kernel_precisions.tsv");
  ASSERT_TRUE(in.good());
  std::string line;
  int rows = 0, wrong = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t tab1 = line.find('\t'), tab2 = line.find('\t', tab1 + 1);
    ASSERT_NE(tab2, std::string::npos) << line;
    const std::string cls = line.substr(0, tab1), precision = line.substr(tab1 + 1, tab2 - tab1 - 1);
    const std::string name = line.substr(tab2 + 1);
    const KernelKind kind = ClassifyKernelName(name);
    ++rows;
    if (cls != KernelClassName(kind.cls) || precision != PrecisionName(kind.precision)) {
      ++wrong;
      ADD_FAILURE() << "expected " << cls << " " << precision << ", got " << KernelClassName(kind.cls) << " "
                    << PrecisionName(kind.precision) << ": " << name.substr(0, 160);
    }
  }
  EXPECT_GE(rows, 500);
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace gputriage
