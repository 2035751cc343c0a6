# Blockwise FP8 GEMMs (DeepSeek style: 1x128 activations and gradients, 128x128 weights), generated from
# the producers' declarations in fp8_blockwise.ql: each operand is one direction of one producer
# variant, so its layouts, blocks and scale format are the ones that producer writes, and the GEMM
# refuses (before launch) a tensor whose layout descriptor says anything else.
#
# fprop   Y[M, N] = X[M, K] @ W[N, K]^T       a: X rowwise (1x128), b: W rowwise (128x128)
# dgrad   dX[M, K] = dY[M, N] @ W[N, K]        a: dY rowwise (1x128), b: W colwise, i.e. W^T as the
#                                              128x128 NVIDIA cast writes it (transposed [K, N])
# wgrad   dW[g][N, K] = dY_g^T @ X_g           a: dY, b: X, both the segment-padded colwise cast of the
#                                              same groups; accumulates into an fp32 main_grad

# Dense, ROCm TE / Primus-Turbo layouts (row-major fp32 scales).
gemm fp8_gemm_fprop(a: fp8_1x128_rocm_te.rowwise, b: fp8_128x128_rocm_te.rowwise) -> bf16

# Dense, NVIDIA TE GEMM_READY layouts (MN-major 1x128 scales, padded 128x128 scales); dgrad reads the
# weight's transposed copy.
gemm fp8_gemm_fprop_nvte(a: fp8_1x128_nvte(gemm_ready).rowwise, b: fp8_128x128_nvte.rowwise) -> bf16
gemm fp8_gemm_dgrad_nvte(a: fp8_1x128_nvte(gemm_ready).rowwise, b: fp8_128x128_nvte.colwise) -> bf16

# Dense with DeepGEMM's UE8M0 activation scales (fp32 powers of two, MN-major).
gemm fp8_gemm_fprop_deepgemm(a: fp8_1x128_deepgemm_ue8m0.rowwise, b: fp8_128x128_rocm_te.rowwise) -> bf16

# MoE: A's rows in G groups (device offsets), B one weight per group (a 128x128 cast of [G * N, K]).
gemm fp8_gemm_grouped_fprop(a: fp8_1x128_rocm_te.rowwise, b: fp8_128x128_rocm_te.rowwise, groups: rows) -> bf16
gemm fp8_gemm_grouped_dgrad(a: fp8_1x128_rocm_te.rowwise, b: fp8_128x128_nvte.colwise, groups: rows) -> bf16
gemm fp8_gemm_grouped_fprop_nvte(a: fp8_1x128_nvte(gemm_ready).rowwise, b: fp8_128x128_nvte.rowwise, groups: rows) -> bf16
gemm fp8_gemm_grouped_dgrad_nvte(a: fp8_1x128_nvte(gemm_ready).rowwise, b: fp8_128x128_nvte.colwise, groups: rows) -> bf16

# MoE weight gradient: variable K (each group's tokens), accumulated into main_grad [G, N, K] or written.
# From ROCm TE's segment-padded operands (tokens along the rows), and from the transposed ones (tokens
# contiguous: K-major, the layout the MMA reads without a transpose).
gemm fp8_gemm_grouped_wgrad(a: fp8_segment_m.colwise, b: fp8_segment_m.colwise, groups: contraction) -> fp32
gemm fp8_gemm_grouped_wgrad_acc(a: fp8_segment_m.colwise, b: fp8_segment_m.colwise, groups: contraction) -> fp32 accumulate
gemm fp8_gemm_grouped_wgrad_t(a: fp8_segment_m_transposed.colwise, b: fp8_segment_m_transposed.colwise, groups: contraction) -> fp32
gemm fp8_gemm_grouped_wgrad_t_acc(a: fp8_segment_m_transposed.colwise, b: fp8_segment_m_transposed.colwise, groups: contraction) -> fp32 accumulate
gemm fp8_gemm_grouped_wgrad_t_bf16(a: fp8_segment_m_transposed.colwise, b: fp8_segment_m_transposed.colwise, groups: contraction) -> bf16
gemm fp8_gemm_grouped_wgrad_t_pow2(a: fp8_segment_m_transposed_pow2.colwise, b: fp8_segment_m_transposed_pow2.colwise, groups: contraction) -> fp32
gemm fp8_gemm_grouped_wgrad_t_pow2_acc(a: fp8_segment_m_transposed_pow2.colwise, b: fp8_segment_m_transposed_pow2.colwise, groups: contraction) -> fp32 accumulate
gemm fp8_gemm_grouped_wgrad_t_pow2_bf16(a: fp8_segment_m_transposed_pow2.colwise, b: fp8_segment_m_transposed_pow2.colwise, groups: contraction) -> bf16
