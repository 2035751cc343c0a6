"""MXFP8 (E4M3 / E5M2 with E8M0 scales): formats against torch's own casts, kernels against the
reference, and the metamorphic law colwise(X) == rowwise(X^T)."""
import pytest
import torch

import quantlay
from quantlay import inputs, reference
from quantlay.formats import E4M3, E5M2, E8M0
from quantlay.generated import find
from quantlay.spec import load, SPECS_DIR

from conftest import DEVICE, MXFP4_SPEC

MXFP8_SPEC = SPECS_DIR / "mxfp8.ql"


@pytest.mark.parametrize("fmt,dtype", [(E4M3(), torch.float8_e4m3fn), (E5M2(), torch.float8_e5m2)])
def test_fp8_reference_equals_torch_casts(fmt, dtype):
    """torch's float8 casts (round to nearest even) are an independent oracle inside the finite range."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(100000, generator=g) * torch.exp2(torch.randint(-24, 17, (100000,), generator=g).float())
    grid = torch.tensor(fmt.grid())
    mids = (grid[1:] + grid[:-1]) / 2
    x = torch.cat([x.clamp(-fmt.max_value, fmt.max_value), grid, -grid, mids, -mids]).float()
    assert torch.equal(fmt.encode_reference(x), x.to(dtype).view(torch.uint8))


def test_fp8_saturation_and_specials():
    x = torch.tensor([1e6, -1e6, float("inf"), float("nan"), 464.0, 480.0, -0.0])
    assert E4M3().encode_reference(x).tolist() == [0x7E, 0xFE, 0x7E, 0x7F, 0x7E, 0x7E, 0x80]
    assert E5M2().encode_reference(x[:4]).tolist() == [0x7B, 0xFB, 0x7B, 0x7F]


def test_e8m0_worked_examples_e4m3():
    """docs/formats-and-layouts.md §2, E4M3 columns."""
    amax = torch.tensor([1.0, 1.5, 1.74, 1.75, 2.0, 3.0, 6.0, 7.0, 448, 500])
    want = {"floor": [119, 119, 119, 119, 120, 120, 121, 121, 127, 127],
            "ceil": [119, 120, 120, 120, 120, 121, 122, 122, 128, 128],
            "even": [119, 119, 119, 119, 120, 120, 121, 121, 127, 128],
            "rceil": [119, 119, 119, 119, 120, 120, 121, 121, 127, 128]}
    for mode, w in want.items():
        assert E8M0(mode=mode).select_reference(amax, E4M3()).tolist() == w, mode


@pytest.mark.parametrize("kernel,swizzle", [(k, s) for k in ("mxfp8_nvte", "mxfp8_floor_transposed", "mxfp8_nvte_e5m2")
                                            for s in (False, True)] + [("mxfp8_rocm_te", None)])
def test_mxfp8_kernels_bit_exact(kernel, swizzle):
    opts = {} if swizzle is None else {"with_gemm_swizzled_scales": swizzle}
    variant = next(k for k in load(MXFP8_SPEC) if k.name == kernel).variant(**opts)
    mod = find(kernel, **opts)
    for (M, N), cname, poison in (((2, 2), "normal", 0xAB), ((98, 166), "specials", 0x5A), ((128, 192), "ties", 0)):
        x = inputs.CLASSES[cname](M, N, seed=M)
        shapes = mod._shapes(M, N)
        out = {k: torch.full(s[2], poison, dtype=torch.uint8, device=DEVICE) for k, s in shapes.items()}
        res = mod.quantize(x.to(DEVICE), out=out)
        ref = reference.quantize(variant, x)
        for k in ref:
            assert torch.equal(res[k].tensor.cpu(), ref[k]), (kernel, swizzle, M, N, cname, k)
        for d in ("rowwise", "colwise"):
            assert reference.same_values(mod.dequantize(res, d), reference.dequantize(variant, d, ref, M, N))


def test_rocm_te_e0_multiplier_differs_from_nvidia_only_on_tiny_blocks():
    """ROCm TE multiplies by 1.0 where E8M0 is 0, NVIDIA by 2^127: the data differ only on blocks whose
    scale byte is 0 (amax below about 2^-119), and only where such a block has non-zero values."""
    x = inputs.subnormals(64, 128, seed=3)
    a = find("mxfp8_rocm_te").quantize(x.to(DEVICE))
    b = find("mxfp8_nvte").quantize(x.to(DEVICE))
    diff = a["rowwise_data"].tensor != b["rowwise_data"].tensor
    zero_scale = (a["rowwise_scale"].tensor == 0).repeat_interleave(32, dim=1)
    assert diff.any() and not (diff & ~zero_scale).any()


def test_mxfp8_nvte_swizzled_scale_shapes():
    res = find("mxfp8_nvte", with_gemm_swizzled_scales=True).quantize(inputs.normal(96, 160).to(DEVICE))
    assert tuple(res["rowwise_scale"].tensor.shape) == (128, 8)    # [rup(M,128), rup(N/32,4)]
    assert tuple(res["colwise_scale"].tensor.shape) == (256, 4)    # transposed: [rup(N,128), rup(M/32,4)]
    assert tuple(res["colwise_data"].tensor.shape) == (96, 160)    # not transposed


@pytest.mark.parametrize("spec,kernel,opts", [
    (MXFP8_SPEC, "mxfp8_floor_transposed", {}),
    (MXFP4_SPEC, "mxfp4_cast_transpose_hw", {}),
    (MXFP4_SPEC, "mxfp4_cast_transpose_te", {"shuffle_rowwise_data": True, "shuffle_columnwise_data": True}),
])
def test_colwise_of_x_is_rowwise_of_x_transposed(spec, kernel, opts):
    """Metamorphic: the columnwise outputs of X equal, bit for bit, the rowwise outputs of X^T."""
    mod = find(kernel, **opts)
    x = inputs.ties(128, 192, seed=9)
    a = mod.quantize(x.to(DEVICE))
    b = mod.quantize(x.t().contiguous().to(DEVICE))
    assert torch.equal(a["colwise_data"].tensor, b["rowwise_data"].tensor)
    assert torch.equal(a["colwise_scale"].tensor, b["rowwise_scale"].tensor)


def test_e5m2_kernel_through_build(tmp_path, monkeypatch):
    monkeypatch.setenv("QUANTLAY_CACHE", str(tmp_path))
    text = """
kernel mx_e5m2(x: fp32[M, N]) {
    rowwise blocks 1x32 {
        element e5m2(ties: even)
        scale e8m0(mode: even, zero_amax: 127)
        store data as row_major
        store scale as row_major
    }
}
"""
    mod = quantlay.build(text)
    variant = load(text)[0].variant()
    x = inputs.specials(64, 96, dtype=torch.float32, seed=2)
    res = mod.quantize(x.to(DEVICE))
    ref = reference.quantize(variant, x)
    assert all(torch.equal(res[k].tensor.cpu(), ref[k]) for k in ref)


def test_packed_on_fp8_is_a_spec_error():
    with pytest.raises(quantlay.SpecError, match="packed\\(...\\) applies to 4- and 6-bit elements only"):
        load("kernel k(x: bf16[M, N]) { rowwise blocks 1x32 profile mxfp8_nvte {"
             " store data as packed(low: even) store scale as row_major } }")


def test_blockwise_gemm_ready_colwise_is_rowwise_of_transpose():
    """Metamorphic for blockwise FP8: transposed columnwise data of X == rowwise data of X^T."""
    mod = find("fp8_1x128_nvte", gemm_ready=True)
    x = inputs.normal(256, 384, seed=4)
    a = mod.quantize(x.to(DEVICE))
    b = mod.quantize(x.t().contiguous().to(DEVICE))
    assert torch.equal(a["colwise_data"].tensor, b["rowwise_data"].tensor)


@pytest.mark.parametrize("spec", sorted(p.name for p in SPECS_DIR.glob("*.ql")))
def test_verify_passes_for_every_shipped_spec(spec, capsys):
    from quantlay.cli import main
    assert main(["verify", str(SPECS_DIR / spec), "--shapes", "128x256"]) == 0
    assert "verify passed" in capsys.readouterr().out


NAN_IGNORED = """
kernel nan_ignored(x: bf16[M, N]) {
    rowwise blocks 1x32 {
        element e4m3(ties: even, zero_sign: sign_bit, nan: 0x7F)
        scale e8m0(mode: rceil, clamp: 0..254, zero_amax: 0, inf_amax: 254, nan_amax: 255, nan_in_amax: IGNORE)
        store data  as row_major
        store scale as row_major
    }
    colwise blocks 32x1 {
        element e2m1(ties: even)
        scale e8m0(mode: even, nan_in_amax: IGNORE)
        store data  as transpose | packed(low: even)
        store scale as transpose
    }
}
"""


@pytest.mark.parametrize("rule", ["ignore", "propagate"])
def test_nan_in_amax_rule_on_bf16_pairs(tmp_path, monkeypatch, rule):
    """bf16 kernels take the block amax on |x| pairs (two 16-bit lanes per word). With `nan_in_amax:
    ignore` a NaN must not reach its block's amax, whichever lane of the pair it sits in (even or odd
    column, 8-bit rows and a transposed 4-bit direction); with `propagate` it must."""
    monkeypatch.setenv("QUANTLAY_CACHE", str(tmp_path))
    text = NAN_IGNORED.replace("IGNORE", rule)
    mod = quantlay.build(text)
    variant = load(text)[0].variant()
    M, N = 96, 128
    x = inputs.normal(M, N, seed=5)
    x[3, 7] = x[40, 64] = x[65, 2] = float("nan")   # odd and even lanes, rows of both colwise blocks
    x[3, 6] = 1000.0  # the NaN's neighbour in its pair: an amax the ignore rule must see
    res = mod.quantize(x.to(DEVICE))
    ref = reference.quantize(variant, x)
    for k in ref:
        assert torch.equal(res[k].tensor.cpu(), ref[k]), (rule, k)
    nan_scale = res["rowwise_scale"].tensor.cpu()[3, 0].item()
    assert (nan_scale == 255) == (rule == "propagate"), nan_scale
