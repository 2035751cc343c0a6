"""`quantlay show`: the IR of a spec as text, with a picture of where logical elements land."""
from __future__ import annotations

import math
from typing import List

import torch

from . import spec as specmod
from .expr import Var
from .ir import KernelIR, PackRef
from .layout import Layout


def example_shape(lay: Layout):
    """A small legal [rows, cols] for a picture: two of the smallest tile in each dimension."""
    need = [1, 1]
    for axis, k in lay.requirements():
        need[axis] = math.lcm(need[axis], k)
    return (max(2 * need[0], min(2 * lay.pad[0], 64), 4), max(2 * need[1], min(2 * lay.pad[1], 16), 4))


def picture(lay: Layout, runs: int = 18) -> List[str]:
    """Where the first physical bytes come from, as runs: `16..31 <- (1, 0..15)`."""
    rows, cols = example_shape(lay)
    r = torch.arange(rows)[:, None].expand(rows, cols)
    c = torch.arange(cols)[None, :].expand(rows, cols)
    off = lay.flat(Var("r"), Var("c"), rows, cols).evaluate({"r": r, "c": c})
    src = {int(o): (int(i), int(j)) for o, i, j in zip(off.flatten(), r.flatten(), c.flatten())}
    phys = [str(int(s.evaluate({}))) for s in lay.physical_shape(rows, cols)]
    out, p = [], 0
    total = math.prod(int(x) for x in phys)
    while len(out) < runs and p < total:
        start = p
        if p not in src:
            while p + 1 < total and p + 1 not in src:
                p += 1
            out.append(f"{start}..{p} <- padding" if p > start else f"{start} <- padding")
        else:
            (r0, c0) = src[p]
            dr, dc = (0, 1) if src.get(p + 1) == (r0, c0 + 1) else (1, 0)
            while src.get(p + 1) == (src[p][0] + dr, src[p][1] + dc):
                p += 1
            r1, c1 = src[p]
            rr = f"{r0}" if r0 == r1 else f"{r0}..{r1}"
            cc = f"{c0}" if c0 == c1 else f"{c0}..{c1}"
            out.append(f"{start}..{p} <- ({rr}, {cc})" if p > start else f"{start} <- ({rr}, {cc})")
        p += 1
    lines = [f"    example: logical [{rows}, {cols}] -> physical [{', '.join(phys)}]; "
             f"physical offsets <- logical (row, col):"]
    for i in range(0, len(out), 4):
        lines.append("      " + "   ".join(out[i:i + 4]))
    return lines


def show_kernel(k: KernelIR) -> List[str]:
    out = [f"kernel {k.name}   (from {k.spec_path or '<text>'}, spec sha256 {k.spec_hash[:16]})",
           f"  input x: {k.dtype} [M, N] (leading dims flattened into M)",
           f"  options: {', '.join(k.options) or 'none'}"]
    layouts = {}
    for d in k.directions:
        out.append(f"  {d.name} blocks {d.block[0]}x{d.block[1]}")
        out.append(f"    element {d.element!r}")
        out.append(f"    scale   {d.scale!r}")
        for store in (d.data, d.scale_store):
            items = []
            for it in store.items:
                if isinstance(it, PackRef):
                    items.append(f"packed(low: {it.low})")
                else:
                    layouts[it.layout.name] = it.layout
                    cond = f" if {'not ' if it.condition[0] else ''}{it.condition[1]}" if it.condition else ""
                    items.append(it.layout.name + (f"(fill: {it.fill})" if it.fill is not None else "") + cond)
            out.append(f"    store {store.target:5s} as {' | '.join(items)}")
    out.append("  outputs per option setting (logical -> physical shape; padding and fill):")
    for v in k.variants():
        flags = ", ".join(f"{n}={int(b)}" for n, b in v.options) or "no options"
        out.append(f"    [{flags}]  {v.name}")
        for o in v.outputs:
            logical = ", ".join(e.render() for e in o.logical)
            phys = ", ".join(e.render() for e in o.chain.physical_shape(*o.logical))
            pad = ", ".join(e.render() for e in o.chain.logical_padding(*o.logical))
            fill = o.chain.fill()
            extra = f"; padded to [{pad}] with {fill}" if fill is not None else ""
            out.append(f"      {o.key:14s} [{logical}] as {o.layout_name()} -> [{phys}]{extra}")
    out.append("  layouts:")
    for name, lay in layouts.items():
        out.append(f"    {lay.describe()}")
        off = lay.flat(Var("r"), Var("c"), Var("rows"), Var("cols")).render()
        out.append(f"    off(r, c) = {off}")
        out += picture(lay)
    return out


def show_gemm(g) -> List[str]:
    from .gemm import lower
    ctx = lower(g)
    kind = {None: "dense", "rows": "grouped by rows", "contraction": "grouped over the contraction"}[g.groups]
    out = [f"gemm {g.name}   ({kind}; module {g.module_name})",
           f"  output {g.out_dtype}{' (accumulated in place)' if g.accumulate else ''}; K blocks of {g.k_block}"]
    for op, c in ((g.a, ctx["a"]), (g.b, ctx["b"])):
        axis = "its columns" if c["contract_cols"] else "its rows"
        out.append(f"  {op.name} = {op.describe()}: contracts over {axis}; {c['element']} codes, blocks {c['block']}")
        out.append(f"    data  {c['data_layout']} -> [{', '.join(c['data_physical'])}]; off(r, c) = {c['data_offset']}")
        out.append(f"    scale {c['scale_layout']} ({c['scale_format']}) -> [{', '.join(c['scale_physical'])}]; "
                   f"off(r, c) = {c['scale_offset']}")
    if ctx["sizes"]:
        out.append("  where " + ", ".join(f"{s['name']} = {s['expr']}" for s in ctx["sizes"]))
    return out


def show(spec) -> str:
    lines: List[str] = []
    for k in specmod.load(spec):
        lines += show_kernel(k) + [""]
    for g in specmod.load_gemms(spec):
        lines += show_gemm(g) + [""]
    return "\n".join(lines)
