"""`quantlay tune`: sweep launch configurations on the GPU and commit the winners to a table.

The candidates are declared with the template (each generated module's CONFIGS: tiles that hold whole
blocks). The table (`compiler/tuning.json`) is keyed by kernel variant name, GPU name, Triton version
and size bucket (log2 of the element count), so users never pay for tuning at run time: a generated
launcher looks its configuration up (`lookup`, the entry of the nearest bucket tuned) and falls back to
the template's default tile when the kernel has none. Every candidate is checked bit-exact against the
reference before it can win, and timed as `quantlay bench` times it (CUDA-graph replays: plain launches
timed the Python launcher, which made the segmented kernels' sweeps noisy).
"""
from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

TABLE = Path(__file__).with_name("tuning.json")
N_FIRST_RETIMED = 4  # the best M-first configurations retimed with the grid in N-first order
GROUPS_RETIMED, GRID_GROUPS = 2, (2, 4, 8)  # and the best two in groups of column tiles
# kernels with plain transposed scales (REGION_BLOCK_ROWS): the best configuration of each of the three best
# tiles (tile, warps, register cap) with columns of 2 and 4 tiles per program (on the H200 a 64x64 tile
# gained 4% from it where the best 64x128 tile gained nothing: the best few configs can be one tile)
REGIONS_RETIMED, REGIONS = 3, (2, 4)
# the best configuration of each of the six best tiles so far, retimed with the scale pass: the pass changes the
# tiles' order (on the H200 `mxfp8_nvte_e5m2` plain ran 32x128 on two warps 89.1% and 32x64 on one 86.0% without
# it, 91.6 and 95.6% with it), so the best few configurations, often one tile, missed the winner
SCALE_PASS_TILES = 6
# the best four configurations, retimed with each program warming L2 for the program this many places later
# (on the H200 the fused 1x128 cast gained about a point at 8192x8192 and up with 66, lost one at 4096x6144;
# the segmented fused cast's best without it was not its best with it: the plain widening won there)
PREFETCH_RETIMED, PREFETCHES = 4, (33, 66, 132)
# two-direction kernels: the best four retimed with the second direction's opaque widening, as they are
# and under a cap of 128 registers (two 256-thread programs per SM), where the widening pays off
OPAQUE_RETIMED, OPAQUE_CAP = 4, 128


def size_bucket(numel: int) -> int:
    """Tuning bucket of a problem: floor(log2(elements)), so shapes within a factor of two share one."""
    return max(int(math.log2(max(numel, 1))), 0)


def _bucket_of(row: dict) -> int:
    """A cast's bucket is that of its M * N elements, a GEMM's that of M * N * K."""
    return size_bucket(math.prod(int(v) for v in row["shape"].split("x")))


@functools.lru_cache(maxsize=None)
def _table() -> Dict[Tuple[str, str, str], Dict[int, dict]]:
    """(kernel, gpu, triton) -> {bucket: entry}."""
    if not TABLE.exists():
        return {}
    out: Dict[Tuple[str, str, str], Dict[int, dict]] = {}
    for r in json.loads(TABLE.read_text())["entries"]:
        out.setdefault((r["kernel"], r["gpu"], r["triton"]), {})[_bucket_of(r)] = r
    return out


@functools.lru_cache(maxsize=None)
def lookup(kernel: str, bucket: int, device_index: int = 0) -> Optional[dict]:
    """The launch settings tuned for this kernel on this GPU and Triton in the nearest size bucket (the
    keys of runtime.LAUNCH_DEFAULTS and the tile's), or None."""
    import torch
    import triton
    if not torch.cuda.is_available():
        return None
    rows = _table().get((kernel, torch.cuda.get_device_name(device_index), triton.__version__))
    if not rows:
        return None
    row = rows[min(rows, key=lambda b: (abs(b - bucket), -b))]  # ties: the larger bucket's entry
    from .runtime import LAUNCH_DEFAULTS  # an entry without a setting was tuned with its default
    return {"block_m": row["block_m"], "block_n": row["block_n"], "num_warps": row["num_warps"],
            **{k: row.get(k, v) for k, v in LAUNCH_DEFAULTS.items()}}


def tune(variants: Iterable[Tuple[str, dict]], shapes: Sequence[Tuple[int, int]] = ((8192, 8192),),
         write: bool = True, device: str = "cuda", timer: Optional[Callable] = None,
         max_tile: Optional[int] = None) -> List[dict]:
    """Sweep each module's CONFIGS for each (kernel, options) at each shape, then retime the best few with
    the second direction's opaque widening (two-direction kernels), with the grid in N-first order, in
    groups of column tiles, (REGION_BLOCK_ROWS) in columns of tiles per program, with the scale pass, and
    the best with L2 prefetch distances; return (and store) the winners. `timer(fn)` -> ms (default: CUDA-graph
    replays; the tests pass another one and device="cpu" to run the stages in the interpreter).
    `max_tile`: sweep only tiles of at most that many elements (a shorter sweep where large tiles lose)."""
    import torch
    import triton
    from . import inputs, reference
    from .bench import bytes_moved, time_call
    from .runtime import LAUNCH_DEFAULTS, region_rows
    timer = timer or (lambda fn: time_call(fn)[0])  # graph replays: no host time
    from . import spec as specmod
    from quantlay.generated import find
    kernels = specmod.shipped_kernels()
    gpu, tv = torch.cuda.get_device_name(), triton.__version__
    winners = []
    for (kname, opts), shape in ((v, s) for v in variants for s in shapes):
        mod = find(kname, **opts)
        variant = kernels[kname].variant(**opts)
        x = inputs.normal(*shape, seed=1).to(device)
        extra = (inputs.equal_groups(shape[0], device),) if variant.kernel.groups else ()
        ref = reference.quantize(variant, x, *extra)
        moved = bytes_moved(x, ref.values())
        timed = []

        def measure(cfg):
            if any(cfg == c for _, c in timed):  # e.g. two N-first configs give one M-first group candidate
                return
            res = mod.quantize(x, *extra, **cfg)
            if not all(torch.equal(res[k].tensor, ref[k]) for k in ref):
                raise AssertionError(f"{mod.NAME} config {cfg} is not bit-exact")
            ms = timer(lambda: mod.quantize(x, *extra, **cfg))
            print(f"{mod.NAME} {shape[0]}x{shape[1]} {cfg['block_m']}x{cfg['block_n']} w{cfg['num_warps']} "
                  f"maxnreg {cfg['maxnreg'] or None} inplace_rows {int(cfg['inplace_rows'])} "
                  f"grid_n_first {int(cfg['grid_n_first'])} grid_group {cfg['grid_group']} "
                  f"opaque_widen {int(cfg['opaque_widen'])} region_m {cfg['region_m']} "
                  f"scale_pass {int(cfg['scale_pass'])} l2_prefetch {cfg['l2_prefetch']}: {ms:.4f} ms "
                  f"{moved / ms / 1e6:.0f} GB/s", flush=True)
            timed.append((ms, cfg))

        def best(n):
            return [cfg for _, cfg in sorted(timed, key=lambda t: t[0])[:n]]

        def best_tiles(n):
            """The best configuration of each of the n best tiles (tile, warps, register cap) so far."""
            tiles = {}
            for cfg in best(len(timed)):
                tiles.setdefault((cfg["block_m"], cfg["block_n"], cfg["num_warps"], cfg["maxnreg"]), cfg)
            return list(tiles.values())[:n]

        def winner(stage):
            """The best so far, stored after each stage: a sweep cut short (a device time limit) keeps it."""
            ms, cfg = min(timed, key=lambda t: t[0])
            row = {"kernel": mod.NAME, "gpu": gpu, "triton": tv, **dict(cfg, maxnreg=cfg["maxnreg"] or None),
                   "shape": f"{shape[0]}x{shape[1]}", "median_ms": round(ms, 4)}
            print(f"best {mod.NAME} at {shape[0]}x{shape[1]} after the {stage}: {cfg} ({ms:.4f} ms)", flush=True)
            if write:
                _store(row)
            return row

        configs = [c for c in mod.CONFIGS if not max_tile or c[0] * c[1] <= max_tile]
        if not configs:
            raise ValueError(f"{mod.NAME}: no candidate tile has at most max_tile={max_tile} elements; "
                             f"the smallest has {min(c[0] * c[1] for c in mod.CONFIGS)}: raise --max-tile")
        for bm, bn, w, regs, inplace in configs:  # maxnreg 0: no cap, whatever the table says
            measure(dict(LAUNCH_DEFAULTS, block_m=bm, block_n=bn, num_warps=w, maxnreg=regs or 0,
                         inplace_rows=inplace))
        winner("sweep")
        if mod.OPAQUE_WIDENS:  # the kernel has a second direction that opaque_widen changes
            for cfg in best(OPAQUE_RETIMED):
                for regs in sorted({cfg["maxnreg"], OPAQUE_CAP}, key=bool):
                    measure(dict(cfg, maxnreg=regs, opaque_widen=True))
            winner("opaque stage")
        # the grid order matters most for the best tiles: retime those in the other orders
        for cfg in best(N_FIRST_RETIMED):
            measure(dict(cfg, grid_n_first=True))
        winner("N-first stage")
        for cfg in best(GROUPS_RETIMED):
            for g in GRID_GROUPS:
                if triton.cdiv(shape[1], cfg["block_n"]) % g == 0:  # a group must divide the column tiles
                    measure(dict(cfg, grid_n_first=False, grid_group=g))  # groups are an M-first order
        stage = "group stage"
        if getattr(mod, "REGION_BLOCK_ROWS", 0):
            winner(stage)
            for cfg in best_tiles(REGIONS_RETIMED):
                for r in REGIONS:  # only regions the launcher takes (whole regions, words of 2-8 bytes)
                    if region_rows(mod.NAME, r, cfg["block_m"], mod.REGION_BLOCK_ROWS, True, shape[0]) == r:
                        measure(dict(cfg, region_m=r))
            stage = "region stage"
        if getattr(mod, "SCALE_PASS", False):  # the scales staged per tile and moved by a second kernel
            winner(stage)
            for cfg in best_tiles(SCALE_PASS_TILES):
                measure(dict(cfg, region_m=1, scale_pass=True))
            stage = "scale-pass stage"
        winner(stage)
        for cfg in best(PREFETCH_RETIMED):
            for ahead in PREFETCHES:
                measure(dict(cfg, l2_prefetch=ahead))
        winners.append(winner("prefetch stage"))
    return winners


def _store(winner: dict) -> None:
    """Add (or replace) one winner in the committed table: a sweep cut short keeps what it found."""
    rows = {(k, b): r for k, by_bucket in _table().items() for b, r in by_bucket.items()}
    rows[((winner["kernel"], winner["gpu"], winner["triton"]), _bucket_of(winner))] = winner
    out = sorted(rows.values(), key=lambda r: (r["kernel"], r["gpu"], r["triton"], _bucket_of(r)))
    TABLE.write_text(json.dumps({"entries": out}, indent=2, sort_keys=True) + "\n")
    _table.cache_clear()
    lookup.cache_clear()
    lookup_gemm.cache_clear()


GEMM_KEYS = ("block_m", "block_n", "num_warps", "num_stages", "group_m")


@functools.lru_cache(maxsize=None)
def lookup_gemm(kernel: str, bucket: int, device_index: int = 0) -> Optional[dict]:
    """A GEMM's tuned launch configuration for its M * N * K bucket on this GPU and Triton, or None."""
    import torch
    import triton
    if not torch.cuda.is_available():
        return None
    rows = _table().get((kernel, torch.cuda.get_device_name(device_index), triton.__version__))
    if not rows:
        return None
    row = rows[min(rows, key=lambda b: (abs(b - bucket), -b))]
    return {k: row[k] for k in GEMM_KEYS if k in row}


def tune_gemm(names: Iterable[str], shapes: Sequence[Tuple[int, int, int]] = ((8192, 8192, 8192),),
              write: bool = True, device: str = "cuda", timer: Optional[Callable] = None, groups: int = 8) -> List[dict]:
    """Sweep each GEMM's CONFIGS at each (M, N, K) and store the fastest per bucket. Grouped GEMMs run on
    `groups` balanced groups; an accumulating GEMM is timed on a scratch buffer of its own (never on a
    buffer it adds into: its result would be the sum of every candidate's), and every candidate's output
    is checked bit-exact against the reference on engineered exact inputs before it can win."""
    import torch
    import triton
    from . import inputs, reference
    from . import spec as specmod
    from .bench import time_call
    from .gemm import producer_shape
    from quantlay.generated import find
    timer = timer or (lambda fn: time_call(fn)[0])
    gemms = {g.name: g for p in specmod.shipped_specs() for g in specmod.load_gemms(p)}
    gpu, tv = torch.cuda.get_device_name(), triton.__version__
    winners = []
    for name, (M, N, K) in ((n, s) for n in names for s in shapes):
        if name not in gemms:
            raise ValueError(f"no shipped gemm {name!r}; gemms: {', '.join(sorted(gemms))}")
        g, mod = gemms[name], find(name)
        G = groups if g.groups else 1
        lens = torch.full((G,), (K if g.groups == "contraction" else M) // G, dtype=torch.int64)
        lens[-1] += (K if g.groups == "contraction" else M) - int(lens.sum())

        def operand(op, free):
            shape = producer_shape(op, g.groups, M, N, K, G)
            seg = lens.to(device) if g.groups == "contraction" else None
            return inputs.exact_operand(op, shape, device, G, seg, seed=len(op.name))
        a, b = operand(g.a, M), operand(g.b, N)
        offs = (a.extras["padded_offsets"] if g.groups == "contraction" else
                torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)]).to(device) if g.groups else None)
        args = (offs,) if g.groups else ()
        shape = (G, M, N) if g.groups == "contraction" else (M, N)
        ref = reference.gemm(g, a, b, offs).cpu()
        timed = []
        for bm, bn, w, st, gm in mod.CONFIGS:
            cfg = dict(block_m=bm, block_n=bn, num_warps=w, num_stages=st, group_m=gm)
            fresh = torch.zeros(shape, dtype=torch.float32, device=device) if g.accumulate else None
            y = mod.gemm(a, b, *args, out=fresh, **cfg)
            if not torch.equal(y.cpu(), ref.to(y.dtype)):
                raise AssertionError(f"{mod.NAME} config {cfg} is not bit-exact")
            scratch = torch.zeros(shape, dtype=torch.float32, device=device) if g.accumulate else torch.empty_like(y)
            ms = timer(lambda: mod.gemm(a, b, *args, out=scratch, **cfg))
            print(f"{mod.NAME} {M}x{N}x{K} {bm}x{bn} w{w} s{st} g{gm}: {ms:.4f} ms "
                  f"{2 * M * N * K / ms / 1e9:.0f} TFLOP/s", flush=True)
            timed.append((ms, cfg))
        ms, cfg = min(timed, key=lambda t: t[0])
        row = {"kernel": mod.NAME, "gpu": gpu, "triton": tv, **cfg, "shape": f"{M}x{N}x{K}", "median_ms": round(ms, 4)}
        print(f"best {mod.NAME} at {M}x{N}x{K}: {cfg} ({ms:.4f} ms)", flush=True)
        if write:
            _store(row)
        winners.append(row)
    return winners
