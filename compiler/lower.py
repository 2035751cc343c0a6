"""Lowering: one `VariantIR` -> the template context (plain values and rendered expressions).

Templates see only what is built here. The lowering records every spec setting it turns into code;
a setting the spec wrote that no code consumed is a compile error (`Tracker.check`), so a declared
field can never be silently ignored. Index arithmetic comes from the layout algebra (`Chain.flat`),
rendered from the same `Expr` trees the tests evaluate.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from quantlay.errors import SpecError

from .expr import Bin, Const, Expr, Var
from .formats import bf16_bits, f32_bits
from .ir import DirectionIR, OutputIR, Setting, VariantIR
from . import tiles
from .layout import COLS, ROWS, Chain

TORCH_DTYPES = {"bf16": "torch.bfloat16", "fp16": "torch.float16", "fp32": "torch.float32"}


@dataclass
class Tracker:
    """Which explicit spec settings the generated code consumed."""
    settings: List[Tuple[str, Setting]] = field(default_factory=list)
    used: set = field(default_factory=set)

    def offer(self, scope: str, settings) -> None:
        self.settings += [(scope, s) for s in settings]

    def use(self, scope: str, key: str) -> None:
        self.used.add((scope, key))

    def check(self) -> None:
        for scope, s in self.settings:
            if (scope, s.key) not in self.used:
                raise SpecError(f"{scope}: setting '{s.key}' is not used by the generated kernel",
                                line=s.span.line, column=s.span.column,
                                hint="remove it, or use a kernel kind that implements it")


class SizeTable:
    """Run-time sizes (functions of M and N) passed to kernels as arguments.

    Passing them, instead of recomputing them in the kernel, lets Triton see their divisibility, so
    stores stay vectorised.
    """

    def __init__(self) -> None:
        self.names: Dict[str, str] = {}
        self.exprs: List[Tuple[str, Expr]] = []

    def __call__(self, e: Expr) -> Expr:
        if isinstance(e, (Const, Var)):
            return e
        key = e.render()
        if key not in self.names:
            name = f"s{len(self.exprs)}"
            self.names[key] = name
            self.exprs.append((name, e))
        return Var(self.names[key])


def _py_float(x: float) -> str:
    """A float literal that converts to exactly this fp32 value."""
    return repr(float(x))


def _e8m0_ctx(sc, el) -> Dict[str, object]:
    return {
        "mode": sc.mode,
        "even_add": hex(sc.even_add(el)),
        "rceil_recip": _py_float(sc.rceil_reciprocal(el)),
        "lo": sc.clamp[0], "hi": sc.clamp[1],
        "zero_amax": sc.zero_amax, "inf_amax": sc.inf_amax, "nan_amax": sc.nan_amax,
        "e0_one": sc.e0_multiplier == "one",
        "tensor_scale": False,
    }


def _store_format(sc) -> Optional[Dict[str, object]]:
    """The constants of a scale stored in a declared minifloat (NVFP4's E4M3, unsigned), from the
    library's declaration: its rounding on fp32 bits and its decoding."""
    if sc.storage != "e4m3":
        return None
    from .formats import element_formats
    fmt = element_formats()["e4m3"]()
    shift = 23 - fmt.mbits
    return {
        "name": fmt.name.upper(), "bias": fmt.bias, "mbits": fmt.mbits, "shift": shift,
        "min_normal": _py_float(2.0 ** (1 - fmt.bias)), "max_value": _py_float(fmt.max_value),
        "half_m1": f"0x{(1 << (shift - 1)) - 1:X}", "step": f"0x{1 << shift:X}",
        "rebias": 127 - fmt.bias, "mant_mask": (1 << fmt.mbits) - 1, "exp_mask": (1 << fmt.ebits) - 1,
        "mag_mask": f"0x{fmt.sign_bit - 1:X}", "nan": f"0x{fmt.nan:X}",
        "sub_unit": _py_float(2.0 ** (1 - fmt.bias - fmt.mbits)), "one": fmt.bias << fmt.mbits,
    }


def _f32_ctx(sc, el) -> Dict[str, object]:
    from .formats import FP32_MAX, f32
    return {
        "fmax": _py_float(f32(el.max_value)),
        "amax_floor": _py_float(f32(sc.amax_floor)),
        "has_floor": sc.amax_floor > 0,
        "pow2": sc.pow2,
        "rule": sc.rule,
        "store": sc.store,
        "tensor_scale": sc.tensor_scale,
        "fp32_max": _py_float(FP32_MAX),
    }


def transposed_tile(d: DirectionIR, data: OutputIR) -> bool:
    """Whether a direction works on the transposed input tile (its block axis made the tile's last axis).

    Only a colwise direction whose codes are packed two per byte needs it (the template packs along the
    tile's last axis). Every other colwise direction reduces over the tile's rows; a transposed layout
    then permutes the 8-bit codes, not the 16-bit input, on the way out.
    """
    return d.block_axis == ROWS and data.pack_axis is not None


def nan_blocks(sc) -> bool:
    """A NaN element makes its block's E8M0 byte 255 (multiplier NaN: every code of the block is NaN's)
    and no other element can become NaN, so codes may test NaN once per block, not per element."""
    return sc.name == "e8m0" and sc.nan_in_amax == "propagate" and sc.nan_amax == 255


def nan_by_block(el, sc) -> bool:
    """Whether the fp32 encoder leaves NaN to its caller: packed 4-bit codes set a NaN block's after
    packing (see nan_blocks)."""
    return el.bits == 4 and nan_blocks(sc)


def lower_direction(d: DirectionIR, tr: Tracker, dtype: str = "bf16", oriented: bool = False) -> Dict[str, object]:
    scope = d.name
    tr.offer(scope, d.settings)
    el, sc = d.element, d.scale
    by_block = nan_by_block(el, sc)
    # The bf16x2 encoders take bf16 input (in blocks along one axis, or square ones under a power of two:
    # element pairs along the last axis lie in one block either way). Under a power of two (E8M0) the product
    # is exact in bf16; an E4M3 block scale gives a NaN multiplier exactly for a NaN amax and a finite,
    # positive one otherwise (with a tensor scale above 2^-122, which the kernel checks), so its NaN codes
    # are set per block.
    pairs = dtype == "bf16"
    # (square blocks: 4-bit codes only, the form the GPU tests run; 6-bit square blocks keep the fp32 encoder)
    pow2_form = pairs and el.bf16x2_rules and nan_blocks(sc) and not (d.block2d and el.bits == 6)
    f32_form = pairs and not d.block2d and el.bf16x2_fp32_rules and sc.name == "f32" and sc.store == "e4m3"
    store_format = _store_format(sc)
    for key in ("ties", "zero_sign", "nan"):
        tr.use(scope, f"element.{key}")
    for f in dataclasses.fields(sc):  # every field of the scale format is rendered below
        tr.use(scope, f"scale.{f.name}")
    ctx = {
        "name": d.name,
        "B": d.block_size,
        "oriented": oriented,
        # blocks along the rows of an untransposed tile: reduce over axis 1 of [R / B, B, C]
        "row_blocks": not oriented and d.block_axis == ROWS and not d.block2d,
        # the rowwise direction's scale math may run in place (the INPLACE_ROWS launch option)
        "inplace_option": d.name == "rowwise",
        "bh": d.block[0], "bw": d.block[1],
        "block2d": d.block2d,
        "segmented": d.segmented,
        "R": "BLOCK_N" if oriented else "BLOCK_M",
        "C": "BLOCK_M" if oriented else "BLOCK_N",
        "axis": "cols" if d.block_axis == COLS else "rows",
        "block": f"{d.block[0]}x{d.block[1]}",
        "element": repr(el),
        "scale_fmt": repr(sc),
        "scale_kind": sc.name,
        # the stored scale's format, as the kernel's comments name it
        "scale_label": "E8M0" if sc.name == "e8m0" else {"e4m3": "E4M3", "ue8m0": "UE8M0"}.get(sc.store, "fp32"),
        "scale_storage": sc.storage,
        # a stored scale of 1.0 (what masked lanes load): E8M0 127, the stored format's code of 1, fp32 1.0
        "scale_one": {"e8m0": "127", "f32": "1.0"}.get(sc.storage) or f"0x{store_format['one']:02X}",
        "store_format": store_format,
        "nan_propagate": sc.nan_in_amax == "propagate",
        "nan_by_block": by_block,
        # |q| + 2^(1-bias) is exact near every rounding boundary only when q has few significant bits:
        # a bf16/fp16 input times a power of two. Otherwise the subnormal range is rounded exactly.
        "cheap_subnormals": dtype in ("bf16", "fp16") and sc.name == "e8m0",
        # Compiled kernels encode bf16 input in bf16x2 PTX (see pow2_form and f32_form above); the fp32
        # multiplier's form takes the product in fp32 and narrows it (bf16x2_f32).
        "bf16x2": pow2_form or f32_form,
        "bf16x2_f32": f32_form,
        **_element_ctx(el),
        **(_e8m0_ctx(sc, el) if sc.name == "e8m0" else _f32_ctx(sc, el)),
    }
    return ctx


def _element_ctx(el) -> Dict[str, object]:
    """The element format's constants: the encoder's (fp32 bit patterns) and the decoder's."""
    sub = 2.0 ** (1 - el.bias)  # the smallest normal value: |q| + sub puts subnormals in the mantissa
    shift = 23 - el.mbits
    return {
        "ties": el.ties,
        "el_name": el.name,
        "bits": el.bits,
        "packed": el.bits == 4,
        "packed6": el.bits == 6,  # four codes in three bytes
        "sub_add": _py_float(sub),
        "sub_bits": f"0x{f32_bits(sub):08X}",
        "norm_bits": f"0x{(127 - el.bias) << 23:08X}",
        "shift": shift,
        # ties-to-even rounding by one fp32 add (see _encode): the binade of |q| (at least the format's
        # smallest normal one, sub) picks a magic 2^(23 - mbits + E) whose ulp is the format's step there
        "magic_shift": f"0x{(23 - el.mbits) << 23:08X}",
        "magic_base": f"0x{f32_bits(sub) + ((23 - el.mbits) << 23):08X}",
        "max_value": _py_float(el.max_value),
        "half": f"0x{1 << (shift - 1):X}",
        "half_m1": f"0x{(1 << (shift - 1)) - 1:X}",
        "sign_shift": 32 - el.bits,
        "sign_val": el.sign_bit,
        "mag_mask": el.sign_bit - 1,
        "mbits": el.mbits,
        "mant_mask": (1 << el.mbits) - 1,
        "exp_rebias": 127 - el.bias,
        "sub_unit": _py_float(2.0 ** (1 - el.bias - el.mbits)),
        "decode_table": [repr(v) for v in el.grid()] if el.bits == 4 else None,
        "sub_scale": _py_float(2.0 ** (el.bias - 1 + el.mbits)),
        "zero_sign": el.zero_sign,
        "nan_code": el.nan,
        "nan_byte": el.nan | (el.nan << 4),
        "hw_dtype": el.hw_convert,
        # the bf16x2 encoder's constants (bf16 patterns): saturation, minus the smallest normal value, the
        # magic M's factor 2^(7 - mbits) on a binade (M's ulp is then the format's step there) and M in the
        # smallest normal binade, and the scale that turns a rounded value into its code: 2^(bias - 127)
        # maps the format's smallest normal onto bf16's, so the bf16 exponent and top mantissa bits of the
        # product are the code, at bit `bf_shift`.
        "bf_max": f"0x{bf16_bits(el.max_value):04X}",
        "bf_neg_min_normal": f"0x{bf16_bits(-sub):04X}",
        "bf_magic_scale": f"0x{bf16_bits(2.0 ** (7 - el.mbits)):04X}",
        "bf_magic_base": f"0x{bf16_bits(sub * 2.0 ** (7 - el.mbits)):04X}",
        "bf_code_scale": f"0x{bf16_bits(2.0 ** (el.bias - 127)):04X}",
        "bf_shift": 7 - el.mbits,
        "bf_code_exp": el.bias - 127,
        "hw_nan_select": el.hw_nan_select,
        "max_code": el.max_code,
        "P": el.max_pow2,
    }


def _oriented(o: OutputIR, oriented: bool):
    """How the kernel addresses an output tile.

    Each direction works on a tile whose last axis is its block axis: rowwise on the input tile
    [BLOCK_M, BLOCK_N], colwise on its transpose [BLOCK_N, BLOCK_M]. An output whose layout starts with
    that same transpose is addressed in the tile's own coordinates by the remaining stages (so the
    data tile can be stored in physical order); otherwise the full chain is applied to logical
    coordinates. Identity stages (row_major) are dropped. Returns (use_tile_coords, stages).
    """
    stages = list(zip(o.chain.stages, o.chain.fills or (None,) * len(o.chain.stages)))
    if oriented and stages and stages[0][0].axis_map == (COLS, ROWS):
        return True, [sf for sf in stages[1:] if sf[0].axis_map != (ROWS, COLS)]
    if not oriented:
        return True, [sf for sf in stages if sf[0].axis_map != (ROWS, COLS)]
    return False, stages


def _bcast(j: int, n: int) -> str:
    return "[" + ", ".join(":" if i == j else "None" for i in range(n)) + "]"


def lower_output(o: OutputIR, d: DirectionIR, variant: VariantIR, sizes: SizeTable,
                 oriented: bool) -> Dict[str, object]:
    """`oriented`: the direction's tile is the transposed input tile (see transposed_tile)."""
    if o.role == "data" and o.pack_axis is not None and o.pack_axis != d.block_axis:
        raise SpecError(f"{o.key}: packing along the {'rows' if o.pack_axis == ROWS else 'cols'} of a "
                        f"{d.name} direction is not supported by the MX template; pack along the block axis "
                        f"(for colwise data, store it as transpose | packed(...))",
                        line=o.spans[0].line if o.spans else None, column=o.spans[0].column if o.spans else None)
    # Tile of this output in the direction's orientation, and the program ids of its two axes.
    # (rows, cols) of the tile per output unit: a code, two packed codes, or one scale per block
    bh, bw = d.block if o.role == "scale" else (1, 1)
    codes, nbytes = o.pack_ratio
    if o.role == "data" and o.pack_axis is not None:  # 6-bit codes: the tile counts groups of four
        bh, bw = (codes, 1) if o.pack_axis == ROWS else (1, codes)
    height, width = (str(bw), str(bh)) if oriented else (str(bh), str(bw))
    tile = (f"BLOCK_N // {height}", f"BLOCK_M // {width}") if oriented else (f"BLOCK_M // {height}", f"BLOCK_N // {width}")
    tile = tuple(t[:-len(" // 1")] if t.endswith(" // 1") else t for t in tile)
    pids = ("n", "m") if oriented else ("m", "n")
    tile_coords, stages = _oriented(o, oriented)
    if tile_coords:
        logical = (o.logical[1], o.logical[0]) if oriented else o.logical
        chain = Chain(tuple(st for st, _ in stages), tuple(f for _, f in stages))
        rc = ("ti", "tj")
    else:
        logical, chain, rc = o.logical, o.chain, ("tj", "ti")
    rows, cols = (sizes(e) for e in logical)
    plan = None
    # In a segmented kernel the program's rows are padded output rows; the other directions' outputs
    # are addressed by the input rows they map to (`in_rows`), element by element.
    mapped_rows = variant.kernel.groups is not None and not d.segmented
    if (o.role == "data" and tile_coords and len(stages) <= 1 and chain.fill() is None and not mapped_rows
            and nbytes == 1):
        plan = tiles.plan(stages[0][0] if stages else None, tile, tuple("pid_" + p for p in pids), rows, cols,
                          sizes)
    prow, pcol = (sizes(e) for e in chain.logical_padding(rows, cols))
    offset = chain.flat(Var("r"), Var("c"), rows, cols, sizes)
    phys = o.chain.physical_shape(o.logical[0], o.logical[1])
    padded = o.chain.logical_padding(o.logical[0], o.logical[1])
    # Input-coordinate extent this output covers (its padding included): the grid must reach it.
    scale_r = codes if o.pack_axis == ROWS else (d.block[0] if o.role == "scale" else 1)
    scale_c = codes if o.pack_axis == COLS else (d.block[1] if o.role == "scale" else 1)
    per = f" // {nbytes}" if nbytes > 1 else ""  # bytes of a group
    reqs = []
    for stage, param, value, k in o.chain.requirements(o.logical[0], o.logical[1]):
        option = dict(o.conditions).get(stage)
        text = _plain(value)
        fix = _pad_fix(value, k) + (f", or turn off {option}" if option else "")
        reqs.append({
            "value": value.render(), "k": k,
            "message": (f"{o.key}: layout {stage} needs its {param} ({text}) to be a multiple of {k}, "
                        f"got {text} = {{value}}; {fix}"),
        })
    if o.pack_axis is not None:
        dim = "N" if o.pack_axis == COLS else "M"
        share, rule, fix = (("two 4-bit codes share a byte", "be even", "an even size") if nbytes == 1 else
                            ("four 6-bit codes share three bytes", "be a multiple of 4", "a multiple of 4"))
        reqs.append({"value": dim, "k": codes,
                     "message": (f"{o.key}: {share} along {dim}, so {dim} must {rule}, got {dim} = {{value}}; "
                                 f"pad {dim} to {fix}")})
    has_pad = padded[0].render() != o.logical[0].render() or padded[1].render() != o.logical[1].render()
    # Tile multiples the kernel's BLOCK_M / BLOCK_N must respect for the tiled store.
    tile_mult = (1, 1)
    if plan is not None:
        ir, ic = plan.inner
        h, w = int(height), int(width)
        tile_mult = (w * ic, h * ir) if oriented else (h * ir, w * ic)
    # A scale tile whose rows are contiguous bytes along M in memory (the plain transpose: [N, M // B]
    # E8M0 bytes): a program over a column of tiles (REGION_M) can store each row's bytes as one word.
    # region_block_rows: B, the input rows per byte along such a row (0: not such an output).
    region_words = (o.role == "scale" and d.scale.storage != "f32" and tile_coords and not stages
                    and not has_pad and not mapped_rows and pids == ("n", "m"))
    return {
        "key": o.key, "role": o.role, "direction": o.direction,
        "region_block_rows": d.block[0] if region_words else 0,
        "tl_dtype": "tl.float32" if o.role == "scale" and d.scale.storage == "f32" else "tl.uint8",
        "torch_dtype": "torch.float32" if o.role == "scale" and d.scale.storage == "f32" else "torch.uint8",
        "ptr": f"{o.key}_ptr",
        "pids": pids, "tile": tile, "plan": plan, "rc": rc, "mapped_rows": mapped_rows,
        "bcast": [_bcast(j, len(plan.dims)) for j in range(len(plan.dims))] if plan else [],
        "tile_mult": tile_mult,
        "offset": offset.render(),
        "sector_next": _sector_next(offset) if o.role == "data" and nbytes == 1 else None,
        "rows": rows.render(), "cols": cols.render(),
        "prows": prow.render(), "pcols": pcol.render(),
        "has_padding": has_pad,
        "fill": o.chain.fill() if has_pad else None,
        "pack_axis": {None: None, ROWS: "rows", COLS: "cols"}[o.pack_axis],
        "low_even": o.pack_low != "odd",
        "low_first": o.pack_low != "last",
        "pack_bits": o.pack_bits,
        # 6-bit codes stored in the tile's own coordinates, row-major: 16 codes as three int32 words where
        # the packed dimension is a multiple of 16 (WORDS6), byte by byte otherwise
        "words6": (o.role == "data" and o.pack_bits == 6 and tile_coords and not stages and not mapped_rows
                   and not has_pad),
        "packed_dim": ("N" if o.pack_axis == COLS else "M") if o.pack_axis is not None else None,
        "layout": o.layout_name(),
        "block": f"{o.block[0]}x{o.block[1]}",
        "format": o.format,
        "logical_py": [e.render() for e in o.logical],
        "padded_py": [e.render() for e in padded],
        "physical_py": [e.render() for e in phys],
        "extent_rows_py": f"({padded[0].render()}) * {scale_r}" + (per if o.pack_axis == ROWS else ""),
        "extent_cols_py": f"({padded[1].render()}) * {scale_c}" + (per if o.pack_axis == COLS else ""),
        "requirements": reqs,
        "layout_doc": _layout_doc(o),
    }


class _Sizes(dict):
    """Every size a large power of two (the layouts' tiles divide it)."""
    def __missing__(self, name):
        return 1 << 12


@functools.lru_cache(maxsize=None)
def _sector_next(offset: Expr) -> Optional[str]:
    """Where the 16 bytes after a 16-byte run (r, c .. c + 15), r even and c a multiple of 32, lie in
    an output's coordinates, so that both fill one aligned 32-byte sector: "cols" (r, c + 16 ..), "rows"
    (r + 1, c ..), or None (elsewhere). A kernel storing 16-byte runs pairs its lanes by it."""
    def at(r, c):
        return offset.evaluate(_Sizes(r=r, c=c))
    points = [(r, c) for r in (0, 2, 14, 18, 130) for c in (0, 32, 96, 512)]
    if any(at(r, c) % 32 or at(r, c + j) != at(r, c) + j for r, c in points for j in range(16)):
        return None
    for name, (dr, dc) in (("cols", (0, 16)), ("rows", (1, 0))):
        if all(at(r + dr, c + dc + j) == at(r, c) + 16 + j for r, c in points for j in range(16)):
            return name
    return None


def _plain(e: Expr) -> str:
    s = e.render()
    return s[1:-1] if s.startswith("(") and s.endswith(")") else s


def _pad_fix(value: Expr, k: int) -> str:
    """How to satisfy `value % k == 0` in terms of the input's M or N."""
    if isinstance(value, Var):
        return f"pad {value.name} to a multiple of {k}"
    if (isinstance(value, Bin) and value.op == "//" and isinstance(value.a, Var)
            and isinstance(value.b, Const)):
        return f"pad {value.a.name} to a multiple of {value.b.value * k}"
    return f"pad the input so that {_plain(value)} is a multiple of {k}"


def _layout_doc(o: OutputIR) -> str:
    shape = ", ".join(e.render() for e in o.chain.physical_shape(o.logical[0], o.logical[1]))
    logical = ", ".join(e.render() for e in o.logical)
    f32 = o.role == "scale" and o.format == "f32"
    packing = "codes packed two per byte" if o.pack_bits == 4 else "codes packed four in three bytes"
    what = packing if o.pack_axis is not None else (
        ("fp32 dequantization multipliers" if f32 else f"{o.format.upper()} bytes") if o.role == "scale" else "codes")
    return (f"{o.key}: logical [{logical}] ({what}), stored as {o.layout_name()} -> "
            f"{'float32' if f32 else 'uint8'} [{shape}]")


def _hopper_family(k, directions) -> Optional[str]:
    """The Hopper (Gluon) cast-transpose family that covers the kernel, or None. Each takes bf16 input quantized
    rowwise and columnwise, nothing segmented or two-level. Under E8M0 scales in 1x32 and 32x1 blocks:
    "mxfp4", both into 4-bit codes (even element in the low nibble) by the bf16x2 power-of-two encoders, the
    colwise direction on the transposed tile (also in 32x32 blocks, one scale a square block shared by both
    directions); "mxfp8", both into 8-bit codes by the GPU's convert, the colwise
    codes stored transposed (the Triton kernel's transposition through shared memory is what the family
    avoids). Under fp32 scales stored as fp32 in 1x128 and 128x1 blocks: "fp8_1x128", both into 8-bit codes by
    the GPU's convert, the colwise codes stored as they are or transposed (the fused 1x128 casts: the family's
    reductions across warps take two barriers a tile where the compiler's take 15), and so the segmented fused
    cast: its colwise direction segmented (a program's rows are padded rows of one group) and stored as it is
    (the form the GPU tests ran), no output padded."""
    names = [d["name"] for d in directions]
    if k.dtype != "bf16" or sorted(names) != ["colwise", "rowwise"]:
        return None
    row, col = directions if names[0] == "rowwise" else directions[::-1]
    blocks = ((row["bh"], row["bw"]), (col["bh"], col["bw"]))
    if (blocks == ((1, 128), (128, 1)) and not row["oriented"]
            and all(d["scale_kind"] == "f32" and d["store"] == "f32" and not d["tensor_scale"] and not d["packed"]
                    and d["hw_dtype"] for d in directions)
            and (not k.groups or (col["segmented"] and not row["segmented"]
                                  and "transpose" not in col["data"]["layout"].split("|")
                                  and not any(d[o]["has_padding"] for d in directions for o in ("data", "scale"))))):
        return "fp8_1x128"
    square = blocks == ((32, 32), (32, 32))
    if k.groups or not (blocks == ((1, 32), (32, 1)) or square) or row["oriented"]:
        return None
    if square and any(not set(d[o]["layout"].split("|")) <= {"row_major", "transpose", "packed(low=even)"}
                      for d in directions for o in ("data", "scale")):
        return None  # in 32x32 blocks only the layouts its GPU tests ran: plain, the colwise outputs transposed
    if any(d["scale_kind"] != "e8m0" or d["tensor_scale"] for d in directions):
        return None
    if (col["oriented"] and (col["pair"] or square) and all(d["packed"] and d["bf16x2"] and not d["bf16x2_f32"]
                                                             and d["data"]["low_even"] for d in directions)):
        return "mxfp4"
    transposed = "transpose" in col["data"]["layout"].split("|")
    if transposed and not square and all(not d["packed"] and d["hw_dtype"] for d in directions):  # (8-bit: never oriented)
        return "mxfp8"
    return None


def lower(variant: VariantIR) -> Dict[str, object]:
    """The complete template context for one variant."""
    tr = Tracker()
    sizes = SizeTable()
    k = variant.kernel
    directions = []
    outputs = []
    for d in variant.directions:
        oriented = transposed_tile(d, variant.output(f"{d.name}_data"))
        dctx = lower_direction(d, tr, k.dtype, oriented)
        data = lower_output(variant.output(f"{d.name}_data"), d, variant, sizes, oriented)
        scale = lower_output(variant.output(f"{d.name}_scale"), d, variant, sizes, oriented)
        dctx["data"], dctx["scale"] = data, scale
        # a transposed 4-bit direction of bf16 input (the bf16x2 encoder) quantizes row pairs where they
        # were loaded (even and odd rows apart) and transposes its bytes, not the bf16 tile
        dctx["pair"] = oriented and dctx["packed"] and dctx["bf16x2"] and not dctx["block2d"] and not k.groups
        directions.append(dctx)
        outputs += [data, scale]
    tr.check()
    # The even/odd row load serves one such direction; a bf16x2 direction with blocks along the rows of
    # an untransposed tile beside it reduces the two rows of a pair in one word (no other bf16x2 kind).
    for d in directions:
        d["row_pairs"] = d["bf16x2"] and not (d["oriented"] or d["row_blocks"] or d["block2d"])
    others = any(d["bf16x2"] and not (d["pair"] or d["row_pairs"]) for d in directions)
    if sum(d["pair"] for d in directions) != 1 or others:
        for d in directions:
            d["pair"] = False
    for d in directions:
        d["row_pairs"] = d["row_pairs"] and any(c["pair"] for c in directions)
    hopper = _hopper_family(k, directions)
    import math
    # A tile must hold whole blocks along each axis and whole units of every tiled layout; narrower tiles
    # than the default stay legal for the tuner. The default (used without a tuned entry) is what the
    # H200 sweeps preferred: a block's rows (at least 32) by at least 64 columns (MXFP8 32x64, a 128x1
    # cast 128x64, 1x128 rowwise 32x128).
    mult_m = [o["tile_mult"][0] for o in outputs]
    mult_n = [o["tile_mult"][1] for o in outputs]
    tile_m = math.lcm(2, *[d.block[0] for d in variant.directions], *mult_m)
    tile_n = math.lcm(2, *[d.block[1] for d in variant.directions], *mult_n)
    default_m, default_n = max(tile_m, 32), max(tile_n, 64)
    # About 64 elements per thread where blocks span rows (few warps to cross: MXFP8 32x64 on one warp,
    # 128x1 casts 128x64 on four, within 1% of two), 16 where every block is one row (1x128: 32x128 on 8).
    per_warp = 2048 if any(d.block[0] > 1 for d in variant.directions) else 512
    word_outputs = [o for o in outputs if o["region_block_rows"]]
    return {
        "name": variant.name,
        "kernel": k.name,
        "spec_path": k.spec_path or "<text>",
        "spec_hash": k.spec_hash,
        "dtype": k.dtype,
        "torch_dtype": TORCH_DTYPES[k.dtype],
        "options": [{"name": n, "value": v} for n, v in variant.options],
        "directions": directions,
        "outputs": outputs,
        "sizes": [{"name": n, "expr": e.render()} for n, e in sizes.exprs],
        "min_tile_m": tile_m, "min_tile_n": tile_n,
        "has_inplace_option": any(c["inplace_option"] for c in directions),
        # the one output REGION_M > 1 stores as words (None: REGION_M changes nothing)
        "region_output": word_outputs[0] if len(word_outputs) == 1 and not k.groups else None,
        "pair_rows": any(c["pair"] for c in directions),
        # the Hopper (sm_90) path beside the Triton kernel, a family (templates/mx_cast_gluon.jinja) or None.
        # The MX families' default stages the scales (the scale pass) where a scale layout is plain: a tile
        # gives each of its rows 2 bytes, each a partial-sector write stored directly (fp32 scales: 4 bytes
        # a row, stored directly as the Triton kernel's tuned entries do)
        "hopper": hopper,
        # the fused family's register cap where its kernel fits 80 registers with no spill (the colwise codes
        # transposed, rows not segmented): three programs an SM, not two (H200: 0.3-2.4 points of a copy; the
        # others spill at 80, and spilling the segmented kernel cost 1.2-2.9 points)
        "hopper_maxnreg": 80 if hopper == "fp8_1x128" and not k.groups and any(
            "transpose" in d["data"]["layout"].split("|") for d in directions if d["name"] == "colwise") else 0,
        "hopper_staged": hopper in ("mxfp4", "mxfp8") and any(set(o["layout"].split("|")) <= {"row_major", "transpose"}
                                                              for o in outputs if o["role"] == "scale"),
        "words6": [o for o in outputs if o["words6"]],
        "tile_m": default_m, "tile_n": default_n,
        "num_warps": min(8, max(1, default_m * default_n // per_warp)),
        "nan_propagate_all": all(d["nan_propagate"] for d in directions),
        "batch_rows": max([d.block[0] for d in variant.directions if d.block2d] + [1]),
        "groups": k.groups[0] if k.groups else None,
        "segment_rows": next((d.block[0] for d in variant.directions if d.segmented), None),
        "canonical": variant.canonical().splitlines(),
        # two-level scaling: the per-tensor fp32 scale amax(x) / divisor, given or computed on the device
        "tensor_scale": next((_py_float(d.scale.tensor_scale_divisor(d.element)) for d in variant.directions
                              if d.scale.tensor_scale), None),
    }
