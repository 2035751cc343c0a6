"""GEMMs whose operands are what producer kernels wrote: IR, rules and lowering.

    gemm fp8_gemm_fprop(a: fp8_1x128_rocm_te.rowwise, b: fp8_128x128_rocm_te.rowwise) -> bf16

computes Y[M, N] = A[M, K] @ B[N, K]^T from the named producers' outputs. Each operand is one direction
of one producer variant (`KERNEL(OPTION, ...)` turns those options on): its data and scale outputs,
with their layouts, blocks and formats, come from the producer's IR, so the consumer's index arithmetic
is derived from the same declarations that generated the producer. A rowwise direction contracts
over its input's columns (the GEMM's K is the producer's N), a colwise one over its rows.

Grouping:
* `groups: rows`: A's rows are split into G groups by device offsets (MoE fprop / dgrad); B holds one
  matrix per group, stacked along the producer's rows (a 128x128 cast of [G * rows, cols]).
* `groups: contraction`: the contraction runs over each group's tokens (MoE weight gradient): both
  operands are segment-padded colwise outputs and the output is [G, M, N].
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from quantlay.dsl import ast
from quantlay.dsl.ast import Span
from quantlay.errors import SpecError, did_you_mean

from .expr import Expr, Var, subs
from .ir import DirectionIR, KernelIR, OutputIR, VariantIR, _check_identifier
from .layout import COLS, ROWS

GROUPINGS = ("rows", "contraction")
OUT_DTYPES = {"bf16": ("tl.bfloat16", "torch.bfloat16"), "fp32": ("tl.float32", "torch.float32")}
TORCH_FP8 = {"tl.float8e4nv": "torch.float8_e4m3fn", "tl.float8e5": "torch.float8_e5m2"}
GLUON_GROUPS = (None, "rows", "contraction")  # the groupings the Hopper (Gluon) kernel covers


def _err(msg: str, span: Optional[Span], hint: Optional[str] = None) -> SpecError:
    return SpecError(msg, line=span.line if span else None, column=span.column if span else None, hint=hint)


@dataclass(frozen=True)
class OperandIR:
    name: str                 # a | b
    variant: VariantIR        # the producer variant that writes it
    direction: DirectionIR
    data: OutputIR
    scale: OutputIR
    span: Span

    @property
    def contraction_axis(self) -> int:
        """The producer's axis the GEMM contracts over: its columns for rowwise, its rows for colwise."""
        return self.direction.block_axis

    @property
    def k_block(self) -> int:
        return self.direction.block[1] if self.contraction_axis == COLS else self.direction.block[0]

    def describe(self) -> str:
        opts = ", ".join(n for n, v in self.variant.options if v)
        return f"{self.variant.kernel.name}{f'({opts})' if opts else ''}.{self.direction.name}"


@dataclass(frozen=True)
class GemmIR:
    name: str
    a: OperandIR
    b: OperandIR
    groups: Optional[str]
    out_dtype: str
    accumulate: bool
    span: Span
    spec_path: Optional[str]
    spec_hash: str

    @property
    def k_block(self) -> int:
        return self.a.k_block

    def canonical(self) -> str:
        """Everything that changes the generated code: the module name's digest is taken from it."""
        parts = [f"gemm={self.name}", f"groups={self.groups}", f"out={self.out_dtype}",
                 f"accumulate={self.accumulate}"]
        for op in (self.a, self.b):
            parts += [f"{op.name}={op.describe()}", op.data.canonical(), op.scale.canonical(),
                      f"{op.name}.scale={op.direction.scale!r}", f"{op.name}.element={op.direction.element!r}"]
        return "\n".join(parts)

    @property
    def module_name(self) -> str:
        return f"{self.name}__{hashlib.sha256(self.canonical().encode()).hexdigest()[:8]}"


# ---- building ------------------------------------------------------------------------------------
def build(spec: ast.SpecFile, producers: Dict[str, KernelIR], spec_hash: str = "") -> List[GemmIR]:
    """The spec's GEMMs, with operands resolved against `producers` (kernels by name)."""
    try:
        return [_build(g, producers, spec, spec_hash) for g in _unique(spec.gemms, producers)]
    except SpecError as exc:
        raise exc.with_source(spec.source, spec.path) from None


def _unique(gemms, producers):
    seen = set()
    for g in gemms:
        _check_identifier(g.name, "gemm", g.span)
        if g.name in seen or g.name in producers:
            raise _err(f"'{g.name}' is already declared", g.span, "choose another name")
        seen.add(g.name)
        yield g


def _operand(op: ast.Operand, expected: str, producers: Dict[str, KernelIR]) -> OperandIR:
    if op.name != expected:
        raise _err(f"operand '{op.name}': the operands are a (rows of the output) and b (its columns), "
                   f"in that order", op.span, f"write {expected}: KERNEL.DIRECTION")
    if op.kernel not in producers:
        raise _err(f"unknown kernel '{op.kernel}'", op.kernel_span,
                   did_you_mean(op.kernel, producers) or "name a kernel of this spec or of a shipped spec")
    k = producers[op.kernel]
    values = {}
    for name, span in op.options:
        if name not in k.options:
            raise _err(f"kernel {k.name} has no option '{name}'", span,
                       did_you_mean(name, k.options) or f"options: {', '.join(k.options) or 'none'}")
        values[name] = True
    variant = k.variant(**values)
    names = [d.name for d in variant.directions]
    if op.direction not in names:
        raise _err(f"{op.kernel}{'(' + ', '.join(values) + ')' if values else ''} writes no {op.direction} "
                   f"outputs", op.direction_span, f"directions: {', '.join(names)}")
    d = variant.direction(op.direction)
    data, scale = variant.output(f"{d.name}_data"), variant.output(f"{d.name}_scale")
    if d.element.bits != 8:
        raise _err(f"operand {op.name}: {d.element.name} codes; the GEMM template reads 8-bit FP8 codes "
                   f"(e4m3, e5m2)", op.kernel_span)
    if d.scale.name != "f32":
        raise _err(f"operand {op.name}: {d.scale.name} scales; the GEMM template reads blockwise fp32 "
                   f"scales (f32, stored as f32 or ue8m0)", op.kernel_span)
    return OperandIR(op.name, variant, d, data, scale, op.span)


def _build(g: ast.Gemm, producers: Dict[str, KernelIR], spec: ast.SpecFile, spec_hash: str) -> GemmIR:
    a = _operand(g.operands[0], "a", producers)
    b = _operand(g.operands[1], "b", producers)
    if a.k_block != b.k_block:
        raise _err(f"a's blocks hold {a.k_block} elements along the contraction and b's {b.k_block}; the "
                   f"scales of one K block must cover the same K range", g.span,
                   "use producers with the same block length along K (e.g. 1x128 and 128x128)")
    if a.k_block < 16:
        raise _err(f"blocks of {a.k_block} along K are shorter than one MMA step (16)", g.span)
    groups = None
    if g.groups is not None:
        groups, gspan = g.groups
        if groups not in GROUPINGS:
            raise _err(f"groups: {groups} is not one of {', '.join(GROUPINGS)}", gspan,
                       did_you_mean(groups, GROUPINGS) or "rows (MoE fprop, dgrad) or contraction (wgrad)")
    for op in (a, b):
        seg = op.direction.segmented
        if groups == "contraction" and not (seg and op.contraction_axis == ROWS):
            raise _err(f"operand {op.name}: groups: contraction reads segment-padded columnwise operands "
                       f"(each group's tokens padded to whole blocks); {op.describe()} is not one", op.span,
                       "use a segmented colwise direction, e.g. fp8_segment_m.colwise")
        if groups != "contraction" and seg:
            raise _err(f"operand {op.name}: {op.describe()} is segment-padded; only groups: contraction "
                       f"reads such operands", op.span)
    if groups == "rows" and a.direction.block2d:
        raise _err("operand a: with groups: rows, a's blocks must not span rows (1xB), or blocks would "
                   "straddle two groups", g.operands[0].span)
    if g.out_dtype not in OUT_DTYPES:
        raise _err(f"output dtype '{g.out_dtype}' is not one of {', '.join(OUT_DTYPES)}", g.out_span,
                   did_you_mean(g.out_dtype, OUT_DTYPES))
    if g.accumulate and g.out_dtype != "fp32":
        raise _err("accumulate adds into an fp32 buffer", g.out_span, "write -> fp32 accumulate")
    return GemmIR(g.name, a, b, groups, g.out_dtype, g.accumulate, g.span, spec.path, spec_hash)


# ---- lowering --------------------------------------------------------------------------------------
def producer_dims(op: OperandIR, groups: Optional[str]) -> Dict[str, Expr]:
    """The producer's input dimensions (its M and N) in the GEMM's: rowwise (I, K), colwise (K, I), with
    I = M for a and N for b; with groups: rows, b's matrices are stacked along the producer's rows."""
    free = Var("M" if op.name == "a" else "N")
    rows, cols = (free, Var("K")) if op.contraction_axis == COLS else (Var("K"), free)
    if groups == "rows" and op.name == "b":
        rows = Var("G") * rows
    return {"M": rows, "N": cols, "G": Var("G")}


def producer_shape(op: OperandIR, groups: Optional[str], M: int, N: int, K: int, G: int = 1) -> Tuple[int, int]:
    """The input shape the producer casts for operand `op` of a GEMM of these dimensions (for groups:
    contraction, K counts the tokens)."""
    env = {"M": M, "N": N, "K": K, "G": G}
    dims = producer_dims(op, groups)
    return int(dims["M"].evaluate(env)), int(dims["N"].evaluate(env))


def lower_operand(op: OperandIR, groups: Optional[str], sizes) -> Dict[str, object]:
    env = producer_dims(op, groups)

    def dims(o: OutputIR):
        return tuple(subs(e, env) for e in o.logical)
    drows, dcols = dims(op.data)
    srows, scols = dims(op.scale)
    data_off = op.data.chain.flat(Var("r"), Var("c"), sizes(drows), sizes(dcols), sizes)
    scale_off = op.scale.chain.flat(Var("r"), Var("c"), sizes(srows), sizes(scols), sizes)
    phys = lambda o: [subs(e, env).render() for e in o.chain.physical_shape(o.logical[0], o.logical[1])]  # noqa: E731
    # b's matrix of group g starts at producer row g * rows_per_group (groups: rows)
    per_group = (Var("N") if op.contraction_axis == COLS else Var("K")) if (groups == "rows" and op.name == "b") else None
    bh, bw = op.direction.block
    # The Hopper path loads codes with TMA: the data must be a plain 2-D array (a chain of axis
    # permutations) with the contraction along its contiguous axis, as the FP8 MMA reads it (K-major).
    amap = op.data.chain.axis_map
    tma = amap is not None and amap[1] == op.contraction_axis and len(op.data.chain.physical_shape(1, 1)) == 2
    return {
        "name": op.name,
        "describe": op.describe(),
        "direction": op.direction.name,
        "contract_cols": op.contraction_axis == COLS,
        "block_rows": bh, "block_cols": bw,
        "batch_rows": sizes(per_group).render() if per_group is not None else "",
        "data_offset": data_off.render(),
        "scale_offset": scale_off.render(),
        "scale_ue8m0": op.direction.scale.storage == "ue8m0" or op.scale.format == "ue8m0",
        "data_key": op.data.key, "scale_key": op.scale.key,
        "data_layout": op.data.layout_name(), "scale_layout": op.scale.layout_name(),
        "data_fill": op.data.chain.fill(), "scale_fill": op.scale.chain.fill(),
        "data_format": op.data.format, "scale_format": op.scale.format,
        "block": f"{bh}x{bw}",
        "data_physical": phys(op.data), "scale_physical": phys(op.scale),
        "element": op.direction.element.name,
        "tl_fp8": op.direction.element.HW_DTYPE,
        "torch_fp8": TORCH_FP8[op.direction.element.HW_DTYPE],
        "tma": tma,
        # the scale block's extent along the free axis (a tile inside one block reads one scale per K block)
        "free_block": bh if op.contraction_axis == COLS else bw,
    }


def lower(g: GemmIR) -> Dict[str, object]:
    from .lower import SizeTable
    sizes = SizeTable()
    a = lower_operand(g.a, g.groups, sizes)
    b = lower_operand(g.b, g.groups, sizes)
    return {
        "gemm": g.name, "name": g.module_name,
        "spec_path": g.spec_path or "<text>", "spec_hash": g.spec_hash,
        "a": a, "b": b, "groups": g.groups,
        "out_dtype": g.out_dtype, "out_tl": OUT_DTYPES[g.out_dtype][0], "out_torch": OUT_DTYPES[g.out_dtype][1],
        "accumulate": g.accumulate,
        "BK": g.k_block,
        # a Hopper kernel (Gluon: TMA, warp-specialized, two consumer warpgroups) beside the Triton one; the
        # weight gradient's loader copies the scales with cp.async, 4 bytes at a time: fp32 scales there
        "gluon": (g.k_block == 128 and g.groups in GLUON_GROUPS and a["tma"] and b["tma"]
                  and not (g.groups == "contraction" and (a["scale_ue8m0"] or b["scale_ue8m0"]))),
        "sizes": [{"name": n, "expr": e.render()} for n, e in sizes.exprs],
        "canonical": g.canonical().splitlines(),
    }
