"""`quantlay bench`: memory-bound kernels timed against a copy measured in the same run.

A registry of benchmark entries (kernel, runner, peers, shapes, validator). Each measurement is the
median of CUDA-graph replays (`triton.testing.do_bench_cudagraph`, with p20/p80; plain launches for a
callable that cannot be captured), reported as GB/s counting every input byte read
once and every output byte written once, and as a ratio to a device-to-device copy timed in the same
process. Shapes a validator rejects are reported as skipped with the reason. Results go to a table on
the terminal and one CSV row per measurement.
"""
from __future__ import annotations

import csv
import hashlib
import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

from . import inputs, reference
from . import spec as specmod

SHAPES = ((4096, 6144), (8192, 8192), (16384, 8192), (32768, 4096))  # the shapes of issue 5's targets


@dataclass(frozen=True)
class Entry:
    name: str
    make: Callable[[int, int], Tuple[Callable[[], object], int]]  # (M, N) -> (run, bytes moved)
    validate: Callable[[int, int], Optional[str]] = lambda M, N: None  # reason to skip, or None
    kernel_hash: str = ""
    group: str = ""


@dataclass
class Row:
    name: str
    group: str
    shape: str
    median_ms: float = float("nan")
    p20_ms: float = float("nan")
    p80_ms: float = float("nan")
    gbps: float = float("nan")
    pct_copy: float = float("nan")
    kernel_hash: str = ""
    note: str = ""


def time_call(fn) -> Tuple[float, float, float]:
    """(median, p20, p80) ms of one call, replayed from a CUDA graph: the Python launcher's host time
    (tens of microseconds, more than a small kernel's) stays out, as in a captured training step.
    Callables that cannot be captured are timed by plain launches."""
    import triton
    fn()
    torch.cuda.synchronize()
    try:
        q = triton.testing.do_bench_cudagraph(fn, rep=200, quantiles=[0.5, 0.2, 0.8])
    except Exception:  # not capturable (a host sync in a peer): launches, host time included
        torch.cuda.synchronize()
        q = triton.testing.do_bench(fn, warmup=25, rep=200, quantiles=[0.5, 0.2, 0.8])
    return tuple(q)


def copy_gbps(nbytes: int = 2 << 30) -> float:
    """Device-to-device copy bandwidth (read + write), by plain launches: 2 GiB take ~1 ms, far above
    host time, and a copy captured in a CUDA graph becomes a memcpy node that may run on a copy engine
    (measured 2775 GB/s that way on the H200 against 4273 GB/s by launches)."""
    import triton
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    med = triton.testing.do_bench(lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median")
    return 2 * nbytes / (med * 1e-3) / 1e9


def bytes_moved(x: torch.Tensor, outputs) -> int:
    """What GB/s counts: the input read once and every output (tensors or QuantizedTensors) written once."""
    outs = [getattr(t, "tensor", t) for t in outputs]
    return x.numel() * x.element_size() + sum(t.numel() * t.element_size() for t in outs)


def mxfp4_entries() -> List[Entry]:
    """Generated MXFP4 cast-transpose kernels (flags on and off) and their peers."""
    from quantlay.generated import find
    kernel = specmod.load(specmod.SPECS_DIR / "mxfp4_cast_transpose.ql")[0]
    flags = kernel.options
    out = []
    for on in (True, False):
        opts = dict.fromkeys(flags, on)
        mod = find(kernel.name, **opts)
        src = open(mod.__file__).read()

        def make(M, N, mod=mod):
            x = inputs.normal(M, N, seed=0).cuda()
            res = mod.quantize(x)
            return (lambda: mod.quantize(x)), bytes_moved(x, res.values())

        def validate(M, N, on=on):
            if on and (M % 64 or N % 64):
                return "the preshuffle layouts need M and N to be multiples of 64"
            return None

        out.append(Entry(f"quantlay {kernel.name} flags={'on' if on else 'off'}", make, validate,
                         hashlib.sha256(src.encode()).hexdigest()[:12], "mxfp4"))
    return out + reference_entries(kernel.variant(**dict.fromkeys(flags, True)), "flags on", "mxfp4")


def reference_entries(variant, label: str, group: str) -> List[Entry]:
    """The PyTorch reference of `variant`, eager and under torch.compile: the floor any kernel must beat."""
    def make(compiled: bool):
        def run_maker(M, N):
            x = inputs.normal(M, N, seed=0).cuda()
            fn = (lambda t: reference.quantize(variant, t))
            fn = torch.compile(fn) if compiled else fn
            return (lambda: fn(x)), bytes_moved(x, fn(x).values())
        return run_maker

    return [Entry(f"torch eager reference ({label})", make(False), group=group),
            Entry(f"torch.compile of the reference ({label})", make(True), group=group)]


def _generated_entries(spec_name: str, group: str) -> List[Entry]:
    """Every kernel of a shipped spec with all its options off and all on."""
    from quantlay.generated import find
    out = []
    for kernel in specmod.load(specmod.SPECS_DIR / spec_name):
        settings = [{}] if not kernel.options else [dict.fromkeys(kernel.options, v) for v in (False, True)]
        for opts in settings:
            mod = find(kernel.name, **opts)

            def make(M, N, mod=mod, kernel=kernel):
                x = inputs.normal(M, N, seed=0).cuda()
                args = ()
                if kernel.groups:
                    args = (inputs.equal_groups(M, "cuda"),)
                res = mod.quantize(x, *args)
                return (lambda: mod.quantize(x, *args)), bytes_moved(x, res.values())

            tag = ",".join(f"{k}={int(v)}" for k, v in opts.items())
            out.append(Entry(f"quantlay {kernel.name}" + (f" {tag}" if tag else ""), make,
                             lambda M, N: None if M % 128 == 0 and N % 128 == 0 else "needs M, N % 128",
                             hashlib.sha256(open(mod.__file__).read().encode()).hexdigest()[:12], group))
    return out


TORCHAO_KERNELS = (  # torchao 0.18 prototype.blockwise_fp8_training.kernels: (function, what it writes)
    ("triton_fp8_blockwise_act_quant_lhs", "1x128 rowwise"),
    ("triton_fp8_blockwise_act_quant_transposed_lhs", "1x128 colwise transposed"),
    ("triton_fp8_blockwise_weight_quant_rhs", "128x128"),
    ("triton_fp8_blockwise_weight_quant_transposed_rhs", "128x128 transposed"),
)


def torchao_entries() -> List[Entry]:
    """torchao 0.18's blockwise FP8 Triton kernels, when torchao is installed (issue 5's peers). Its C++
    extension is skipped (TORCHAO_FORCE_SKIP_LOADING_SO_FILES): these kernels are pure Triton."""
    out = []
    for fn_name, what in TORCHAO_KERNELS:
        def make(M, N, fn_name=fn_name):
            os.environ.setdefault("TORCHAO_FORCE_SKIP_LOADING_SO_FILES", "1")
            from torchao.prototype.blockwise_fp8_training import kernels as k  # optional peer
            fn = getattr(k, fn_name)
            x = inputs.normal(M, N, seed=0).cuda()
            q, s = fn(x, 128)  # first call autotunes
            return (lambda: fn(x, 128)), bytes_moved(x, (q, s))

        out.append(Entry(f"torchao {what} ({fn_name})", make, group="fp8"))
    return out


REGISTRY: Dict[str, Callable[[], List[Entry]]] = {
    "mxfp4": mxfp4_entries,
    "mxfp8": lambda: _generated_entries("mxfp8.ql", "mxfp8") + reference_entries(
        specmod.shipped_kernels()["mxfp8_nvte"].variant(with_gemm_swizzled_scales=True), "mxfp8_nvte", "mxfp8"),
    "fp8": lambda: _generated_entries("fp8_blockwise.ql", "fp8") + torchao_entries() + reference_entries(
        specmod.shipped_kernels()["fp8_1x128_rocm_te"].variant(), "fp8_1x128_rocm_te", "fp8"),
}


def select(groups: Sequence[str], match: Optional[Sequence[str]] = None) -> List[Tuple[str, Entry]]:
    """(group, entry) for each registered entry of `groups` whose name contains one of `match` (all
    when None): e.g. ("quantlay", "torchao") leaves out the torch reference peers, whose compilation
    takes most of a group's time."""
    out = []
    for g in groups:
        if g not in REGISTRY:
            raise ValueError(f"unknown bench group {g!r}; the groups are {sorted(REGISTRY)}")
        out += [(g, e) for e in REGISTRY[g]() if match is None or any(m in e.name for m in match)]
    return out


CSV_FIELDS = ["kernel", "group", "shape", "kernel_hash", "median_ms", "p20_ms", "p80_ms", "gbps", "pct_of_copy", "note"]


def run(groups=("mxfp4",), shapes=SHAPES, csv_path: Optional[str] = None,
        match: Optional[Sequence[str]] = None) -> List[Row]:
    """Time every selected entry at every shape; the CSV gets each row as it is measured (a run cut
    short keeps what it measured)."""
    import triton
    entries = select(groups, match)
    copy = copy_gbps()
    meta = {
        "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
        "commit": os.environ.get("QUANTLAY_COMMIT", "unknown"), "copy_gbps": f"{copy:.0f}",
    }
    out = open(csv_path, "w", newline="") if csv_path else None
    writer = csv.writer(out) if out else None
    if writer:
        writer.writerow(list(meta) + CSV_FIELDS)
        out.flush()
    rows: List[Row] = []
    try:
        for g, entry in entries:
            for M, N in shapes:
                row = Row(entry.name, g, f"{M}x{N}", kernel_hash=entry.kernel_hash)
                reason = entry.validate(M, N)
                if reason:
                    row.note = f"skipped: {reason}"
                else:
                    try:
                        fn, moved = entry.make(M, N)
                        row.median_ms, row.p20_ms, row.p80_ms = time_call(fn)
                        row.gbps = moved / (row.median_ms * 1e-3) / 1e9
                        row.pct_copy = 100 * row.gbps / copy
                    except Exception as exc:  # a peer that cannot run is reported, not fatal
                        row.note = f"skipped: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
                    torch.cuda.empty_cache()
                rows.append(row)
                if writer:
                    writer.writerow(list(meta.values()) + [
                        row.name, row.group, row.shape, row.kernel_hash, f"{row.median_ms:.4f}", f"{row.p20_ms:.4f}",
                        f"{row.p80_ms:.4f}", f"{row.gbps:.0f}", f"{row.pct_copy:.1f}", row.note])
                    out.flush()
    finally:
        if out:
            out.close()
    print(f"{meta['gpu']}, torch {meta['torch']}, triton {meta['triton']}, commit {meta['commit'][:12]}; "
          f"copy {copy:.0f} GB/s (read + write)")
    print(f"{'kernel':48s} {'shape':>11s} {'median ms':>10s} {'GB/s':>7s} {'% copy':>7s}")
    for r in rows:
        if r.note:
            print(f"{r.name:48s} {r.shape:>11s} {r.note}")
        else:
            print(f"{r.name:48s} {r.shape:>11s} {r.median_ms:10.4f} {r.gbps:7.0f} {r.pct_copy:6.1f}%")
    return rows
