"""`quantlay verify`: prove on real data that each kernel is exact and that every option matters.

For every kernel of a spec, every option combination and every input class: run the generated kernel,
compare each output with the reference bit for bit, and for every option check that flipping it
changes the output bytes. Inputs have the spec's dtype; the default shapes are derived from what the
layouts require (every variant can take them), so nothing is skipped: a run that fails, or a variant or
option that no input reached, is a failure. Runs on CUDA when present (the tuned tiles), otherwise in
Triton's interpreter (wider tiles: `interpreter_tile`).
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

from . import inputs, reference
from .inputs import normal
from . import spec as specmod
from .expr import Var
from .gemm import producer_shape
from .ir import KernelIR
from .layout import COLS

TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
BASE_SHAPES = ((128, 192), (96, 256))  # rounded up to the layouts' multiples: one ragged in M, one in N


@dataclass
class Report:
    lines: List[str] = field(default_factory=list)
    failures: List[str] = field(default_factory=list)

    def ok(self) -> bool:
        return not self.failures


def _device() -> str:
    if torch.cuda.is_available():
        return "cuda"
    os.environ.setdefault("TRITON_INTERPRET", "1")
    return "cpu"


def multiples(kernel: KernelIR) -> Tuple[int, int]:
    """The smallest (mM, mN) such that every variant's layouts take any M % mM == 0, N % mN == 0."""
    reqs = []
    for v in kernel.variants():
        for o in v.outputs:
            reqs += [(value, k) for _, _, value, k in o.chain.requirements(*o.logical)]
            if o.pack_axis is not None:  # two codes per byte along the packing axis
                reqs.append((Var("N") if o.pack_axis == COLS else Var("M"), 2))

    def ok(M: int, N: int) -> bool:
        env = {"M": M, "N": N, "G": 3}
        return all(int(value.evaluate(env)) % k == 0 for value, k in reqs)
    big = 2 ** 14
    mM = next(m for m in range(1, big + 1) if ok(m, big))
    mN = next(n for n in range(1, big + 1) if ok(big, n))
    return mM, mN


def default_shapes(kernel: KernelIR) -> Tuple[Tuple[int, int], ...]:
    mM, mN = multiples(kernel)
    return tuple(dict.fromkeys((math.ceil(m / mM) * mM, math.ceil(n / mN) * mN) for m, n in BASE_SHAPES))


def interpreter_tile(mod, M: int, N: int) -> Dict[str, int]:
    """The tile verify launches in Triton's interpreter, which runs each program op by op in Python: the
    module's default tile doubled (up to 128) while it still splits M and N in two, so tile boundaries are
    crossed along both axes at a fraction of the default tile's time (about 4x less at 128x256). A tile
    changes speed only, never bytes; the other tests run the default tiles and the tuned ones."""
    def widen(t: int, n: int) -> int:
        while 2 * t <= 128 and n > 2 * t:
            t *= 2
        return t
    return {"block_m": widen(mod.BLOCK_M, M), "block_n": widen(mod.BLOCK_N, N)}


def verify(spec, shapes: Optional[Sequence[Tuple[int, int]]] = None, seed: int = 0,
           log: Optional[Callable[[str], None]] = None) -> Report:
    """`shapes` None: each kernel's default shapes (`default_shapes`). `log` receives each line as it is
    known (progress); the report holds them all."""
    from .build_cache import build
    device = _device()
    rep = Report()

    def say(line: str) -> None:
        rep.lines.append(line)
        if log:
            log(line)
    say(f"verify on {device} ({'compiled' if device == 'cuda' else 'Triton interpreter'}), inputs "
        f"{', '.join(inputs.CLASSES)}")
    for kernel in specmod.load(spec):
        kshapes = tuple(shapes) if shapes else default_shapes(kernel)
        dtype = TORCH_DTYPES[kernel.dtype]
        say(f"kernel {kernel.name}: {kernel.dtype} input, {len(kernel.variants())} variant(s), shapes "
            f"{', '.join(f'{m}x{n}' for m, n in kshapes)}")
        outputs: Dict[Tuple, Dict[Tuple, Dict[str, torch.Tensor]]] = {}
        for variant in kernel.variants():
            t0 = time.perf_counter()
            mod = build(spec, kernel=kernel.name, options=dict(variant.options))
            ran, bad = 0, len(rep.failures)
            for (M, N) in kshapes:
                for cname, make in inputs.CLASSES.items():
                    x = make(M, N, dtype=dtype, seed=seed)
                    groups = torch.tensor([M // 3, 0, M - M // 3]) if kernel.groups else None
                    try:
                        args = (groups.to(device),) if groups is not None else ()
                        tile = interpreter_tile(mod, M, N) if device == "cpu" else {}
                        res = mod.quantize(x.to(device), *args, **tile)
                    except Exception as exc:  # noqa: BLE001 - every failure is reported, none hidden
                        rep.failures.append(f"{variant.name} {M}x{N} {cname}: the kernel raised "
                                            f"{type(exc).__name__}: {exc}")
                        continue
                    ran += 1
                    ref = reference.quantize(variant, x, groups)
                    got = {k: v.tensor.cpu() for k, v in res.items()}
                    outputs.setdefault(variant.options, {})[(M, N, cname)] = got
                    for key in ref:
                        if not reference.same_values(got[key], ref[key]):  # any NaN equals any NaN
                            g, r = got[key], ref[key]
                            n = int(((g != r) & ~(g.isnan() & r.isnan() if g.is_floating_point() else False)).sum()) \
                                if g.shape == r.shape else -1
                            rep.failures.append(f"{variant.name} {M}x{N} {cname} {key}: "
                                                + (f"{n} bytes differ from the reference" if n >= 0 else
                                                   f"shape {tuple(got[key].shape)}, reference "
                                                   f"{tuple(ref[key].shape)}"))
            status = "exact " if ran and len(rep.failures) == bad else "FAILED"
            if not ran:
                rep.failures.append(f"{variant.name}: no input reached this variant")
            say(f"  {status} {variant.name} ({ran} runs, {time.perf_counter() - t0:.1f} s)")
        for opt in kernel.options:
            compared = changed = 0
            for v in kernel.variants():
                if dict(v.options)[opt]:
                    continue
                flipped = tuple((n, (not b) if n == opt else b) for n, b in v.options)
                a, b = outputs.get(v.options, {}), outputs.get(flipped, {})
                for c in set(a) & set(b):
                    compared += 1
                    changed += (set(a[c]) != set(b[c]) or any(
                        a[c][k].shape != b[c][k].shape or not torch.equal(a[c][k], b[c][k]) for k in a[c]))
            if not compared:
                rep.failures.append(f"{kernel.name}: option {opt} could not be compared (no input ran under "
                                    f"both settings)")
                say(f"  option {kernel.name}.{opt}: NOT COMPARED")
            elif changed < compared:
                rep.failures.append(f"{kernel.name}: flipping {opt} left every output byte the same on "
                                    f"{compared - changed} of {compared} inputs")
                say(f"  option {kernel.name}.{opt}: FAILED, some inputs do not see it")
            else:
                say(f"  option {kernel.name}.{opt}: flipping it changes the output bytes ({compared} inputs)")
    casts: Dict[Tuple, object] = {}  # the producers' casts of the random operands, shared by the GEMMs
    for g in specmod.load_gemms(spec):
        verify_gemm(g, device, seed, say, rep, casts)
    if len(rep.lines) == 1:
        rep.failures.append("the spec declares no kernel and no gemm: nothing was verified")
    return rep


GEMM_SHAPE = (96, 160, 320)  # M, N, K: partial tiles and a partial last K block
GEMM_LENS = (30, 0, 66)      # grouped: an empty group among them


def verify_gemm(g, device: str, seed: int, say, rep: Report, casts: Optional[Dict[Tuple, object]] = None) -> None:
    """A GEMM on engineered exact inputs (bit-exact against the reference) and on the producers' casts
    of random inputs (within 1e-6 of the reference rounded to the output dtype). `casts` keeps each
    producer's cast of a random operand for the next GEMM that reads the same one."""
    casts = {} if casts is None else casts
    from quantlay.generated import find
    t0 = time.perf_counter()
    M, N, K = GEMM_SHAPE
    if g.groups == "rows":  # b stacks one matrix per group: square blocks must not straddle two of them
        K = 256
    mod = find(g.name) if _shipped(g) else None
    if mod is None:
        from .build_cache import build_gemm
        mod = build_gemm(g)
    G = len(GEMM_LENS) if g.groups else 1
    lens = torch.tensor(GEMM_LENS, device=device) if g.groups else None
    offs = torch.tensor([0] + list(torch.tensor(GEMM_LENS).cumsum(0).tolist()), device=device) if g.groups == "rows" else None

    Kc = M if g.groups == "contraction" else K  # the contraction: tokens for the weight gradient
    Mo, No = (N, K) if g.groups == "contraction" else (M, N)

    def shape(op, free):
        return producer_shape(op, g.groups, Mo, No, Kc, G)
    ok = True
    for kind in ("exact", "random"):
        if kind == "exact":
            mk = lambda op, free, s: inputs.exact_operand(op, shape(op, free), device, G, lens if op.direction.segmented else None, seed + s)  # noqa: E731
        else:
            def mk(op, free, s):
                from quantlay.generated import find as f
                prod = f(op.variant.kernel.name, **{n: v for n, v in op.variant.options if v})
                key = (prod.NAME, shape(op, free), seed + s, op.direction.segmented and g.groups and GEMM_LENS)
                if key not in casts:
                    x = normal(*shape(op, free), seed=seed + s).to(device)
                    casts[key] = prod.quantize(x, lens) if op.direction.segmented else prod.quantize(x)
                return casts[key]
        a = mk(g.a, Mo, 1)
        b = mk(g.b, No, 2)
        o = a.extras["padded_offsets"] if g.groups == "contraction" else offs
        args = (o,) if g.groups else ()
        out = torch.zeros((G, Mo, No), device=device) if g.accumulate else None
        y = mod.gemm(a, b, *args, out=out) if g.accumulate else mod.gemm(a, b, *args)
        ref = reference.gemm(g, a, b, o).to(y.dtype).cpu()
        y = y.cpu()
        if kind == "exact" and not torch.equal(y, ref):
            ok = False
            rep.failures.append(f"{g.module_name} exact inputs: {(y != ref).sum().item()} of {y.numel()} outputs differ "
                                f"from the reference")
        if kind == "random":
            yd, rd = y.double(), ref.double()
            err = float(1 - 2 * (yd * rd).sum() / ((yd * yd).sum() + (rd * rd).sum()))
            if not err < 1e-6:
                ok = False
                rep.failures.append(f"{g.module_name} random inputs: 1 - cos-like error {err:.3g} >= 1e-6")
    say(f"  {'exact ' if ok else 'FAILED'} {g.module_name} (engineered and random inputs, {time.perf_counter() - t0:.1f} s)")


def _shipped(g) -> bool:
    from quantlay.generated import VARIANTS
    return any(k == g.name and mod == g.module_name for (k, _), mod in VARIANTS.items())
