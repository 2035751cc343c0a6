"""`quantlay compare`: run a hand-written kernel and the generated one on the same inputs, decode both
through the layout algebra, and explain every difference.

The binding (TOML) says how to call the hand-written callable, which spec output each returned value
is, which outputs it writes into buffers the caller allocates ([buffers]: compare allocates them in the
spec's layout, every byte a sentinel), and which option values the hand-written code claims to honour.
The diagnosis (`compiler/diagnose.py`) searches layouts and numerics jointly, so a kernel that ignores
a layout flag *and* rounds another way gets both named, each with the share of the differing values it
explains, and the data differences that follow from a scale difference are not counted twice. A
summary per output closes the report; exit status 0 when every output is bit-exact, 1 when any differs,
2 for usage errors.
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
from .diagnose import SENTINEL, diagnose_direction
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
    buffers: Dict[str, str] = field(default_factory=dict)  # output key -> keyword argument it is passed as


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
    outputs = dict(raw.get("outputs", {}))
    buffers = dict(raw.get("buffers", {}))
    for key, kwarg in buffers.items():
        if key not in OUTPUT_KEYS:
            raise BindingError(f"binding {path}: [buffers] {key} is not a spec output; "
                               f"{did_you_mean(key, OUTPUT_KEYS) or 'outputs: ' + ', '.join(OUTPUT_KEYS)}")
        if not isinstance(kwarg, str) or not kwarg.isidentifier():
            raise BindingError(f"binding {path}: [buffers] {key} = {kwarg!r} must be the name of the keyword "
                               f"argument the buffer is passed as")
    if not outputs and not buffers:
        raise BindingError(f"binding {path}: an [outputs] table (e.g. rowwise_data = 0) or a [buffers] table "
                           f"(e.g. rowwise_data = \"out_data\") is required")
    for key in outputs:
        if key not in OUTPUT_KEYS:
            raise BindingError(f"binding {path}: [outputs] {key} is not a spec output; "
                               f"{did_you_mean(key, OUTPUT_KEYS) or 'outputs: ' + ', '.join(OUTPUT_KEYS)}")
    call = raw.get("call", {})
    args = call.get("args", ["x"])
    return Binding(kernel, {n: bool(options.get(n, False)) for n in k.options}, list(args),
                   dict(call.get("kwargs", {})), outputs, buffers)


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


def output_buffers(variant: VariantIR, binding: Binding, x: torch.Tensor, G: int = 0) -> Dict[str, torch.Tensor]:
    """The buffers the binding says the caller allocates: the spec's physical shape and dtype, every byte
    the sentinel, so a cell the kernel leaves unwritten shows."""
    M, N = x.reshape(-1, x.shape[-1]).shape
    out = {}
    for key in binding.buffers:
        o = variant.output(key)
        shape = tuple(int(e.evaluate({"M": M, "N": N, "G": G})) for e in o.chain.physical_shape(*o.logical))
        raw = torch.full(shape if o.format != "f32" else shape + (4,), SENTINEL, dtype=torch.uint8, device=x.device)
        out[key] = raw if o.format != "f32" else raw.view(torch.float32).reshape(shape)
    return out


def call_handwritten(fn: Callable, binding: Binding, x: torch.Tensor,
                     buffers: Optional[Dict[str, torch.Tensor]] = None, groups: Optional[torch.Tensor] = None,
                     groups_name: str = "") -> Dict[str, torch.Tensor]:
    """Call the hand-written kernel: "x" in the binding's args is the input, the kernel's groups
    parameter name (segmented kernels) the group lengths."""
    args = [x if a == "x" else groups if groups is not None and a == groups_name else a for a in binding.args]
    buffers = buffers or {}
    kwargs = dict(binding.kwargs, **{binding.buffers[k]: t for k, t in buffers.items()})
    try:
        ret = fn(*args, **kwargs)
    except Exception as exc:
        raise BindingError(f"the hand-written callable raised {type(exc).__name__}: {exc}") from exc
    out = {k: (t if t.dtype == torch.uint8 else t.view(torch.uint8) if t.element_size() == 1 else t)
           for k, t in buffers.items() if k not in binding.outputs}
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
    first: List[Tuple[int, int, object, object]] = field(default_factory=list)  # (row, col, generated, hand-written)
    diagnosis: str = ""
    causes: List[Tuple[str, int]] = field(default_factory=list)  # (cause, logical values it explains)
    unexplained: int = 0
    differing: int = 0  # logical values that differ under the claimed layout


def _logical(variant: VariantIR, key: str, t: torch.Tensor, M: int, N: int, G: int = 0) -> torch.Tensor:
    return reference.logical_view(variant.output(key), t.cpu(), M, N, G)


def compare_groups(M: int) -> torch.Tensor:
    """The group lengths a segmented kernel is compared on: uneven, one of them empty."""
    return torch.tensor([M // 3, 0, M - M // 3])


def compare_one(variant: VariantIR, fn: Callable, binding: Binding, x: torch.Tensor, device: str) -> List[OutputReport]:
    from quantlay.generated import find
    x2 = x.reshape(-1, x.shape[-1])
    M, N = x2.shape
    groups = compare_groups(M) if variant.kernel.groups else None
    extra = (groups.to(device),) if groups is not None else ()
    mod = find(variant.kernel.name, **dict(variant.options))
    gen = {k: v.tensor.cpu() for k, v in mod.quantize(x.to(device), *extra).items()}
    bufs = output_buffers(variant, binding, x.to(device), len(groups) if groups is not None else 0)
    gname = variant.kernel.groups[0] if variant.kernel.groups else ""
    hand = {k: v.cpu() for k, v in call_handwritten(fn, binding, x.to(device), bufs, *extra, gname).items()}
    keys = [k for k in OUTPUT_KEYS if k in hand]
    G = len(groups) if groups is not None else 0
    findings = {}
    for d in variant.directions:
        if any(k.startswith(d.name + "_") and not _same(gen[k], hand[k]) for k in keys):
            findings.update(diagnose_direction(variant, d.name, x2.float().cpu(), hand, groups))
    reports = []
    for key in keys:
        g, h = gen[key], hand[key]
        if _same(g, h):
            reports.append(OutputReport(key, True, 0, g.numel()))
            continue
        rep = OutputReport(key, False, total=g.numel())
        f = findings[key]
        rep.causes = list(f.causes)
        rep.unexplained = f.unexplained
        rep.differing = f.differing
        rep.diagnosis = f.text()
        if g.numel() != h.numel():
            rep.mismatches = g.numel()
        else:
            h = h.reshape(g.shape)
            rep.mismatches = int((g != h).sum())
            lg, lh = _logical(variant, key, g, M, N, G), _logical(variant, key, h.reshape(g.shape), M, N, G)
            diff = (lg != lh).nonzero()
            val = float if lg.is_floating_point() else int
            rep.first = [(int(r), int(c), val(lg[r, c]), val(lh[r, c])) for r, c in diff[:5].tolist()]
        reports.append(rep)
    return reports


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)


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
    summary: Dict[str, dict] = {}
    print(f"compare {variant.name}\n   with {against} (claims {binding.options})\n   on {device}"
          f"{' (Triton interpreter)' if device == 'cpu' else ''}")
    for (M, N) in shapes:
        for cname, make in (classes or inputs.COMPARE_CLASSES).items():
            x = make(M, N, seed=M + N)
            reps = compare_one(variant, fn, binding, x, device)
            entry = {"shape": f"{M}x{N}", "class": cname, "outputs": [dataclasses.asdict(r) for r in reps]}
            result["classes"].append(entry)
            for r in reps:
                all_exact &= r.exact
                status = "bit-exact" if r.exact else (f"{r.mismatches}/{r.total} bytes differ "
                                                     f"({100 * r.mismatches / r.total:.2f}%)")
                print(f"  {M}x{N} {cname:11s} {r.key:14s} {status}")
                if not r.exact:
                    for (row, col, gv, hv) in r.first[:3]:
                        show = (lambda v: f"{v:#x}") if isinstance(gv, int) else repr
                        print(f"      at ({row}, {col}): generated {show(gv)}, hand-written {show(hv)}")
                    print(f"      diagnosis: {r.diagnosis}")
                    tally = summary.setdefault(r.key, {"differing": 0, "unexplained": 0, "causes": {}})
                    tally["differing"] += r.differing
                    tally["unexplained"] += r.unexplained
                    for cause, n in r.causes:
                        tally["causes"][cause] = tally["causes"].get(cause, 0) + n
    if time_it and device == "cuda":
        result["speed"] = _speed(variant, fn, binding, time_shapes or shapes)
    if summary:
        print("summary (causes, with the share of the differing logical values each explains):")
        for key, t in summary.items():
            print(f"  {key}: {t['differing']} differing values")
            for cause, n in t["causes"].items():
                share = f"{100 * n / t['differing']:.0f}%" if t["differing"] and n else "-"
                print(f"    {share:>5s}  {cause}")
            if t["unexplained"]:
                print(f"    {100 * t['unexplained'] / max(t['differing'], 1):.0f}%  unexplained")
    result["summary"] = summary
    if json_path:
        with open(json_path, "w") as f:
            json.dump(result, f, indent=2)
    print("all outputs bit-exact" if all_exact else "outputs differ (see the diagnoses above)")
    return 0 if all_exact else 1


def _speed(variant, fn, binding, shapes):
    """Both kernels timed the same way (CUDA-graph replays, `bench.time_call`; the hand-written one gets
    its output buffers preallocated when the binding declares them), with a copy of the same run."""
    import hashlib
    import triton
    from .bench import copy_gbps, time_call
    from quantlay.generated import find
    mod = find(variant.kernel.name, **dict(variant.options))
    copy = copy_gbps()
    rows = []
    print(f"{'shape':>11s} {'generated ms':>13s} {'GB/s':>6s} {'%copy':>6s} {'hand ms':>9s} {'GB/s':>6s} "
          f"{'%copy':>6s} {'speedup':>8s}")
    for (M, N) in shapes:
        x = inputs.normal(M, N).cuda()
        extra = (compare_groups(M).cuda(),) if variant.kernel.groups else ()
        res = mod.quantize(x, *extra)
        moved = x.numel() * x.element_size() + sum(t.tensor.numel() * t.tensor.element_size() for t in res.values())
        out = {k: v.tensor for k, v in res.items()}
        tg = time_call(lambda: mod.quantize(x, *extra, out=out))[0]
        bufs = output_buffers(variant, binding, x, len(extra[0]) if extra else 0)
        gname = variant.kernel.groups[0] if variant.kernel.groups else ""
        th = time_call(lambda: call_handwritten(fn, binding, x, bufs, *extra, gname))[0]
        row = {"shape": f"{M}x{N}", "generated_ms": tg, "handwritten_ms": th,
               "generated_gbps": moved / tg / 1e6, "handwritten_gbps": moved / th / 1e6,
               "copy_gbps": copy, "speedup": th / tg}
        rows.append(row)
        print(f"{M}x{N:<5d} {tg:13.4f} {row['generated_gbps']:6.0f} {100 * row['generated_gbps'] / copy:5.1f}% "
              f"{th:9.4f} {row['handwritten_gbps']:6.0f} {100 * row['handwritten_gbps'] / copy:5.1f}% "
              f"{row['speedup']:7.2f}x")
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "commit": os.environ.get("QUANTLAY_COMMIT", "unknown"), "timing": "CUDA-graph replays",
            "kernel_sha256": hashlib.sha256(open(mod.__file__).read().encode()).hexdigest()[:16]}
    return {"meta": meta, "rows": rows}
