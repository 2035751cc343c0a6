"""What each part of a Hopper GEMM's consumer costs: edited copies of a generated module, each with one part
taken out (their outputs are wrong by design), for bench/gemm_ab.py to time beside the shipped module.

    python3 bench/gemm_ablate.py fp8_gemm_grouped_wgrad_t /tmp/abl       # writes /tmp/abl/ABLATION/MODULE.py
    python3 bench/gemm_ablate.py fp8_gemm_grouped_wgrad_t /tmp/abl --compile-only   # sm_90 compiles, no GPU
    for d in /tmp/abl/*/; do python3 bench/gemm_ab.py $d --cases "fp8_gemm_grouped_wgrad_t:wgrad_t_G=8_equal:4096x7168x2048"; done

gemm_ab calls the copy "base": a copy much faster than "this" says that part is on the critical path.

Ablations (an anchor the template no longer has is an error, not a silent no-op):
  row_scales   each block promoted by a's row scales only (no b scale loads, no product per element)
  no_scales    each block added unscaled (no scale loads, no multiplies)
  no_staging   the finished tile not written into c_buf before its TMA store (a run-time test never true)
"""
import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

B_COLUMNS = r"\(sa\[:, None\] \* sb_bufs\.index\(st\)\.load\(gl\.SliceLayout\(0, mma\)\)\[None, :\]\)"
ABLATIONS = {  # name: [(pattern, replacement)]; together they must change the consumer
    "row_scales": [(B_COLUMNS, "sa[:, None]")],  # the weight gradient's form (scales from the stage)
    "no_scales": [(r"acc \+= (\w+) \* " + B_COLUMNS, r"acc += \1"),
                  (r"acc \+= (\w+) \* \(sa \* sb\)\[:, None\]", r"acc += \1"),
                  (r"acc \+= p \* scale\b", "acc += p")],  # the other Hopper GEMMs' form
    "no_staging": [(r"(?m)^( +)(c_buf\.store\(_hopper_value\(acc\)\))$", r"\1if K < 0:\n\1    \2")],
}


def ablate(text: str, name: str) -> str:
    """The module's text with ablation `name` applied to its consumer."""
    head, sep, consumer = text.partition("def _hopper_consumer(")
    if not sep:
        raise SystemExit("gemm_ablate: the module has no Hopper consumer")
    body, sep2, tail = consumer.partition("\n@gluon.jit")
    total = 0
    for pattern, repl in ABLATIONS[name]:
        body, n = re.subn(pattern, repl, body)
        total += n
    if total == 0:
        raise SystemExit(f"gemm_ablate: {name}: none of its anchors is in the consumer (the template changed, "
                         f"or this GEMM has no such part); update bench/gemm_ablate.py")
    return head + sep + body + sep2 + tail


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("gemm")
    p.add_argument("out", type=Path)
    p.add_argument("--only", default=",".join(ABLATIONS), help="comma-separated ablations")
    p.add_argument("--compile-only", action="store_true", help="compile each copy for sm_90 (no GPU) and print "
                   "its K loop's SASS count and spills")
    a = p.parse_args()
    from quantlay.generated import find
    src = Path(find(a.gemm).__file__)
    if a.compile_only:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        import hopper_compile
        import named
        hopper_compile.driver.set_active(hopper_compile.Sm90())
    for name in a.only.split(","):
        path = a.out / name / src.name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(ablate(src.read_text(), name))
        if a.compile_only:
            kernel = hopper_compile.compile_hopper(a.gemm, mod=named.module_copy(str(path)))
            cubin = kernel.asm["cubin"]
            print(name, hopper_compile.resources(cubin), hopper_compile.k_loop(cubin))
        else:
            print(path)


if __name__ == "__main__":
    main()
