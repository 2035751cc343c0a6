"""`quantlay tune`: sweep tile configurations on the GPU and commit the winners to a table.

The table (`compiler/tuning.json`) is keyed by kernel variant name, GPU name and Triton version, so
users never pay for tuning at run time: a generated launcher looks its configuration up once
(`lookup`) and falls back to the template's default tile when the table has no entry. Every candidate
is checked bit-exact against the reference before it can win.
"""
from __future__ import annotations

import functools
import itertools
import json
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

TABLE = Path(__file__).with_name("tuning.json")
CONFIGS = [(bm, bn, w) for bm, bn, w in itertools.product((32, 64, 128), (64, 128, 256), (2, 4, 8))
           if 2048 <= bm * bn <= 16384 and not (bm * bn >= 16384 and w < 4)]


@functools.lru_cache(maxsize=None)
def _table() -> Dict[Tuple[str, str, str], dict]:
    if not TABLE.exists():
        return {}
    rows = json.loads(TABLE.read_text())["entries"]
    return {(r["kernel"], r["gpu"], r["triton"]): r for r in rows}


@functools.lru_cache(maxsize=None)
def lookup(kernel: str, device_index: int = 0) -> Optional[Tuple[int, int, int]]:
    """(block_m, block_n, num_warps) tuned for this kernel on this GPU and Triton, or None."""
    import torch
    import triton
    if not torch.cuda.is_available():
        return None
    row = _table().get((kernel, torch.cuda.get_device_name(device_index), triton.__version__))
    return (row["block_m"], row["block_n"], row["num_warps"]) if row else None


def tune(variants: Iterable[Tuple[str, dict]], shape=(8192, 8192), write: bool = True) -> List[dict]:
    """Sweep CONFIGS for each (kernel, options) at `shape`; return (and store) the winners."""
    import torch
    import triton
    from . import inputs, reference
    from . import spec as specmod
    from quantlay.generated import find
    kernels = {k.name: k for p in specmod.shipped_specs() for k in specmod.load(p)}
    gpu, tv = torch.cuda.get_device_name(), triton.__version__
    winners = []
    for kname, opts in variants:
        mod = find(kname, **opts)
        variant = kernels[kname].variant(**opts)
        x = inputs.normal(*shape, seed=1).cuda()
        ref = reference.quantize(variant, x)
        moved = x.numel() * x.element_size() + sum(t.numel() for t in ref.values())
        best = None
        for bm, bn, w in CONFIGS:
            if bm % mod.BLOCK_M_MULTIPLE or bn % mod.BLOCK_N_MULTIPLE:
                continue
            res = mod.quantize(x, block_m=bm, block_n=bn, num_warps=w)
            if not all(torch.equal(res[k].tensor, ref[k]) for k in ref):
                raise AssertionError(f"{mod.NAME} tile {bm}x{bn} w{w} is not bit-exact")
            ms = triton.testing.do_bench(lambda: mod.quantize(x, block_m=bm, block_n=bn, num_warps=w),
                                         warmup=10, rep=100)
            print(f"{mod.NAME} {bm}x{bn} w{w}: {ms:.4f} ms {moved / ms / 1e6:.0f} GB/s")
            if best is None or ms < best[0]:
                best = (ms, bm, bn, w)
        ms, bm, bn, w = best
        winners.append({"kernel": mod.NAME, "gpu": gpu, "triton": tv, "block_m": bm, "block_n": bn,
                        "num_warps": w, "shape": f"{shape[0]}x{shape[1]}", "median_ms": round(ms, 4)})
    if write:
        old = {k: v for k, v in _table().items()}
        for w in winners:
            old[(w["kernel"], w["gpu"], w["triton"])] = w
        rows = sorted(old.values(), key=lambda r: (r["kernel"], r["gpu"], r["triton"]))
        TABLE.write_text(json.dumps({"entries": rows}, indent=2, sort_keys=True) + "\n")
        _table.cache_clear()
        lookup.cache_clear()
    return winners
