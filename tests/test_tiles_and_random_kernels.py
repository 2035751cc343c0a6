"""The two forms the kernels use agree with the layout algebra: tile-level store plans equal
`Layout.flat`, and random layout declarations compiled into a kernel store exactly what the
reference's view/permute produces."""
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import quantlay
from quantlay import inputs, reference, tiles
from quantlay.expr import Var
from quantlay.ir import build_layout
from quantlay.layout import Layout
from quantlay.spec import library, load

from conftest import DEVICE


def lib(name) -> Layout:
    return build_layout(next(d for d in library().layouts if d.name == name))


def plan_offsets(lay, TR, TC, rows, cols, pid_r, pid_c):
    """Evaluate a TilePlan's per-dimension (origin, size, stride) with Python in place of Triton."""
    p = tiles.plan(lay, (str(TR), str(TC)), ("pr", "pc"), Var("R"), Var("C"), lambda e: e)
    env = {"pr": pid_r, "pc": pid_c, "R": rows, "C": cols}
    tile = torch.arange(TR * TC).reshape(TR, TC)
    dims = [int(eval(s, {}, dict(env))) for s in p.reshape]  # noqa: S307 - compiler-made integer text
    v = tile.reshape(dims).permute(p.perm) if lay is not None else tile
    off = torch.zeros(v.shape, dtype=torch.long)
    for j, (org, size, stride) in enumerate(p.dims):
        shape = [1] * len(p.dims)
        shape[j] = -1
        idx = int(eval(org, {}, dict(env))) + torch.arange(int(eval(size, {}, dict(env))))
        off = off + idx.reshape(shape) * int(eval(stride, {}, dict(env)))
    return v.flatten(), off.flatten()


def test_tile_plans_equal_the_closed_form():
    for name, (TR, TC), (rows, cols) in (("preshuffle16x16", (32, 64), (64, 128)),
                                          ("transpose", (8, 4), (16, 12)), (None, (4, 8), (8, 16))):
        lay = lib(name) if name else None
        ref = lay or lib("row_major")
        for pr in range(rows // TR):
            for pc in range(cols // TC):
                elems, off = plan_offsets(lay, TR, TC, rows, cols, pr, pc)
                r = pr * TR + elems // TC
                c = pc * TC + elems % TC
                want = ref.flat(Var("r"), Var("c"), rows, cols).evaluate({"r": r, "c": c})
                assert torch.equal(off, want), (name, pr, pc)


@st.composite
def scale_layouts(draw):
    rsplit = draw(st.sampled_from([[], [2], [4], [2, 2]]))
    csplit = draw(st.sampled_from([[], [2], [2, 2]]))
    ck = 2 ** len(csplit)
    rk = 1
    for f in rsplit:
        rk *= f
    dims = [f"rows/{rk}" if rk > 1 else "rows"] + [str(f) for f in rsplit]
    dims += [f"cols/{ck}" if ck > 1 else "cols"] + [str(f) for f in csplit]
    perm = draw(st.permutations(list(range(len(dims)))))
    fill = draw(st.integers(0, 255))
    return (f"layout rnd(rows, cols) pad(rows: {4 * rk}, cols: {2 * ck}) fill {fill} "
            f"= view({', '.join(dims)}) permute({', '.join(map(str, perm))})")


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scale_layouts(), st.sampled_from([(64, 96), (96, 160)]))
def test_random_layouts_through_a_generated_kernel(decl, shape):
    text = decl + """
kernel rnd_layout(x: bf16[M, N]) {
    rowwise blocks 1x32 profile mxfp4_hw {
        store data as packed(low: even)
        store scale as rnd
    }
}
"""
    mod = quantlay.build(text)
    variant = load(text)[0].variant()
    x = inputs.normal(*shape, seed=len(decl))
    res = mod.quantize(x.to(DEVICE))
    ref = reference.quantize(variant, x)
    for k in ref:
        assert torch.equal(res[k].tensor.cpu(), ref[k]), (decl, k)
