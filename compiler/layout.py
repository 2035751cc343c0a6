"""The layout algebra: one declaration, every derived form.

A layout is declared once as `pad` + `view` + `permute` (+ the physical 2-D shape it presents). From
that declaration alone this module derives:

* the closed-form index arithmetic logical (row, col) -> physical offset, as an `Expr` that is rendered
  into generated kernels and evaluated by the tests (`Layout.flat`, `Chain.flat`);
* the PyTorch transform (pad with the fill, view, permute) used by the reference (`apply`);
* its inverse (`invert`), the padded shape, the physical shape and the divisibility it needs.

Layouts know nothing about formats or kernels, so quantize kernels, dequantize kernels and (later) GEMMs
all read the same declarations.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable, List, Optional, Sequence, Tuple

from .expr import Const, Expr, ExprLike, as_expr, rup

ROWS, COLS = 0, 1
_SizeFn = Callable[[Expr], Expr]


def _identity(e: Expr) -> Expr:
    return e


@dataclass(frozen=True)
class Factor:
    """One view dimension: `param/k` (param = ROWS or COLS) or a constant."""
    param: Optional[int]
    k: int  # divisor for a param factor, the size for a constant

    def size(self, rows: Expr, cols: Expr, size: _SizeFn = _identity) -> Expr:
        if self.param is None:
            return Const(self.k)
        return size(as_expr((rows, cols)[self.param]) // self.k)

    def monomial(self) -> Tuple[Tuple[int, ...], Fraction]:
        if self.param is None:
            return (), Fraction(self.k)
        return (self.param,), Fraction(1, self.k)

    def text(self, names: Sequence[str]) -> str:
        if self.param is None:
            return str(self.k)
        return names[self.param] + (f"/{self.k}" if self.k != 1 else "")


def _product(factors: Sequence[Factor]):
    params: List[int] = []
    const = Fraction(1)
    for f in factors:
        p, c = f.monomial()
        params.extend(p)
        const *= c
    return tuple(sorted(params)), const


@dataclass(frozen=True)
class Layout:
    """A validated layout declaration. Construct through `Layout.declare` (it checks the rules)."""
    name: str
    params: Tuple[str, str]
    pad: Tuple[int, int]
    fill: Optional[int]
    view: Tuple[Factor, ...]
    split: int  # view[:split] factor the rows, view[split:] the cols
    perm: Tuple[int, ...]
    out: Tuple[Factor, Factor]

    # ---- construction ----------------------------------------------------------------------------
    @staticmethod
    def declare(name: str, params: Tuple[str, str], view: Optional[Sequence[Factor]],
                perm: Optional[Sequence[int]], pad: Tuple[int, int] = (1, 1), fill: Optional[int] = None,
                out: Optional[Tuple[Factor, Factor]] = None) -> "Layout":
        """Check a declaration and return the layout; raise ValueError(rule, fix) otherwise."""
        view = tuple(view) if view else (Factor(ROWS, 1), Factor(COLS, 1))
        split = _row_split(view, params)
        perm = tuple(perm) if perm is not None else tuple(range(len(view)))
        if sorted(perm) != list(range(len(view))):
            raise ValueError(f"permute{tuple(perm)} is not a permutation of the {len(view)} view "
                             f"dimensions; list each of 0..{len(view) - 1} exactly once")
        for p, m in zip(params, pad):
            if m < 1:
                raise ValueError(f"pad({p}: {m}) must be a positive multiple")
        out = out or (Factor(ROWS, 1), Factor(COLS, 1))
        if _product(out) != _product(view):
            raise ValueError(
                f"the physical shape ({out[0].text(params)}, {out[1].text(params)}) does not hold "
                f"{params[0]}*{params[1]} elements; give '-> (...)' dimensions whose product is "
                f"{params[0]}*{params[1]}")
        return Layout(name, tuple(params), tuple(pad), fill, view, split, perm, out)

    # ---- shapes ----------------------------------------------------------------------------------
    def padded(self, rows: ExprLike, cols: ExprLike) -> Tuple[Expr, Expr]:
        return rup(rows, self.pad[0]), rup(cols, self.pad[1])

    def sizes(self, rows: ExprLike, cols: ExprLike, size: _SizeFn = _identity) -> List[Expr]:
        rp, cp = (size(e) for e in self.padded(rows, cols))
        return [f.size(rp, cp, size) for f in self.view]

    def physical_shape(self, rows: ExprLike, cols: ExprLike, size: _SizeFn = _identity):
        rp, cp = (size(e) for e in self.padded(rows, cols))
        return tuple(f.size(rp, cp, size) for f in self.out)

    def requirements(self) -> List[Tuple[int, int]]:
        """(axis, k): the padded extent of `axis` must be a multiple of k for the view to exist."""
        req = []
        for f in self.view:
            if f.param is not None and f.k > 1 and self.pad[f.param] % f.k != 0:
                req.append((f.param, f.k))
        return req

    @property
    def axis_map(self) -> Optional[Tuple[int, int]]:
        """For a pure axis permutation (row_major, transpose): which logical axis each physical axis is."""
        if (len(self.view) == 2 and self.split == 1 and self.pad == (1, 1)
                and all(f.param is not None and f.k == 1 for f in self.view)):
            phys = tuple(self.view[p].param for p in self.perm)
            if tuple(f.param for f in self.out) == phys and all(f.k == 1 for f in self.out):
                return phys
        return None

    # ---- index arithmetic ----------------------------------------------------------------------
    def digits(self, r: Expr, c: Expr, rows, cols, size: _SizeFn = _identity) -> List[Expr]:
        sz = self.sizes(rows, cols, size)
        out: List[Expr] = []
        for group, idx in ((range(0, self.split), r), (range(self.split, len(self.view)), c)):
            group = list(group)
            for n, i in enumerate(group):
                below = Const(1)
                for j in group[n + 1:]:
                    below = below * sz[j]
                d = idx // below
                out.append(d if n == 0 else d % sz[i])
        return out

    def flat(self, r: ExprLike, c: ExprLike, rows, cols, size: _SizeFn = _identity) -> Expr:
        """Physical flat offset of logical (r, c), as one expression."""
        sz = self.sizes(rows, cols, size)
        dg = self.digits(as_expr(r), as_expr(c), rows, cols, size)
        off: Expr = Const(0)
        for p in self.perm:
            off = off * sz[p] + dg[p]
        return off

    def coords(self, r: ExprLike, c: ExprLike, rows, cols, size: _SizeFn = _identity):
        """Physical (row, col) of logical (r, c) in the 2-D physical shape."""
        amap = self.axis_map
        if amap is not None:
            rc = (as_expr(r), as_expr(c))
            return rc[amap[0]], rc[amap[1]]
        off = self.flat(r, c, rows, cols, size)
        pcols = self.physical_shape(rows, cols, size)[1]
        return off // pcols, off % pcols

    # ---- torch forms (reference) ------------------------------------------------------------
    def apply(self, t, fill: Optional[int] = None):
        """The declared transform on a 2-D tensor: pad with the fill, view, permute, present 2-D."""
        import torch.nn.functional as F
        rows, cols = t.shape
        rp, cp = (int(e.evaluate({})) for e in self.padded(rows, cols))
        fill = self.fill if fill is None else fill
        if (rp, cp) != (rows, cols):
            if fill is None:
                raise ValueError(f"layout {self.name} pads but declares no fill value")
            t = F.pad(t, (0, cp - cols, 0, rp - rows), value=fill)
        sz = [int(s.evaluate({})) for s in self.sizes(rp, cp)]
        phys = [int(s.evaluate({})) for s in self.physical_shape(rows, cols)]
        return t.reshape(sz).permute(self.perm).contiguous().reshape(phys)

    def invert(self, phys, rows: int, cols: int):
        """The inverse of `apply`: a physical tensor back to logical [rows, cols] (padding cropped)."""
        rp, cp = (int(e.evaluate({})) for e in self.padded(rows, cols))
        sz = [int(s.evaluate({})) for s in self.sizes(rp, cp)]
        inv = [0] * len(self.perm)
        for i, p in enumerate(self.perm):
            inv[p] = i
        t = phys.reshape([sz[p] for p in self.perm]).permute(inv).reshape(rp, cp)
        return t[:rows, :cols]

    def describe(self) -> str:
        n = self.params
        view = ", ".join(f.text(n) for f in self.view)
        s = f"{self.name}({n[0]}, {n[1]})"
        if self.pad != (1, 1):
            s += f" pad({n[0]}: {self.pad[0]}, {n[1]}: {self.pad[1]})"
        if self.fill is not None:
            s += f" fill {self.fill}"
        return (s + f" -> ({self.out[0].text(n)}, {self.out[1].text(n)}) = view({view}) "
                f"permute({', '.join(map(str, self.perm))})")


def _row_split(view: Tuple[Factor, ...], params) -> int:
    """Index where the cols factors start; checks each group multiplies to its parameter."""
    kinds = [f.param for f in view]
    first_col = next((i for i, f in enumerate(view) if f.param == COLS), None)
    if first_col is None or ROWS not in kinds[:first_col] or ROWS in kinds[first_col:]:
        raise ValueError(
            f"view must list the factors of {params[0]} first, then those of {params[1]}, each "
            f"parameter exactly once (for example view({params[0]}/16, 16, {params[1]}/32, 2, 16))")
    for axis, group in ((ROWS, view[:first_col]), (COLS, view[first_col:])):
        params_in = [f for f in group if f.param is not None]
        if len(params_in) != 1:
            raise ValueError(f"view names {params[axis]} {len(params_in)} times; name it once")
        consts = 1
        for f in group:
            if f.param is None:
                consts *= f.k
        if consts != params_in[0].k:
            raise ValueError(
                f"view factors of {params[axis]} multiply to {params[axis]}/{params_in[0].k}*{consts}, "
                f"not {params[axis]}; make the constants multiply to {params_in[0].k}")
    return first_col


@dataclass(frozen=True)
class Chain:
    """Layouts applied one after another; each stage's physical shape is the next stage's logical shape."""
    stages: Tuple[Layout, ...]
    fills: Tuple[Optional[int], ...] = field(default=())

    def fill(self) -> Optional[int]:
        """The value written into padding: the last declared fill of a padding stage."""
        val = None
        for st, f in zip(self.stages, self.fills or (None,) * len(self.stages)):
            if st.pad != (1, 1):
                val = st.fill if f is None else f
        return val

    def shapes(self, rows, cols, size: _SizeFn = _identity):
        """[(rows, cols)] entering each stage, then the final physical shape."""
        shapes = [(as_expr(rows), as_expr(cols))]
        for st in self.stages:
            r, c = shapes[-1]
            shapes.append(tuple(size(e) for e in st.physical_shape(r, c, size)))
        return shapes

    def physical_shape(self, rows, cols, size: _SizeFn = _identity):
        return self.shapes(rows, cols, size)[-1]

    def flat(self, r, c, rows, cols, size: _SizeFn = _identity) -> Expr:
        shapes = self.shapes(rows, cols, size)
        r, c = as_expr(r), as_expr(c)
        if not self.stages:
            return r * shapes[0][1] + c
        for i, st in enumerate(self.stages[:-1]):
            r, c = st.coords(r, c, *shapes[i], size)
        return self.stages[-1].flat(r, c, *shapes[-2], size)

    @property
    def axis_map(self) -> Optional[Tuple[int, int]]:
        """For a chain of pure axis permutations: the logical axis each physical axis holds, else None."""
        amap: Tuple[int, int] = (ROWS, COLS)
        for st in self.stages:
            sm = st.axis_map
            if sm is None:
                return None
            amap = (amap[sm[0]], amap[sm[1]])
        return amap

    def logical_padding(self, rows, cols) -> Tuple[Expr, Expr]:
        """Padded extents in logical coordinates: every cell below them is written (fill or value)."""
        ext = [as_expr(rows), as_expr(cols)]
        amap: Optional[Tuple[int, int]] = (ROWS, COLS)
        for st in self.stages:
            if st.pad != (1, 1):
                if amap is None:
                    raise ValueError(f"layout {st.name} pads, but follows a layout that is not a plain "
                                     f"axis permutation; put padding layouts first")
                for phys_axis in (ROWS, COLS):
                    ext[amap[phys_axis]] = rup(ext[amap[phys_axis]], st.pad[phys_axis])
            sm = st.axis_map
            amap = None if (sm is None or amap is None) else (amap[sm[0]], amap[sm[1]])
        return ext[0], ext[1]

    def requirements(self, rows, cols):
        """[(stage name, value expr, k)]: value must be a multiple of k."""
        out = []
        for (r, c), st in zip(self.shapes(rows, cols), self.stages):
            rp, cp = st.padded(r, c)
            for axis, k in st.requirements():
                out.append((st.name, st.params[axis], (rp, cp)[axis], k))
        return out

    def apply(self, t):
        fills = self.fills or (None,) * len(self.stages)
        for st, f in zip(self.stages, fills):
            t = st.apply(t, f)
        return t

    def invert(self, phys, rows: int, cols: int):
        shapes = [(rows, cols)]
        for st in self.stages:
            r, c = shapes[-1]
            shapes.append(tuple(int(e.evaluate({})) for e in st.physical_shape(r, c)))
        t = phys
        for i in range(len(self.stages) - 1, -1, -1):
            r, c = shapes[i]
            rp, cp = (int(e.evaluate({})) for e in self.stages[i].padded(r, c))
            t = self.stages[i].invert(t, r, c)
        return t

    def name(self) -> str:
        return "|".join(st.name for st in self.stages) or "row_major"
