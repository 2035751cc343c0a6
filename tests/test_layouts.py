"""The layout algebra: bijections, inverses, closed forms, and docs/formats-and-layouts.md's worked examples."""
import math

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from quantlay.errors import QuantlayError, SpecError
from quantlay.expr import Var
from quantlay.ir import MAX_VIEW_FACTORS, build_layout
from quantlay.dsl.parser import parse
from quantlay.layout import Chain, Layout
from quantlay.spec import load


def library_layout(name):
    from quantlay import spec as specmod
    lib = specmod.library()
    return build_layout(next(d for d in lib.layouts if d.name == name))


def offsets(lay, rows, cols):
    r = torch.arange(rows)[:, None].expand(rows, cols)
    c = torch.arange(cols)[None, :].expand(rows, cols)
    return lay.flat(Var("r"), Var("c"), rows, cols).evaluate({"r": r, "c": c})


def check_laws(lay: Layout, rows: int, cols: int):
    rp, cp = (int(e.evaluate({})) for e in lay.padded(rows, cols))
    total = rp * cp
    # 1. the closed form is a bijection onto the padded buffer
    off = offsets(lay, rp, cp).flatten()
    assert torch.equal(off.sort().values, torch.arange(total))
    # 2. the closed form equals the view/permute definition
    t = torch.arange(rp * cp).reshape(rp, cp)
    phys = lay.apply(t, fill=-1).flatten()
    assert torch.equal(phys[off], t.flatten())
    # 3. the inverse round-trips, on the unpadded logical matrix too
    x = torch.randint(0, 255, (rows, cols))
    fill = lay.fill if lay.fill is not None else 0
    assert torch.equal(lay.invert(lay.apply(x, fill=fill), rows, cols), x)
    # 4. the physical shape holds exactly the padded matrix
    assert math.prod(int(s.evaluate({})) for s in lay.physical_shape(rows, cols)) == total


@pytest.mark.parametrize("name,rows,cols", [
    ("row_major", 5, 7), ("transpose", 6, 3), ("preshuffle16x16", 32, 64), ("preshuffle16x16", 48, 96),
    ("e8m0_shuffle", 256, 16), ("e8m0_shuffle", 100, 5), ("cublas_blocked_128x4", 256, 8),
    ("cublas_blocked_128x4", 130, 3),
])
def test_library_layouts_obey_the_laws(name, rows, cols):
    check_laws(library_layout(name), rows, cols)


def sources(lay, rows, cols, ps):
    off = offsets(lay, rows, cols)
    inv = {int(o): (i // cols, i % cols) for i, o in enumerate(off.flatten().tolist())}
    return [inv[p] for p in ps]


def test_e8m0_shuffle_worked_example():
    """docs/formats-and-layouts.md §6: m=256, n=16."""
    ps = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 63, 64, 65, 255, 256, 511, 512]
    want = [(0, 0), (16, 0), (0, 4), (16, 4), (1, 0), (17, 0), (1, 4), (17, 4), (2, 0), (18, 0), (31, 4),
            (0, 1), (16, 1), (31, 7), (0, 8), (31, 15), (32, 0)]
    assert sources(library_layout("e8m0_shuffle"), 256, 16, ps) == want


def test_e8m0_shuffle_closed_form():
    lay = library_layout("e8m0_shuffle")
    rows, cols = 512, 24
    off = offsets(lay, rows, cols)
    r = torch.arange(rows)[:, None]
    c = torch.arange(cols)[None, :]
    i0, i1, i2, i3, i4, i5 = r // 32, (r % 32) // 16, r % 16, c // 8, (c % 8) // 4, c % 4
    closed = i0 * (cols // 8) * 256 + i3 * 256 + i5 * 64 + i2 * 4 + i4 * 2 + i1
    assert torch.equal(off, closed)


def test_preshuffle_worked_example_and_closed_form():
    """docs/formats-and-layouts.md §5: byte matrix [32, 64]."""
    lay = library_layout("preshuffle16x16")
    ps = [0, 1, 2, 15, 16, 17, 31, 32, 255, 256, 257, 511, 512, 1023, 1024, 2047]
    want = [(0, 0), (0, 1), (0, 2), (0, 15), (1, 0), (1, 1), (1, 15), (2, 0), (15, 15), (0, 16), (0, 17),
            (15, 31), (0, 32), (15, 63), (16, 0), (31, 63)]
    assert sources(lay, 32, 64, ps) == want
    rows, kx = 48, 128
    n = torch.arange(rows)[:, None]
    c = torch.arange(kx)[None, :]
    closed = (n // 16) * (16 * kx) + (c // 32) * 512 + ((c % 32) // 16) * 256 + (n % 16) * 16 + (c % 16)
    assert torch.equal(offsets(lay, rows, kx), closed)


def test_cublas_blocked_worked_example_and_closed_form():
    """docs/formats-and-layouts.md §6: scale matrix 256x8."""
    lay = library_layout("cublas_blocked_128x4")
    ps = [0, 1, 2, 3, 4, 5, 6, 7, 8, 15, 16, 17, 511, 512, 1024]
    want = [(0, 0), (0, 1), (0, 2), (0, 3), (32, 0), (32, 1), (32, 2), (32, 3), (64, 0), (96, 3), (1, 0),
            (1, 1), (127, 3), (0, 4), (128, 0)]
    assert sources(lay, 256, 8, ps) == want
    R, C = 384, 12
    r = torch.arange(R)[:, None]
    c = torch.arange(C)[None, :]
    closed = ((r // 128) * (C // 4) + c // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4
    assert torch.equal(offsets(lay, R, C), closed)


def test_chain_transpose_then_shuffle_matches_rocm_te():
    """Columnwise scales: logical [M/32, N] -> transpose -> e8m0_shuffle, as ROCm TE stores them."""
    chain = Chain((library_layout("transpose"), library_layout("e8m0_shuffle")))
    e = torch.randint(0, 255, (3, 100), dtype=torch.uint8)
    phys = chain.apply(e)
    assert tuple(phys.shape) == (256, 8)
    direct = library_layout("e8m0_shuffle").apply(e.t().contiguous())
    assert torch.equal(phys, direct)
    assert torch.equal(chain.invert(phys, 3, 100), e)
    # chain.flat agrees with the torch transform
    r = torch.arange(3)[:, None].expand(3, 100)
    c = torch.arange(100)[None, :].expand(3, 100)
    off = chain.flat(Var("r"), Var("c"), 3, 100).evaluate({"r": r, "c": c})
    assert torch.equal(phys.flatten()[off], e)


# ---- property tests over random declarations -----------------------------------------------------
def _factorizations(k):
    """Ways to write k (a power of two) as an ordered list of factors >= 2 (k == 1: no factors)."""
    if k == 1:
        return [[]]
    out = []
    for f in (2, 4, 8):
        if k % f == 0:
            out += [[f] + rest for rest in _factorizations(k // f)]
    return out


@st.composite
def layout_decls(draw):
    rk = draw(st.sampled_from([1, 2, 4, 8, 16]))
    ck = draw(st.sampled_from([1, 2, 4, 8]))
    rsplit = draw(st.sampled_from(_factorizations(rk)))
    csplit = draw(st.sampled_from(_factorizations(ck)))
    assume(len(rsplit) + len(csplit) + 2 <= MAX_VIEW_FACTORS)  # the compiler's bound on view factors
    dims = [f"rows/{rk}" if rk > 1 else "rows"] + [str(f) for f in rsplit]
    dims += [f"cols/{ck}" if ck > 1 else "cols"] + [str(f) for f in csplit]
    perm = draw(st.permutations(list(range(len(dims)))))
    pad_r = draw(st.sampled_from([1, rk, 2 * rk]))
    pad_c = draw(st.sampled_from([1, ck, 4 * ck]))
    pad = ""
    if (pad_r, pad_c) != (1, 1):
        pad = f" pad(rows: {pad_r}, cols: {pad_c}) fill 7"
    text = f"layout rand(rows, cols){pad} = view({', '.join(dims)}) permute({', '.join(map(str, perm))})"
    rows = draw(st.integers(1, 3)) * rk * (pad_r if pad_r > 1 else 1) - (draw(st.integers(0, rk - 1)) if pad_r > 1 else 0)
    cols = draw(st.integers(1, 3)) * ck * (pad_c if pad_c > 1 else 1) - (draw(st.integers(0, ck - 1)) if pad_c > 1 else 0)
    return text, max(rows, 1), max(cols, 1)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout_decls())
def test_random_valid_layouts_are_bijections(case):
    text, rows, cols = case
    lay = build_layout(parse(text).layouts[0])
    for axis, k in lay.requirements():
        if (rows, cols)[axis] % k:
            return  # not a legal shape for this layout: the launcher refuses it
    check_laws(lay, rows, cols)


_TOKENS = ["rows", "cols", "rows/4", "cols/2", "2", "4", "0", "x", "rows/3", "cols/8", "3", "16"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=6),
       st.lists(st.integers(0, 6), max_size=7), st.booleans())
def test_random_layout_declarations_never_crash(dims, perm, with_pad):
    pad = " pad(rows: 4) fill 1" if with_pad else ""
    ptxt = f" permute({', '.join(map(str, perm))})" if perm else ""
    text = f"layout rand(rows, cols){pad} = view({', '.join(dims)}){ptxt}"
    try:
        lay = build_layout(parse(text).layouts[0])
    except SpecError as exc:
        assert exc.line == 1 and str(exc)
        return
    check_laws(lay, 8 * 3, 8 * 2)


def test_spec_layouts_are_checked_at_load():
    with pytest.raises(QuantlayError):
        load("layout odd(rows, cols) = view(rows/3, 2, cols)\n")
