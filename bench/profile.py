"""Launch named generated kernels once each (after a warm-up launch) at one shape, for a profiler.

    ncu --clock-control none --kernel-name regex:_quantize_kernel --launch-skip-before-match 0 \\
        --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \\
        python3 bench/profile.py fp8_1x128_rocm_te fp8_1x128_colwise_transposed --shape 16384x8192

Each kernel runs with its tuned configuration (compiler/tuning.json); options all on. A name
`torchao:FUNCTION` runs that torchao 0.18 blockwise FP8 kernel instead (the peer to compare stall
reasons with; add `|triton_fp8` to ncu's kernel-name regex; its first call autotunes, so ncu profiles
dozens of launches: give it time, or `--launch-skip`). The warm-up launch compiles; ncu reports every
launch, the last of each kernel is the one to read.
"""
import os
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
    if name.startswith("torchao:"):
        os.environ.setdefault("TORCHAO_FORCE_SKIP_LOADING_SO_FILES", "1")
        from torchao.prototype.blockwise_fp8_training import kernels as tk  # optional peer
        fn = getattr(tk, name.split(":", 1)[1])
        for _ in range(2):
            fn(x, 128)
        torch.cuda.synchronize()
        print(f"profiled {name}")
        continue
    k = specs[name]
    mod = find(name, **dict.fromkeys(k.options, True))
    args = (inputs.equal_groups(M, "cuda"),) if k.groups else ()
    for _ in range(2):
        mod.quantize(x, *args)
    torch.cuda.synchronize()
    print(f"profiled {mod.NAME}")
