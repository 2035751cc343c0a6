"""quantlay: declared low-precision layouts in, bit-exact Triton kernels out.

commands:
    quantlay generate [SPEC ...] [--check]   render the shipped specs into generated/ (or check it is fresh)
    quantlay show SPEC                       the IR: formats, blocks, layouts with shape formulas and pictures
    quantlay verify SPEC                     prove bit-exactness and that every option changes the output
    quantlay demo                            generate, run a shipped kernel, check it against the reference
    quantlay compare SPEC --against MOD:FN --binding B.toml   diagnose a hand-written kernel
    quantlay bench                           (GPU) speed against a same-run copy and the peers
    quantlay tune                            (GPU) sweep tiles into the committed tuning table

SPEC is a .ql file or a shipped spec's name ({specs}).
Without a CUDA device, kernels run in Triton's interpreter (TRITON_INTERPRET=1): correct, not fast.
`quantlay COMMAND --help` gives each command's options and their defaults.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import List, Optional

from .errors import QuantlayError
from .paths import GENERATED_DIR


def _shapes(text: str, dims: int = 2):
    """'128x256,96x160' -> ((128, 256), (96, 160)); anything else is a usage error naming the fix."""
    out = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*" + "x".join([r"([1-9][0-9]*)"] * dims) + r"\s*", part)
        if not m:
            what, eg = ("MxN", "256x512") if dims == 2 else ("MxNxK", "4096x7168x2048")
            raise QuantlayError(f"shape {part!r} is not {what} with positive integers; write e.g. {eg}")
        out.append(tuple(int(v) for v in m.groups()))
    return tuple(out)


def _cmd_generate(args) -> int:
    from . import generate
    from . import spec as specmod
    out = Path(args.out)
    specs = [Path(p) for p in args.specs] or None
    if specs and out.resolve() == GENERATED_DIR.resolve():
        shipped = {p.resolve() for p in specmod.shipped_specs()}
        if not all(p.resolve() in shipped for p in specs):
            print("error: generated/ holds the kernels of every shipped spec (dsl/specs/*.ql) and nothing "
                  "else; render other specs into a folder of their own with --out DIR, or use "
                  "quantlay.build(spec) at run time", file=sys.stderr)
            return 2
        specs = None  # a shipped spec: regenerate them all, so no other spec's modules are removed
    files = generate.render_all(specs)
    if args.check:
        problems = generate.check(out, files)
        if problems:
            print(f"generated/ is stale ({len(problems)} problem{'s' * (len(problems) > 1)}):", file=sys.stderr)
            for p in problems:
                print(f"  {p}", file=sys.stderr)
            print("fix: run `quantlay generate` and commit generated/ (if it still fails, a spec or "
                  "template changed without regenerating, or a file was edited by hand)", file=sys.stderr)
            return 1
        print(f"generated/ is fresh: {len(files)} files match the specs")
        return 0
    changed = generate.write(out, files)
    written = [c for c in changed if not c.startswith("(removed)")]
    print(f"wrote {len(written)} of {len(files)} files into {out}" +
          ("".join(f"\n  {c}" for c in changed) if changed else " (all up to date)"))
    return 0


def _cmd_show(args) -> int:
    from .show import show
    print(show(args.spec))
    return 0


def _cmd_verify(args) -> int:
    from .verify import verify
    shapes = _shapes(args.shapes) if args.shapes else None
    rep = verify(args.spec, shapes=shapes, seed=args.seed, log=lambda line: print(line, flush=True))
    if rep.failures:
        print(f"FAILED: {len(rep.failures)} problem(s)")
        for f in rep.failures[:50]:
            print(f"  {f}")
        return 1
    print("verify passed: every variant is bit-exact and every option changes the output")
    return 0


def _cmd_demo(args) -> int:
    import time
    import torch
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from . import generate, inputs, reference
    from . import spec as specmod
    from quantlay.generated import find
    device = "cuda" if torch.cuda.is_available() else "cpu"
    files = generate.render_all()
    problems = generate.check(GENERATED_DIR, files)
    print(f"1. generate: {len(files)} files from {len(specmod.shipped_specs())} spec(s); "
          f"generated/ is {'fresh' if not problems else 'STALE: ' + problems[0]}")
    kernel = specmod.load(specmod.SPECS_DIR / "mxfp4_cast_transpose.ql")[0]
    opts = {o: True for o in kernel.options}
    variant = kernel.variant(**opts)
    mod = find(kernel.name, **opts)
    M, N = (args.m, args.n)
    print(f"2. kernel: {mod.NAME}\n   options: {mod.OPTIONS}\n   device: {device}"
          f"{' (Triton interpreter)' if device == 'cpu' else ''}")
    ok = True
    for cname, make in inputs.CLASSES.items():
        x = make(M, N, seed=1)
        t0 = time.perf_counter()
        res = mod.quantize(x.to(device))
        if device == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        ref = reference.quantize(variant, x)
        exact = {k: torch.equal(res[k].tensor.cpu(), ref[k]) for k in ref}
        ok &= all(exact.values())
        print(f"3. {cname:8s} x[{M}, {N}] -> " + ", ".join(
            f"{k} {tuple(res[k].tensor.shape)} {'bit-exact' if e else 'MISMATCH'}" for k, e in exact.items())
            + f"  ({dt * 1e3:.0f} ms)")
    y = mod.dequantize(res, "rowwise")
    yr = reference.dequantize(variant, "rowwise", ref, M, N)
    same = reference.same_values(y, yr)
    ok &= same
    print(f"4. dequantize(rowwise) through the layout descriptors: {'bit-exact' if same else 'MISMATCH'}")
    print(f"   layout of rowwise_data: {res['rowwise_data'].layout.describe()}")
    print("summary: " + ("all outputs equal the reference bit for bit" if ok else "MISMATCHES FOUND"))
    return 0 if ok else 1


def _cmd_bench(args) -> int:
    import torch
    if not torch.cuda.is_available():
        print("error: quantlay bench needs a CUDA device (timings in the interpreter mean nothing)",
              file=sys.stderr)
        return 2
    from . import bench
    shapes = _shapes(args.shapes)
    try:
        bench.run(groups=args.groups.split(","), shapes=shapes, csv_path=args.csv,
                  match=args.match.split(",") if args.match else None,
                  gemm_shapes=_shapes(args.gemm_shapes, 3))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def _cmd_tune(args) -> int:
    import torch
    if not torch.cuda.is_available():
        print("error: quantlay tune needs a CUDA device", file=sys.stderr)
        return 2
    from . import spec as specmod
    from .tune import tune, tune_gemm
    kernels = specmod.shipped_kernels()
    gemms = sorted(g.name for p in specmod.shipped_specs() for g in specmod.load_gemms(p))
    names = sorted(kernels) if args.kernel == "all" else args.kernel.split(",")
    unknown = [n for n in names if n not in kernels and n not in gemms]
    if unknown:
        print(f"error: no shipped kernel or gemm {unknown[0]!r}; kernels: {', '.join(sorted(kernels))}; "
              f"gemms: {', '.join(gemms)}", file=sys.stderr)
        return 2
    variants = []
    for name in (n for n in names if n in kernels):  # a kernel without options has one variant whatever --flags says
        settings = args.flags.split(",") if kernels[name].options else ["off"]
        variants += [(name, dict.fromkeys(kernels[name].options, flags == "on")) for flags in settings]
    gemm_names = [n for n in names if n in gemms]
    try:
        if variants:
            tune(variants, shapes=list(_shapes(args.shape)), max_tile=args.max_tile)  # stores each winner
        if gemm_names:
            tune_gemm(gemm_names, shapes=list(_shapes(args.gemm_shape, 3)))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def _cmd_compare(args) -> int:
    import torch
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from .compare import BindingError, run
    shapes = _shapes(args.shapes)
    try:
        tshapes = _shapes(args.time_shapes) \
            if args.time_shapes else None
        return run(args.spec, args.against, args.binding, shapes, json_path=args.json, time_shapes=tshapes)
    except BindingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def main(argv: Optional[List[str]] = None) -> int:
    import warnings
    # The interpreter computes with NumPy, which warns where fp32 overflows to Inf as specified.
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton.runtime.interpreter")
    from . import spec as specmod
    doc = __doc__.replace("{specs}", ", ".join(specmod.shipped_names()))  # the shipped specs, as they are
    p = argparse.ArgumentParser(prog="quantlay", description=doc,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    fmt = {"formatter_class": argparse.ArgumentDefaultsHelpFormatter}
    g = sub.add_parser("generate", **fmt, help="render the specs into generated/")
    g.add_argument("--check", action="store_true", help="fail if generated/ is stale, missing or extra")
    g.add_argument("--out", default=str(GENERATED_DIR), help="output folder")
    g.add_argument("specs", nargs="*", help="spec files (none: every shipped spec)")
    g.set_defaults(fn=_cmd_generate)
    s = sub.add_parser("show", **fmt, help="print a spec's IR and layouts")
    s.add_argument("spec", help="a .ql file or a shipped spec's name")
    s.set_defaults(fn=_cmd_show)
    v = sub.add_parser("verify", **fmt, help="bit-exact check of every variant and option")
    v.add_argument("spec", help="a .ql file or a shipped spec's name")
    v.add_argument("--shapes", default=None, help="comma-separated MxN shapes (none: two shapes per kernel, "
                   "derived from the multiples its layouts need, one ragged in M and one in N)")
    v.add_argument("--seed", type=int, default=0, help="seed of the random input classes")
    v.set_defaults(fn=_cmd_verify)
    d = sub.add_parser("demo", **fmt, help="generate, run a shipped kernel, check it against the reference")
    d.add_argument("--m", type=int, default=256, help="rows of the demo input")
    d.add_argument("--n", type=int, default=512, help="columns of the demo input")
    d.set_defaults(fn=_cmd_demo)
    b = sub.add_parser("bench", **fmt, help="time generated kernels and peers against a same-run copy (GPU)")
    b.add_argument("--groups", default="mxfp4", help="comma-separated: mxfp4, mxfp6, mxfp8, nvfp4, fp8, gemm")
    b.add_argument("--gemm-shapes", default="8192x8192x8192,4096x7168x7168,4096x2048x7168,4096x7168x2048,16384x4096x4096,"
                   "32768x4096x4096",
                   help="comma-separated MxNxK shapes of the gemm group")
    b.add_argument("--shapes", default="4096x6144,8192x8192,16384x8192,32768x4096",
                   help="comma-separated MxN input shapes")
    b.add_argument("--csv", default=None, help="write one CSV row per measurement (as each is measured)")
    b.add_argument("--match", default=None, help="comma-separated name parts: only entries whose name has one "
                   "(e.g. quantlay,torchao leaves out the torch reference peers); '=NAME' is the entry NAME alone")
    b.set_defaults(fn=_cmd_bench)
    t = sub.add_parser("tune", **fmt, help="sweep tiles on the GPU and store the winners in compiler/tuning.json")
    t.add_argument("--kernel", default="mxfp4_cast_transpose_hw", help="kernel or gemm names, comma-separated, or all (the kernels)")
    t.add_argument("--flags", default="on,off", help="option settings to tune: on, off or both")
    t.add_argument("--shape", default="8192x8192", help="shapes, comma-separated: one winner per size bucket")
    t.add_argument("--gemm-shape", default="8192x8192x8192", help="MxNxK shapes for gemms, comma-separated")
    t.add_argument("--max-tile", type=int, default=None, metavar="ELEMENTS",
                   help="sweep only tiles of at most this many elements, e.g. 8192 (a shorter sweep)")
    t.set_defaults(fn=_cmd_tune)
    c = sub.add_parser("compare", **fmt, help="compare a hand-written kernel with the generated one and diagnose")
    c.add_argument("spec", help="the spec the hand-written kernel claims to implement")
    c.add_argument("--against", required=True, help="package.module:function of the hand-written kernel")
    c.add_argument("--binding", required=True, help="TOML file: outputs, options, how to call it")
    c.add_argument("--shapes", default="256x512", help="comma-separated MxN shapes to compare on")
    c.add_argument("--json", default=None, help="write the full report as JSON")
    c.add_argument("--time-shapes", default=None, help="shapes to time on the GPU (none: --shapes)")
    c.set_defaults(fn=_cmd_compare)
    args = p.parse_args(argv)
    try:
        return args.fn(args)
    except QuantlayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (`quantlay show ... | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a folder or file quantlay must write or read (generated/, a cache, --csv)
        where = f" {exc.filename}" if exc.filename else ""
        print(f"error: cannot access{where}: {exc.strerror or exc}; check that the path exists and is "
              f"writable", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
