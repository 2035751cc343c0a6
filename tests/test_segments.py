"""Segment-padded columnwise FP8 for grouped (MoE) GEMMs (docs/formats-and-layouts.md §4), with the fused rowwise
output, against the reference; group offsets stay on the device."""
import pytest
import torch

import quantlay
from quantlay import inputs, reference, runtime
from quantlay.generated import find
from quantlay.spec import SPECS_DIR, load

from conftest import DEVICE

KERNEL = next(k for k in load(SPECS_DIR / "fp8_blockwise.ql") if k.name == "fp8_segment_m")


def test_worked_example_80_176():
    """group sizes [80, 176] -> padded offsets [0, 128, 384]; padding rows and the unused scale row are 0."""
    mod = find("fp8_segment_m")
    x = inputs.normal(256, 128, seed=1)
    res = mod.quantize(x.to(DEVICE), torch.tensor([80, 176], device=DEVICE))
    assert res.extras["padded_offsets"].tolist() == [0, 128, 384]
    data = res["colwise_data"].tensor.cpu()
    assert tuple(data.shape) == (256 + 2 * 128, 128)
    assert not data[80:128].any() and not data[304:].any()
    assert data[:80].any() and data[128:304].any()
    scale = res["colwise_scale"].tensor.cpu()
    assert (scale[:3] != 0).all() and not scale[3:].any()


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("lens", [[0, 1, 127, 128, 129], [80, 176], [300]])
def test_bit_exact(fused, lens):
    variant = KERNEL.variant(fused_rowwise=fused)
    mod = find("fp8_segment_m", fused_rowwise=fused)
    M = sum(lens)
    for cname in ("normal", "specials"):
        x = inputs.CLASSES[cname](M, 256, seed=M)
        gl = torch.tensor(lens, device=DEVICE)
        res = mod.quantize(x.to(DEVICE), gl)
        ref = reference.quantize(variant, x, torch.tensor(lens))
        for k in ref:
            got = res[k].tensor.cpu()
            assert reference.same_values(got, ref[k]), (fused, lens, cname, k)
        y = mod.dequantize(res, "colwise")
        assert tuple(y.shape) == ((-(-M // 128) + len(lens)) * 128, 256)
        if fused:
            assert reference.same_values(mod.dequantize(res, "rowwise"),
                                         reference.dequantize(variant, "rowwise", ref, M, 256))


@pytest.mark.parametrize("G, longest, every", [(32, 200, 1), (37, 200, 1), (300, 20, 5)])
def test_many_groups(G, longest, every):
    """Many groups: 32, the most each program of the cast scans itself, then the map kernel's (its scan spans
    64 and 512 lanes, the latter with several blocks of rows per program): random lengths with empty groups
    and whole blocks; of 300 groups only every fifth has rows (60 blocks of rows for the cast in the
    interpreter, not 235)."""
    g = torch.Generator().manual_seed(7)
    lens = torch.randint(0, longest, (G,), generator=g)
    lens[::5] = 0
    lens[3::7] = 128
    if every > 1:  # only groups 3, 3 + every, ... keep their rows
        lens[torch.arange(G) % every != 3] = 0
    M = int(lens.sum())
    variant = KERNEL.variant(fused_rowwise=True)
    x = inputs.specials(M, 128, seed=9)
    res = find("fp8_segment_m", fused_rowwise=True).quantize(x.to(DEVICE), lens.to(DEVICE))
    ref = reference.quantize(variant, x, lens)
    for k in ref:
        assert reference.same_values(res[k].tensor.cpu(), ref[k]), k
    _, offsets = reference.segment_rows(x[:, :1].float(), lens, 128)
    assert res.extras["padded_offsets"].cpu().tolist() == torch.as_tensor(offsets).tolist()


def _row_map(monkeypatch, mod, where):
    """Have `mod` find each block's group in the cast's programs (up to 32 groups, the default) or by its map
    kernel (as with more groups)."""
    if where == "map kernel":
        monkeypatch.setattr(mod, "INLINE_MAP_GROUPS", 0)


@pytest.mark.parametrize("where", ["cast", "map kernel"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_offsets_come_back_from_the_kernel(dtype, where, monkeypatch):
    """The cast (or the map kernel) scans the lengths (int32 or int64, empty groups included) and returns both
    offset vectors; the buffers start as garbage, so each entry must have been written."""
    lens = [5, 0, 300, 128, 0, 1]
    mod = find("fp8_segment_m", fused_rowwise=True)
    _row_map(monkeypatch, mod, where)
    x = inputs.normal(sum(lens), 128, seed=2).to(DEVICE)
    res = mod.quantize(x, torch.tensor(lens, dtype=dtype, device=DEVICE))
    assert res.extras["group_offsets"].tolist() == [0, 5, 5, 305, 433, 433, 434]
    assert res.extras["padded_offsets"].tolist() == [0, 128, 128, 512, 640, 640, 768]
    assert res.extras["padded_offsets"].dtype == torch.int64
    ref = reference.quantize(KERNEL.variant(fused_rowwise=True), x.cpu(), torch.tensor(lens))
    for k in ref:
        assert reference.same_values(res[k].tensor.cpu(), ref[k]), (dtype, k)


@pytest.mark.parametrize("fused", [False, True])
def test_64_bit_row_arithmetic(monkeypatch, fused):
    """The row map in 64-bit arithmetic (taken when a buffer reaches 2^31 elements) gives the same bytes."""
    from quantlay import runtime
    lens = [0, 1, 127, 129, 70]
    mod = find("fp8_segment_m", fused_rowwise=fused)
    x = inputs.specials(sum(lens), 256, seed=5).to(DEVICE)
    small = mod.quantize(x, torch.tensor(lens, device=DEVICE))
    monkeypatch.setattr(runtime, "needs_int64", lambda *sizes: True)
    big = mod.quantize(x, torch.tensor(lens, device=DEVICE))
    for k in mod.LAYOUTS:
        assert torch.equal(small[k].tensor.view(torch.uint8), big[k].tensor.view(torch.uint8)), k


def test_fused_rowwise_is_the_plain_rowwise_cast():
    """The fused rowwise operand equals the 1x128 rowwise cast of the same input (same profile)."""
    x = inputs.normal(300, 256, seed=3)
    fused = find("fp8_segment_m", fused_rowwise=True).quantize(x.to(DEVICE), torch.tensor([100, 200], device=DEVICE))
    plain = find("fp8_1x128_rocm_te").quantize(x.to(DEVICE))
    assert torch.equal(fused["rowwise_data"].tensor, plain["rowwise_data"].tensor)
    assert torch.equal(fused["rowwise_scale"].tensor, plain["rowwise_scale"].tensor)


def test_group_length_errors():
    mod = find("fp8_segment_m")
    x = inputs.normal(64, 128).to(DEVICE)
    with pytest.raises(quantlay.LaunchError, match="1-D int32 or int64 tensor"):
        mod.quantize(x, [64])
    with pytest.raises(quantlay.LaunchError, match="no groups given"):
        mod.quantize(x, torch.tensor([], dtype=torch.int64, device=DEVICE))


@pytest.mark.parametrize("where", ["cast", "map kernel"])
@pytest.mark.parametrize("lens", [[10, 20], [2 ** 40, 0], [100, -36], [-64, 128], [30, 30, 5], [2 ** 32 + 10, 54]])
def test_lengths_that_do_not_sum_to_M(lens, where, monkeypatch):
    """Host lengths are refused before launch; device lengths (the check forced onto the kernel here)
    set the error flag and are taken as one group of M rows: every cell written, none past a buffer
    (2^32 + 10 is 10 in 32 bits: the check is 64-bit)."""
    mod = find("fp8_segment_m", fused_rowwise=True)
    _row_map(monkeypatch, mod, where)
    x = inputs.normal(64, 128)
    t = torch.tensor(lens, dtype=torch.int64)
    if DEVICE == "cpu":
        with pytest.raises(quantlay.LaunchError, match=r"must be >= 0 and sum to the rows of x \(M = 64\)"):
            mod.quantize(x, t)
        monkeypatch.setattr(runtime, "check_group_lengths", lambda *a: None)  # leave it to the map kernel
    out = {k: torch.full(s[2], 0x5A, dtype=mod.DTYPES[k], device=DEVICE)
           for k, s in mod._shapes(64, 128, len(lens)).items()}
    res = mod.quantize(x.to(DEVICE), t.to(DEVICE), out=out)
    assert int(res.extras["invalid_groups"][0]) == 1
    one = torch.tensor([64] + [0] * (len(lens) - 1))
    ref = reference.quantize(KERNEL.variant(fused_rowwise=True), x, one)
    for k in ref:
        assert torch.equal(res[k].tensor.cpu(), ref[k]), k
    assert res.extras["padded_offsets"].tolist() == [0] + [128] * len(lens)


def test_valid_lengths_leave_the_flag_clear():
    res = find("fp8_segment_m").quantize(inputs.normal(64, 128).to(DEVICE), torch.tensor([0, 64], device=DEVICE))
    assert int(res.extras["invalid_groups"][0]) == 0


def test_segmented_needs_a_groups_parameter():
    with pytest.raises(quantlay.SpecError, match="segmented but the kernel has no groups parameter"):
        load("kernel k(x: bf16[M, N]) { colwise blocks 128x1 segmented profile fp8_block_rocm_te {"
             " store data as row_major store scale as row_major } }")


@pytest.mark.gpu
@pytest.mark.parametrize("fused", [False, True])
def test_dependent_launch_replayed_with_new_lengths(fused):
    """On sm_90 the cast is launched as the row-map kernel's programmatic dependent and waits for the map's
    stores inside the kernel. Replayed from a CUDA graph with other lengths copied in and every output
    poisoned before each replay, the bytes are the reference's for those lengths: a cast that read the
    map before it landed would read the previous replay's map."""
    variant = KERNEL.variant(fused_rowwise=fused)
    mod = find("fp8_segment_m", fused_rowwise=fused)
    M, N, G = 8192, 512, 64
    x = inputs.specials(M, N, seed=21).to(DEVICE)
    runs = []
    for seed in (1, 2, 3):
        cuts = torch.sort(torch.randint(0, M + 1, (G - 1,), generator=torch.Generator().manual_seed(seed))).values
        runs.append(torch.diff(torch.cat([torch.tensor([0]), cuts, torch.tensor([M])])))
    lens = runs[0].to(DEVICE)
    out = {k: torch.empty(s[2], dtype=mod.DTYPES[k], device=DEVICE) for k, s in mod._shapes(M, N, G).items()}
    mod.quantize(x, lens, out=out)  # compile outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        res = mod.quantize(x, lens, out=out)
    for run in runs[1:] + runs[:1]:
        lens.copy_(run)
        for t in out.values():
            t.view(torch.uint8).fill_(0x5A)
        g.replay()
        torch.cuda.synchronize()
        ref = reference.quantize(variant, x.cpu(), run)
        for k in ref:
            assert reference.same_values(res[k].tensor.cpu(), ref[k]), (fused, k)
