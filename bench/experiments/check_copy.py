"""Bit-exactness of edited MXFP4 copies against the shipped module (interpreter or GPU).

    [TRITON_INTERPRET=1] python bench/experiments/check_copy.py [--on] [--region R] M N exp/COPY.py ...

Special values among normal inputs, every output poisoned (0x5A) before each of two launches (the
second also checks that a copy's cached scratch is left as it must be for the next launch). The
flags-off module unless --on; --region R launches the copy in columns of R tiles (flags off, M a
multiple of 64 * R).
"""
import argparse
import sys

import torch
sys.path.insert(0, "bench")
import named
from quantlay import inputs

p = argparse.ArgumentParser()
p.add_argument("--on", action="store_true", help="every option on (default: off)")
p.add_argument("--region", type=int, default=1, help="region_m for the copies (flags off)")
p.add_argument("M", type=int)
p.add_argument("N", type=int)
p.add_argument("copies", nargs="+")
a = p.parse_args()
kernel, shipped = named.shipped("mxfp4_cast_transpose_hw" + ("" if a.on else "@off"))
x = inputs.normal(a.M, a.N, seed=3)
x.view(-1)[::97] = 0
x.view(-1)[5::131] *= 1e-30
x.view(-1)[7::1003] = float("inf")
x.view(-1)[11::2003] = float("nan")
dev = "cuda" if torch.cuda.is_available() else "cpu"
x = x.to(dev)
launch = dict(block_m=64, block_n=64, num_warps=2)
exp = shipped.quantize(x, **launch, **({} if a.on else {"region_m": 1}))
for path in a.copies:
    mod = named.module_copy(path)
    for rep in range(2):
        out = mod.quantize(x, **launch, **({} if a.on else {"region_m": a.region}),
                           out={k: torch.full_like(exp[k].tensor, 0x5A) for k in shipped.LAYOUTS})
        print(path, rep, all(torch.equal(out[k].tensor, exp[k].tensor) for k in shipped.LAYOUTS),
              [int((out[k].tensor != exp[k].tensor).sum()) for k in shipped.LAYOUTS])
