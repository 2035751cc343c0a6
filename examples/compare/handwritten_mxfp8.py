"""A hand-written MXFP8 E5M2 rowwise cast in plain Triton (the spec: `mxfp8_nvte_e5m2`, rowwise only),
with switches for three defects: no saturation (values past 57344 and Inf become Inf, as a plain
`.to(float8e5)` does on the GPU), E8M0 exponents in FLOOR mode instead of RCEIL, and plain scales where
the spec swizzles them. Returns (rowwise_data, rowwise_scale)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _e5m2(q, SATURATE: tl.constexpr):
    """fp32 -> E5M2 code, round to nearest even, in integer arithmetic (the same on every backend)."""
    bits = q.to(tl.int32, bitcast=True)
    sign = (bits >> 24) & 0x80
    a = tl.abs(q)
    ab = a.to(tl.int32, bitcast=True)
    r = (ab + 0xFFFFF + ((ab >> 21) & 1)) & 0x7FE00000  # the mantissa rounded to 2 bits
    e = (r >> 23) - 127 + 15
    normal = (e << 2) | ((r >> 21) & 3)
    sub = ((a * 65536.0 + 8388608.0) - 8388608.0).to(tl.int32)  # multiples of 2^-16, ties to even
    code = tl.where(a < 6.103515625e-05, sub, normal)
    top = 0x7B if SATURATE else 0x7C
    code = tl.where((e > 30) | (a == float("inf")), top, code)
    code = tl.where(q != q, 0x7F, code | sign)
    return code


@triton.jit
def _kernel(x_ptr, d_ptr, s_ptr, M, N, s_cols, FLOOR: tl.constexpr, SATURATE: tl.constexpr,
            SWIZZLE: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rows = pm * 32 + tl.arange(0, 32)
    cols = pn * 32 + tl.arange(0, 32)
    x = (tl.load(x_ptr + rows[:, None] * N + cols[None, :]).to(tl.uint16, bitcast=True).to(tl.uint32) << 16
         ).to(tl.float32, bitcast=True)
    nan = tl.max((x != x).to(tl.int32), axis=1) > 0
    amax = tl.max(tl.where(x != x, 0.0, tl.abs(x)), axis=1)
    ab = amax.to(tl.int32, bitcast=True)
    if FLOOR:
        e = (ab >> 23) - 15
    else:  # RCEIL: the exponent of amax / 57344 rounded up
        d = (amax * (1.0 / 57344.0)).to(tl.int32, bitcast=True)
        ex = d >> 23
        man = d & 0x7FFFFF
        e = ex + ((man != 0) & ((ex != 0) | (man > 0x400000))).to(tl.int32)
    e = tl.minimum(tl.maximum(e, 0), 254)
    e = tl.where(amax == 0.0, 0, e)
    e = tl.where(ab == 0x7F800000, 254, e)
    e = tl.where(nan, 255, e)
    mult = tl.where(e == 254, 0x400000, (254 - e) << 23)
    mult = tl.where(e == 255, 0x7FC00000, mult).to(tl.float32, bitcast=True)
    code = _e5m2(x * mult[:, None], SATURATE)
    tl.store(d_ptr + rows[:, None] * N + cols[None, :], code.to(tl.uint8))
    if SWIZZLE:  # cuBLAS 128x4 tiles
        r, c = rows, pn
        off = ((r // 128) * (s_cols // 4) + c // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4
        tl.store(s_ptr + off, e.to(tl.uint8))
    else:
        tl.store(s_ptr + rows * s_cols + pn, e.to(tl.uint8))


def _launch(x, with_gemm_swizzled_scales, floor=False, saturate=True, honour_swizzle=True):
    M, N = x.shape
    assert M % 32 == 0 and N % 32 == 0, "this hand-written kernel needs M, N multiples of 32"
    swizzle = with_gemm_swizzled_scales and honour_swizzle
    d = torch.empty(M, N, dtype=torch.uint8, device=x.device)
    shape = (triton.cdiv(M, 128) * 128, triton.cdiv(N // 32, 4) * 4) if swizzle else (M, N // 32)
    s = torch.zeros(shape, dtype=torch.uint8, device=x.device)
    _kernel[(M // 32, N // 32)](x.view(torch.int16), d, s, M, N, shape[1], FLOOR=floor, SATURATE=saturate,
                                SWIZZLE=swizzle)
    return d, s


def cast_mxfp8_e5m2(x, with_gemm_swizzled_scales=False):
    return _launch(x, with_gemm_swizzled_scales)


def cast_mxfp8_e5m2_unsaturated_floor_plain(x, with_gemm_swizzled_scales=False):
    return _launch(x, with_gemm_swizzled_scales, floor=True, saturate=False, honour_swizzle=False)
