"""MXFP4 with one scale per 32x32 tile (dsl/specs/mxfp4_2d.ql): square blocks with packed 4-bit codes,
bit-exact against the reference on every input class and ragged shapes; both directions hold the same
scales (the blocks are the same), stored once rowwise and once transposed."""
import pytest
import torch

from quantlay import inputs, reference
from quantlay import spec as specmod
from quantlay.generated import find

from conftest import DEVICE

KERNEL = {k.name: k for k in specmod.load(specmod.SPECS_DIR / "mxfp4_2d.ql")}["mxfp4_32x32_hw"]


@pytest.mark.parametrize("cls", ["normal", "ties", "zeros", "subnormals", "infs", "nans", "specials"])
@pytest.mark.parametrize("M,N", [(64, 96), (70, 100), (32, 32)])
def test_bit_exact_with_the_reference(cls, M, N):
    x = getattr(inputs, cls)(M, N, seed=3).to(DEVICE)
    res = find("mxfp4_32x32_hw").quantize(x)
    ref = reference.quantize(KERNEL.variant(), x)
    for key in ref:
        assert reference.same_values(res[key].tensor, ref[key]), key


@pytest.mark.gpu  # compiled: the bf16x2 PTX encoder on each square block's element pairs
@pytest.mark.parametrize("M,N", [(4096, 6144), (1000, 1250)])
def test_bit_exact_at_realistic_sizes(M, N):
    for cls, make in inputs.CLASSES.items():
        x = make(M, N, seed=5).to(DEVICE)
        res = find("mxfp4_32x32_hw").quantize(x)
        ref = reference.quantize(KERNEL.variant(), x)
        assert [k for k in ref if not reference.same_values(res[k].tensor, ref[k])] == [], cls


def test_one_scale_per_tile_shared_by_both_directions():
    x = inputs.normal(96, 128, seed=4).to(DEVICE)
    res = find("mxfp4_32x32_hw").quantize(x)
    rs, cs = res["rowwise_scale"].tensor.cpu(), res["colwise_scale"].tensor.cpu()
    assert rs.shape == (3, 4) and torch.equal(rs, cs.t())
    # the tile's scale follows its amax alone: double one tile and only its byte moves (by one)
    y = x.clone()
    y[32:64, 64:96] *= 2
    ys = find("mxfp4_32x32_hw").quantize(y)["rowwise_scale"].tensor.cpu()
    diff = (ys.int() - rs.int())
    assert diff[1, 2] == 1 and int(diff.abs().sum()) == 1


# Bugs planted in the compiled path (the bf16x2 encoder's plumbing); the GPU test must catch each. Blocks of
# 32 rows get scales 2^0 .. 2^7 apart, so a block coded under another block's multiplier shows.
PLANTED = {
    "the element pairs' nibbles swapped": [("_bf16x2_rowwise(lo, hi, kw[:, None, :, None])",
                                            "_bf16x2_rowwise(hi, lo, kw[:, None, :, None])")],
    "a tile's column blocks under its first block's multiplier": [
        ("kw = tl.reshape(tl.gather(_bf16x2_word_colwise(mult), blk, 0)",
         "kw = tl.reshape(tl.gather(_bf16x2_word_colwise(mult), blk * 0, 0)")],
}


def test_planted_bugs_find_their_target_text():
    from test_gemm import edited
    for edits in PLANTED.values():
        edited("mxfp4_32x32_hw", edits)


@pytest.mark.gpu
@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_planted_bugs_are_caught(bug, tmp_path):
    from test_gemm import mutated
    m = mutated("mxfp4_32x32_hw", PLANTED[bug], tmp_path)
    x = inputs.normal(1024, 1024, seed=4) * 2.0 ** (torch.arange(1024)[:, None] // 32 % 8)
    x = x.to(torch.bfloat16).to(DEVICE)
    res, ref = m.quantize(x), reference.quantize(KERNEL.variant(), x)
    assert not all(reference.same_values(res[k].tensor, ref[k]) for k in ref), f"the suite misses: {bug}"

