"""The frozen, validated IR, built from the AST.

Every rule that a spec must obey is checked here, with the spec's line and column: unknown names (with
a suggestion), values out of range, layouts that are not bijections, options declared twice or never
used. What comes out is immutable and fully resolved: layouts are `Layout` objects, formats are
`E2M1` / `E8M0` instances, and a kernel can be specialised to one setting of its options
(`KernelIR.variant`), which is what the lowering and the reference consume.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

from quantlay.dsl import ast
from quantlay.dsl.ast import Span
from quantlay.errors import SpecError, did_you_mean

from .expr import Expr, Var, cdiv
from .formats import (E8M0, E8M0_MODES, INPUT_DTYPES, MINIFLOAT_ARGS, SCALE_FORMATS, TIE_RULES, Minifloat,
                      minifloat_class,
                      ZERO_SIGN_RULES)
from .layout import COLS, ROWS, Chain, Factor, Layout

DIRECTIONS = ("rowwise", "colwise")
M, N = Var("M"), Var("N")
# Names a spec may not take: they are the generated modules' own names (launcher arguments, module
# globals) or the arguments of `find(kernel, **options)`.
_RESERVED = {"x", "M", "N", "G", "tl", "triton", "torch", "math", "runtime", "quantize", "dequantize",
             "self", "kernel", "out", "find", "tag", "block_m", "block_n", "num_warps", "maxnreg",
             "inplace_rows", "grid_n_first", "grid_group", "opaque_widen", "region_m", "scale_pass", "l2_prefetch", "staged",
             "scratch", "tiles", "sizes", "grid_m", "grid_n", "ext0", "ext1", "result", "bufs",
             "cfg", "shapes", "kwargs", "grid", "hw", "lens", "goffs", "poffs", "seg_map", "inline_map", "INLINE_MAP_GROUPS", "rows", "cols",
             "even", "region", "idx64", "x2", "print", "len", "max", "min", "range", "int", "bool", "dict",
             "tuple", "list", "object", "type", "super", "NAME", "OPTIONS", "LAYOUTS", "DTYPES", "List",
             "QuantizedResult", "QuantizedTensor", "LayoutDescriptor"}
# Bounds that keep compile time and memory small and the error clear (the shipped specs use at most
# 3 options, 6 view factors, 3 layout stages per store and constants up to 256).
MAX_OPTIONS = 8          # 2^8 variants
MAX_VIEW_FACTORS = 8
MAX_PIPE_STAGES = 4
MAX_CONSTANT = 4096      # pad multiples, view divisors and constants
MIN_AMAX_FLOOR = 2.0 ** -126  # fp32's smallest normal: a subnormal floor is not an fp32 constant in every backend


def _err(msg: str, span: Optional[Span], hint: Optional[str] = None) -> SpecError:
    return SpecError(msg, line=span.line if span else None, column=span.column if span else None,
                     hint=hint)


def _check_identifier(name: str, what: str, span: Span) -> None:
    import keyword
    if name.startswith("_") or keyword.iskeyword(name) or keyword.issoftkeyword(name) or name in _RESERVED:
        raise _err(f"{what} name '{name}' is reserved (a Python keyword or a name the generated code "
                   f"uses)", span, "choose another name that starts with a letter")
    if len(name) > 64:
        raise _err(f"{what} name '{name[:20]}...' is longer than 64 characters", span, "shorten it")


def _check_bound(value: int, what: str, span: Span, bound: int = MAX_CONSTANT) -> None:
    if value > bound:
        raise _err(f"{what} {value} is larger than {bound}", span,
                   f"quantlay accepts at most {bound} here; real layouts use tiles of at most a few hundred")


# ---- IR nodes ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Setting:
    """One value the spec wrote explicitly; the lowering must consume it or the compile fails."""
    key: str
    span: Span


@dataclass(frozen=True)
class StageRef:
    layout: Layout
    fill: Optional[int]
    condition: Optional[Tuple[bool, str]]  # (negate, option)
    span: Span


@dataclass(frozen=True)
class PackRef:
    low: str  # 4-bit: which element of each pair goes to the low nibble (even | odd); 6-bit: which code
    span: Span  # of each group of four takes the lowest bits of its three little-endian bytes (first | last)


def pack_ratio(bits: int) -> Tuple[int, int]:
    """(codes, bytes) of one packed group: (2, 1) for 4-bit codes, (4, 3) for 6-bit ones."""
    return (2, 1) if bits == 4 else (4, 3)


@dataclass(frozen=True)
class StoreIR:
    target: str
    items: Tuple[object, ...]  # StageRef | PackRef
    span: Span


@dataclass(frozen=True)
class DirectionIR:
    name: str
    block: Tuple[int, int]
    element: Minifloat
    scale: E8M0
    data: StoreIR
    scale_store: StoreIR
    settings: Tuple[Setting, ...]
    span: Span
    segmented: bool = False  # rows are groups, each padded to a multiple of the block (docs/formats-and-layouts.md §4)
    condition: Optional[Tuple[bool, str]] = None  # the direction exists only under this option

    @property
    def block_axis(self) -> int:
        """The axis that is last in the direction's tile: COLS for rowwise (1xB), ROWS for colwise
        (Bx1). A square block spans both; its direction's name decides."""
        if self.block2d:
            return COLS if self.name == "rowwise" else ROWS
        return COLS if self.block[0] == 1 else ROWS

    @property
    def block2d(self) -> bool:
        return self.block[0] == self.block[1] and self.block[0] > 1

    @property
    def block_size(self) -> int:
        return max(self.block)


@dataclass(frozen=True)
class OutputIR:
    """One tensor a variant writes, fully resolved: what it holds and how it is laid out."""
    direction: str
    role: str                 # data | scale
    block: Tuple[int, int]
    format: str               # e2m1 | e8m0
    pack_axis: Optional[int]  # logical axis along which two codes share a byte (data only)
    pack_low: Optional[str]
    chain: Chain
    logical: Tuple[Expr, Expr]  # logical storage shape, in M and N
    spans: Tuple[Span, ...]
    layout_text: str = ""       # the active pipe as the spec wrote it, e.g. transpose|packed(low=even)
    conditions: Tuple[Tuple[str, Optional[str]], ...] = ()  # (stage name, option that enabled it)
    pack_bits: int = 4          # packed codes' width: 4 (two per byte) or 6 (four in three bytes)

    @property
    def key(self) -> str:
        return f"{self.direction}_{self.role}"

    @property
    def pack_ratio(self) -> Tuple[int, int]:
        return pack_ratio(self.pack_bits)

    def layout_name(self) -> str:
        return self.layout_text or "row_major"

    def canonical(self) -> str:
        stages = ";".join(st.describe() + f" fill={f}" for st, f in zip(self.chain.stages, self.chain.fills))
        bits = f":{self.pack_bits}bit" if self.pack_bits != 4 else ""
        return f"{self.key}:{self.block}:{self.format}:{self.pack_axis}:{self.pack_low}{bits}:[{stages}]"


@dataclass(frozen=True)
class KernelIR:
    name: str
    input_name: str
    dtype: str
    dims: Tuple[str, str]
    options: Tuple[str, ...]
    directions: Tuple[DirectionIR, ...]
    span: Span
    spec_path: Optional[str]
    spec_hash: str
    option_spans: Tuple[Span, ...] = ()
    groups: Optional[Tuple[str, str]] = None  # (group-lengths parameter, its count G)

    def variants(self) -> List["VariantIR"]:
        out = []
        for bits in range(2 ** len(self.options)):
            vals = {o: bool(bits >> (len(self.options) - 1 - i) & 1) for i, o in enumerate(self.options)}
            out.append(self.variant(**vals))
        return out

    def variant(self, **values: bool) -> "VariantIR":
        unknown = set(values) - set(self.options)
        if unknown:
            name = sorted(unknown)[0]
            raise SpecError(f"kernel {self.name} has no option '{name}'",
                            hint=did_you_mean(name, self.options) or f"options: {', '.join(self.options)}")
        for name, value in values.items():
            if not isinstance(value, bool):
                raise SpecError(f"option {name}={value!r} of kernel {self.name} must be True or False "
                                f"(a {type(value).__name__} is not accepted, so 'false' cannot mean True)")
        vals = tuple((o, values.get(o, False)) for o in self.options)
        outputs = []
        for d in _active(self.directions, dict(vals)):
            outputs.append(_resolve_store(d, d.data, dict(vals)))
            outputs.append(_resolve_store(d, d.scale_store, dict(vals)))
        return VariantIR(self, vals, tuple(outputs))


@dataclass(frozen=True)
class VariantIR:
    kernel: KernelIR
    options: Tuple[Tuple[str, bool], ...]
    outputs: Tuple[OutputIR, ...]

    @property
    def directions(self) -> Tuple[DirectionIR, ...]:
        """The directions this option setting quantizes (a direction may depend on an option)."""
        return _active(self.kernel.directions, dict(self.options))

    def direction(self, name: str) -> DirectionIR:
        return next(d for d in self.directions if d.name == name)

    def output(self, key: str) -> OutputIR:
        return next(o for o in self.outputs if o.key == key)

    def canonical(self) -> str:
        """Everything that changes the generated code, as text: the name's digest is taken from it."""
        k = self.kernel
        parts = [f"kernel={k.name}", f"dtype={k.dtype}"]
        for d in k.directions:
            parts.append(f"{d.name}:{d.block}:{d.element!r}:{d.scale!r}")
        parts += [o.canonical() for o in self.outputs]
        parts.append("options=" + ",".join(f"{n}={int(v)}" for n, v in self.options))
        return "\n".join(parts)

    @property
    def name(self) -> str:
        """The identity: kernel name, the option bits by initials, and a digest of all parameters."""
        digest = hashlib.sha256(self.canonical().encode()).hexdigest()[:8]
        abbr = [_abbr(n) for n, _ in self.options]
        if len(set(abbr)) != len(abbr):  # initials collide: number them (names stay short file names)
            abbr = [f"{a}{i}" for i, a in enumerate(abbr)]
        opts = "_".join(f"{a}{int(v)}" for a, (_, v) in zip(abbr, self.options))
        return f"{self.kernel.name}__{opts + '__' if opts else ''}{digest}"


def _active(directions, values: Dict[str, bool]) -> Tuple[DirectionIR, ...]:
    return tuple(d for d in directions if d.condition is None or values[d.condition[1]] != d.condition[0])


def _abbr(option: str) -> str:
    return "".join(w[0] for w in option.split("_") if w)


def _resolve_store(d: DirectionIR, store: StoreIR, values: Dict[str, bool]) -> OutputIR:
    """Apply the option values and normalise packing (pre-pack transposes move after the pack)."""
    active = [it for it in store.items
              if not isinstance(it, StageRef) or it.condition is None
              or values[it.condition[1]] != it.condition[0]]
    stages = tuple(it for it in active if isinstance(it, StageRef))
    chain = Chain(tuple(s.layout for s in stages), tuple(s.fill for s in stages))
    spans = tuple(it.span for it in active)
    text = "|".join(f"packed(low={it.low})" if isinstance(it, PackRef)
                    else it.layout.name + (f"(fill={it.fill})" if it.fill is not None else "")
                    for it in active)
    if d.segmented:  # the rows are groups padded to whole blocks: part of the layout a consumer reads
        text = f"segments({d.block[0]})|" + (text or "row_major")
    conds = tuple((s.layout.name, s.condition[1] if s.condition else None) for s in stages)
    rows, cols = M, N
    if d.segmented:  # upper bound on the padded rows (no device-to-host sync for the real total), whole
        rows = (cdiv(M, d.block[0]) + Var("G")) * d.block[0]  # blocks so that rows of the transpose align for TMA
    if store.target == "scale":
        if d.block[0] > 1:
            rows = cdiv(rows, d.block[0])
        if d.block[1] > 1:
            cols = cdiv(N, d.block[1])
        return OutputIR(d.name, "scale", d.block, d.scale.stored_name, None, None,
                        chain, (rows, cols), spans,
                        text, conds)
    packs = [i for i, it in enumerate(active) if isinstance(it, PackRef)]
    pack_axis = pack_low = None
    if packs:
        amap = (ROWS, COLS)
        for it in active[:packs[0]]:
            sm = it.layout.axis_map
            amap = (amap[sm[0]], amap[sm[1]])
        pack_axis, pack_low = amap[1], active[packs[0]].low
        codes, nbytes = pack_ratio(d.element.bits)
        size = (N if pack_axis == COLS else M) // codes
        size = size * nbytes if nbytes > 1 else size
        if pack_axis == COLS:
            cols = size
        else:
            rows = size
    return OutputIR(d.name, "data", d.block, d.element.name, pack_axis, pack_low, chain, (rows, cols),
                    spans, text, conds, d.element.bits if packs else 4)


# ---- building the IR from the AST --------------------------------------------------------------
@dataclass
class _Scope:
    layouts: Dict[str, Layout] = field(default_factory=dict)
    layout_spans: Dict[str, Span] = field(default_factory=dict)
    profiles: Dict[str, ast.Profile] = field(default_factory=dict)
    elements: Dict[str, type] = field(default_factory=dict)  # element formats: format NAME = minifloat(...)


def _build_minifloat(decl: ast.FormatDecl) -> type:
    """The class of a `format NAME = minifloat(...)` declaration, its settings checked."""
    call = decl.definition
    _check_identifier(decl.name, "format", decl.span)
    if call.name != "minifloat":
        raise _err(f"format {decl.name} = {call.name}(...): formats are declared as minifloat(...)", call.span,
                   "write format NAME = minifloat(exponent: E, mantissa: M, bias: B, max_code: C)")
    kwargs = _call_kwargs(call, MINIFLOAT_ARGS)
    missing = [k for k in ("exponent", "mantissa", "bias", "max_code") if k not in kwargs]
    if missing:
        raise _err(f"format {decl.name} does not say its {', '.join(missing)}", call.span,
                   "a minifloat needs exponent, mantissa, bias and max_code")
    bits = 1 + kwargs["exponent"] + kwargs["mantissa"]
    if bits > 8:
        raise _err(f"format {decl.name}: 1 + {kwargs['exponent']} + {kwargs['mantissa']} = {bits} bits; codes "
                   f"are at most 8 bits", call.span)
    mag = 1 << (bits - 1)
    for key in ("max_code", "inf", "nan"):
        limit = (1 << bits) if key == "nan" else mag
        if key in kwargs and kwargs[key] >= limit:
            arg = next(a for a in call.args if a.key == key)
            raise _err(f"format {decl.name}: {key} {kwargs[key]:#x} is not a {bits}-bit "
                       f"{'code' if key == 'nan' else 'magnitude code'}", arg.value.span,
                       f"use a value below {limit:#x}")
    if "hw" in kwargs and bits != 8:
        raise _err(f"format {decl.name}: hw names an fp8 convert, but the format has {bits} bits", call.span)
    return minifloat_class(decl.name, **kwargs)


def declared_formats(spec: ast.SpecFile) -> Dict[str, type]:
    """The element formats a spec file declares, by name (errors carry the file's position)."""
    try:
        return {f.name: _build_minifloat(f) for f in spec.formats}
    except SpecError as exc:
        raise exc.with_source(spec.source, spec.path) from None


def build_layout(decl: ast.LayoutDecl) -> Layout:
    names = decl.params
    if names[0] == names[1]:
        raise _err(f"layout {decl.name} names both parameters '{names[0]}'", decl.span,
                   "name them differently, e.g. (rows, cols)")

    def factor(dim: ast.Dim) -> Factor:
        _check_bound(dim.value, "view constant" if dim.kind == "const" else f"divisor of {dim.name}",
                     dim.span)
        if dim.kind == "const":
            if dim.value < 1:
                raise _err(f"view dimension {dim.value} must be a positive integer", dim.span)
            return Factor(None, dim.value)
        if dim.name not in names:
            raise _err(f"unknown name '{dim.name}' in layout {decl.name}", dim.span,
                       did_you_mean(dim.name, names) or f"use the parameters {names[0]} and {names[1]}")
        return Factor(names.index(dim.name), dim.value)

    view = perm = None
    seen = []
    for kind, args, span in decl.steps:
        if kind in seen:
            raise _err(f"layout {decl.name} has two {kind} steps", span,
                       "merge them into one view(...) followed by one permute(...)")
        if kind == "view" and "permute" in seen:
            raise _err(f"layout {decl.name}: view must come before permute", span)
        if kind == "permute" and len(args) > MAX_VIEW_FACTORS:
            raise _err(f"layout {decl.name}: permute lists {len(args)} dimensions; at most "
                       f"{MAX_VIEW_FACTORS}", span)
        seen.append(kind)
        if kind == "view":
            if len(args) > MAX_VIEW_FACTORS:
                raise _err(f"layout {decl.name}: view has {len(args)} factors; at most {MAX_VIEW_FACTORS}",
                           span, "merge factors: a layout of real hardware needs at most 6")
            view = [factor(d) for d in args]
        else:
            perm = list(args)
    pad = [1, 1]
    padded = set()
    for key, val, span in decl.pad:
        if key not in names:
            raise _err(f"pad names '{key}', which is not a parameter of layout {decl.name}", span,
                       did_you_mean(key, names) or f"pad({names[0]}: R, {names[1]}: C)")
        if key in padded:
            raise _err(f"pad sets '{key}' twice", span, "keep one")
        padded.add(key)
        if val < 1:
            raise _err(f"pad({key}: {val}) must be a positive multiple", span)
        _check_bound(val, f"pad({key}: ...) multiple", span)
        pad[names.index(key)] = val
    if decl.fill is not None and not 0 <= decl.fill <= 255:
        raise _err(f"fill {decl.fill} does not fit the byte storage (0..255)", decl.span)
    if pad != [1, 1] and decl.fill is None:
        raise _err(f"layout {decl.name} pads but declares no fill value", decl.span,
                   "add 'fill N' after pad(...): the value every padding byte gets")
    if pad == [1, 1] and decl.fill is not None:
        raise _err(f"layout {decl.name} declares fill {decl.fill} but does not pad", decl.span,
                   "remove the fill, or add pad(...)")
    out = tuple(factor(d) for d in decl.out) if decl.out else None
    try:
        return Layout.declare(decl.name, names, view, perm, tuple(pad), decl.fill, out)
    except ValueError as exc:
        raise _err(f"layout {decl.name}: {exc}", decl.span) from None


def _arg_value(arg: ast.Arg, kind: str, choices: Iterable[str] = (), lo: int = 0, hi: int = 255):
    v = arg.value
    if kind == "name":
        if v.kind != "name" or v.raw not in choices:
            shown = v.raw if v.kind != "range" else f"{v.raw[0]}..{v.raw[1]}"
            hint = did_you_mean(str(v.raw), choices) if v.kind == "name" else None
            raise _err(f"{arg.key}: {shown} is not one of {', '.join(choices)}", v.span,
                       hint or f"write {arg.key}: {next(iter(choices))}")
        return v.raw
    if kind == "int":
        if v.kind != "int" or not lo <= v.raw <= hi:
            raise _err(f"{arg.key}: {v.raw} must be an integer in {lo}..{hi}", v.span)
        return v.raw
    if kind == "float":
        if v.kind not in ("int", "float") or not lo <= float(v.raw) <= hi:
            raise _err(f"{arg.key}: {v.raw} must be a number in {lo}..{hi}", v.span, f"for example {arg.key}: 1e-4")
        return float(v.raw)
    if kind == "bool":
        if v.kind != "name" or v.raw not in ("true", "false"):
            raise _err(f"{arg.key}: {v.raw} must be true or false", v.span,
                       did_you_mean(str(v.raw), ("true", "false")))
        return v.raw == "true"
    if kind == "range":
        if v.kind != "range" or not (lo <= v.raw[0] <= v.raw[1] <= hi):
            raise _err(f"{arg.key} must be a range lo..hi within {lo}..{hi}", v.span,
                       f"for example {arg.key}: 0..254")
        return tuple(v.raw)
    raise AssertionError(kind)


_ELEMENT_ARGS = {"ties": ("name", TIE_RULES), "zero_sign": ("name", ZERO_SIGN_RULES), "nan": ("int", (), 0, 255)}
_SCALE_ARGS = {
    "e8m0": {
        "mode": ("name", E8M0_MODES), "clamp": ("range", (), 0, 255), "zero_amax": ("int", (), 0, 255),
        "inf_amax": ("int", (), 0, 255), "nan_amax": ("int", (), 0, 255),
        "nan_in_amax": ("name", ("propagate", "ignore")), "e0_multiplier": ("name", ("exact", "one")),
    },
    "f32": {"amax_floor": ("float", (), 0, 1), "pow2": ("bool", ()),
            "rule": ("name", ("f_over_amax", "amax_over_f")), "store": ("name", ("f32", "ue8m0", "e4m3")), "tensor_scale": ("bool", ())},
}


def _call_kwargs(call: ast.Call, schema) -> Dict[str, object]:
    """A call's settings by name, each checked against `schema` (name -> (kind, choices, range))."""
    kwargs: Dict[str, object] = {}
    for arg in call.args:
        if arg.key not in schema:
            raise _err(f"{call.name} has no setting '{arg.key}'", arg.span,
                       did_you_mean(arg.key, schema) or f"settings: {', '.join(schema)}")
        if arg.key in kwargs:
            raise _err(f"{call.name} sets '{arg.key}' twice", arg.span, "keep one")
        kind, choices, *rng = schema[arg.key]
        kwargs[arg.key] = _arg_value(arg, kind, choices, *rng)
    return kwargs


def _build_format(call: ast.Call, registry, schema, role: str, prefix: str):
    if call.name not in registry:
        raise _err(f"unknown {role} format '{call.name}'", call.span,
                   did_you_mean(call.name, registry) or f"known: {', '.join(registry)}")
    if role == "scale":
        schema = schema[call.name]
    kwargs = _call_kwargs(call, schema)
    settings = [Setting(f"{prefix}.{arg.key}", arg.span) for arg in call.args]
    cls = registry[call.name]
    bits = getattr(cls, "bits", 8)
    if "nan" in kwargs and kwargs["nan"] >= 1 << bits:
        arg = next(a for a in call.args if a.key == "nan")
        raise _err(f"nan: {kwargs['nan']:#x} is not a {bits}-bit {call.name} code", arg.value.span,
                   f"use a code in 0..{(1 << bits) - 1:#x}")
    floor = kwargs.get("amax_floor")
    if floor is not None and 0 < floor < MIN_AMAX_FLOOR:
        arg = next(a for a in call.args if a.key == "amax_floor")
        raise _err(f"amax_floor: {floor:g} is below fp32's smallest normal number ({MIN_AMAX_FLOOR:.6g})",
                   arg.value.span, "use 0 (no floor) or a normal fp32 value such as 1e-12")
    if kwargs.get("store") == "ue8m0" and not kwargs.get("pow2", False):
        arg = next(a for a in call.args if a.key == "store")
        raise _err("store: ue8m0 keeps only the exponent byte, so the scale must be a power of two "
                   "(pow2 is false)", arg.value.span, "add pow2: true, or use store: f32")
    if kwargs.get("store") == "e4m3" and (kwargs.get("rule") != "amax_over_f" or kwargs.get("pow2")):
        arg = next(a for a in call.args if a.key == "store")
        raise _err("store: e4m3 rounds the scale amax / F to E4M3 (NVFP4's block scale): it needs rule: "
                   "amax_over_f and no pow2", arg.value.span, "write scale f32(rule: amax_over_f, store: e4m3)")
    if kwargs.get("tensor_scale") and kwargs.get("store") != "e4m3":
        arg = next(a for a in call.args if a.key == "tensor_scale")
        raise _err("tensor_scale: true scales E4M3 block scales by a per-tensor fp32 scale (NVFP4's two "
                   "levels); it needs store: e4m3", arg.value.span, "add store: e4m3, or remove tensor_scale")
    return cls(**kwargs), settings


def _build_store(store: ast.Store, scope: _Scope, options: Dict[str, Span], used: set, d_name: str,
                 element) -> StoreIR:
    items: List[object] = []
    for it in store.items:
        call = it.call
        cond = None
        if it.condition is not None:
            c = it.condition
            if c.option not in options:
                raise _err(f"unknown option '{c.option}'", c.span,
                           did_you_mean(c.option, options) or
                           f"declare it first: option {c.option}")
            used.add(c.option)
            cond = (c.negate, c.option)
        if call.name == "packed":
            if store.target != "data":
                raise _err("packed applies to data, not scales", call.span)
            if cond is not None:
                raise _err("packed cannot be conditional: the byte format is not an option", call.span)
            lows, example = (("first", "last"), "packed(low: first)") if element.bits == 6 else (("even", "odd"), "packed(low: even)")
            low = lows[0]
            for i, arg in enumerate(call.args):
                if arg.key != "low":
                    raise _err(f"packed has no setting '{arg.key}'", arg.span, example)
                if i:
                    raise _err("packed sets 'low' twice", arg.span, "keep one")
                low = _arg_value(arg, "name", lows)
            items.append(PackRef(low, call.span))
            continue
        if call.name not in scope.layouts:
            raise _err(f"unknown layout '{call.name}'", call.span,
                       did_you_mean(call.name, list(scope.layouts) + ["packed"]) or
                       "declare it with 'layout NAME(rows, cols) = view(...) permute(...)'")
        lay = scope.layouts[call.name]
        fill = None
        for i, arg in enumerate(call.args):
            if arg.key != "fill":
                raise _err(f"layout {call.name} takes only 'fill', not '{arg.key}'", arg.span)
            if i:
                raise _err(f"layout {call.name} sets 'fill' twice", arg.span, "keep one")
            if lay.pad == (1, 1):
                raise _err(f"layout {call.name} does not pad, so fill has no effect", arg.span,
                           "remove the fill")
            fill = _arg_value(arg, "int")
        items.append(StageRef(lay, fill, cond, call.span))
    stages = sum(isinstance(it, StageRef) for it in items)
    if stages > MAX_PIPE_STAGES:
        raise _err(f"store {store.target} chains {stages} layouts; at most {MAX_PIPE_STAGES}", store.span,
                   "a real layout needs at most three stages (e.g. transpose | packed | preshuffle16x16)")
    packs = [i for i, it in enumerate(items) if isinstance(it, PackRef)]
    if store.target == "data":
        if element.bits == 8 and packs:
            raise _err(f"{element.name} codes are whole bytes: packed(...) applies to 4- and 6-bit elements only",
                       items[packs[0]].span, "remove the packed(...) step")
        if element.bits == 4 and len(packs) != 1:
            raise _err(f"{d_name} data of {element.name} needs exactly one 'packed(...)' step "
                       f"(two 4-bit codes per byte)", store.span,
                       "store data as packed(low: even) | ...")
        if element.bits == 6 and len(packs) != 1:
            raise _err(f"{d_name} data of {element.name} needs exactly one 'packed(...)' step "
                       f"(four 6-bit codes in three bytes)", store.span,
                       "store data as packed(low: first) | ...")
        for it in items[:packs[0]] if packs else []:
            if it.layout.axis_map is None:
                raise _err(f"layout {it.layout.name} comes before packed but is not a plain axis "
                           f"permutation (row_major / transpose)", it.span,
                           "move it after packed(...): it then works on bytes")
    chain_pad_check = Chain(tuple(it.layout for it in items if isinstance(it, StageRef)))
    try:
        chain_pad_check.logical_padding(M, N)
    except ValueError as exc:
        raise _err(str(exc), store.span) from None
    return StoreIR(store.target, tuple(items), store.span)


def _build_direction(d: ast.Direction, scope: _Scope, options, used, groups=None) -> DirectionIR:
    if d.name not in DIRECTIONS:
        raise _err(f"unknown direction '{d.name}'", d.span,
                   did_you_mean(d.name, DIRECTIONS) or "use rowwise or colwise")
    a, b = d.block
    expect_row = d.name == "rowwise"
    square = a == b and a > 1  # 2-D blocks (weights): the same scales serve both directions
    if not square and ((expect_row and a != 1) or (not expect_row and b != 1) or min(a, b) != 1):
        want = "1xB (or a square BxB)" if expect_row else "Bx1 (or a square BxB)"
        raise _err(f"{d.name} blocks {a}x{b}: a {d.name} block is {want}", d.block_span,
                   f"write blocks {'1x32' if expect_row else '32x1'}")
    bs = max(a, b)
    if bs < 2 or bs > 128 or bs & (bs - 1):
        raise _err(f"block size {bs} must be a power of two in 2..128", d.block_span)
    element_call, scale_call, settings = d.element, d.scale, []
    if d.profile is not None:
        pname, pspan = d.profile
        if pname not in scope.profiles:
            raise _err(f"unknown profile '{pname}'", pspan,
                       did_you_mean(pname, scope.profiles) or "declare it with 'profile NAME { ... }'")
        prof = scope.profiles[pname]
        element_call = element_call or prof.element
        scale_call = scale_call or prof.scale
    built = {}
    for role, call, registry, schema in (("element", element_call, scope.elements, _ELEMENT_ARGS),
                                         ("scale", scale_call, SCALE_FORMATS, _SCALE_ARGS)):
        if call is not None:  # check what is there before complaining about what is missing
            built[role] = _build_format(call, registry, schema, role, role)
    for role in ("element", "scale"):
        if role not in built:
            raise _err(f"{d.name} has no {role} format", d.span,
                       f"add '{role} ...' or 'profile NAME' naming a profile that declares it")
    (element, s1), (scale, s2) = built["element"], built["scale"]
    if element.bits not in (4, 6, 8):
        raise _err(f"{element.name} codes have {element.bits} bits; the MX template stores 8-bit codes, 4-bit "
                   f"codes packed two per byte and 6-bit codes four in three bytes", element_call.span,
                   "declare a 4-, 6- or 8-bit format")
    settings = s1 + s2
    stores = {}
    for st in d.stores:
        if st.target in stores:
            raise _err(f"{d.name} stores {st.target} twice", st.span, "keep one 'store' line")
        stores[st.target] = _build_store(st, scope, options, used, d.name, element)
    for target in ("data", "scale"):
        if target not in stores:
            default = "packed(low: even)" if target == "data" else "row_major"
            raise _err(f"{d.name} does not say how to store its {target}", d.span,
                       f"add 'store {target} as {default}'")
    cond = None
    if d.condition is not None:
        c = d.condition
        if c.option not in options:
            raise _err(f"unknown option '{c.option}'", c.span,
                       did_you_mean(c.option, options) or f"declare it first: option {c.option}")
        used.add(c.option)
        cond = (c.negate, c.option)
    if d.segmented:
        if groups is None:
            raise _err(f"{d.name} is segmented but the kernel has no groups parameter", d.span,
                       "add ', group_lens: groups[G]' to the kernel's parameters")
        if d.name != "colwise" or d.block[1] != 1:
            raise _err("only colwise (Bx1) blocks can be segmented: groups split the rows", d.span)
        if element.bits != 8:
            raise _err(f"segmented quantization is supported for 8-bit elements, not {element.name}", d.span)
    return DirectionIR(d.name, d.block, element, scale, stores["data"], stores["scale"],
                       tuple(settings), d.span, d.segmented, cond)


def build(spec: ast.SpecFile, library: Optional[ast.SpecFile] = None) -> List[KernelIR]:
    """Validate a parsed spec (plus the shipped library) and return its kernels' IR."""
    try:
        return _build(spec, library)
    except SpecError as exc:
        raise exc.with_source(spec.source, spec.path) from None  # keeps a library error's own source


def _build(spec: ast.SpecFile, library: Optional[ast.SpecFile]) -> List[KernelIR]:
    scope = _Scope()
    for src in ([library] if library else []) + [spec]:
        for decl in src.formats:
            if decl.name in scope.elements:
                raise _err(f"format '{decl.name}' is already declared", decl.span, "choose another name")
            try:
                scope.elements[decl.name] = _build_minifloat(decl)
            except SpecError as exc:
                raise SpecError(exc.message, line=exc.line, column=exc.column, source=src.source,
                                path=src.path, hint=exc.hint) from None
        for decl in src.layouts:
            if decl.name in scope.layouts:
                where = scope.layout_spans[decl.name]
                raise _err(f"layout '{decl.name}' is already declared (line {where.line})", decl.span,
                           "choose another name" if src is spec else None)
            _check_identifier(decl.name, "layout", decl.span)
            scope.layouts[decl.name] = build_layout(decl)
            scope.layout_spans[decl.name] = decl.span if src is spec else Span(0, 0)
        for prof in src.profiles:
            if prof.name in scope.profiles:
                raise _err(f"profile '{prof.name}' is already declared", prof.span, "choose another name")
            if src is not spec:  # check library profiles here, so errors point into the library file
                try:
                    for role, call, reg, schema in (("element", prof.element, scope.elements, _ELEMENT_ARGS),
                                                    ("scale", prof.scale, SCALE_FORMATS, _SCALE_ARGS)):
                        if call is not None:
                            _build_format(call, reg, schema, role, role)
                except SpecError as exc:
                    raise SpecError(exc.message, line=exc.line, column=exc.column, source=src.source,
                                    path=src.path, hint=exc.hint) from None
            scope.profiles[prof.name] = prof
    text = (library.source if library else "") + "\0" + spec.source
    spec_hash = hashlib.sha256(text.encode()).hexdigest()
    kernels, seen = [], {}
    for k in spec.kernels:
        _check_identifier(k.name, "kernel", k.span)
        if k.name in seen:
            raise _err(f"kernel '{k.name}' is declared twice", k.span, "rename one of them")
        seen[k.name] = k.span
        if k.dtype not in INPUT_DTYPES:
            raise _err(f"unknown input dtype '{k.dtype}'", k.dtype_span,
                       did_you_mean(k.dtype, INPUT_DTYPES) or f"use one of {', '.join(INPUT_DTYPES)}")
        # Every formula, launcher and message calls the input x with rows M and columns N: other names
        # would be written and ignored, so they are refused.
        if k.input_name != "x" or tuple(k.dims) != ("M", "N"):
            raise _err(f"kernel {k.name} declares its input as {k.input_name}: {k.dtype}[{k.dims[0]}, "
                       f"{k.dims[1]}]; the input is always x with rows M and columns N", k.span,
                       f"write kernel {k.name}(x: {k.dtype}[M, N]) (leading dimensions of a batched input "
                       f"are flattened into M)")
        if k.groups is not None:
            gname, gcount, gspan = k.groups
            _check_identifier(gname, "groups parameter", gspan)
            if gcount != "G":
                raise _err(f"groups[{gcount}]: the group count is always called G", gspan,
                           f"write {gname}: groups[G]")
        if len(k.options) > MAX_OPTIONS:
            raise _err(f"kernel {k.name} declares {len(k.options)} options; at most {MAX_OPTIONS} "
                       f"(each option doubles the variants)", k.options[MAX_OPTIONS][1],
                       "split the kernel into several kernels")
        options: Dict[str, Span] = {}
        for name, span in k.options:
            if name in options:
                raise _err(f"option '{name}' is declared twice", span, "declare each option once")
            _check_identifier(name, "option", span)
            options[name] = span
        if not k.directions:
            raise _err(f"kernel {k.name} has no rowwise or colwise section", k.span,
                       "add 'rowwise blocks 1x32 profile NAME { ... }'")
        used: set = set()
        dirs, dnames = [], set()
        for d in k.directions:
            if d.name in dnames:
                raise _err(f"kernel {k.name} declares {d.name} twice", d.span, "merge the two sections")
            dnames.add(d.name)
            dirs.append(_build_direction(d, scope, options, used, k.groups))
        if k.groups is not None and not any(d.segmented for d in dirs):
            raise _err(f"kernel {k.name} takes groups '{k.groups[0]}' but no direction is segmented",
                       k.groups[2], "mark the colwise direction 'segmented', or remove the parameter")
        for name, span in options.items():
            if name not in used:
                raise _err(f"option '{name}' is declared but no layout uses it", span,
                           f"use it as '<layout> if {name}' in a store line, or remove it")
        if all(d.condition is not None for d in dirs):
            # some setting of the options leaves no direction when no direction is unconditional,
            # unless one is guarded by an option and another by its negation
            conds = {d.condition for d in dirs}
            if not any((not neg, opt) in conds for neg, opt in conds):
                c = dirs[0].condition
                raise _err(f"kernel {k.name} quantizes nothing when {c[1]} is "
                           f"{'on' if c[0] else 'off'}: every direction is conditional", dirs[0].span,
                           "make one direction unconditional (drop its 'if ...')")
        kernels.append(KernelIR(k.name, k.input_name, k.dtype, k.dims, tuple(options), tuple(dirs),
                                k.span, spec.path, spec_hash, tuple(options.values()),
                                (k.groups[0], k.groups[1]) if k.groups else None))
    return kernels
