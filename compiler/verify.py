"""`quantlay verify`: prove on real data that each kernel is exact and that every option matters.

For every kernel of a spec, every option combination and every input class: run the generated kernel,
compare each output with the reference bit for bit, and for every option check that flipping it
changes the output bytes. Runs on CUDA when present, otherwise in Triton's interpreter.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

import torch

from . import inputs, reference
from . import spec as specmod


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


def verify(spec, shapes: Tuple[Tuple[int, int], ...] = ((128, 192), (96, 256)), seed: int = 0) -> Report:
    from .build_cache import build
    device = _device()
    rep = Report()
    for kernel in specmod.load(spec):
        outputs: Dict[Tuple, Dict[str, Dict[str, torch.Tensor]]] = {}
        for variant in kernel.variants():
            opts = dict(variant.options)
            mod = build(spec, kernel=kernel.name, options=opts)
            for (M, N) in shapes:
                for cname, make in inputs.CLASSES.items():
                    x = make(M, N, seed=seed)
                    groups = None
                    if kernel.groups:  # segmented kernels: uneven groups, one of them empty
                        groups = torch.tensor([M // 3, 0, M - M // 3])
                    try:
                        args = (groups.to(device),) if groups is not None else ()
                        res = mod.quantize(x.to(device), *args)
                    except Exception as exc:  # a shape a layout cannot take is reported, not hidden
                        rep.lines.append(f"  skip {variant.name} {M}x{N} {cname}: {exc}")
                        continue
                    ref = reference.quantize(variant, x, groups)
                    got = {k: v.tensor.cpu() for k, v in res.items()}
                    outputs.setdefault(variant.options, {})[(M, N, cname)] = got
                    for key in ref:
                        if not torch.equal(got[key], ref[key]):
                            n = int((got[key] != ref[key]).sum()) if got[key].shape == ref[key].shape else -1
                            rep.failures.append(f"{variant.name} {M}x{N} {cname} {key}: {n} bytes differ "
                                                f"from the reference")
            rep.lines.append(f"  exact  {variant.name}")
        for opt in kernel.options:
            for v in kernel.variants():
                vals = dict(v.options)
                if vals[opt]:
                    continue
                flipped = tuple((n, (not b) if n == opt else b) for n, b in v.options)
                a, b = outputs.get(v.options, {}), outputs.get(flipped, {})
                common = set(a) & set(b)
                changed = any(set(a[c]) != set(b[c])  # the option adds or removes outputs
                              or any(not torch.equal(a[c][k], b[c][k]) if a[c][k].shape == b[c][k].shape
                                     else True for k in a[c]) for c in common)
                if not common:
                    rep.failures.append(f"{kernel.name}: option {opt} could not be compared (no shape ran "
                                        f"under both settings)")
                elif not changed:
                    rep.failures.append(f"{kernel.name}: flipping {opt} from {dict(v.options)} does not "
                                        f"change any output byte")
            rep.lines.append(f"  option {kernel.name}.{opt}: flipping it changes the output bytes")
    rep.lines.insert(0, f"verify on {device} ({'compiled' if device == 'cuda' else 'Triton interpreter'}), "
                        f"shapes {', '.join(f'{m}x{n}' for m, n in shapes)}, inputs "
                        f"{', '.join(inputs.CLASSES)}")
    return rep
