"""`quantlay tune`: sweep tile configurations on the GPU and commit the winners to a table.

The table (`compiler/tuning.json`) is keyed by kernel variant name, GPU name and Triton version, so
users never pay for tuning at run time: a generated launcher looks its configuration up once
(`lookup`) and falls back to the template's default tile when the table has no entry. Every candidate
is checked bit-exact against the reference before it can win.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

TABLE = Path(__file__).with_name("tuning.json")
# (block_m, block_n, num_warps, maxnreg, stages): maxnreg caps registers per thread (None: the compiler's
# choice) so that two 256-thread programs fit on an SM (tiles of 16384 elements hold 64 per thread on 8
# warps); stages 0 runs one tile per program, n >= 1 a persistent grid with n - 1 tiles' loads in flight.
CONFIGS = [(bm, bn, w, None, 0) for bm, bn, w in (
    (32, 64, 2), (32, 64, 4), (32, 128, 2), (32, 128, 4), (32, 128, 8), (64, 64, 2), (64, 64, 4),
    (64, 128, 4), (64, 128, 8), (128, 128, 8), (128, 128, 16), (128, 32, 2), (128, 32, 4), (128, 64, 2),
    (128, 64, 4))] + [
    (128, 128, 8, 128, 0), (64, 128, 4, 128, 0), (64, 64, 2, 128, 0),
    (128, 128, 8, None, 2), (128, 128, 16, None, 2), (64, 128, 4, None, 2), (64, 128, 8, None, 2),
    (64, 64, 2, None, 2), (64, 64, 4, None, 2), (32, 128, 2, None, 2), (32, 128, 4, None, 2)]


@functools.lru_cache(maxsize=None)
def _table() -> Dict[Tuple[str, str, str], dict]:
    if not TABLE.exists():
        return {}
    rows = json.loads(TABLE.read_text())["entries"]
    return {(r["kernel"], r["gpu"], r["triton"]): r for r in rows}


@functools.lru_cache(maxsize=None)
def lookup(kernel: str, device_index: int = 0) -> Optional[Tuple[int, int, int, Optional[int], int]]:
    """(block_m, block_n, num_warps, maxnreg, stages) tuned for this kernel on this GPU and Triton, or None."""
    import torch
    import triton
    if not torch.cuda.is_available():
        return None
    row = _table().get((kernel, torch.cuda.get_device_name(device_index), triton.__version__))
    return (row["block_m"], row["block_n"], row["num_warps"], row.get("maxnreg"), row.get("stages") or 0) if row else None


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
        # a grouped kernel runs on 8 equal groups (as in quantlay bench); its row tile is the segment
        extra = (torch.full((8,), shape[0] // 8, dtype=torch.int64, device="cuda"),) if variant.kernel.groups else ()
        ref = reference.quantize(variant, x, *extra)
        moved = x.numel() * x.element_size() + sum(t.numel() * t.element_size() for t in ref.values())
        best = None
        for bm, bn, w, regs, stages in CONFIGS:
            if bm % mod.BLOCK_M_MULTIPLE or bn % mod.BLOCK_N_MULTIPLE or (extra and bm != mod.BLOCK_M):
                continue
            cfg = dict(block_m=bm, block_n=bn, num_warps=w, maxnreg=regs, stages=stages)
            res = mod.quantize(x, *extra, **cfg)
            if not all(torch.equal(res[k].tensor, ref[k]) for k in ref):
                raise AssertionError(f"{mod.NAME} config {cfg} is not bit-exact")
            ms = triton.testing.do_bench(lambda: mod.quantize(x, *extra, **cfg), warmup=10, rep=60)
            print(f"{mod.NAME} {bm}x{bn} w{w} maxnreg {regs} stages {stages}: {ms:.4f} ms {moved / ms / 1e6:.0f} GB/s", flush=True)
            if best is None or ms < best[0]:
                best = (ms, cfg)
        ms, cfg = best
        winners.append({"kernel": mod.NAME, "gpu": gpu, "triton": tv, **cfg,
                        "shape": f"{shape[0]}x{shape[1]}", "median_ms": round(ms, 4)})
        print(f"best {mod.NAME}: {cfg} ({ms:.4f} ms)", flush=True)
        if write:
            _store(winners[-1])
    return winners


def _store(winner: dict) -> None:
    """Add (or replace) one winner in the committed table: a sweep cut short keeps what it found."""
    rows = dict(_table())
    rows[(winner["kernel"], winner["gpu"], winner["triton"])] = winner
    out = sorted(rows.values(), key=lambda r: (r["kernel"], r["gpu"], r["triton"]))
    TABLE.write_text(json.dumps({"entries": out}, indent=2, sort_keys=True) + "\n")
    _table.cache_clear()
    lookup.cache_clear()
