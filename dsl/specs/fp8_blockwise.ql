# Blockwise FP8, 1x128 (activations and gradients), both directions from one read of a bf16 [M, N].
#
# fp8_1x128_rocm_te: ROCm TE Triton / Primus-Turbo. data [M, N] both directions (columnwise NOT
#   transposed, blocks of 128 along M); fp32 scales [M, N/128] and [M/128, N], row-major.
# fp8_1x128_nvte: NVIDIA TE. COMPACT by default (as above); with gemm_ready, the GEMM_READY format:
#   rowwise scales MN-major [N/128, rup(M, 4)], columnwise data transposed [N, M] with scales
#   [M/128, rup(N, 4)].

kernel fp8_1x128_rocm_te(x: bf16[M, N]) {
    rowwise blocks 1x128 profile fp8_block_rocm_te {
        store data  as row_major
        store scale as row_major
    }
    colwise blocks 128x1 profile fp8_block_rocm_te {
        store data  as row_major
        store scale as row_major
    }
}

kernel fp8_1x128_nvte(x: bf16[M, N]) {
    option gemm_ready

    rowwise blocks 1x128 profile fp8_block_nvte {
        store data  as row_major
        store scale as mn_major_pad4 if gemm_ready
    }
    colwise blocks 128x1 profile fp8_block_nvte {
        store data  as transpose if gemm_ready
        store scale as row_major_pad_cols4 if gemm_ready
    }
}

# The columnwise operand alone, transposed for the weight-gradient GEMM (what torchao's
# triton_fp8_blockwise_act_quant_transposed_lhs writes): data [N, M], blocks of 128 along M, scales
# [N, M/128] (each row of the transposed data has its own scales).
kernel fp8_1x128_colwise_transposed(x: bf16[M, N]) {
    colwise blocks 128x1 profile fp8_block_rocm_te {
        store data  as transpose
        store scale as transpose
    }
}

# Blockwise FP8, 128x128 (weights): one scale per 128x128 tile, amax over the whole tile, so the same
# scales serve the rowwise and the transposed columnwise copy. Leading dims (batched weights
# [B, M, N]) are flattened into M: blocks never straddle two weights when M % 128 == 0.
#
# fp8_128x128_rocm_te: data [M, N], scales [M/128, N/128] row-major (ROCm TE Triton / Primus-Turbo).
# fp8_128x128_nvte: NVIDIA TE GEMM_READY: rowwise data [M, N] with scales [M/128, rup(N/128, 4)];
#   columnwise data transposed [N, M] with scales [N/128, rup(M/128, 4)].

kernel fp8_128x128_rocm_te(x: bf16[M, N]) {
    rowwise blocks 128x128 profile fp8_block_rocm_te {
        store data  as row_major
        store scale as row_major
    }
}

kernel fp8_128x128_nvte(x: bf16[M, N]) {
    rowwise blocks 128x128 profile fp8_block_nvte {
        store data  as row_major
        store scale as row_major_pad_cols4
    }
    colwise blocks 128x128 profile fp8_block_nvte {
        store data  as transpose
        store scale as transpose | row_major_pad_cols4
    }
}

# DeepGEMM's activation cast: 1x128 rowwise, fp32 scales [M, N/128] (the TMA-aligned MN-major layout
# of its GEMM is `mn_major_pad4` for fp32 scales); with ue8m0 the scales are powers of two.
kernel fp8_1x128_deepgemm(x: bf16[M, N]) {
    rowwise blocks 1x128 profile fp8_block_deepgemm {
        store data  as row_major
        store scale as row_major
    }
}

kernel fp8_1x128_deepgemm_ue8m0(x: bf16[M, N]) {
    rowwise blocks 1x128 profile fp8_block_deepgemm_ue8m0 {
        store data  as row_major
        store scale as mn_major_pad4
    }
}

# DeepGEMM's SM100 scale format: the UE8M0 cast with scales stored as exponent bytes, four k-blocks per
# int32, MN-major and TMA-aligned: the uint8 buffer's bytes, viewed as int32 [rup(N/128, 4) / 4, rup(M, 4)]
# and transposed, are DeepGEMM's [rup(M, 4), rup(N/128, 4) / 4] tensor with strides (1, rup(M, 4)).
kernel fp8_1x128_deepgemm_sm100(x: bf16[M, N]) {
    rowwise blocks 1x128 profile fp8_block_deepgemm_ue8m0_bytes {
        store data  as row_major
        store scale as ue8m0_packed_mn_major
    }
}

# Segment-padded columnwise quantization for grouped (MoE) weight gradients (docs/formats-and-layouts.md §4), as ROCm TE
# and Primus-Turbo compute it: rows arrive as G groups (lengths in a device tensor); each group is
# padded with zero rows to a multiple of 128 in an upper-bound buffer of M + 128*G rows, blocks of 128
# never straddle two groups, and scales past the last group are 0. fused_rowwise also writes the
# 1x128 rowwise operand from the same read of the input.
kernel fp8_segment_m(x: bf16[M, N], group_lens: groups[G]) {
    option fused_rowwise

    colwise blocks 128x1 segmented profile fp8_block_rocm_te {
        store data  as row_major
        store scale as row_major
    }
    rowwise blocks 1x128 if fused_rowwise profile fp8_block_rocm_te {
        store data  as row_major
        store scale as row_major
    }
}

# The same segment-padded columnwise operand stored transposed ([N, M + 128*G]: each row holds one
# column's tokens, contiguous): K-major for the weight-gradient GEMM, whose contraction runs over the
# tokens (what NVIDIA TE's GEMM_READY columnwise data is to the dense case). Scales [N, (M + 128*G) / 128].
kernel fp8_segment_m_transposed(x: bf16[M, N], group_lens: groups[G]) {
    colwise blocks 128x1 segmented profile fp8_block_rocm_te {
        store data  as transpose
        store scale as transpose
    }
}

# The same with NVIDIA TE's power-of-two scales (no amax floor): the weight-gradient operands of a recipe
# whose every cast uses power-of-two scales.
kernel fp8_segment_m_transposed_pow2(x: bf16[M, N], group_lens: groups[G]) {
    colwise blocks 128x1 segmented profile fp8_block_nvte {
        store data  as transpose
        store scale as transpose
    }
}
