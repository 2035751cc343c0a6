# MXFP4 with one E8M0 scale per 32x32 tile (bf16 [M, N] in): weights quantized once for both GEMM
# orientations, so the rowwise and columnwise copies share their scales (each direction stores them).
#
# rowwise:  data [M, N/2] bytes, even column in the low nibble; scales [M/32, N/32].
# colwise:  data transposed [N, M/2] (even row in the low nibble); scales transposed [N/32, M/32].

kernel mxfp4_32x32_hw(x: bf16[M, N]) {
    rowwise blocks 32x32 profile mxfp4_hw {
        store data  as packed(low: even)
        store scale as row_major
    }
    colwise blocks 32x32 profile mxfp4_hw {
        store data  as transpose | packed(low: even)
        store scale as transpose
    }
}
