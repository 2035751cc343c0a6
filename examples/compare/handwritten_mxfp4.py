"""A hand-written MXFP4 cast-transpose in the plain style of ROCm TransformerEngine's Triton kernel.

Not generated: this is what a user keeps and wants to compare with quantlay's kernel. One kernel with
switches for the bugs the compare tool must diagnose, and four entry points:

* `cast_transpose_mxfp4`: correct for the `mxfp4_cast_transpose_hw` spec (ties to even, EVEN scales);
* `cast_transpose_ignores_colwise_shuffle`: applies the scale swizzle but ignores
  `shuffle_columnwise_data` (the bug that motivated quantlay);
* `cast_transpose_ties_away`: rounds E2M1 ties away from zero;
* `cast_transpose_rceil_scales`: picks E8M0 exponents in RCEIL mode instead of EVEN.

Each returns (rowwise_data, rowwise_scale, colwise_data, colwise_scale). `BATTERY` adds kernels with
two or three defects at once (`battery_<name>`), among them padding left unwritten in scale buffers
the caller allocates (`out_rs`, `out_cs`: binding_buffers.toml).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _to_fp4(q, TIES_AWAY: tl.constexpr, SIGNED_ZERO: tl.constexpr):
    a = tl.abs(q)
    if TIES_AWAY:
        m = ((a >= 0.25).to(tl.int32) + (a >= 0.75).to(tl.int32) + (a >= 1.25).to(tl.int32)
             + (a >= 1.75).to(tl.int32) + (a >= 2.5).to(tl.int32) + (a >= 3.5).to(tl.int32)
             + (a >= 5.0).to(tl.int32))
    else:  # ties to even
        m = ((a > 0.25).to(tl.int32) + (a >= 0.75).to(tl.int32) + (a > 1.25).to(tl.int32)
             + (a >= 1.75).to(tl.int32) + (a > 2.5).to(tl.int32) + (a >= 3.5).to(tl.int32)
             + (a > 5.0).to(tl.int32))
    if SIGNED_ZERO:  # the sign bit, so -0.0 (and a negative product that underflows) gives 0x8
        sign = (q.to(tl.int32, bitcast=True) >> 31) & 1
    else:
        sign = (q < 0.0).to(tl.int32)
    return tl.where(q != q, 0, m | (sign << 3))


@triton.jit
def _multiplier(e):
    m = tl.where(e == 254, 0x400000, (254 - e) << 23)
    return tl.where(e == 255, 0x7FC00000, m).to(tl.float32, bitcast=True)


@triton.jit
def _scale_exp(amax, has_nan, RCEIL: tl.constexpr, FLOOR: tl.constexpr, LOG2: tl.constexpr):
    bits = amax.to(tl.int32, bitcast=True)
    if RCEIL:
        d = (amax * (1.0 / 6.0)).to(tl.int32, bitcast=True)
        e = (d >> 23) + ((d & 0x7FFFFF) != 0).to(tl.int32)
    elif FLOOR:
        e = (bits >> 23) - 2
    else:
        e = ((bits + 0x200000) >> 23) - 2
    if LOG2:  # floor(log2(rounded amax)) through an approximate log2 that lands just below some powers of two
        e = tl.where(((bits + 0x200000) >> 23) % 8 == 3, e - 1, e)
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
            TIES_AWAY: tl.constexpr, RCEIL: tl.constexpr, FLOOR: tl.constexpr, LOG2: tl.constexpr,
            NAN_IGNORED: tl.constexpr, SIGNED_ZERO: tl.constexpr):
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
    has_nan = tl.max(nan.to(tl.int32), axis=1) > 0
    e = _scale_exp(tl.max(ax, axis=1), has_nan & (not NAN_IGNORED), RCEIL, FLOOR, LOG2)
    q = x * _multiplier(e)[:, None]
    codes = _to_fp4(q, TIES_AWAY, SIGNED_ZERO)
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
    has_nan = tl.max(nan.to(tl.int32), axis=0) > 0
    e = _scale_exp(tl.max(ax, axis=0), has_nan & (not NAN_IGNORED), RCEIL, FLOOR, LOG2)
    q = x * _multiplier(e)[None, :]
    codes = tl.trans(_to_fp4(q, TIES_AWAY, SIGNED_ZERO))
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
            honour_col_shuffle=True, ties_away=False, rceil=False, honour_row_shuffle=True, honour_swizzle=True,
            floor=False, log2=False, nan_ignored=False, signed_zero=False, out_rs=None, out_cs=None,
            fill_padding=True):
    M, N = x.shape
    assert M % 64 == 0 and N % 64 == 0, "this hand-written kernel needs M, N multiples of 64"
    dev = x.device
    swizzle = with_gemm_swizzled_scales and honour_swizzle
    rd = torch.empty(M, N // 2, dtype=torch.uint8, device=dev)
    cd = torch.empty(N, M // 2, dtype=torch.uint8, device=dev)
    if swizzle:
        rs_shape = (triton.cdiv(M, 256) * 256, triton.cdiv(N // 32, 8) * 8)
        cs_shape = (triton.cdiv(N, 256) * 256, triton.cdiv(M // 32, 8) * 8)
    else:
        rs_shape, cs_shape = (M, N // 32), (N, M // 32)
    rs = out_rs if out_rs is not None else torch.empty(rs_shape, dtype=torch.uint8, device=dev)
    cs = out_cs if out_cs is not None else torch.empty(cs_shape, dtype=torch.uint8, device=dev)
    if swizzle and fill_padding:  # the cells past the scales: 1.0, as ROCm TE fills them
        rs.fill_(127)
        cs.fill_(127)
    _kernel[(M // 32, N // 32)](x.view(torch.int16), rd, rs, cd, cs, M, N, rs.shape[1], cs.shape[1],
                                SHUF_ROW=shuffle_rowwise_data and honour_row_shuffle,
                                SHUF_COL=shuffle_columnwise_data and honour_col_shuffle,
                                SWIZZLE=swizzle, TIES_AWAY=ties_away, RCEIL=rceil, FLOOR=floor, LOG2=log2,
                                NAN_IGNORED=nan_ignored, SIGNED_ZERO=signed_zero)
    return rd, rs, cd, cs


def cast_transpose_mxfp4(x, shuffle_rowwise_data=False, shuffle_columnwise_data=False,
                         with_gemm_swizzled_scales=False, out_rs=None, out_cs=None):
    return _launch(x, shuffle_rowwise_data, shuffle_columnwise_data, with_gemm_swizzled_scales,
                   out_rs=out_rs, out_cs=out_cs)


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


# A battery of kernels wrong in two or three ways at once, as real ones are: the defects each plants.
BATTERY = {
    "colshuffle_tiesaway": dict(honour_col_shuffle=False, ties_away=True),
    "rowshuffle_rceil": dict(honour_row_shuffle=False, rceil=True),
    "swizzle_floor": dict(honour_swizzle=False, floor=True),
    "colshuffle_log2": dict(honour_col_shuffle=False, log2=True),
    "rowshuffle_nanignored_signedzero": dict(honour_row_shuffle=False, nan_ignored=True, signed_zero=True),
    "tiesaway_signedzero": dict(ties_away=True, signed_zero=True),
    "rceil_nanignored": dict(rceil=True, nan_ignored=True),
    "swizzle_tiesaway_log2": dict(honour_swizzle=False, ties_away=True, log2=True),
    "floor_signedzero_colshuffle": dict(floor=True, signed_zero=True, honour_col_shuffle=False),
    "log2_nanignored": dict(log2=True, nan_ignored=True),
    "bothshuffles_rceil": dict(honour_col_shuffle=False, honour_row_shuffle=False, rceil=True),
    "padding_tiesaway": dict(fill_padding=False, ties_away=True),
    "padding_rceil_rowshuffle": dict(fill_padding=False, rceil=True, honour_row_shuffle=False),
    # ROCm TE's plain-Triton style: plain layouts whatever the three flags say, exponents through log2
    "te_style": dict(honour_row_shuffle=False, honour_col_shuffle=False, honour_swizzle=False, log2=True),
}


def _battery_entry(defects):
    def fn(x, shuffle_rowwise_data=False, shuffle_columnwise_data=False, with_gemm_swizzled_scales=False,
           out_rs=None, out_cs=None):
        return _launch(x, shuffle_rowwise_data, shuffle_columnwise_data, with_gemm_swizzled_scales,
                       out_rs=out_rs, out_cs=out_cs, **defects)
    return fn


for _name, _defects in BATTERY.items():
    globals()[f"battery_{_name}"] = _battery_entry(_defects)
