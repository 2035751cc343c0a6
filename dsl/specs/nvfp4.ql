# NVFP4 cast (bf16 [M, N] in): E2M1 codes two per byte, one E4M3 scale per 16 elements, relative to a
# per-tensor fp32 scale amax(x) / (6 * 448) (passed in, or computed on the device: result["tensor_scale"]).
# nvfp4_block_only: the same without the tensor scale (block scales alone).
#
# rowwise:  blocks of 16 along N. data [M, N/2] bytes, even column in the low nibble; scales [M, N/16].
# colwise:  blocks of 16 along M, stored transposed (the layout a GEMM reads for the other operand):
#           data [N, M/2], scales [N, M/16].
# Option:
#   with_gemm_swizzled_scales  both scale tensors in cuBLAS's 128x4 blocked layout (padding = 0)

kernel nvfp4(x: bf16[M, N]) {
    option with_gemm_swizzled_scales

    rowwise blocks 1x16 profile nvfp4 {
        store data  as packed(low: even)
        store scale as row_major | cublas_blocked_128x4 if with_gemm_swizzled_scales
    }
    colwise blocks 16x1 profile nvfp4 {
        store data  as transpose | packed(low: even)
        store scale as transpose | cublas_blocked_128x4 if with_gemm_swizzled_scales
    }
}

kernel nvfp4_block_only(x: bf16[M, N]) {
    option with_gemm_swizzled_scales

    rowwise blocks 1x16 profile nvfp4_block_only {
        store data  as packed(low: even)
        store scale as row_major | cublas_blocked_128x4 if with_gemm_swizzled_scales
    }
    colwise blocks 16x1 profile nvfp4_block_only {
        store data  as transpose | packed(low: even)
        store scale as transpose | cublas_blocked_128x4 if with_gemm_swizzled_scales
    }
}
