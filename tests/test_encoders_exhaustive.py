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
