"""`quantlay compare`: run a hand-written kernel and the generated one on the same inputs, decode both
through the layout algebra, and explain every difference in one sentence.

The binding (TOML) says how to call the hand-written callable, which spec output each returned value
is, and which option values the hand-written code claims to honour. Diagnoses, tried in order:

* layout: the hand-written bytes equal the reference under another option setting of the spec (e.g. it
  ignores `shuffle_columnwise_data`);
* numerics: they equal the reference with one format rule changed (E2M1 tie rule or sign of zero,
  E8M0 mode, amax == 0 / Inf / NaN convention), named with the elements or blocks affected;
* padding: only padding cells differ, and hold another fill than the declared one;
* otherwise: the pattern of mismatching rows, columns and blocks, with examples.
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import torch

from quantlay.errors import QuantlayError, did_you_mean

from . import inputs, reference
from . import spec as specmod
from .formats import E8M0_MODES, TIE_RULES, ZERO_SIGN_RULES
from .ir import KernelIR, VariantIR

OUTPUT_KEYS = ("rowwise_data", "rowwise_scale", "colwise_data", "colwise_scale")


class BindingError(QuantlayError):
    """A binding file or callable that cannot be used (exit status 2)."""


@dataclass
class Binding:
    kernel: str
    options: Dict[str, bool]
    args: List[str]
    kwargs: Dict[str, object]
    outputs: Dict[str, object]


def load_binding(path: str, kernels: Dict[str, KernelIR]) -> Binding:
    import tomllib
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except FileNotFoundError:
        raise BindingError(f"binding file {path!r} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise BindingError(f"binding {path}: not valid TOML: {exc}") from None
    kernel = raw.get("kernel")
    if kernel not in kernels:
        raise BindingError(f"binding {path}: kernel = {kernel!r} is not a kernel of the spec; "
                           f"{did_you_mean(str(kernel), kernels) or 'kernels: ' + ', '.join(kernels)}")
    k = kernels[kernel]
    options = raw.get("options", {})
    for name, val in options.items():
        if name not in k.options:
            raise BindingError(f"binding {path}: [options] {name} is not an option of {kernel}; "
                               f"{did_you_mean(name, k.options) or 'options: ' + ', '.join(k.options)}")
        if not isinstance(val, bool):
            raise BindingError(f"binding {path}: [options] {name} = {val!r} must be true or false")
    outputs = raw.get("outputs")
    if not outputs:
        raise BindingError(f"binding {path}: an [outputs] table is required, e.g. rowwise_data = 0")
    for key in outputs:
        if key not in OUTPUT_KEYS:
            raise BindingError(f"binding {path}: [outputs] {key} is not a spec output; "
                               f"{did_you_mean(key, OUTPUT_KEYS) or 'outputs: ' + ', '.join(OUTPUT_KEYS)}")
    call = raw.get("call", {})
    args = call.get("args", ["x"])
    return Binding(kernel, {n: bool(options.get(n, False)) for n in k.options}, list(args),
                   dict(call.get("kwargs", {})), dict(outputs))


def load_callable(target: str) -> Callable:
    if ":" not in target:
        raise BindingError(f"--against {target!r} must look like package.module:function")
    mod_name, fn_name = target.split(":", 1)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise BindingError(f"--against: cannot import {mod_name!r}: {exc}") from None
    fn = getattr(mod, fn_name, None)
    if not callable(fn):
        raise BindingError(f"--against: {mod_name} has no callable {fn_name!r}")
    return fn


def call_handwritten(fn: Callable, binding: Binding, x: torch.Tensor) -> Dict[str, torch.Tensor]:
    args = [x if a == "x" else a for a in binding.args]
    try:
        ret = fn(*args, **binding.kwargs)
    except Exception as exc:
        raise BindingError(f"the hand-written callable raised {type(exc).__name__}: {exc}") from exc
    out = {}
    for key, where in binding.outputs.items():
        try:
            t = ret[where]
        except (KeyError, IndexError, TypeError):
            raise BindingError(f"[outputs] {key} = {where!r}: the callable returned {type(ret).__name__} "
                               f"without that entry") from None
        if not isinstance(t, torch.Tensor):
            raise BindingError(f"[outputs] {key} is a {type(t).__name__}, not a tensor")
        if t.dtype != torch.uint8:
            t = t.view(torch.uint8) if t.element_size() == 1 else t
        out[key] = t
    return out


# ---- diagnosis -------------------------------------------------------------------------------------
@dataclass
class OutputReport:
    key: str
    exact: bool
    mismatches: int = 0
    total: int = 0
    first: List[Tuple[int, int, int, int]] = field(default_factory=list)
    diagnosis: str = ""


def _variant_with(variant: VariantIR, direction: str, element=None, scale=None) -> VariantIR:
    dirs = tuple(dataclasses.replace(d, element=element or d.element, scale=scale or d.scale)
                 if d.name == direction else d for d in variant.kernel.directions)
    k = dataclasses.replace(variant.kernel, directions=dirs)
    return k.variant(**dict(variant.options))


def _numeric_alternatives(variant: VariantIR, direction: str):
    """(description, variant) for every single-rule change of one direction's numerics."""
    d = variant.direction(direction)
    el, sc = d.element, d.scale
    for t in TIE_RULES:
        if t != el.ties:
            yield ("ties", t), _variant_with(variant, direction, element=dataclasses.replace(el, ties=t))
    for z in ZERO_SIGN_RULES:
        if z != el.zero_sign:
            yield ("zero_sign", z), _variant_with(variant, direction, element=dataclasses.replace(el, zero_sign=z))
    top = (1 << el.bits) - 1
    for nan in sorted({0x0, top >> 1, (top >> 1) + 1, top} - {el.nan}):
        yield ("nan", nan), _variant_with(variant, direction, element=dataclasses.replace(el, nan=nan))
    if sc.name != "e8m0":  # other scale formats: only the element rules are varied
        return
    for m in E8M0_MODES:
        for zero in [sc.zero_amax] + sorted({0, 127} - {sc.zero_amax}):
            if (m, zero) != (sc.mode, sc.zero_amax):
                alt = dataclasses.replace(sc, mode=m, zero_amax=zero)
                yield ("mode", (m, zero)), _variant_with(variant, direction, scale=alt)
    for inf in sorted({253, 254, 255} - {sc.inf_amax}):
        yield ("inf_amax", inf), _variant_with(variant, direction, scale=dataclasses.replace(sc, inf_amax=inf))


def _sentence(kind, value, d, key) -> str:
    el, sc = d.element, d.scale
    what = key.replace("_", " ")
    if kind == "ties":
        names = {"even": "to even", "away": "away from zero", "zero": "toward zero"}
        return (f"{what}: E2M1 tie rounding: the hand-written kernel rounds exact midpoints {names[value]}, "
                f"the spec rounds them {names[el.ties]} (every mismatch is at an exact midpoint)")
    if kind == "zero_sign":
        return (f"{what}: sign of zero: the hand-written kernel encodes zero results with zero_sign "
                f"{value}, the spec says {el.zero_sign}")
    if kind == "mode":
        mode, zero = value
        if mode == sc.mode:
            return (f"{what}: amax == 0 convention: all-zero blocks get E8M0 {zero} in the hand-written "
                    f"kernel, {sc.zero_amax} in the spec")
        extra = f" and all-zero blocks get {zero}" if zero != sc.zero_amax else ""
        return (f"{what}: E8M0 scale rule: the hand-written kernel selects exponents in `{mode}` mode"
                f"{extra}; the spec says `{sc.mode}` (exponents differ by one on blocks whose amax "
                f"mantissa lies between the two modes' rounding points)")
    if kind == "inf_amax":
        return f"{what}: blocks with an Inf get E8M0 {value} in the hand-written kernel, {sc.inf_amax} in the spec"
    if kind == "nan":
        return f"{what}: NaN inputs are encoded as {value:#x} by the hand-written kernel, {el.nan:#x} by the spec"
    raise AssertionError(kind)


def diagnose(variant: VariantIR, key: str, x: torch.Tensor, hand: torch.Tensor,
             refs_by_options: Dict[Tuple, Dict[str, torch.Tensor]]) -> str:
    claimed = variant.output(key)
    ref = refs_by_options[variant.options][key]
    # 1. layout: another option setting of the spec stores exactly these bytes (fewest flips first)
    def flips(opts):
        return [n for (n, a), (_, b) in zip(variant.options, opts) if a != b]
    for opts in sorted(refs_by_options, key=lambda o: len(flips(o))):
        other = refs_by_options[opts][key]
        if opts == variant.options or other.shape != hand.shape or not torch.equal(other.to(hand.device), hand):
            continue
        alt = variant.kernel.variant(**dict(opts)).output(key)
        if alt.layout_name() == claimed.layout_name():
            continue
        flipped = flips(opts)
        verbs = [f"ignores {n}" if dict(variant.options)[n] else f"applies {n} although it is off"
                 for n in flipped]
        return (f"{key.replace('_', ' ')} is in `{alt.layout_name()}`, the spec with "
                f"{', '.join(f'{n}={str(dict(variant.options)[n]).lower()}' for n in flipped)} says "
                f"`{claimed.layout_name()}`: the hand-written kernel {' and '.join(verbs)}")
    # 2. numerics: one rule changed explains every byte (or, failing that, nearly every byte)
    d = variant.direction(claimed.direction)
    base = int((ref.to(hand.device) != hand).sum()) if ref.shape == hand.shape else None
    closest = None
    for (kind, value), alt in _numeric_alternatives(variant, claimed.direction):
        got = reference.quantize(alt, x)[key]
        if got.shape != hand.shape:
            continue
        left = int((got.to(hand.device) != hand).sum())
        if left == 0:
            return _sentence(kind, value, d, key)
        if closest is None or left < closest[0]:
            closest = (left, kind, value)
    if closest is not None and base and closest[0] * 4 <= base:
        left, kind, value = closest
        return (_sentence(kind, value, d, key)
                + f"; this explains {base - left} of the {base} differing bytes, {left} still differ "
                f"(the hand-written rule also differs there, e.g. on subnormal or special amax)")
    # 3. padding only
    if ref.shape == hand.shape:
        M, N = x.reshape(-1, x.shape[-1]).shape
        rows, cols = (int(e.evaluate({"M": M, "N": N})) for e in claimed.logical)
        marker = claimed.chain.apply(torch.zeros(rows, cols, dtype=torch.uint8)) if claimed.chain.fill() is not None else None
        if marker is not None:
            probe = claimed.chain.apply(torch.ones(rows, cols, dtype=torch.uint8))
            pad = (probe != 1).to(hand.device)  # cells the logical matrix does not reach
            diff = hand != ref.to(hand.device)
            if diff.any() and not (diff & ~pad).any():
                vals = sorted(set(hand[diff].tolist()))[:4]
                return (f"{key.replace('_', ' ')}: only padding differs: the hand-written kernel leaves "
                        f"{vals} in padding cells, the spec fills them with {claimed.chain.fill()}")
    # 4. the pattern
    return ""


def _logical(variant: VariantIR, key: str, t: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return reference.logical_view(variant.output(key), t.cpu(), M, N)


def compare_one(variant: VariantIR, fn: Callable, binding: Binding, x: torch.Tensor, device: str,
                refs_by_options) -> List[OutputReport]:
    from quantlay.generated import find
    M, N = x.reshape(-1, x.shape[-1]).shape
    mod = find(variant.kernel.name, **dict(variant.options))
    gen = {k: v.tensor.cpu() for k, v in mod.quantize(x.to(device)).items()}
    hand = {k: v.cpu() for k, v in call_handwritten(fn, binding, x.to(device)).items()}
    reports = []
    for key in binding.outputs:
        g, h = gen[key], hand[key]
        if g.shape == h.shape and torch.equal(g, h):
            reports.append(OutputReport(key, True, 0, g.numel()))
            continue
        rep = OutputReport(key, False, total=g.numel())
        if g.shape != h.shape:
            rep.mismatches = g.numel()
            rep.diagnosis = (f"{key.replace('_', ' ')}: the hand-written buffer has shape {tuple(h.shape)}, "
                             f"the spec's layout `{variant.output(key).layout_name()}` has {tuple(g.shape)}")
            reports.append(rep)
            continue
        lg, lh = _logical(variant, key, g, M, N), _logical(variant, key, h, M, N)
        diff = (lg != lh).nonzero()
        rep.mismatches = int((g != h).sum())
        rep.first = [(int(r), int(c), int(lg[r, c]), int(lh[r, c])) for r, c in diff[:5].tolist()]
        rep.diagnosis = diagnose(variant, key, x.cpu(), h, refs_by_options) or _pattern(key, lg, lh, variant)
        reports.append(rep)
    return reports


def _pattern(key, lg, lh, variant) -> str:
    bad = lg != lh
    if key.endswith("scale") and bool(((lg.int() - lh.int()).abs()[bad] == 1).all()):
        ups = int(((lh.int() - lg.int()) == 1).sum())
        return (f"{key.replace('_', ' ')}: E8M0 exponents differ by one on {int(bad.sum())} blocks "
                f"({ups} one higher, {int(bad.sum()) - ups} one lower in the hand-written kernel): its scale "
                f"rule rounds amax differently; no single mode of the spec reproduces it on these inputs")
    rows = bad.any(dim=1).nonzero().flatten().tolist()
    cols = bad.any(dim=0).nonzero().flatten().tolist()
    return (f"{key.replace('_', ' ')}: unexplained: {int(bad.sum())} logical elements differ in "
            f"{len(rows)} rows (first {rows[:4]}) and {len(cols)} columns (first {cols[:4]}); no layout "
            f"of the spec and no single format rule reproduces the hand-written bytes")


def run(spec_path: str, against: str, binding_path: str, shapes, json_path: Optional[str] = None,
        classes=None, time_it: bool = True, time_shapes=None) -> int:
    kernels = {k.name: k for k in specmod.load(spec_path)}
    binding = load_binding(binding_path, kernels)
    fn = load_callable(against)
    kernel = kernels[binding.kernel]
    variant = kernel.variant(**binding.options)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    result = {"spec": spec_path, "kernel": variant.name, "against": against, "options": binding.options,
              "classes": []}
    all_exact = True
    print(f"compare {variant.name}\n   with {against} (claims {binding.options})\n   on {device}"
          f"{' (Triton interpreter)' if device == 'cpu' else ''}")
    for (M, N) in shapes:
        for cname, make in (classes or inputs.COMPARE_CLASSES).items():
            x = make(M, N, seed=M + N)
            refs = {v.options: reference.quantize(v, x) for v in kernel.variants()}
            reps = compare_one(variant, fn, binding, x, device, refs)
            entry = {"shape": f"{M}x{N}", "class": cname, "outputs": [dataclasses.asdict(r) for r in reps]}
            result["classes"].append(entry)
            for r in reps:
                all_exact &= r.exact
                status = "bit-exact" if r.exact else (f"{r.mismatches}/{r.total} bytes differ "
                                                     f"({100 * r.mismatches / r.total:.2f}%)")
                print(f"  {M}x{N} {cname:11s} {r.key:14s} {status}")
                if not r.exact:
                    for (row, col, gv, hv) in r.first[:3]:
                        print(f"      at ({row}, {col}): generated {gv:#x}, hand-written {hv:#x}")
                    print(f"      diagnosis: {r.diagnosis}")
    if time_it and device == "cuda":
        result["speed"] = _speed(variant, fn, binding, time_shapes or shapes)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(result, f, indent=2)
    print("all outputs bit-exact" if all_exact else "outputs differ (see the diagnoses above)")
    return 0 if all_exact else 1


def _speed(variant, fn, binding, shapes):
    import hashlib
    import triton
    from .bench import copy_gbps
    from quantlay.generated import find
    mod = find(variant.kernel.name, **dict(variant.options))
    copy = copy_gbps()
    rows = []
    print(f"{'shape':>11s} {'generated ms':>13s} {'GB/s':>6s} {'%copy':>6s} {'hand ms':>9s} {'GB/s':>6s} "
          f"{'%copy':>6s} {'speedup':>8s}")
    for (M, N) in shapes:
        x = inputs.normal(M, N).cuda()
        res = mod.quantize(x)
        moved = x.numel() * x.element_size() + sum(t.tensor.numel() for t in res.values())
        tg = triton.testing.do_bench(lambda: mod.quantize(x), warmup=25, rep=200)
        th = triton.testing.do_bench(lambda: call_handwritten(fn, binding, x), warmup=25, rep=200)
        row = {"shape": f"{M}x{N}", "generated_ms": tg, "handwritten_ms": th,
               "generated_gbps": moved / tg / 1e6, "handwritten_gbps": moved / th / 1e6,
               "copy_gbps": copy, "speedup": th / tg}
        rows.append(row)
        print(f"{M}x{N:<5d} {tg:13.4f} {row['generated_gbps']:6.0f} {100 * row['generated_gbps'] / copy:5.1f}% "
              f"{th:9.4f} {row['handwritten_gbps']:6.0f} {100 * row['handwritten_gbps'] / copy:5.1f}% "
              f"{row['speedup']:7.2f}x")
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "commit": os.environ.get("QUANTLAY_COMMIT", "unknown"),
            "kernel_sha256": hashlib.sha256(open(mod.__file__).read().encode()).hexdigest()[:16]}
    return {"meta": meta, "rows": rows}
