"""Experiment (fourteenth session, not shipped): MXFP4 flags on with a column of LOOP_R tiles per program.

    python bench/experiments/tile_loop_pipelined.py RxS ...   (from the repository root; writes exp/loop_R_sS.py)

The tile body of d8dd7930 inside `tl.range(0, LOOP_R, num_stages=S)`: S > 1 lets Triton's pipeliner
prefetch the next tile through shared memory (cp.async). Measured: S=1 65.7-67.6%, S=2-3 46-61%
(168-195 registers uncapped, spills under caps) against 69.5-70.6% for the shipped entry
(h200_variants_mxfp4_on_loop_09ee217.log).
"""
import sys
SRC = "generated/mxfp4_cast_transpose_hw__srd1_scd1_wgss1__d8dd7930.py"
t = open(SRC).read()
start = t.index("    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)\n")
end = t.index("\n\ndef _sizes(M, N):")
body = t[start:end]
body = "\n".join(("    " + ln) if ln.strip() else ln for ln in body.split("\n"))
t = t[:start] + """    pid_rm = pid_m
    for i in tl.range(0, LOOP_R, num_stages=STAGES):
        pid_m = pid_rm * LOOP_R + i
""" + body + t[end:]
t = t.replace("PAIR_RUN: tl.constexpr):\n    \"\"\"One", "PAIR_RUN: tl.constexpr, LOOP_R: tl.constexpr, STAGES: tl.constexpr):\n    \"\"\"One", 1)
t = t.replace("grid, grid_n_first, grid_group = runtime.launch_grid(triton.cdiv(rows, block_m * region)", "assert even and rows % (block_m * LOOP_R) == 0\n    grid, grid_n_first, grid_group = runtime.launch_grid(triton.cdiv(rows, block_m * region * LOOP_R)", 1)
assert "LOOP_R)" in t
t = t.replace("OPAQUE_WIDEN=cfg[\"opaque_widen\"], **kwargs)", "OPAQUE_WIDEN=cfg[\"opaque_widen\"], LOOP_R=LOOP_R, STAGES=STAGES, **kwargs)", 1)
assert "STAGES=STAGES" in t
for r, s in [[int(v) for v in a.split("x")] for a in sys.argv[1:]]:
    open(f"exp/loop_{r}_s{s}.py", "w").write(t.replace('NAME = "', f'LOOP_R, STAGES = {r}, {s}\nNAME = "', 1))
