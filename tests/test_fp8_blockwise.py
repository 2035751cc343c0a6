"""Blockwise FP8 1x128 with fp32 scales (DeepSeek style, docs/formats-and-layouts.md §3), and exact rounding
when the scaled value carries 24 significant bits (fp32 inputs, non-power-of-two scales)."""
import pytest
import torch

import quantlay
from quantlay import inputs, reference
from quantlay.formats import E4M3, F32Scale
from quantlay.generated import find
from quantlay.spec import SPECS_DIR, load

from conftest import DEVICE

SPEC = SPECS_DIR / "fp8_blockwise.ql"
KERNELS = {k.name: k for k in load(SPEC)}


def test_scale_rule_worked_example():
    """docs/formats-and-layouts.md §3: amax 3.0, E4M3: F/amax = 149.33; pow2 -> 128 -> scale_inv 2^-7."""
    amax = torch.tensor([3.0, 0.0, float("inf"), float("nan"), 1e-30])
    inv, mult = F32Scale(pow2=True).scales_reference(amax, E4M3())
    assert inv[0].item() == 2.0 ** -7 and mult[0].item() == 128.0
    assert mult[1:4].tolist() == [1.0, 1.0, 1.0]                 # bad amax -> multiplier 1 (NVIDIA TE)
    inv, mult = F32Scale(amax_floor=1e-4).scales_reference(amax, E4M3())
    assert abs(inv[0].item() - 0.0066964) < 1e-7
    assert mult[1].item() == torch.tensor(448.0) / torch.tensor(1e-4)   # floored amax
    assert mult[4].item() == mult[1].item()


@pytest.mark.parametrize("name,opts", [("fp8_1x128_rocm_te", {}), ("fp8_1x128_nvte", {"gemm_ready": False}),
                                       ("fp8_1x128_nvte", {"gemm_ready": True}), ("fp8_1x128_deepgemm", {}),
                                       ("fp8_1x128_deepgemm_ue8m0", {}), ("fp8_1x128_deepgemm_sm100", {}),
                                       ("fp8_1x128_colwise_transposed", {})])
def test_kernels_bit_exact(name, opts):
    variant = KERNELS[name].variant(**opts)
    mod = find(name, **opts)
    for (M, N), cname in (((130, 250), "normal"), ((256, 128), "specials"), ((6, 256), "ties")):
        x = inputs.CLASSES[cname](M, N, seed=M)
        shapes = mod._shapes(M, N)
        out = {k: torch.full(s[2], 7, dtype=mod.DTYPES[k], device=DEVICE) for k, s in shapes.items()}
        res = mod.quantize(x.to(DEVICE), out=out)
        ref = reference.quantize(variant, x)
        for k in ref:
            got = res[k].tensor.cpu()
            assert reference.same_values(got, ref[k]), (name, opts, M, N, cname, k)
        for d in (d.name for d in KERNELS[name].directions):
            assert reference.same_values(mod.dequantize(res, d), reference.dequantize(variant, d, ref, M, N))


def test_deepgemm_rule():
    """docs/formats-and-layouts.md §3: amax 3.0 -> DeepGEMM sf = 3/448, UE8M0 sf = 2^-7; data multiplied by 1/sf."""
    amax = torch.tensor([3.0, 0.0])
    sf, mult = F32Scale(amax_floor=1e-4, rule="amax_over_f").scales_reference(amax, E4M3())
    assert sf[0].item() == (torch.tensor(3.0) / torch.tensor(448.0)).item()
    assert mult[0].item() == (1 / torch.tensor(3.0 / 448, dtype=torch.float32)).item()
    assert sf[1].item() == (torch.tensor(1e-4) / torch.tensor(448.0)).item()  # floor, not "bad amax"
    sf, mult = F32Scale(amax_floor=1e-4, pow2=True, rule="amax_over_f").scales_reference(amax, E4M3())
    assert sf[0].item() == 2.0 ** -7 and mult[0].item() == 128.0


def test_gemm_ready_layouts():
    """docs/formats-and-layouts.md §3 worked example: M=6, K=256 -> rowwise scale_inv (2, 8), row 5 k-block 1 at 13."""
    mod = find("fp8_1x128_nvte", gemm_ready=True)
    x = inputs.normal(6, 256, seed=1)
    res = mod.quantize(x.to(DEVICE))
    s = res["rowwise_scale"].tensor.cpu()
    assert tuple(s.shape) == (2, 8)
    ref = reference.quantize(KERNELS["fp8_1x128_nvte"].variant(gemm_ready=False), x)["rowwise_scale"]
    assert s.flatten()[13] == ref[5, 1]
    assert s.flatten()[[6, 7, 14, 15]].tolist() == [0.0] * 4       # padding
    assert tuple(res["colwise_data"].tensor.shape) == (256, 6)      # transposed


def near_subnormal_ties(M, N, dtype):
    """Values one fp32 ulp either side of the smallest E2M1 / E4M3 midpoints after scaling."""
    g = torch.Generator().manual_seed(0)
    base = torch.tensor([0.25, 0.75, 1.25, 1.75]).repeat(M * N // 4 + 1)[: M * N]
    nudge = torch.randint(-1, 2, (M * N,), generator=g).float()
    x = torch.where(nudge == 0, base, torch.nextafter(base, base + nudge))
    x = x.reshape(M, N)
    x[:, ::32] = 4.0  # every block's amax is 4: power-of-two scale 1 under EVEN
    return x.to(dtype)


def test_fp32_input_rounds_exactly_near_ties(tmp_path, monkeypatch):
    """fp32 inputs keep 24 significant bits: the E2M1 rounding must not go through an inexact add."""
    monkeypatch.setenv("QUANTLAY_CACHE", str(tmp_path))
    text = """
kernel mx_fp32_in(x: fp32[M, N]) {
    rowwise blocks 1x32 {
        element e2m1(ties: even)
        scale e8m0(mode: even)
        store data as packed(low: even)
        store scale as row_major
    }
}
"""
    mod = quantlay.build(text)
    x = near_subnormal_ties(64, 64, torch.float32)
    res = mod.quantize(x.to(DEVICE))
    ref = reference.quantize(load(text)[0].variant(), x)
    assert torch.equal(res["rowwise_data"].tensor.cpu(), ref["rowwise_data"])


@pytest.mark.parametrize("name", ["fp8_128x128_rocm_te", "fp8_128x128_nvte"])
def test_128x128_kernels_bit_exact(name):
    variant = KERNELS[name].variant()
    mod = find(name)
    for (M, N), cname in (((130, 250), "normal"), ((256, 384), "specials"), ((128, 128), "ties")):
        x = inputs.CLASSES[cname](M, N, seed=N)
        res = mod.quantize(x.to(DEVICE))
        ref = reference.quantize(variant, x)
        for k in ref:
            got = res[k].tensor.cpu()
            assert reference.same_values(got, ref[k]), (name, M, N, cname, k)
        for d in KERNELS[name].directions:
            assert reference.same_values(mod.dequantize(res, d.name),
                                         reference.dequantize(variant, d.name, ref, M, N))


def test_128x128_scale_shapes_and_shared_scales():
    """docs/formats-and-layouts.md §3 (TE GEMM_READY 2D): rowwise (cdiv(M,128), rup(cdiv(K,128),4)), columnwise
    (cdiv(K,128), rup(cdiv(M,128),4)); one amax per tile, so the two hold the same values transposed."""
    res = find("fp8_128x128_nvte").quantize(inputs.normal(256, 384, seed=2).to(DEVICE))
    rs, cs = res["rowwise_scale"].tensor.cpu(), res["colwise_scale"].tensor.cpu()
    assert tuple(rs.shape) == (2, 4) and tuple(cs.shape) == (3, 4)
    assert torch.equal(rs[:, :3], cs[:, :2].t())
    assert tuple(res["colwise_data"].tensor.shape) == (384, 256)


def test_batched_weights():
    mod = find("fp8_128x128_rocm_te")
    w = inputs.normal(3 * 128, 256, seed=5).reshape(3, 128, 256)
    res = mod.quantize(w.to(DEVICE))
    for b in range(3):
        one = mod.quantize(w[b].contiguous().to(DEVICE))
        assert torch.equal(res["rowwise_scale"].tensor[b], one["rowwise_scale"].tensor[0])
        assert torch.equal(res["rowwise_data"].tensor[b * 128:(b + 1) * 128], one["rowwise_data"].tensor)
    with pytest.raises(quantlay.LaunchError, match=r"rows of each matrix \(x.shape\[-2\] = 100\) must be a multiple of 128"):
        mod.quantize(inputs.normal(200, 256).reshape(2, 100, 256).to(DEVICE))


def test_ue8m0_bytes_packed_mn_major_worked_example():
    """docs/formats-and-layouts.md §3 (DeepGEMM SM100): MN=5, Kb=8 -> 2 int32 per row, int (m, q) at q*8 + m; byte 2 of
    int (3, 1) is the scale of k-block 6 of row 3, and it is the fp32 UE8M0 scale's bits >> 23."""
    x = inputs.normal(5, 8 * 128, seed=9)
    x[3, 6 * 128:7 * 128] *= 1000.0  # make that block's scale stand out
    packed = find("fp8_1x128_deepgemm_sm100").quantize(x.to(DEVICE))["rowwise_scale"].tensor.cpu()
    as_int = packed.contiguous().view(-1).view(torch.int32)
    assert as_int.numel() == 2 * 8
    fp32 = find("fp8_1x128_deepgemm_ue8m0").quantize(x.to(DEVICE))["rowwise_scale"].tensor.cpu()
    # mn_major_pad4 stores [Kb, rup(M, 4)]: scale (3, 6) at [6, 3]
    want = fp32[6, 3].view(torch.int32) >> 23
    assert (as_int[1 * 8 + 3] >> 16) & 255 == want
    # every byte: the same exponents as the fp32 scales; padding rows (m = 5..7) hold 0
    bytes_ = packed.contiguous().view(-1).view(2, 8, 4)  # [q, m, j]
    logical = bytes_.permute(1, 0, 2).reshape(8, 8)[:5].int()
    assert torch.equal(logical, (fp32[:, :5].t().contiguous().view(torch.int32) >> 23))
    assert not bytes_[:, 5:].any()
    y = find("fp8_1x128_deepgemm_sm100").dequantize(
        find("fp8_1x128_deepgemm_sm100").quantize(x.to(DEVICE)), "rowwise")
    assert torch.equal(y.cpu(), find("fp8_1x128_deepgemm_ue8m0").dequantize(
        find("fp8_1x128_deepgemm_ue8m0").quantize(x.to(DEVICE)), "rowwise").cpu())


def test_ue8m0_store_needs_power_of_two_scales():
    text = """
profile p { element e4m3 scale f32(amax_floor: 1e-4, rule: amax_over_f, store: ue8m0) }
kernel k(x: bf16[M, N]) { rowwise blocks 1x128 profile p { store data as row_major  store scale as row_major } }
"""
    with pytest.raises(quantlay.SpecError, match=r"(?s)2:80: store: ue8m0 keeps only the exponent byte.*\^.*add pow2: true"):
        load(text)
