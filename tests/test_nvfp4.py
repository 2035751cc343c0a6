"""NVFP4 (E2M1 codes, one E4M3 scale per 16 elements, relative to a per-tensor fp32 scale in `nvfp4`,
alone in `nvfp4_block_only`): bit-exact against torchao's nvfp4_quantize (pure PyTorch, on the CPU) on
every input class, rowwise and columnwise, with cuBLAS's blocked scale layout, the tensor scale computed
or given; against the reference on ragged shapes; the dequantize consumer; the scale format's rules."""
import warnings

import pytest
import torch

from quantlay import inputs, reference
from quantlay import spec as specmod
from quantlay.errors import LaunchError, SpecError
from quantlay.generated import find

from conftest import DEVICE

warnings.filterwarnings("ignore", module="torchao")
nvfp4_tensor = pytest.importorskip("torchao.prototype.mx_formats.nvfp4_tensor")
to_blocked = pytest.importorskip("torchao.prototype.mx_formats.utils").to_blocked

KERNELS = {k.name: k for k in specmod.load(specmod.SPECS_DIR / "nvfp4.ql")}
CLASSES = ("normal", "ties", "zeros", "subnormals", "infs", "nans", "specials")


def torchao(x, ts=None):
    """torchao's (scale bytes, packed codes) of x's rows, on the CPU; ts: the per-tensor scale."""
    s, d = nvfp4_tensor.nvfp4_quantize(x.cpu(), per_tensor_scale=None if ts is None else ts.cpu())
    return s.view(torch.uint8), d


def torchao_tensor_scale(x):
    return nvfp4_tensor.per_tensor_amax_to_scale(x.abs().amax().cpu())


def expect_torchao(res, x, ts=None, swizzled=False):
    for key, xx in (("rowwise", x), ("colwise", x.t().contiguous())):  # columnwise = torchao's cast of x^T
        s, d = torchao(xx, ts)
        assert torch.equal(res[f"{key}_data"].tensor.cpu(), d), key
        got = res[f"{key}_scale"].tensor.cpu()
        assert torch.equal(got.flatten(), to_blocked(s).flatten()) if swizzled else torch.equal(got, s), key


@pytest.mark.parametrize("cls", CLASSES)
def test_block_scales_alone_bit_exact_with_torchao(cls):
    x = getattr(inputs, cls)(128, 192, seed=5).to(DEVICE)
    expect_torchao(find("nvfp4_block_only").quantize(x), x)
    expect_torchao(find("nvfp4_block_only", with_gemm_swizzled_scales=True).quantize(x), x, swizzled=True)


@pytest.mark.parametrize("cls", [c for c in CLASSES if c not in ("infs", "nans", "specials")])
def test_two_levels_bit_exact_with_torchao(cls):
    """The tensor scale computed on the device, and given (delayed scaling: another tensor's)."""
    x = getattr(inputs, cls)(128, 192, seed=6).to(DEVICE)
    res = find("nvfp4").quantize(x)
    ts = torchao_tensor_scale(x)
    assert torch.equal(res["tensor_scale"].tensor.cpu(), ts.reshape(1))
    expect_torchao(res, x, ts)
    given = torch.tensor([0.0123], dtype=torch.float32)
    expect_torchao(find("nvfp4", with_gemm_swizzled_scales=True).quantize(x, given.to(DEVICE)), x, given,
                   swizzled=True)


def test_two_levels_on_special_inputs_match_the_reference():
    """amax(x) is Inf or NaN there: the tensor scale is too, and torchao's divisions by it give bytes its
    own encoder defines; the kernel follows the reference's rules (codes of NaN blocks 0x4, scales 0x7F)."""
    for cls in ("infs", "nans", "specials"):
        x = getattr(inputs, cls)(64, 96, seed=7).to(DEVICE)
        res = find("nvfp4").quantize(x)
        ref = reference.quantize(KERNELS["nvfp4"].variant(), x)
        for key in ref:
            assert reference.same_values(res[key].tensor, ref[key]), (cls, key)


@pytest.mark.parametrize("ts", [1e-38, 2.0 ** -122, 2.0 ** -121, -0.5, 0.0, 3e38, float("inf"), float("nan")])
def test_any_given_tensor_scale_matches_the_reference(ts):
    """Given tensor scales at and past the compiled encoder's condition (ts > 2^-122: every multiplier
    finite and positive; otherwise the fp32 encoder runs), on normal values, zeros and subnormals."""
    for cls in ("normal", "zeros", "subnormals"):
        x = getattr(inputs, cls)(64, 96, seed=8).to(DEVICE)
        given = torch.tensor([ts], dtype=torch.float32)
        res = find("nvfp4").quantize(x, given.to(DEVICE))
        ref = reference.quantize(KERNELS["nvfp4"].variant(), x, tensor_scale=given)
        for key in ref:
            assert reference.same_values(res[key].tensor, ref[key]), (cls, key)


def test_computed_tensor_scale_reads_strided_rows_and_every_tile():
    """The first pass (its own kernel: a max per program, the last program divides) on rows with a
    stride and a ragged last tile, with the largest |x| placed in the last tile, and a NaN anywhere."""
    big = (inputs.normal(70, 320, seed=9) / 4096).to(DEVICE)
    big[69, 290] = -1000.0  # the last tile of both axes (the pass reads 32 x 256 tiles), outside x below
    big[69, 280] = -900.0
    x = big[:, :288]
    res = find("nvfp4").quantize(x)
    assert res["tensor_scale"].tensor.cpu().item() == torch.tensor(900.0 / 2688.0, dtype=torch.float32).item()
    ref = reference.quantize(KERNELS["nvfp4"].variant(), x.contiguous())
    for key in ref:
        assert reference.same_values(res[key].tensor, ref[key]), key
    x = x.clone()
    x[3, 5] = float("nan")
    assert torch.isnan(find("nvfp4").quantize(x)["tensor_scale"].tensor).all()


@pytest.mark.parametrize("M,N", [(70, 98), (34, 18), (2, 2)])
@pytest.mark.parametrize("swizzled", [False, True])
@pytest.mark.parametrize("kernel", ["nvfp4", "nvfp4_block_only"])
def test_ragged_shapes_match_the_reference(M, N, swizzled, kernel):
    x = inputs.normal(M, N, seed=2).to(DEVICE)
    res = find(kernel, with_gemm_swizzled_scales=swizzled).quantize(x)
    ref = reference.quantize(KERNELS[kernel].variant(with_gemm_swizzled_scales=swizzled), x)
    for key in ref:
        assert reference.same_values(res[key].tensor, ref[key]), key


def test_known_bytes():
    """A block of 0..15 / 4 with one -6: amax 6, scale 1.0 (E4M3 0x38); a zero block: scale 2^-6 (0x08);
    an Inf: scale 448 (0x7E), the Inf saturates to code 7."""
    x = torch.zeros(2, 32)
    x[0, :16] = torch.arange(16) / 4
    x[0, 15] = -6.0
    x[1, 16] = float("inf")
    res = find("nvfp4_block_only").quantize(x.to(torch.bfloat16).to(DEVICE))
    assert res["rowwise_scale"].tensor.cpu().tolist() == [[0x38, 0x08], [0x08, 0x7E]]
    codes = res["rowwise_data"].tensor.cpu()
    assert codes[0, 7].item() == 0xF6  # elements 14 (3.5 -> 4.0, code 6) and 15 (-6: code 0xF)
    assert codes[1, 8].item() == 0x07


@pytest.mark.parametrize("kernel", ["nvfp4", "nvfp4_block_only"])
def test_dequantize_matches_the_reference(kernel):
    x = inputs.normal(64, 96, seed=4).to(DEVICE)
    mod = find(kernel)
    res = mod.quantize(x)
    for direction in ("rowwise", "colwise"):
        want = reference.dequantize(KERNELS[kernel].variant(), direction, {k: v.tensor for k, v in res.items()}, 64, 96)
        assert reference.same_values(mod.dequantize(res, direction), want)


def test_tensor_scale_argument_is_checked():
    x = inputs.normal(32, 32, seed=1).to(DEVICE)
    with pytest.raises(LaunchError, match="tensor_scale must be a 1-element float32 tensor"):
        find("nvfp4").quantize(x, torch.ones(2, device=DEVICE))


def test_e4m3_scale_rules_are_checked():
    spec = """
kernel k(x: bf16[M, N]) {
    rowwise blocks 1x16 profile p {
        store data as packed(low: even)
        store scale as row_major
    }
}
profile p {
    element e2m1(ties: even, zero_sign: sign_bit, nan: 0x4)
    scale f32(rule: f_over_amax, store: e4m3)
}
"""
    with pytest.raises(SpecError, match=r"store: e4m3 rounds the scale amax / F to E4M3") as exc:
        specmod.load(spec)
    assert "^" in str(exc.value)


def test_tensor_scale_needs_e4m3_scales():
    spec = """
kernel k(x: bf16[M, N]) {
    rowwise blocks 1x32 profile p {
        store data as row_major
        store scale as row_major
    }
}
profile p {
    element e4m3(ties: even, zero_sign: sign_bit, nan: 0x7F)
    scale f32(rule: amax_over_f, tensor_scale: true)
}
"""
    with pytest.raises(SpecError, match="tensor_scale: true scales E4M3 block scales"):
        specmod.load(spec)


@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_two_levels_from_fp16_and_fp32_input(dtype):
    """A user's NVFP4 spec on fp16 or fp32 input: the first pass reads that dtype's bit patterns; the
    tensor scale and the codes equal the reference's (the fp32 encoders: bf16x2 is for bf16 input)."""
    import quantlay
    spec = f"""kernel nv_{dtype}(x: {dtype}[M, N]) {{
        rowwise blocks 1x16 profile nvfp4 {{
            store data  as packed(low: even)
            store scale as row_major
        }}
    }}"""
    mod = quantlay.build(spec)
    variant = specmod.load(spec)[0].variant()
    torch_dtype = {"fp16": torch.float16, "fp32": torch.float32}[dtype]
    for cls in ("normal", "subnormals", "zeros"):
        x = getattr(inputs, cls)(48, 80, seed=3).to(torch_dtype).to(DEVICE)
        res, ref = mod.quantize(x), reference.quantize(variant, x)
        assert torch.equal(res["tensor_scale"].tensor.cpu(), ref["tensor_scale"].cpu()), cls
        for key in ref:
            assert reference.same_values(res[key].tensor, ref[key]), (cls, key)
