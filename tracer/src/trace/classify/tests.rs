use super::*;

#[test]
fn mmq_column_count_parameter_by_signature() {
    // Real names: cyllama 0.2.18's libggml-cuda.so, and llama.cpp of llama-cpp-python 0.3.36 (4 template
    // arguments, y_scale).
    let fastdiv = classify("_Z9mul_mat_qIL9ggml_type12ELi16ELb0EEvPKcPKiS4_S4_PfS5_5uint3iiiiiS6_S6_iiiS6_S6_iiiS6_");
    assert_eq!((fastdiv.family, fastdiv.ne11_param, fastdiv.param_plan()), (Family::Mmq, Some(10), 1 << 10));
    let y_scale = classify(
        "_Z9mul_mat_qIL9ggml_type12ELi16ELb0EL9ggml_prec30EEvPKcPKiS5_S5_PfS6_PKf5uint3iiiiiS9_S9_iiiS9_S9_iiiS9_",
    );
    assert_eq!(y_scale.ne11_param, Some(11));
    let params = std::collections::BTreeMap::from([(11u8, 0xdead_beef_0000_0122u64)]);
    assert_eq!(y_scale.ne11_from_params(&params), Some(290));
    assert_eq!(y_scale.ne11_from_params(&std::collections::BTreeMap::new()), None);
    // hipcc's spelling of the same lists (fixtures/hip/ggml_steps.hip).
    let hip = classify(
        "_Z9mul_mat_qIL9ggml_type12ELi16ELb0EL9ggml_prec30EEvPKcPKiS5_S5_PfS6_PKf15HIP_vector_typeIjLj3EEiiiiiSA_SA_iiiSA_SA_iiiSA_",
    );
    assert_eq!(hip.ne11_param, Some(11));
    let hip = classify(
        "_Z9mul_mat_qIL9ggml_type12ELi104ELb0EEvPKcPKiS4_S4_PfS5_15HIP_vector_typeIjLj3EEiiiiiS7_S7_iiiS7_S7_iiiS7_",
    );
    assert_eq!(hip.ne11_param, Some(10));
    // A list tracer does not know (older ggml): no parameter, no plan.
    let old = classify("_Z9mul_mat_qIL9ggml_type12ELi16ELb0EEvPKcPKiS4_S4_PfS5_iii");
    assert_eq!((old.ne11_param, old.param_plan()), (None, 0));
    assert_eq!(classify("_Z13mul_mat_vec_qIL9ggml_type12ELi1ELb0EEvPKvS2_PKiPfjjj").param_plan(), 0);
    // In a queue dispatch's argument segment: six or seven pointers, a uint3 (12 bytes, 4-aligned), then
    // ints; the column count at byte 72 (word 9, low half) and 80 (word 10, low half).
    assert_eq!((fastdiv.ne11_kernarg, fastdiv.kernarg_plan()), (Some(72), 1 << 9));
    assert_eq!((y_scale.ne11_kernarg, y_scale.kernarg_plan()), (Some(80), 1 << 10));
    let words = std::collections::BTreeMap::from([(9u8, 0x0000_0007_0000_000bu64)]);
    assert_eq!(fastdiv.ne11_from_kernarg(&words), Some(11));
    assert_eq!(y_scale.ne11_from_kernarg(&words), None);
    assert_eq!((old.ne11_kernarg, old.kernarg_plan()), (None, 0));
}

#[test]
fn mmq_columns_from_the_src1_quantization_launch() {
    let quantize = classify("_Z17quantize_mmq_q8_1IL18mmq_q8_1_ds_layout1EEvPKfPKiPvlllllii");
    assert_eq!(quantize.mmq_columns([290, 1, 1]), Some(290));
    // quantize_q8_1 (MMVQ's) and the matrix kernel itself say nothing of it.
    assert_eq!(classify("_Z13quantize_q8_1PKfPvllllllll").mmq_columns([2, 1, 1]), None);
    let mmq = classify("_Z9mul_mat_qIL9ggml_type12ELi16ELb0EEvPKcPKiS4_S4_PfS5_iii");
    assert_eq!(mmq.mmq_columns([132, 1, 1]), None);
}

#[test]
fn ggml_kernels_by_family_quant_and_batch() {
    // Names as ggml's HIP build emits them (static kernels: _ZL).
    let mmvq = classify(
        "_ZL13mul_mat_vec_qIL9ggml_type12ELi1ELb0EEvPKvS2_PKi31ggml_cuda_mm_fusion_args_devicePfj15HIP_vector_typeIjLj3EEjjjS8_jjjS8_jjj",
    );
    assert_eq!(
        mmvq,
        Class {
            family: Family::Mmvq,
            quant: Some("Q4_K"),
            batch: Some(Batch::Exact(1)),
            moe: false,
            library: None,
            mmq_src1: false,
            ne11_param: None,
            ne11_kernarg: None
        }
    );
    let mmq = classify("_ZL9mul_mat_qIL9ggml_type12ELi128ELb0EEvPKcPKiS4_S4_PfS5_iiiiiiiiiiiiiiiii");
    assert_eq!(
        mmq,
        Class {
            family: Family::Mmq,
            quant: Some("Q4_K"),
            batch: Some(Batch::TileUpTo(128)),
            moe: false,
            library: None,
            mmq_src1: false,
            ne11_param: None,
            ne11_kernarg: None
        }
    );
    assert_eq!(classify("_ZL13quantize_q8_1PKfPvlllllj15HIP_vector_typeIjLj3EE").family, Family::Quantize);
    assert_eq!(classify("_ZL17quantize_mmq_q8_1IL18mmq_q8_1_ds_layout1EEvPKfPKiPvlllllii").family, Family::Quantize);
    assert_eq!(classify("_ZL16k_get_rows_floatIffEvPKT_PKiPT0_lllmmmmmmmmmmm").family, Family::Convert);
    assert_eq!(classify("_Z13mul_mat_vec_qIL9ggml_type14ELi1EEvPKvS2_PKiPfjj").quant, Some("Q6_K"));
}

#[test]
fn libraries_runtime_and_unknown() {
    assert_eq!(classify("Cijk_Ailk_Bljk_HHS_BH_MT64x64x32_MI16x16x16x1_SN_1LDSB0_APM1_ABV0").family, Family::BlasGemm);
    assert_eq!(classify("__amd_rocclr_copyBuffer").family, Family::RuntimeInternal);
    assert_eq!(classify("_Z12rms_norm_f32PKfPfif").family, Family::Norm);
    assert_eq!(classify("_Z8rope_f32PKfPfiPKif").family, Family::Rope);
    assert_eq!(classify("_Z12soft_max_f32PKfPfi").family, Family::Softmax);
    assert_eq!(classify("add_f32").family, Family::Elementwise);
    assert_eq!(classify("my_private_kernel").family, Family::Unknown);
    assert_eq!(classify("").family, Family::Unknown);
}

#[test]
fn launch_shape_refines_batch() {
    // MMQ with J = 16: a grid of 3 column tiles holds 33..=48 columns; one tile, at most 16.
    let mmq = classify("_ZL9mul_mat_qIL9ggml_type12ELi16ELb0EEvPKcPKiS4_S4_PfS5_iiiiiiiiiiiiiiiii");
    assert_eq!(mmq.clone().with_shape([32, 3, 1], [64, 4, 1], false).batch, Some(Batch::Range(33, 48)));
    assert_eq!(mmq.clone().with_shape([32, 1, 1], [64, 4, 1], false).batch, Some(Batch::TileUpTo(16)));
    // The same 3-tile grid counted in work-items (an AQL packet): 32·64 x 3·4.
    assert_eq!(mmq.with_shape([2048, 12, 1], [64, 4, 1], true).batch, Some(Batch::Range(33, 48)));
    // MoE MMVQ: the second template argument is rows per block; the block's height is the tokens.
    let moe = classify("_ZL17mul_mat_vec_q_moeIL9ggml_type12ELi2EEvPKvS2_PKiPfj15HIP_vector_typeIjLj3EEjjjjjjjjj");
    assert_eq!((moe.family, moe.quant, moe.batch), (Family::Mmvq, Some("Q4_K"), None));
    assert_eq!(moe.with_shape([2048, 8, 1], [32, 5, 1], false).batch, Some(Batch::Exact(5)));
    // A plain MMVQ keeps its name's column count whatever the shape.
    let mmvq = classify("_Z13mul_mat_vec_qIL9ggml_type14ELi1EEvPKvS2_PKiPfjj");
    assert_eq!(mmvq.with_shape([4096, 1, 1], [32, 4, 1], false).batch, Some(Batch::Exact(1)));
    assert_eq!(Batch::Range(33, 48).label(), "33-48");
}

#[test]
fn names_the_demangler_rejects_and_other_ops() {
    // `Tn` (a typed non-type template parameter) is newer than the demangler: read the name itself.
    let set_rows = "_ZL16k_set_rows_quantIi10block_q4_0Li32ETnPFvPKfPT0_EXadL_ZL23quantize_f32_q4_0_blockS2_PS0_EEEvS2_PKT_S4_llllllllllllll15HIP_vector_typeIjLj3EESC_SC_SC_SC_";
    assert_eq!((classify(set_rows).family, classify(set_rows).quant), (Family::Quantize, Some("Q4_0")));
    for other in [
        "_ZL10arange_f32Pfiff",
        "_ZL13im2col_kernelIfEvPKfPT_lllllllllllliiiiii",
        "_Z20gated_delta_net_cudaILi128ELb0ELb0EEvPKfS1_S1_S1_S1_S1_Pfllllllllllll15HIP_vector_typeIjLj3EES4_fi",
        "_ZL17k_argsort_f32_i32IL15ggml_sort_order0EEvPKfPiii",
    ] {
        assert_eq!(classify(other).family, Family::Elementwise, "{other}");
    }
}

#[test]
fn cuda_kernel_names() {
    // cuBLAS on Hopper and Ampere, PyTorch's element-wise and reduction kernels, ggml-cuda's MMVQ.
    for gemm in [
        "nvjet_tst_128x64_64x8_2x1_v_bz_coopA_TNT",
        "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        "ampere_sgemm_128x64_tn",
        "_ZN8cublasLt19splitKreduce_kernelILi32ELi16EifffLb0ELb1ELb0ELb0EEEv18cublasSplitKParamsIT4_EPKT2_PKT3_PS7_PKS4_SC_PKT1_PvlPS4_Pi",
    ] {
        assert_eq!(classify(gemm).family, Family::BlasGemm, "{gemm}");
    }
    // As PyTorch 2.11 (CUDA 13) launched them on an H100 (bench/gpu/cuda_check.sh).
    assert_eq!(
        classify("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x64x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas").family,
        Family::BlasGemm
    );
    for torch in [
        "_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_49_GLOBAL__N__d2ba64fb_16_TensorCompare_cu_71e06f4e19launch_clamp_scalarERNS_18TensorIteratorBaseEN3c106ScalarES6_NS0_6detail11ClampLimitsEENKUlvE_clEvENKUlvE5_clEvEUlfE_St5arrayIPcLm2EEEEviT0_T1_",
        "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_21CUDAFunctorOnSelf_addIfEESt5arrayIPcLm2EEEEviT0_T1_",
        "_ZN2at6native29vectorized_elementwise_kernelILi2ENS0_11FillFunctorIlEESt5arrayIPcLm1EEEEviT0_T1_",
    ] {
        assert_eq!(classify(torch).family, Family::Elementwise, "{torch}");
    }
    let reduce = "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_14func_wrapper_tIfNS0_15sum_functorIfffEEEEjfLi4E\
                  Li4EEEEEvT1_";
    assert_eq!(classify(reduce).family, Family::ReduceScan);
    let softmax = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, \
                   at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)";
    assert_eq!(classify(softmax).family, Family::Softmax);
    // nvcc mangles ggml's static kernels as clang does for HIP.
    let mmvq = classify("_ZL13mul_mat_vec_qIL9ggml_type12ELi1ELb0EEvPKvS2_PKiPfjjj");
    assert_eq!((mmvq.family, mmvq.quant, mmvq.batch), (Family::Mmvq, Some("Q4_K"), Some(Batch::Exact(1))));
}

#[test]
fn real_pytorch_names_by_family_and_library() {
    // Names from a real PyTorch 2.11 / transformers / Inductor run on an H100 (fixtures/pytorch-mix).
    let cases: &[(&str, Family, Option<&str>)] = &[
        ("nvjet_sm90_tst_8x64_64x16_4x1_v_bz_TNN", Family::BlasGemm, Some("cuBLASLt")),
        (
            "_ZN7cutlass7Kernel2I42cutlass_80_simt_sgemm_128x32_8x5_tn_align1EEvNT_6ParamsE",
            Family::BlasGemm,
            Some("CUTLASS"),
        ),
        (
            "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0",
            Family::FlashAttention,
            Some("cuDNN"),
        ),
        (
            "sm80_xmma_fprop_implicit_gemm_indexed_wo_smem_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x32x64_\
             stage1_warpsize4x1x1_g1_tensor16x8x16_alignc4_execute_kernel__5x_cudnn",
            Family::Convolution,
            Some("cuDNN"),
        ),
        ("triton_poi_fused__unsafe_view_mul_silu_8", Family::Triton, Some("Inductor")),
        (
            "triton_poi_fused__scaled_dot_product_cudnn_attention__to_copy__unsafe_view_add_arange_bmm_cat_0",
            Family::Triton,
            Some("Inductor"),
        ),
        ("triton_per_fused__to_copy__unsafe_view_add_mean_mul_pow_rsqrt_11", Family::Triton, Some("Inductor")),
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", Family::Collective, Some("NCCL")),
        ("Cijk_Ailk_Bljk_HHS_BH_MT64x64x32_MI16x16x16x1_SN_1LDSB0", Family::BlasGemm, Some("Tensile")),
        (
            "_ZN5cudnn19engines_precompiled16nchwToNhwcKernelI6__halfS2_fLb0ELb1EL21cudnnKernelDataType_t0EEEvNS0_\
             18nchw2nhwc_params_tIT1_EEPKT_PT0_",
            Family::Convert,
            Some("cuDNN"),
        ),
        (
            "_ZN14at_cuda_detail3cub6detail4scan16DeviceScanKernelINS2_10policy_hubIllljSt4plusIlEE10Policy1000EPKlPlNS0\
             _13ScanTileStateIlLb1EEES6_NS0_8NullTypeEjlLb0ESE_EEvT0_T1_T2_iT3_T4_T5_",
            Family::ReduceScan,
            None,
        ),
    ];
    for (name, family, library) in cases {
        let c = classify(name);
        assert_eq!((c.family, c.library), (*family, *library), "{name}");
    }
}

#[test]
fn ggml_vulkan_shaders_by_name() {
    let c = |n: &str| {
        let k = classify(n);
        (k.family, k.quant)
    };
    assert_eq!(c("matmul_q4_k_f32"), (Family::Mmq, Some("Q4_K")));
    assert_eq!(c("matmul_q4_k_q8_1"), (Family::Mmq, Some("Q4_K")));
    assert_eq!(c("matmul_f16_f32_aligned"), (Family::MatMulFloat, Some("F16")));
    assert_eq!(c("mul_mat_vec_q4_k_f32_f32"), (Family::Mmvq, Some("Q4_K")));
    assert_eq!(c("mul_mat_vec_q6_k_q8_1_f32_subgroup"), (Family::Mmvq, Some("Q6_K")));
    assert_eq!(c("mul_mat_vec_iq2_xxs_f32_f32"), (Family::Mmvq, Some("IQ2_XXS")));
    assert_eq!(c("mul_mat_vec_iq2_xs_f32_f32"), (Family::Mmvq, Some("IQ2_XS")));
    assert_eq!(c("mul_mat_vec_f16_f32_f32"), (Family::MatMulFloat, Some("F16")));
    assert_eq!(c("dequant_q4_k"), (Family::Convert, Some("Q4_K")));
    assert_eq!(c("get_rows_q8_0_f32"), (Family::Convert, Some("Q8_0")));
    assert_eq!(c("rms_norm_f32").0, Family::Norm);
    assert_eq!(c("rope_neox_f32").0, Family::Rope);
    assert_eq!(c("rope_norm_f32_f16").0, Family::Rope);
    assert_eq!(c("soft_max_f32").0, Family::Softmax);
    assert_eq!(c("flash_attn_f32_f16_q4_0").0, Family::FlashAttention);
    assert_eq!(c("quantize_q8_1_x4").0, Family::Quantize);
    assert_eq!(c("matmul_quant_f32_aligned"), (Family::Mmq, None));
    assert_eq!(c("matmul_id_q4_k_f32"), (Family::Mmq, Some("Q4_K")));
    assert_eq!(c("set_rows_f32_f16_i64").0, Family::Convert);
    assert_eq!(c("fa_split_k_reduce").0, Family::FlashAttention);
    assert_eq!(c("rms_norm_set_rows_f32").0, Family::Norm);
    assert_eq!(c("mul_f32_f32_f32").0, Family::Elementwise);
    assert_eq!(c("swiglu_f32").0, Family::Elementwise);
    assert_eq!(c("add_rms_f32_f32_f32").0, Family::Elementwise);
    // A name that only begins like an op is not that op.
    assert_eq!(c("mulx_f32").0, Family::Unknown);
    // ggml-cuda's mangled kernels keep their own rules.
    assert_eq!(c("_Z13mul_mat_vec_qIL9ggml_type12ELi1ELb0EEvPKvS2_PKiPfjjjjjjjjjjjjj").0, Family::Mmvq);
}
