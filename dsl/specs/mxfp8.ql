# MXFP8 cast (bf16 [M, N] in): E4M3 codes, one E8M0 per 32 elements, both directions from one read.
#
# mxfp8_nvte: NVIDIA TransformerEngine's layouts. rowwise data [M, N], scales [M, N/32];
#   colwise data NOT transposed [M, N] (blocks of 32 along M), scales [M/32, N]. With
#   with_gemm_swizzled_scales both scale tensors are written in cuBLAS's 128x4 blocked layout
#   (the columnwise one after transposing it to [N, M/32], as TE does for the GEMM), padding = 0.
# mxfp8_floor_transposed: the layouts of torchao's MX cast (rowwise as above; the "dim1" columnwise
#   cast stored transposed) with the FLOOR rule. Not named after torchao: torchao 0.18's own `to_mx`
#   differs on special blocks (an Inf amax goes through its exponent formula, byte 247; a NaN block's
#   finite elements become +-0 and its NaNs keep their sign; blocks with byte 0 are divided by 2^-126).
#   It is bit-exact with torchao on inputs without such blocks (tests/test_peers.py). Columnwise data
#   [N, M] and scales [N, M/32].

kernel mxfp8_nvte(x: bf16[M, N]) {
    option with_gemm_swizzled_scales

    rowwise blocks 1x32 profile mxfp8_nvte {
        store data  as row_major
        store scale as cublas_blocked_128x4 if with_gemm_swizzled_scales
    }
    colwise blocks 32x1 profile mxfp8_nvte {
        store data  as row_major
        store scale as transpose if with_gemm_swizzled_scales | cublas_blocked_128x4 if with_gemm_swizzled_scales
    }
}

kernel mxfp8_floor_transposed(x: bf16[M, N]) {
    option with_gemm_swizzled_scales

    rowwise blocks 1x32 profile mxfp8_floor {
        store data  as row_major
        store scale as cublas_blocked_128x4 if with_gemm_swizzled_scales
    }
    colwise blocks 32x1 profile mxfp8_floor {
        store data  as transpose
        store scale as transpose | cublas_blocked_128x4 if with_gemm_swizzled_scales
    }
}

# NVIDIA TE MXFP8 with E5M2 codes (same layouts as mxfp8_nvte).
kernel mxfp8_nvte_e5m2(x: bf16[M, N]) {
    option with_gemm_swizzled_scales

    rowwise blocks 1x32 profile mxfp8_nvte_e5m2 {
        store data  as row_major
        store scale as cublas_blocked_128x4 if with_gemm_swizzled_scales
    }
    colwise blocks 32x1 profile mxfp8_nvte_e5m2 {
        store data  as row_major
        store scale as transpose if with_gemm_swizzled_scales | cublas_blocked_128x4 if with_gemm_swizzled_scales
    }
}

# ROCm TE's Triton MXFP8 cast: data [M, N] in both directions (columnwise not transposed), scales
# [M, N/32] and [M/32, N], the e == 0 multiplier 1.0.
kernel mxfp8_rocm_te(x: bf16[M, N]) {
    rowwise blocks 1x32 profile mxfp8_rocm_te_triton {
        store data  as row_major
        store scale as row_major
    }
    colwise blocks 32x1 profile mxfp8_rocm_te_triton {
        store data  as row_major
        store scale as row_major
    }
}
