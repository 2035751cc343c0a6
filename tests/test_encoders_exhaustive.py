"""Every generated element encoder, run in Triton's interpreter (or on CUDA), against the format's
reference (nearest grid value) on every bf16 bit pattern as an fp32 value (subnormals, every midpoint
of the E2M1/E4M3/E5M2 grids, Inf, NaN) and, where the kernel's contract allows fp32 precision (its
subnormal rounding is not the bf16-only shortcut), on fp32 values one ulp either side of every midpoint."""
import pytest
import torch
import triton
import triton.language as tl

from quantlay.generated import find
from quantlay.lower import lower
from quantlay.spec import shipped_kernels

from conftest import DEVICE

CASES = [  # (kernel, options, direction): one per element rule set the shipped profiles use
    ("mxfp4_cast_transpose_hw", {}, "rowwise"),   # e2m1 ties even, negative_only, NaN by block
    ("mxfp4_cast_transpose_te", {}, "colwise"),   # e2m1 ties away
    ("mxfp8_nvte", {}, "rowwise"),                # e4m3 ties even, sign bit
    ("mxfp8_nvte_e5m2", {}, "colwise"),           # e5m2
    ("fp8_1x128_rocm_te", {}, "colwise"),         # e4m3 with fp32 scales (exact subnormal path)
]


@triton.jit
def _run(q_ptr, out_ptr, n, ENC: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    q = tl.load(q_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, ENC(q).to(tl.int32), mask=offs < n)


def _inputs(grid, fp32_precision):
    every_bf16 = (torch.arange(1 << 16, dtype=torch.int32) << 16).view(torch.float32)
    if not fp32_precision:  # bf16 input times a power-of-two scale: 8 significant bits at most
        return every_bf16
    mids = torch.tensor([(a + b) / 2 for a, b in zip(grid, grid[1:])], dtype=torch.float32)
    bits = mids.view(torch.int32)
    near = torch.cat([(bits - 1).view(torch.float32), (bits + 1).view(torch.float32)])
    return torch.cat([every_bf16, near, -near])


@pytest.mark.parametrize("name,opts,direction", CASES, ids=[c[0] for c in CASES])
def test_encoder_matches_reference_everywhere(name, opts, direction):
    kernel = shipped_kernels()[name]
    mod = find(name, **dict.fromkeys(kernel.options, False), **opts)
    variant = kernel.variant(**dict.fromkeys(kernel.options, False))
    d = variant.direction(direction)
    ctx = next(c for c in lower(variant)["directions"] if c["name"] == direction)
    q = _inputs(d.element.grid(), fp32_precision=not ctx["cheap_subnormals"] or ctx["ties"] == "even")
    out = torch.empty(q.shape, dtype=torch.int32, device=DEVICE)
    BLOCK = 4096
    _run[(triton.cdiv(q.numel(), BLOCK),)](q.to(DEVICE), out, q.numel(),
                                           ENC=getattr(mod, f"_encode_{direction}"), BLOCK=BLOCK)
    got = out.cpu()  # (on CUDA, the buffer the kernel wrote: a copy made by .to() would stay unwritten)
    want = d.element.encode_reference(q).to(torch.int32)
    keep = ~torch.isnan(q)  # FP4 kernels set NaN codes per block, after encoding (tested in the kernels)
    bad = (got != want) & keep
    assert not bad.any(), [(hex(int(q.view(torch.int32)[i])), int(got[i]), int(want[i]))
                           for i in bad.nonzero().flatten()[:5].tolist()]


@triton.jit
def _run_codes(q_ptr, one_ptr, out_ptr, n, CODES: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    # times a run-time 1.0, as every kernel multiplies before converting (a NaN becomes the canonical one)
    q = tl.load(q_ptr + offs, mask=offs < n, other=0.0) * tl.load(one_ptr)
    tl.store(out_ptr + offs, CODES(q, True).to(tl.int32), mask=offs < n)


@pytest.mark.gpu  # the hardware convert runs compiled only
@pytest.mark.parametrize("name,direction", [("mxfp8_nvte", "rowwise"), ("mxfp8_nvte_e5m2", "colwise"),
                                            ("fp8_1x128_rocm_te", "colwise")])
def test_hardware_convert_matches_reference_everywhere(name, direction):
    """cvt.rn.satfinite after the multiply: the same codes as the reference, NaN (any sign, any payload)
    included, which is why the kernels need no NaN select after it."""
    kernel = shipped_kernels()[name]
    variant = kernel.variant(**dict.fromkeys(kernel.options, False))
    mod = find(name, **dict.fromkeys(kernel.options, False))
    d = variant.direction(direction)
    q = _inputs(d.element.grid(), fp32_precision=True).cuda()
    out = torch.empty(q.shape, dtype=torch.int32, device="cuda")
    BLOCK = 4096
    _run_codes[(triton.cdiv(q.numel(), BLOCK),)](q, torch.ones(1, device="cuda"), out, q.numel(),
                                                 CODES=getattr(mod, f"_codes_{direction}"), BLOCK=BLOCK)
    want = d.element.encode_reference(q).to(torch.int32)
    bad = out != want
    assert not bad.any(), [(hex(int(q.view(torch.int32)[i])), int(out[i]), int(want[i]))
                           for i in bad.nonzero().flatten()[:5].tolist()]


# ---- the bf16x2 PTX encoder of the MXFP4 kernels (compiled kernels only) --------------------------
PAIR_CASES = [("mxfp4_cast_transpose_hw", "rowwise"), ("mxfp4_cast_transpose_hw", "colwise"),
              ("mxfp4_cast_transpose_te", "rowwise"), ("mxfp4_cast_transpose_te", "colwise"),
              ("mxfp4_32x32_hw", "colwise")]  # square blocks: the same steps on each block's element pairs
# multipliers 2^(127 - e) where the sign test changes regime: no bf16 x underflows fp32 (e < 144),
# thresholds in bf16's subnormals (144..150) and normals (> 150), the subnormal multiplier (254) and a
# NaN block (255)
CPU_E = [0, 1, 15, 16, 17, 64, 120, 126, 127, 128, 129, 143, 144, 145, 146, 149, 150, 151, 152, 200, 250,
         253, 254, 255]


def _pair_inputs(e_values):
    """Every bf16 pattern in the low nibble's element with a different pattern in the high one, under each
    E8M0 byte: (lo, hi, e) int64 tensors. NaN elements are left out: they make their block's byte 255.
    Each byte's run is a whole number of fours (an asm instance's words, which the kernels take from one block)."""
    p = torch.arange(1 << 16, dtype=torch.int64)
    p = p[((p & 0x7FFF) <= 0x7F80)]
    p = torch.cat([p, p[:-len(p) % 4]])
    lo = p.repeat(len(e_values))
    hi = ((p * 40503 + 12345) & 0xFFFF).repeat(len(e_values))
    hi = torch.where((hi & 0x7FFF) > 0x7F80, hi & 0x8000, hi)
    e = torch.tensor(e_values, dtype=torch.int64).repeat_interleave(len(p))
    n = len(lo) // 4 * 4
    return lo[:n], hi[:n], e[:n]


def _pair_reference(variant, direction, lo, hi, mult):
    el = variant.direction(direction).element
    f = lambda h: (h.to(torch.int32) << 16).view(torch.float32)  # noqa: E731
    want = el.encode_reference(f(lo) * mult).to(torch.int64) | (el.encode_reference(f(hi) * mult).to(torch.int64) << 4)
    return torch.where(torch.isnan(mult), el.nan | (el.nan << 4), want)  # a NaN block: the NaN code's byte


def _pairs_on_gpu(mod, direction, lo, hi, mult):
    """The module's own _bf16x2 function (and its per-block word) compiled, on every element pair."""
    out = torch.empty(lo.shape, dtype=torch.uint8, device="cuda")
    BLOCK = 4096
    _run_pairs[(triton.cdiv(lo.numel(), BLOCK),)](lo.to(torch.int16), hi.to(torch.int16), mult, out, lo.numel(),
                                                  PAIRS=getattr(mod, f"_bf16x2_{direction}"),
                                                  WORD=getattr(mod, f"_bf16x2_word_{direction}"), BLOCK=BLOCK)
    return out.to(torch.int64)


def _mult(mod, direction, e):
    """The kernel's own multipliers for E8M0 bytes e (its _multiplier function, run by the interpreter
    on the CPU, compiled on CUDA)."""
    out = torch.empty(e.shape, dtype=torch.float32, device=e.device)
    _run_mult[(triton.cdiv(e.numel(), 4096),)](e.to(torch.int32), out, e.numel(),
                                                MULT=getattr(mod, f"_multiplier_{direction}"), BLOCK=4096)
    return out


def _consts(mod, direction, mult):
    """The per-block word of the bf16x2 encoder (its _bf16x2_word function) split into its 16-bit halves:
    the multiplier's bf16 pattern and the sign threshold."""
    out = torch.empty(mult.shape, dtype=torch.int32, device=mult.device)
    _run_word[(triton.cdiv(mult.numel(), 4096),)](mult, out, mult.numel(),
                                                 WORD=getattr(mod, f"_bf16x2_word_{direction}"), BLOCK=4096)
    kw = out.to(torch.int64)
    return kw & 0xFFFF, (kw >> 16) & 0xFFFF


@triton.jit
def _run_word(mult_ptr, out_ptr, n, WORD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, WORD(tl.load(mult_ptr + offs, mask=offs < n, other=1.0)), mask=offs < n)


@triton.jit
def _run_mult(e_ptr, out_ptr, n, MULT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, MULT(tl.load(e_ptr + offs, mask=offs < n, other=0)), mask=offs < n)


@pytest.mark.parametrize("name,direction", PAIR_CASES)
def test_bf16x2_asm_matches_reference_in_the_ptx_model(name, direction):
    """The generated PTX text, run by tests/ptx_model.py (the ISA's bf16 rules), on every bf16 pattern
    under the multipliers where the encoder's regime changes. The GPU test below runs every E8M0 byte."""
    import ptx_model
    kernel = shipped_kernels()[name]
    variant = kernel.variant(**dict.fromkeys(kernel.options, False))
    mod = find(name, **dict.fromkeys(kernel.options, False))
    asm = getattr(mod, f"_BF16X2_{direction.upper()}").value
    lo, hi, e = _pair_inputs(CPU_E)
    # the kernel's own multipliers and per-block constants (on CUDA compiled, else in the interpreter)
    mult = _mult(mod, direction, e.to(DEVICE))
    me, nt = (t.cpu() for t in _consts(mod, direction, mult))
    mult = mult.cpu()
    g = lambda t: t.reshape(-1, 4)  # noqa: E731
    ops = [None, *ptx_model.pack_bf16(g(lo)), *ptx_model.pack_bf16(g(hi)), *ptx_model.pack_bf16(g(me)),
           *ptx_model.pack_bf16(g(nt))]
    out = ptx_model.run(asm, ops)
    got = _bytes(out)
    want = _pair_reference(variant, direction, lo, hi, mult)
    bad = got != want
    assert not bad.any(), [(hex(int(lo[i])), hex(int(hi[i])), int(e[i]), int(got[i]), int(want[i]))
                           for i in bad.nonzero().flatten()[:5].tolist()]


@pytest.mark.parametrize("name,direction", PAIR_CASES)
def test_bf16x2_sign_threshold_for_every_e8m0_byte(name, direction):
    """The per-block sign threshold -T, T = 2^-150 / mult, against torch's own rounding of 2^(e - 277)
    to bf16 (0 below half its smallest subnormal), for every E8M0 byte; -Inf in a NaN block."""
    kernel = shipped_kernels()[name]
    mod = find(name, **dict.fromkeys(kernel.options, False))
    e = torch.arange(256, dtype=torch.int64)
    _, nt = (t.cpu() for t in _consts(mod, direction, _mult(mod, direction, e.to(DEVICE))))
    t = torch.tensor([2.0 ** (int(v) - 277) for v in e[:255]], dtype=torch.float64).to(torch.bfloat16)
    want = torch.cat([(t.view(torch.int16).to(torch.int64) & 0xFFFF) | 0x8000, torch.tensor([0xFF80])])
    assert torch.equal(nt, want), [(int(v), hex(int(nt[v])), hex(int(want[v]))) for v in (nt != want).nonzero().flatten()[:5]]


@triton.jit
def _run_pairs(lo_ptr, hi_ptr, mult_ptr, out_ptr, n, PAIRS: tl.constexpr, WORD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    lo = tl.load(lo_ptr + offs, mask=offs < n, other=0)
    hi = tl.load(hi_ptr + offs, mask=offs < n, other=0)
    kw = WORD(tl.load(mult_ptr + offs, mask=offs < n, other=1.0))
    tl.store(out_ptr + offs, PAIRS(lo, hi, kw), mask=offs < n)


@pytest.mark.gpu  # inline PTX runs compiled only
@pytest.mark.parametrize("name,direction", PAIR_CASES)
def test_bf16x2_asm_matches_reference_everywhere(name, direction):
    """The kernel's own _bf16x2 function on the GPU: every bf16 pattern under every E8M0 byte."""
    kernel = shipped_kernels()[name]
    variant = kernel.variant(**dict.fromkeys(kernel.options, False))
    mod = find(name, **dict.fromkeys(kernel.options, False))
    lo, hi, e = (t.cuda() for t in _pair_inputs(list(range(256))))
    mult = _mult(mod, direction, e)
    out = _pairs_on_gpu(mod, direction, lo, hi, mult)
    want = _pair_reference(variant, direction, lo, hi, mult)
    bad = out != want
    assert not bad.any(), [(hex(int(lo[i])), hex(int(hi[i])), int(e[i]), int(out[i]), int(want[i]))
                           for i in bad.nonzero().flatten()[:5].tolist()]


# ---- the bf16x2 PTX encoder of the MXFP6 kernels: one 6-bit code a byte, x's sign bit (compiled only) ----
SIX_CASES = [("mxfp6_e2m3", "rowwise"), ("mxfp6_e2m3", "colwise"), ("mxfp6_e3m2", "rowwise"), ("mxfp6_e3m2", "colwise")]


def _six_inputs(e_values):
    """Every bf16 pattern but NaN, both signs and zeros included, under each E8M0 byte: (x, e) int64."""
    lo, hi, e = _pair_inputs(e_values)
    return torch.cat([lo, hi]), torch.cat([e, e])


def _six_reference(name, direction, x, mult):
    el = shipped_kernels()[name].variants()[0].direction(direction).element
    want = el.encode_reference((x.to(torch.int32) << 16).view(torch.float32) * mult).to(torch.int64)
    return torch.where(torch.isnan(mult), el.nan, want)  # a NaN block: the NaN code


def _six_mismatches(name, direction, asm=None, e_values=CPU_E):
    """The module's 6-bit encoder asm (or the given text) in tests/ptx_model.py on every bf16 pattern under
    each E8M0 byte of e_values (the kernel's own multipliers and words), against the reference: bad codes."""
    import ptx_model
    mod = find(name)
    x, e = _six_inputs(e_values)
    mult = _mult(mod, direction, e.to(DEVICE))
    me, _ = (t.cpu() for t in _consts(mod, direction, mult))
    g = lambda t: t.reshape(-1, 4)  # noqa: E731
    out = ptx_model.run(asm or getattr(mod, f"_BF16X2_{direction.upper()}").value,
                        [None, *ptx_model.pack_bf16(g(x)), *ptx_model.pack_bf16(g(me))])
    return int((_bytes(out) != _six_reference(name, direction, x, mult.cpu())).sum())


@pytest.mark.parametrize("name,direction", SIX_CASES)
def test_bf16x2_six_bit_asm_matches_reference_in_the_ptx_model(name, direction):
    """The MXFP6 encoders' PTX text in the PTX model: every bf16 pattern under the multipliers where the
    regime changes (no product underflows, bf16 subnormal products, the subnormal multiplier, a NaN block)."""
    assert _six_mismatches(name, direction) == 0


def test_bf16x2_six_bit_asm_test_catches_planted_bugs():
    """The check above fails on a sign bit moved one place, codes not shifted to bit 0, the wrong bytes
    kept, a magic M not floored at the smallest normal binade and a NaN block left unmasked."""
    asm = find("mxfp6_e3m2")._BF16X2_ROWWISE.value
    e = [120, 127, 200, 255]
    assert _six_mismatches("mxfp6_e3m2", "rowwise", e_values=e) == 0
    for old, new in (("shr.u32 z, $1, 5", "shr.u32 z, $1, 6"), ("shr.u32 w0, c, 5", "shr.u32 w0, c, 4"),
                     ("prmt.b32 w0, w0, w1, 0x6420", "prmt.b32 w0, w0, w1, 0x4620"),
                     ("fma.rn.relu.bf16x2", "fma.rn.bf16x2"), ("and.b32 $0, w0, k0", "mov.b32 $0, w0")):
        assert old in asm
        assert _six_mismatches("mxfp6_e3m2", "rowwise", asm.replace(old, new), e_values=e) > 0


@pytest.mark.gpu  # inline PTX runs compiled only
@pytest.mark.parametrize("name,direction", SIX_CASES)
def test_bf16x2_six_bit_asm_matches_reference_everywhere(name, direction):
    """The kernel's own 6-bit _bf16x2 function on the GPU: every bf16 pattern under every E8M0 byte."""
    mod = find(name)
    x, e = (t.cuda() for t in _six_inputs(list(range(256))))
    mult = _mult(mod, direction, e)
    out = torch.empty(x.shape, dtype=torch.uint8, device="cuda")
    _run_six[(triton.cdiv(x.numel(), 4096),)](x.to(torch.int16), mult, out, x.numel(),
                                              CODES=getattr(mod, f"_bf16x2_{direction}"),
                                              WORD=getattr(mod, f"_bf16x2_word_{direction}"), BLOCK=4096)
    want = _six_reference(name, direction, x, mult)
    bad = out.to(torch.int64) != want
    assert not bad.any(), [(hex(int(x[i])), int(e[i]), int(out[i]), int(want[i])) for i in bad.nonzero().flatten()[:5].tolist()]


@triton.jit
def _run_six(x_ptr, mult_ptr, out_ptr, n, CODES: tl.constexpr, WORD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    kw = WORD(tl.load(mult_ptr + offs, mask=offs < n, other=1.0))
    tl.store(out_ptr + offs, CODES(x, kw), mask=offs < n)


# ---- the bf16x2 encoder's fp32-multiplier form (NVFP4: E4M3 block scales, compiled kernels only) ----
F32_CASES = [("nvfp4", "rowwise"), ("nvfp4", "colwise"), ("nvfp4_block_only", "rowwise")]
TIES = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]  # E2M1's rounding boundaries


def _f32_inputs(n_random):
    """(lo, hi, mult) int64 / fp32 tensors: every finite bf16 pattern under general multipliers (long
    mantissas, the E4M3 range's ends, subnormal products, a NaN block), and bf16 values x under
    multipliers m = tie / x and one fp32 ulp either side, so products fall on and just beside every
    rounding boundary (where narrowing to bf16 must not round twice)."""
    g = torch.Generator().manual_seed(5)
    p = torch.arange(1 << 16, dtype=torch.int64)
    p = p[(p & 0x7FFF) <= 0x7F80]
    general = [1.0, 1 / 6, 1 / 448, 64.0, float.fromhex("0x1.fffffep-1"), float.fromhex("0x1.000002p0"), 2.0 ** -137, 2.0 ** 120, float("nan")]
    general += (2.0 ** torch.randint(-20, 20, (n_random,), generator=g) * (1 + torch.rand(n_random, generator=g))).tolist()
    lo = [p.repeat(len(general))]
    mult = [torch.tensor(general, dtype=torch.float32).repeat_interleave(len(p))]
    xs = torch.tensor([1.0078125, 1.5, 1.9921875, 3.0, 0.3359375, 5.25], dtype=torch.bfloat16)
    xb = xs.view(torch.int16).to(torch.int64) & 0xFFFF
    for t in TIES:
        m = (t / xs.float()).view(torch.int32)
        for d in (-1, 0, 1):
            lo += [xb, xb | 0x8000]
            mult += [(m + d).view(torch.float32)] * 2
    lo, mult = torch.cat(lo), torch.cat(mult)
    hi = (lo * 40503 + 12345) & 0xFFFF
    hi = torch.where((hi & 0x7FFF) > 0x7F80, hi & 0x8000, hi)
    n = len(lo) // 4 * 4
    return lo[:n], hi[:n], mult[:n]


@pytest.mark.parametrize("name,direction", F32_CASES)
def test_bf16x2_f32_asm_matches_reference_in_the_ptx_model(name, direction):
    """The fp32-multiplier encoder's PTX text in tests/ptx_model.py, on every finite bf16 pattern and on
    products beside every rounding boundary; the GPU test below runs the same on the hardware."""
    import ptx_model
    kernel = shipped_kernels()[name]
    variant = kernel.variant(**dict.fromkeys(kernel.options, False))
    mod = find(name, **dict.fromkeys(kernel.options, False))
    asm = getattr(mod, f"_BF16X2_{direction.upper()}").value
    lo, hi, mult = _f32_inputs(3)
    out = torch.empty(mult.shape, dtype=torch.int32, device=DEVICE)
    _run_word[(triton.cdiv(mult.numel(), 4096),)](mult.to(DEVICE), out, mult.numel(),
                                                 WORD=getattr(mod, f"_bf16x2_word_{direction}"), BLOCK=4096)
    kw = out.cpu().to(torch.int64) & 0xFFFFFFFF
    g = lambda t: t.reshape(-1, 4)  # noqa: E731
    ops = [None, *ptx_model.pack_bf16(g(lo)), *ptx_model.pack_bf16(g(hi)), *g(kw).unbind(1)]
    got = _bytes(ptx_model.run(asm, ops))
    want = _pair_reference(variant, direction, lo, hi, mult)
    bad = got != want
    assert not bad.any(), [(hex(int(lo[i])), hex(int(hi[i])), float(mult[i]), int(got[i]), int(want[i]))
                           for i in bad.nonzero().flatten()[:5].tolist()]


@pytest.mark.gpu  # inline PTX runs compiled only
@pytest.mark.parametrize("name,direction", F32_CASES)
def test_bf16x2_f32_asm_matches_reference_everywhere(name, direction):
    """The kernel's own fp32-multiplier _bf16x2 function on the GPU, with 64 random multipliers more."""
    kernel = shipped_kernels()[name]
    variant = kernel.variant(**dict.fromkeys(kernel.options, False))
    mod = find(name, **dict.fromkeys(kernel.options, False))
    lo, hi, mult = (t.cuda() for t in _f32_inputs(64))
    out = _pairs_on_gpu(mod, direction, lo, hi, mult)
    want = _pair_reference(variant, direction, lo, hi, mult)
    bad = out != want
    assert not bad.any(), [(hex(int(lo[i])), hex(int(hi[i])), float(mult[i]), int(out[i]), int(want[i]))
                           for i in bad.nonzero().flatten()[:5].tolist()]


# ---- the Hopper (Gluon) MXFP4 cast-transpose: the same bf16x2 steps on whole words ----
HOPPER_CASES = ["mxfp4_cast_transpose_hw", "mxfp4_cast_transpose_te"]


@triton.jit
def _run_hopper_pair(mlo_ptr, mhi_ptr, out_ptr, n, PAIR: tl.constexpr, WORD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mlo = tl.load(mlo_ptr + offs, mask=offs < n, other=1.0)
    mhi = tl.load(mhi_ptr + offs, mask=offs < n, other=1.0)
    k, thr, keep = PAIR(WORD(mlo), mlo, WORD(mhi), mhi)
    tl.store(out_ptr + 3 * offs, k, mask=offs < n)
    tl.store(out_ptr + 3 * offs + 1, thr, mask=offs < n)
    tl.store(out_ptr + 3 * offs + 2, keep, mask=offs < n)


def _hopper_operands(mod, direction, e_lo, e_hi):
    """The module's own per-word encoder operands (its _multiplier, _bf16x2_word and _hopper_pair) for words
    whose low and high halves lie in blocks of E8M0 bytes e_lo and e_hi: (k, thr, keep, mult_lo, mult_hi)."""
    pairs, inv = torch.unique(e_lo * 256 + e_hi, return_inverse=True)  # each distinct pair once (the interpreter is slow)
    mlo, mhi = _mult(mod, direction, (pairs // 256).to(DEVICE)), _mult(mod, direction, (pairs % 256).to(DEVICE))
    out = torch.empty(3 * mlo.numel(), dtype=torch.int32, device=DEVICE)
    _run_hopper_pair[(triton.cdiv(mlo.numel(), 4096),)](mlo, mhi, out, mlo.numel(), PAIR=mod._hopper_pair,
                                                         WORD=getattr(mod, f"_bf16x2_word_{direction}"), BLOCK=4096)
    k, thr, keep = (out.view(-1, 3).cpu().to(torch.int64)[inv] & 0xFFFFFFFF).unbind(1)
    return k, thr, keep, mlo.cpu()[inv], mhi.cpu()[inv]


def _quads(t):
    """[4n] -> the four registers of n asm instances."""
    return list(t.reshape(-1, 4).unbind(1))


def _bytes(out):
    """An asm block's 32-bit results -> their bytes, lowest first."""
    return torch.stack([(out >> (8 * i)) & 0xFF for i in range(4)], dim=1).flatten()


def _hopper_mismatches(name, row_asm=None, col_asm=None, e_values=CPU_E):
    """The Hopper encoders' asm (the module's, or the given text) in tests/ptx_model.py on every bf16 pattern
    pair under each E8M0 byte of e_values, against the format's reference: the number of wrong bytes.
    rowwise: a word holds elements 2k, 2k + 1 of one block; colwise: the even rows' words and the odd rows',
    their low halves in one column's block and their high halves in the next column's (another block). An
    instance's four words lie in one block (one column pair's blocks), as in the kernel."""
    import ptx_model
    kernel = shipped_kernels()[name]
    variant = kernel.variant(**dict.fromkeys(kernel.options, True))
    mod = find(name, **dict.fromkeys(kernel.options, True))
    lo, hi, e = _pair_inputs(e_values)
    k, thr, keep, mult, _ = _hopper_operands(mod, "rowwise", e, e)
    out = ptx_model.run(row_asm or mod._HOPPER_ROW_ASM.value, [None, *_quads(lo | (hi << 16)), *_quads(k),
                                                                *_quads(thr), *_quads(keep)])
    bad = int((_bytes(out) != _pair_reference(variant, "rowwise", lo, hi, mult)).sum())
    lo2, hi2, e2 = (t.roll(7920) for t in (lo, hi, e))
    k, thr, keep, m0, m1 = _hopper_operands(mod, "colwise", e, e2)
    ops = [None, None, *_quads(lo | (lo2 << 16)), *_quads(hi | (hi2 << 16)), *_quads(k), *_quads(thr), *_quads(keep)]
    outs = ptx_model.run(col_asm or mod._HOPPER_COL_ASM.value, ops, ("$0", "$1"))
    for out, a, b, m in zip(outs, (lo, lo2), (hi, hi2), (m0, m1)):
        bad += int((_bytes(out) != _pair_reference(variant, "colwise", a, b, m)).sum())
    return bad


@pytest.mark.parametrize("name", HOPPER_CASES)
def test_hopper_asm_matches_reference_in_the_ptx_model(name):
    """The Hopper kernel's word encoders (PTX text) in the PTX model, every bf16 pattern pair under the
    multipliers where the encoder's regime changes; the GPU tests run the whole kernel on every pattern."""
    assert _hopper_mismatches(name) == 0


def test_hopper_asm_test_catches_planted_bugs():
    """The check above fails on a wrong byte order, a wrong nibble shift, a dropped tie rule, a magic M not
    floored at the smallest normal binade and a NaN block's bytes left unmasked."""
    mod = find("mxfp4_cast_transpose_te", **dict.fromkeys(shipped_kernels()["mxfp4_cast_transpose_te"].options, True))
    row, col = mod._HOPPER_ROW_ASM.value, mod._HOPPER_COL_ASM.value
    e = [127, 255]
    assert _hopper_mismatches("mxfp4_cast_transpose_te", e_values=e) == 0
    for r, c in ((row.replace("0x5410", "0x4510"), None), (row.replace("shr.u32 v0, u0, 12", "shr.u32 v0, u0, 11"), None),
                 (None, col.replace("0x7632", "0x3276")), (None, col.replace("mad.lo.u32 y2, w2, 16", "mad.lo.u32 y2, w2, 8")),
                 (row.replace("or.b32 a, a, 0x00010001", "or.b32 a, a, 0"), col.replace("or.b32 a, a, 0x00010001", "or.b32 a, a, 0")),
                 (row.replace("fma.rn.relu.bf16x2", "fma.rn.bf16x2"), None),
                 (row.replace("and.b32 $0, u0, $13", "mov.b32 $0, u0"), None), (None, col.replace("and.b32 u1, u1, $18", "mov.b32 u1, u1"))):
        assert (r or c) not in (row, col)
        assert _hopper_mismatches("mxfp4_cast_transpose_te", r, c, e_values=e) > 0
