# quantlay's shipped library: named layouts every spec can use (docs/formats-and-layouts.md gives each one's source).
#
# A layout maps a logical [rows, cols] matrix (of storage units: bytes for packed FP4, scale bytes for
# E8M0) to a flat buffer: pad each dimension up to a multiple, view the padded matrix as the listed
# factors (row factors first), permute them, and present the result with the '->' shape (default: the
# padded [rows, cols]). `fill` is the value written into every padding cell.

# Plain row-major storage: physical [rows, cols].
# Element formats: sign, exponent and mantissa bits and bias; max_code is the largest finite magnitude
# code (codes above it are Inf, NaN or unused), inf the magnitude code of Inf where the format has one,
# nan its NaN code (the code written for a NaN input unless a profile says otherwise; without one, the
# largest finite), hw the fp8 type whose hardware convert rounds like the format. Saturating.
format e2m1 = minifloat(exponent: 2, mantissa: 1, bias: 1, max_code: 0x7)
format e4m3 = minifloat(exponent: 4, mantissa: 3, bias: 7, max_code: 0x7E, nan: 0x7F, hw: float8e4nv)
format e5m2 = minifloat(exponent: 5, mantissa: 2, bias: 15, max_code: 0x7B, inf: 0x7C, nan: 0x7F, hw: float8e5)
# OCP MX FP6: no Inf or NaN codes; largest magnitudes 7.5 (E2M3) and 28 (E3M2).
format e2m3 = minifloat(exponent: 2, mantissa: 3, bias: 1, max_code: 0x1F)
format e3m2 = minifloat(exponent: 3, mantissa: 2, bias: 3, max_code: 0x1F)

layout row_major(rows, cols) = view(rows, cols)

# Transposed storage: physical [cols, rows] (columnwise buffers of ROCm TE, docs/formats-and-layouts.md §7).
layout transpose(rows, cols) -> (cols, rows) = permute(1, 0)

# aiter shuffle_weight(layout=(16, 16)) on a byte matrix (docs/formats-and-layouts.md §5): 512-byte tiles of 16 rows x
# 32 bytes, row-block major; inside a tile the left 16-byte halves of the 16 rows, then the right halves.
# off(n, c) = (n//16)*16*cols + (c//32)*512 + ((c%32)//16)*256 + (n%16)*16 + c%16.
layout preshuffle16x16(rows, cols) = view(rows/16, 16, cols/32, 2, 16) permute(0, 2, 3, 1, 4)

# aiter e8m0_shuffle / ROCm TE with_gemm_swizzled_scales (docs/formats-and-layouts.md §6), padded to [rup(rows, 256),
# rup(cols, 8)]: 256-byte chunks of 32 rows x 8 scale columns.
# off(r, c) = (r//32)*32*cols_p + (c//8)*256 + (c%4)*64 + (r%16)*4 + ((c%8)//4)*2 + (r%32)//16.
layout e8m0_shuffle(rows, cols) pad(rows: 256, cols: 8) fill 127
    = view(rows/32, 2, 16, cols/8, 2, 4) permute(0, 3, 5, 2, 4, 1)

# NVIDIA cuBLAS / TE / torchao block-scaling-factor layout (docs/formats-and-layouts.md §6): 128x4 tiles of 512 bytes,
# row-of-tiles major; inside a tile (r%32)*16 + (r//32)*4 + c. Padded with 0 like torchao and TE.
layout cublas_blocked_128x4(rows, cols) pad(rows: 128, cols: 4) fill 0
    = view(rows/128, 4, 32, cols/4, 4) permute(0, 3, 2, 1, 4)

# Numerics profiles (docs/formats-and-layouts.md §1 and §2). Declared once, referenced by kernels with `profile NAME`.

# What the gfx950 hardware convert computes, as used by ROCm TE's native MXFP4 kernel: E2M1 ties to
# even, E8M0 EVEN mode, amax == 0 -> 127 (scale 1.0). Everything else is as in the Triton profile
# below, so the two differ exactly at ties: a negative value that rounds to zero keeps its sign (0x8,
# as the hardware does), an input of -0.0 gives 0x0, and NaN gives 0x0 (the hardware's NaN result is
# not documented, docs/formats-and-layouts.md §1 and §8).
profile mxfp4_hw {
    element e2m1(ties: even, zero_sign: negative_only, nan: 0x0)
    scale e8m0(mode: even, clamp: 0..254, zero_amax: 127, inf_amax: 254, nan_amax: 255)
}

# ROCm TransformerEngine's hand-written Triton MXFP4 kernel: E2M1 ties away from zero (threshold
# compares `|q| >= t`), sign from `q < 0`, NaN -> +0; E8M0 as above.
profile mxfp4_rocm_te_triton {
    element e2m1(ties: away, zero_sign: negative_only, nan: 0x0)
    scale e8m0(mode: even, clamp: 0..254, zero_amax: 127, inf_amax: 254, nan_amax: 255)
}

# NVIDIA TransformerEngine MXFP8 (docs/formats-and-layouts.md §2, 2.4): E4M3 with RNE and saturation, E8M0 RCEIL
# with the saturating special cases (NaN -> 0xFF, Inf -> 0xFE, amax == 0 -> 0).
profile mxfp8_nvte {
    element e4m3(ties: even, zero_sign: sign_bit, nan: 0x7F)
    scale e8m0(mode: rceil, clamp: 0..254, zero_amax: 0, inf_amax: 254, nan_amax: 255)
}

# E8M0 FLOOR as torchao's `to_mx` computes it for finite blocks (docs/formats-and-layouts.md §2): s clamped
# to [-127, 128] (e in 0..255); a non-finite amax gives 255 here (torchao differs there).
profile mxfp8_floor {
    element e4m3(ties: even, zero_sign: sign_bit, nan: 0x7F)
    scale e8m0(mode: floor, clamp: 0..255, zero_amax: 0, inf_amax: 255, nan_amax: 255)
}

# MXFP6 as torchao's MX cast computes it (to_mx, FLOOR; docs/formats-and-layouts.md §3c): E2M3 / E3M2 codes
# rounded to nearest even and saturated, the sign kept on zeros; E8M0 FLOOR as in mxfp8_floor. The
# formats have no NaN: a NaN block's scale byte is 255 (its values dequantize to NaN) and its codes are 0.
profile mxfp6_e2m3_floor {
    element e2m3(ties: even, zero_sign: sign_bit, nan: 0x0)
    scale e8m0(mode: floor, clamp: 0..255, zero_amax: 0, inf_amax: 255, nan_amax: 255)
}
profile mxfp6_e3m2_floor {
    element e3m2(ties: even, zero_sign: sign_bit, nan: 0x0)
    scale e8m0(mode: floor, clamp: 0..255, zero_amax: 0, inf_amax: 255, nan_amax: 255)
}

# NVIDIA TE GEMM_READY scales of 1x128 blockwise FP8 (docs/formats-and-layouts.md §3). Rowwise: logical [M, K/128]
# stored MN-major with M padded to 4, physical [K/128, rup(M, 4)]; columnwise: logical [M/128, K]
# row-major with K padded to 4. Padding is 0.
layout mn_major_pad4(rows, cols) -> (cols, rows) pad(rows: 4) fill 0 = permute(1, 0)

# DeepGEMM SM100 scales (docs/formats-and-layouts.md §3): E8M0 bytes of 4 consecutive k-blocks packed into one int32
# (byte j <- k-block 4q + j, little-endian), the int32s stored MN-major with MN padded to 4 (TMA) and
# the k-blocks to a multiple of 4: byte (m, kb) at 4 * ((kb / 4) * rup(MN, 4) + m) + kb % 4. The fill
# of the padding is not documented there; 0 is declared here.
layout ue8m0_packed_mn_major(rows, cols) pad(rows: 4, cols: 4) fill 0 = view(rows, cols/4, 4) permute(1, 0, 2)
layout row_major_pad_cols4(rows, cols) pad(cols: 4) fill 0 = view(rows, cols)

# Blockwise FP8 (DeepSeek style, docs/formats-and-layouts.md §3): multiplier F / max(amax, floor), stored 1/multiplier.
# ROCm TE Triton (adapted from Primus-Turbo): amax floor 1e-4, no power-of-two rounding.
profile fp8_block_rocm_te {
    element e4m3(ties: even, zero_sign: sign_bit, nan: 0x7F)
    scale f32(amax_floor: 1e-4, pow2: false)
}

# NVIDIA TE Float8BlockScaling defaults: no floor (amax 0 -> multiplier 1), power-of-two multipliers.
profile fp8_block_nvte {
    element e4m3(ties: even, zero_sign: sign_bit, nan: 0x7F)
    scale f32(amax_floor: 0, pow2: true)
}

# DeepGEMM (per_token_cast_to_fp8 / per_block_cast_to_fp8): sf = max(amax, 1e-4) / 448 stored as fp32,
# data multiplied by 1 / sf (another rounding than 448 / amax). NaN and Inf amax give sf = 1 here
# (DeepGEMM does not special-case them).
profile fp8_block_deepgemm {
    element e4m3(ties: even, zero_sign: sign_bit, nan: 0x7F)
    scale f32(amax_floor: 1e-4, pow2: false, rule: amax_over_f)
}

# DeepGEMM with use_ue8m0: sf rounded up to a power of two (exponent 1..254).
profile fp8_block_deepgemm_ue8m0 {
    element e4m3(ties: even, zero_sign: sign_bit, nan: 0x7F)
    scale f32(amax_floor: 1e-4, pow2: true, rule: amax_over_f)
}

# The same with the scales stored as UE8M0 exponent bytes (DeepGEMM's SM100 path: fp32 bits >> 23).
profile fp8_block_deepgemm_ue8m0_bytes {
    element e4m3(ties: even, zero_sign: sign_bit, nan: 0x7F)
    scale f32(amax_floor: 1e-4, pow2: true, rule: amax_over_f, store: ue8m0)
}

# NVIDIA TE MXFP8 with E5M2 data (gradients): the same scale rule with E5M2's maxpos 57344.
profile mxfp8_nvte_e5m2 {
    element e5m2(ties: even, zero_sign: sign_bit, nan: 0x7F)
    scale e8m0(mode: rceil, clamp: 0..254, zero_amax: 0, inf_amax: 254, nan_amax: 255)
}

# ROCm TE's Triton MXFP8 port of the NVIDIA rule (docs/formats-and-layouts.md §2 and §8): its reciprocal helper maps
# e == 0 to the multiplier 1.0 (NVIDIA computes 2^127).
profile mxfp8_rocm_te_triton {
    element e4m3(ties: even, zero_sign: sign_bit, nan: 0x7F)
    scale e8m0(mode: rceil, clamp: 0..254, zero_amax: 0, inf_amax: 254, nan_amax: 255, e0_multiplier: one)
}

# NVFP4 (torchao's nvfp4_quantize): E2M1 codes, one E4M3 scale per 16 elements, amax / 6 rounded to E4M3
# (clamped to [2^-6, 448]); codes of x times 1 / scale, ties to even, the sign of zero kept. A NaN
# block's codes are 0x4 (what torchao's encoder gives the canonical NaN). Two levels: the block scales
# are relative to a per-tensor fp32 scale amax(x) / (6 * 448), given or computed.
profile nvfp4 {
    element e2m1(ties: even, zero_sign: sign_bit, nan: 0x4)
    scale f32(rule: amax_over_f, store: e4m3, tensor_scale: true)
}

profile nvfp4_block_only {
    element e2m1(ties: even, zero_sign: sign_bit, nan: 0x4)
    scale f32(rule: amax_over_f, store: e4m3)
}
