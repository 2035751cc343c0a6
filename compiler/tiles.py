"""Tile-level layouts: store a register tile straight into its physical order.

A layout `view(F0, f1.., G0, g1..) permute(P)` whose outer factors `F0 = rows/k`, `G0 = cols/l` come
first in their groups splits a tile of TR x TC storage units (TR a multiple of k, TC of l, the tile
aligned to them) the same way it splits the whole matrix: reshape the tile to
`[TR/k, f1.., TC/l, g1..]`, permute with P, and every element's physical offset is a sum of one
arange per dimension times that dimension's physical stride. The trailing constant dimensions are
contiguous in memory, so the stores are wide and coalesced instead of one scattered byte each.
This is derived from the same declaration as `Layout.flat`; tests check the two agree.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

from .expr import Const, Expr
from .layout import Layout


@dataclass(frozen=True)
class TilePlan:
    reshape: Tuple[str, ...]          # tile dims before the permute (template expressions)
    perm: Tuple[int, ...]
    dims: Tuple[Tuple[str, str, str], ...]  # per permuted dim: (origin, size, stride), template expressions
    inner: Tuple[int, int]            # the tile must be a multiple of these (rows, cols)


def plan(layout: Optional[Layout], tile: Tuple[str, str], pids: Tuple[str, str], rows: Expr, cols: Expr,
         size: Callable[[Expr], Expr]) -> Optional[TilePlan]:
    """A TilePlan for `layout` (None: plain row-major), or None if the layout cannot be tiled."""
    tr, tc = tile
    if layout is None:
        return TilePlan((tr, tc), (0, 1), ((f"{pids[0]} * ({tr})", tr, size(cols).render()),
                                             (f"{pids[1]} * ({tc})", tc, "1")), (1, 1))
    if layout.pad != (1, 1):
        return None
    groups = (layout.view[:layout.split], layout.view[layout.split:])
    if any(g[0].param is None or any(f.param is not None for f in g[1:]) for g in groups):
        return None
    reshape: List[str] = []
    origins: List[str] = []
    sizes: List[Expr] = []
    inner = []
    for axis, (g, t, pid, ext) in enumerate(zip(groups, tile, pids, (rows, cols))):
        k = g[0].k
        inner.append(k)
        reshape.append(f"({t}) // {k}")
        origins.append(f"{pid} * (({t}) // {k})")
        sizes.append(size(ext // k) if k > 1 else ext)
        for f in g[1:]:
            reshape.append(str(f.k))
            origins.append("0")
            sizes.append(Const(f.k))
    dims = []
    for j, p in enumerate(layout.perm):
        stride: Expr = Const(1)
        for q in layout.perm[j + 1:]:
            stride = stride * sizes[q]
        dims.append((origins[p], reshape[p], size(stride).render() if not isinstance(stride, Const)
                     else stride.render()))
    return TilePlan(tuple(reshape), tuple(layout.perm), tuple(dims), (inner[0], inner[1]))
