"""Bit-exactness of edited MXFP4 flags-off copies against the shipped module (interpreter or GPU).

    [TRITON_INTERPRET=1] python bench/experiments/check_copy.py M N exp/COPY.py ...

Special values among normal inputs, every output poisoned (0x5A) before each of two launches (the
second also checks that a copy's cached scratch is left as it must be for the next launch).
"""
import sys

import torch
sys.path.insert(0, "bench")
import named
from quantlay import inputs
M, N = int(sys.argv[1]), int(sys.argv[2])
kernel, shipped = named.shipped("mxfp4_cast_transpose_hw@off")
x = inputs.normal(M, N, seed=3)
x.view(-1)[::97] = 0
x.view(-1)[5::131] *= 1e-30
x.view(-1)[7::1003] = float("inf")
x.view(-1)[11::2003] = float("nan")
dev = "cuda" if torch.cuda.is_available() else "cpu"
x = x.to(dev)
exp = shipped.quantize(x, block_m=64, block_n=64, num_warps=2, region_m=1)
for path in sys.argv[3:]:
    mod = named.module_copy(path)
    for rep in range(2):
        out = mod.quantize(x, block_m=64, block_n=64, num_warps=2, region_m=1, out={k: torch.full_like(exp[k].tensor, 0x5A) for k in shipped.LAYOUTS})
        print(path, rep, all(torch.equal(out[k].tensor, exp[k].tensor) for k in shipped.LAYOUTS),
              [int((out[k].tensor != exp[k].tensor).sum()) for k in shipped.LAYOUTS])
