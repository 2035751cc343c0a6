"""Launch named generated kernels once each (after a warm-up launch) at one shape, for a profiler.

    ncu --clock-control none --kernel-name regex:_quantize_kernel --launch-skip-before-match 0 \\
        --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \\
        python3 bench/profile.py fp8_1x128_rocm_te fp8_1x128_colwise_transposed --shape 16384x8192

Each kernel runs with its tuned configuration (compiler/tuning.json); options all on. The warm-up
launch compiles; ncu reports both launches, the second is the one to read.
"""
import argparse

import torch

from quantlay import inputs
from quantlay.generated import find
from quantlay.spec import shipped_kernels

p = argparse.ArgumentParser()
p.add_argument("kernels", nargs="+")
p.add_argument("--shape", default="16384x8192")
a = p.parse_args()
M, N = (int(v) for v in a.shape.split("x"))
specs = shipped_kernels()
x = inputs.normal(M, N, seed=0).cuda()
for name in a.kernels:
    k = specs[name]
    mod = find(name, **dict.fromkeys(k.options, True))
    args = (inputs.equal_groups(M, "cuda"),) if k.groups else ()
    for _ in range(2):
        mod.quantize(x, *args)
    torch.cuda.synchronize()
    print(f"profiled {mod.NAME}")
