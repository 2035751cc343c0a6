"""A hand-written MXFP4 cast-transpose in the plain style of ROCm TransformerEngine's Triton kernel.

Not generated: this is what a user keeps and wants to compare with quantlay's kernel. One kernel with
switches for the bugs the compare tool must diagnose, and four entry points:

* `cast_transpose_mxfp4`: correct for the `mxfp4_cast_transpose_hw` spec (ties to even, EVEN scales);
* `cast_transpose_ignores_colwise_shuffle`: applies the scale swizzle but ignores
  `shuffle_columnwise_data` (the bug that motivated quantlay);
* `cast_transpose_ties_away`: rounds E2M1 ties away from zero;
* `cast_transpose_rceil_scales`: picks E8M0 exponents in RCEIL mode instead of EVEN.

Each returns (rowwise_data, rowwise_scale, colwise_data, colwise_scale).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _to_fp4(q, TIES_AWAY: tl.constexpr):
    a = tl.abs(q)
    if TIES_AWAY:
        m = ((a >= 0.25).to(tl.int32) + (a >= 0.75).to(tl.int32) + (a >= 1.25).to(tl.int32)
             + (a >= 1.75).to(tl.int32) + (a >= 2.5).to(tl.int32) + (a >= 3.5).to(tl.int32)
             + (a >= 5.0).to(tl.int32))
    else:  # ties to even
        m = ((a > 0.25).to(tl.int32) + (a >= 0.75).to(tl.int32) + (a > 1.25).to(tl.int32)
             + (a >= 1.75).to(tl.int32) + (a > 2.5).to(tl.int32) + (a >= 3.5).to(tl.int32)
             + (a > 5.0).to(tl.int32))
    sign = (q < 0.0).to(tl.int32)
    return tl.where(q != q, 0, m | (sign << 3))


@triton.jit
def _multiplier(e):
    m = tl.where(e == 254, 0x400000, (254 - e) << 23)
    return tl.where(e == 255, 0x7FC00000, m).to(tl.float32, bitcast=True)


@triton.jit
def _scale_exp(amax, has_nan, RCEIL: tl.constexpr):
    bits = amax.to(tl.int32, bitcast=True)
    if RCEIL:
        d = (amax * (1.0 / 6.0)).to(tl.int32, bitcast=True)
        e = (d >> 23) + ((d & 0x7FFFFF) != 0).to(tl.int32)
    else:
        e = ((bits + 0x200000) >> 23) - 2
    e = tl.minimum(tl.maximum(e, 0), 254)
    e = tl.where(amax == 0.0, 127, e)
    e = tl.where(bits == 0x7F800000, 254, e)
    return tl.where(has_nan, 255, e)


@triton.jit
def _shuffle_scale_idx(r, c, cols_pad):
    return ((r // 32) * (cols_pad // 8) * 256 + (c // 8) * 256 + (c % 4) * 64 + (r % 16) * 4
            + ((c % 8) // 4) * 2 + (r % 32) // 16)


@triton.jit
def _shuffle_data_idx(r, c, kx):
    return (r // 16) * (16 * kx) + (c // 32) * 512 + ((c % 32) // 16) * 256 + (r % 16) * 16 + (c % 16)


@triton.jit
def _kernel(x_ptr, rd_ptr, rs_ptr, cd_ptr, cs_ptr, M, N, rs_cols, cs_cols,
            SHUF_ROW: tl.constexpr, SHUF_COL: tl.constexpr, SWIZZLE: tl.constexpr,
            TIES_AWAY: tl.constexpr, RCEIL: tl.constexpr):
    # one 32x32 tile: one rowwise block per row, one colwise block per column
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rows = pm * 32 + tl.arange(0, 32)
    cols = pn * 32 + tl.arange(0, 32)
    bits = tl.load(x_ptr + rows[:, None] * N + cols[None, :]).to(tl.uint16, bitcast=True)  # bf16 bits
    x = (bits.to(tl.uint32) << 16).to(tl.float32, bitcast=True)
    # rowwise
    nan = x != x
    ax = tl.where(nan, 0.0, tl.abs(x))
    e = _scale_exp(tl.max(ax, axis=1), tl.max(nan.to(tl.int32), axis=1) > 0, RCEIL)
    q = x * _multiplier(e)[:, None]
    codes = _to_fp4(q, TIES_AWAY)
    lo, hi = tl.split(tl.reshape(codes, [32, 16, 2]))
    byte = (lo | (hi << 4)).to(tl.uint8)
    r = rows[:, None]
    c = (pn * 16 + tl.arange(0, 16))[None, :]
    if SHUF_ROW:
        tl.store(rd_ptr + _shuffle_data_idx(r, c, N // 2), byte)
    else:
        tl.store(rd_ptr + r * (N // 2) + c, byte)
    if SWIZZLE:
        tl.store(rs_ptr + _shuffle_scale_idx(rows, pn, rs_cols), e.to(tl.uint8))
    else:
        tl.store(rs_ptr + rows * rs_cols + pn, e.to(tl.uint8))
    # columnwise, stored transposed
    e = _scale_exp(tl.max(ax, axis=0), tl.max(nan.to(tl.int32), axis=0) > 0, RCEIL)
    q = x * _multiplier(e)[None, :]
    codes = tl.trans(_to_fp4(q, TIES_AWAY))
    lo, hi = tl.split(tl.reshape(codes, [32, 16, 2]))
    byte = (lo | (hi << 4)).to(tl.uint8)
    r = cols[:, None]
    c = (pm * 16 + tl.arange(0, 16))[None, :]
    if SHUF_COL:
        tl.store(cd_ptr + _shuffle_data_idx(r, c, M // 2), byte)
    else:
        tl.store(cd_ptr + r * (M // 2) + c, byte)
    if SWIZZLE:
        tl.store(cs_ptr + _shuffle_scale_idx(cols, pm, cs_cols), e.to(tl.uint8))
    else:
        tl.store(cs_ptr + cols * cs_cols + pm, e.to(tl.uint8))


def _launch(x, shuffle_rowwise_data, shuffle_columnwise_data, with_gemm_swizzled_scales,
            honour_col_shuffle=True, ties_away=False, rceil=False):
    M, N = x.shape
    assert M % 64 == 0 and N % 64 == 0, "this hand-written kernel needs M, N multiples of 64"
    dev = x.device
    rd = torch.empty(M, N // 2, dtype=torch.uint8, device=dev)
    cd = torch.empty(N, M // 2, dtype=torch.uint8, device=dev)
    if with_gemm_swizzled_scales:
        rs = torch.full((triton.cdiv(M, 256) * 256, triton.cdiv(N // 32, 8) * 8), 127, dtype=torch.uint8, device=dev)
        cs = torch.full((triton.cdiv(N, 256) * 256, triton.cdiv(M // 32, 8) * 8), 127, dtype=torch.uint8, device=dev)
    else:
        rs = torch.empty(M, N // 32, dtype=torch.uint8, device=dev)
        cs = torch.empty(N, M // 32, dtype=torch.uint8, device=dev)
    _kernel[(M // 32, N // 32)](x.view(torch.int16), rd, rs, cd, cs, M, N, rs.shape[1], cs.shape[1],
                                SHUF_ROW=shuffle_rowwise_data,
                                SHUF_COL=shuffle_columnwise_data and honour_col_shuffle,
                                SWIZZLE=with_gemm_swizzled_scales, TIES_AWAY=ties_away, RCEIL=rceil)
    return rd, rs, cd, cs


def cast_transpose_mxfp4(x, shuffle_rowwise_data=False, shuffle_columnwise_data=False,
                         with_gemm_swizzled_scales=False):
    return _launch(x, shuffle_rowwise_data, shuffle_columnwise_data, with_gemm_swizzled_scales)


def cast_transpose_ignores_colwise_shuffle(x, shuffle_rowwise_data=False, shuffle_columnwise_data=False,
                                           with_gemm_swizzled_scales=False):
    return _launch(x, shuffle_rowwise_data, shuffle_columnwise_data, with_gemm_swizzled_scales,
                   honour_col_shuffle=False)


def cast_transpose_ties_away(x, shuffle_rowwise_data=False, shuffle_columnwise_data=False,
                             with_gemm_swizzled_scales=False):
    return _launch(x, shuffle_rowwise_data, shuffle_columnwise_data, with_gemm_swizzled_scales, ties_away=True)


def cast_transpose_rceil_scales(x, shuffle_rowwise_data=False, shuffle_columnwise_data=False,
                                with_gemm_swizzled_scales=False):
    return _launch(x, shuffle_rowwise_data, shuffle_columnwise_data, with_gemm_swizzled_scales, rceil=True)
