# MXFP4 cast + transpose (bf16 [M, N] in), the kernel that motivated quantlay, in two numerics profiles.
#
# rowwise:  blocks of 32 along N. data [M, N/2] bytes, even column in the low nibble; scales [M, N/32].
# colwise:  blocks of 32 along M, stored transposed: data [N, M/2] bytes (even row in the low nibble),
#           scales [N, M/32].
# Options (each must change the output; `quantlay verify` proves it):
#   shuffle_rowwise_data       rowwise data in aiter's preshuffle16x16 byte layout
#   shuffle_columnwise_data    columnwise data, after the transpose, in preshuffle16x16
#   with_gemm_swizzled_scales  both scale tensors in aiter's e8m0_shuffle layout (padding = 127)

kernel mxfp4_cast_transpose_hw(x: bf16[M, N]) {
    option shuffle_rowwise_data, shuffle_columnwise_data, with_gemm_swizzled_scales

    rowwise blocks 1x32 profile mxfp4_hw {
        store data  as packed(low: even) | preshuffle16x16 if shuffle_rowwise_data
        store scale as row_major | e8m0_shuffle if with_gemm_swizzled_scales
    }
    colwise blocks 32x1 profile mxfp4_hw {
        store data  as transpose | packed(low: even) | preshuffle16x16 if shuffle_columnwise_data
        store scale as transpose | e8m0_shuffle if with_gemm_swizzled_scales
    }
}

kernel mxfp4_cast_transpose_te(x: bf16[M, N]) {
    option shuffle_rowwise_data, shuffle_columnwise_data, with_gemm_swizzled_scales

    rowwise blocks 1x32 profile mxfp4_rocm_te_triton {
        store data  as packed(low: even) | preshuffle16x16 if shuffle_rowwise_data
        store scale as row_major | e8m0_shuffle if with_gemm_swizzled_scales
    }
    colwise blocks 32x1 profile mxfp4_rocm_te_triton {
        store data  as transpose | packed(low: even) | preshuffle16x16 if shuffle_columnwise_data
        store scale as transpose | e8m0_shuffle if with_gemm_swizzled_scales
    }
}
