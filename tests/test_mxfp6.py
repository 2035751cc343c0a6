"""MXFP6 (dsl/specs/mxfp6.ql): E2M3 and E3M2 codes packed four in three bytes, one E8M0 per 32 elements.
Bit-exact against the reference on every input class and ragged shapes; against torchao's MX cast
(to_mx, FLOOR, its FP6 encoders) on blocks without Inf or NaN; the packing order is the declared one."""
import math

import pytest
import torch

from quantlay import inputs, reference
from quantlay import spec as specmod
from quantlay.errors import SpecError
from quantlay.generated import find

from conftest import DEVICE

KERNELS = {k.name: k for k in specmod.load(specmod.SPECS_DIR / "mxfp6.ql")}
CLASSES = ["normal", "ties", "zeros", "subnormals", "infs", "nans", "specials"]


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("M,N", [(64, 96), (68, 100), (32, 36)])  # ragged: blocks of 32 cut short
def test_bit_exact_with_the_reference(name, cls, M, N):
    x = getattr(inputs, cls)(M, N, seed=3).to(DEVICE)
    res = find(name).quantize(x)
    ref = reference.quantize(KERNELS[name].variant(), x)
    for key in ref:
        assert reference.same_values(res[key].tensor, ref[key]), (key, cls)
    assert tuple(res["rowwise_data"].tensor.shape) == (M, N // 4 * 3)
    assert tuple(res["colwise_data"].tensor.shape) == (N, M // 4 * 3)


def test_sizes_not_a_multiple_of_four_are_refused_with_the_fix():
    from quantlay.errors import LaunchError
    with pytest.raises(LaunchError, match=r"colwise_data: four 6-bit codes share three bytes along M, so M must be "
                                          r"a multiple of 4, got M = 70; pad M to a multiple of 4"):
        find("mxfp6_e2m3").quantize(inputs.normal(70, 64).to(DEVICE))


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_dequantize_reads_the_packed_codes(name):
    x = inputs.normal(64, 128, seed=5).to(DEVICE)
    mod, v = find(name), KERNELS[name].variant()
    res = mod.quantize(x)
    for direction in ("rowwise", "colwise"):
        want = reference.dequantize(v, direction, {k: t.tensor.cpu() for k, t in res.items()}, 64, 128)
        assert torch.equal(mod.dequantize(res, direction).cpu(), want.cpu())
        assert float((mod.dequantize(res, direction).cpu() - x.float().cpu()).abs().max()) < 0.5 * float(x.abs().max())


def test_four_codes_in_three_little_endian_bytes():
    """A row of 32 values 1.0 but a 0.5 at column 1. FLOOR: scale 2^(0 - 2) (E2M3's largest power of two is
    4), so the codes are those of 4.0 (0x18) and 2.0 (0x10), and bytes 0..2 are the little-endian word
    0x18 | 0x10 << 6 | 0x18 << 12 | 0x18 << 18."""
    x = torch.ones(4, 32, dtype=torch.bfloat16)
    x[0, 1] = 0.5
    res = find("mxfp6_e2m3").quantize(x.to(DEVICE))
    b = res["rowwise_data"].tensor.cpu()[0, :3].tolist()
    w = 0x18 | (0x10 << 6) | (0x18 << 12) | (0x18 << 18)
    assert b == [w & 0xFF, (w >> 8) & 0xFF, w >> 16] == [0x18, 0x84, 0x61]
    assert int(res["rowwise_scale"].tensor.cpu()[0, 0]) == 125


def test_a_six_bit_element_needs_its_packing_declared():
    spec = """
kernel k(x: bf16[M, N]) {
    rowwise blocks 1x32 profile mxfp6_e2m3_floor {
        store data as row_major
        store scale as row_major
    }
}
"""
    with pytest.raises(SpecError, match=r"four 6-bit codes in three bytes") as exc:
        specmod.load(spec)
    assert exc.value.line == 4
    with pytest.raises(SpecError, match=r"low: even is not one of first, last"):
        specmod.load(spec.replace("store data as row_major", "store data as packed(low: even)"))


def test_the_last_code_first_order_is_the_mirror():
    spec = """
kernel mxfp6_last(x: bf16[M, N]) {
    rowwise blocks 1x32 profile mxfp6_e3m2_floor {
        store data as packed(low: last)
        store scale as row_major
    }
}
"""
    import quantlay
    mod = quantlay.build(spec)
    x = inputs.normal(32, 64, seed=6)
    got = mod.quantize(x.to(DEVICE))["rowwise_data"].tensor.cpu()
    first = find("mxfp6_e3m2").quantize(x.to(DEVICE))["rowwise_data"].tensor.cpu()
    codes = reference.unpack(first, 1, "first", 6)
    assert torch.equal(got, reference.pack(codes, 1, "last", 6))
    assert not torch.equal(got, first)


torchao_mx = pytest.importorskip("torchao.prototype.mx_formats.mx_tensor")


@pytest.mark.parametrize("name,dtype", [("mxfp6_e2m3", "fp6_e2m3"), ("mxfp6_e3m2", "fp6_e3m2")])
@pytest.mark.parametrize("cls", ["normal", "ties", "zeros", "subnormals"])
def test_equal_to_torchao_on_finite_blocks(name, dtype, cls):
    """torchao 0.18 stores FP6 one code per byte (unpacked); packed here, its codes and scales must match.
    Except blocks with scale byte 0 (amax below 2^-125): torchao divides those by 2^-126, not 2^-127, as
    its MXFP8 cast does (tests/test_peers.py); all-zero blocks have byte 0 too (their codes are 0 in both)."""
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    x = getattr(inputs, cls)(64, 128, seed=7)
    res = find(name).quantize(x.to(DEVICE))
    for direction, xin in (("rowwise", x), ("colwise", x.t().contiguous())):
        s, d = torchao_mx.to_mx(xin, dtype, 32, ScaleCalculationMode.FLOOR)
        ours_s = res[f"{direction}_scale"].tensor.cpu()
        ours_d = reference.unpack(res[f"{direction}_data"].tensor.cpu(), 1, "first", 6)
        assert torch.equal(ours_s, s.view(torch.uint8).reshape(ours_s.shape))
        usual = (ours_s != 0).repeat_interleave(32, dim=1)
        assert torch.equal(ours_d[usual], d.view(torch.uint8)[usual])
        assert bool(usual.any()) and (cls in ("subnormals", "zeros") or bool(usual.all()))


def _stored_at(mod, x, misalign, **cfg):
    """The outputs with the data buffers `misalign` bytes past a 16-byte boundary (which picks the store
    path: 0 vectors where rows are whole 48-byte chunks, 4 int32 words, 1 bytes)."""
    out = {}
    for key, (_, _, shape) in mod._shapes(*x.shape).items():
        if key.endswith("_data"):
            numel = math.prod(shape)
            out[key] = torch.zeros(numel + 16, dtype=torch.uint8, device=DEVICE)[misalign:][:numel].view(shape)
            assert out[key].data_ptr() % 16 == misalign
        else:
            out[key] = torch.empty(shape, dtype=mod.DTYPES[key], device=DEVICE)
    return {k: v.tensor.cpu() for k, v in mod.quantize(x, out=out, **cfg).items()}


@pytest.mark.parametrize("M,N,block", [(64, 96, 32), (192, 192, 128), (128, 256, 64)])
def test_vector_word_and_byte_stores_write_the_same_bytes(M, N, block):
    """Rows of whole 48-byte chunks (N and M multiples of 64) on 16-byte aligned buffers leave as 16-byte
    vectors from tiles at least 64 codes wide; of whole words (multiples of 16) on 4-byte aligned buffers
    as int32 words; otherwise byte by byte: the same bytes every way, ragged tiles included."""
    x = inputs.ties(M, N, seed=8).to(DEVICE)
    mod = find("mxfp6_e3m2")
    cfg = dict(block_m=block, block_n=block, num_warps=4)
    vectors = _stored_at(mod, x, 0, **cfg)
    for misalign in (4, 1):
        other = _stored_at(mod, x, misalign, **cfg)
        for key in vectors:
            assert torch.equal(other[key], vectors[key]), (misalign, key)
