# MXFP6 casts (bf16 [M, N] in): E2M3 or E3M2 codes, one E8M0 per 32 elements, both directions from one read.
#
# Four 6-bit codes are packed in three bytes along the block axis, as one little-endian 24-bit word with
# the first code in the lowest bits: code j of a group at bits [6j, 6j + 6) (docs/formats-and-layouts.md §3c).
# rowwise:  data [M, 3N/4] bytes, scales [M, N/32].
# colwise:  blocks of 32 along M, stored transposed: data [N, 3M/4] bytes, scales [N, M/32].
# Numerics as torchao's MX cast (FLOOR); bit-exact with its to_mx on blocks without Inf or NaN.

kernel mxfp6_e2m3(x: bf16[M, N]) {
    rowwise blocks 1x32 profile mxfp6_e2m3_floor {
        store data  as packed(low: first)
        store scale as row_major
    }
    colwise blocks 32x1 profile mxfp6_e2m3_floor {
        store data  as transpose | packed(low: first)
        store scale as transpose
    }
}

kernel mxfp6_e3m2(x: bf16[M, N]) {
    rowwise blocks 1x32 profile mxfp6_e3m2_floor {
        store data  as packed(low: first)
        store scale as row_major
    }
    colwise blocks 32x1 profile mxfp6_e3m2_floor {
        store data  as transpose | packed(low: first)
        store scale as transpose
    }
}
