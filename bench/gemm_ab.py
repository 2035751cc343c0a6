"""Time this tree's Hopper GEMMs against copies of earlier generated modules (GPU), in one run, on the
same seeded inputs, outputs compared bit for bit (a speed change never changes bytes).

    mkdir /tmp/base && for f in $(git ls-files 'generated/fp8_gemm_*'); do git show REV:$f > /tmp/base/${f#generated/}; done
    python bench/gemm_ab.py /tmp/base [--cases "fp8_gemm_fprop:quantlay_fp8_gemm_fprop:8192x8192x8192;..."]
                                      [--set HOPPER_SPLIT_TAIL=1]

A case is GEMM:BENCH_ENTRY:MxNxK (the entry as `bench.gemm_entry` takes it, `_` for a space). The earlier
module's launcher stands in for this tree's inside the same module, so both run through the bench entry's
own operands; an accumulating GEMM's output is not compared (its buffer holds every timed run). `--set`
gives this tree's modules a setting for their runs (e.g. the same module with and without the split tail,
whose sums differ from the whole kernel's in the last bits: the relative error is printed).
"""
import argparse
import functools
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import named  # noqa: E402  (bench/named.py: edited copies of generated modules)
from quantlay import bench  # noqa: E402
from quantlay.generated import find  # noqa: E402

CASES = ("fp8_gemm_fprop:quantlay_fp8_gemm_fprop:8192x8192x8192;"
         "fp8_gemm_fprop:quantlay_fp8_gemm_fprop:4096x7168x2048;"
         "fp8_gemm_grouped_fprop:grouped_fprop_G=8_random:4096x7168x2048;"
         "fp8_gemm_grouped_wgrad_t:wgrad_t_G=8_equal:4096x7168x2048;"
         "fp8_gemm_grouped_wgrad_t:wgrad_t_G=8_equal:16384x4096x4096;"
         "fp8_gemm_grouped_wgrad_t:wgrad_t_G=64_equal:32768x4096x4096;"
         "fp8_gemm_grouped_wgrad_t_acc:wgrad_t_acc_G=8_equal_[gluon]:16384x4096x4096")


def parse_cases(text: str):
    """'GEMM:ENTRY:MxNxK;...' -> [(gemm, entry, (M, N, K))]."""
    out = []
    for case in filter(None, text.split(";")):
        name, entry, shape = case.split(":")
        out.append((name, entry, tuple(int(v) for v in shape.split("x"))))
    return out


@functools.lru_cache(maxsize=None)
def baseline(directory: Path, name: str):
    """The earlier generated module of GEMM `name` in `directory`, loaded as a copy (once per GEMM)."""
    found = sorted(directory.glob(f"{name}__*.py"))
    if len(found) != 1:
        raise SystemExit(f"gemm_ab: expected one {name}__*.py in {directory}, found {len(found)}")
    return named.module_copy(str(found[0]))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("baseline", type=Path, help="a folder of earlier generated GEMM modules")
    p.add_argument("--cases", default=CASES)
    p.add_argument("--set", action="append", default=[], metavar="NAME=INT", help="a module setting for this tree's runs")
    p.add_argument("--this-first", action="store_true", help="time this tree's launcher first (the order alone has "
                   "moved results by up to 2%% on the H200: run both orders)")
    a = p.parse_args()
    settings = {k: int(v) for k, v in (kv.split("=") for kv in a.set)}
    for name, entry, (M, N, K) in parse_cases(a.cases):
        mod = find(name)
        ours = mod._launch_hopper
        e = bench.gemm_entry(entry)
        row, outs = [], []
        saved = {k: getattr(mod, k) for k in settings}
        runs = [("base", baseline(a.baseline, name)._launch_hopper), ("this", ours)]
        for label, launch in (runs[::-1] if a.this_first else runs):
            mod._launch_hopper = launch
            for k, v in settings.items():
                setattr(mod, k, type(saved[k])(v) if label == "this" else saved[k])
            torch.manual_seed(0)
            run = e.make(M, N, K)[0]
            out = run()
            torch.cuda.synchronize()
            if not name.endswith("_acc"):
                outs.append(out.clone())
            row.append(f"{label}: {2 * M * N * K / bench.time_call(run)[0] / 1e9:7.1f}")
            del run, out
            torch.cuda.empty_cache()
        mod._launch_hopper = ours
        for k, v in saved.items():
            setattr(mod, k, v)
        same = ""
        if outs:
            same = (" outputs equal" if torch.equal(outs[0], outs[1]) else
                    f" OUTPUTS DIFFER (relative error {bench.relative_error(outs[1], outs[0]):.1e})")
        print(f"{e.name:52s} {M}x{N}x{K:<8d} " + "  ".join(row) + same, flush=True)


if __name__ == "__main__":
    main()
