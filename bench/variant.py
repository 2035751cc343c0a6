"""Time edited copies of a generated module against the shipped one (GPU), bytes compared first.

    python bench/variant.py KERNEL[@off] ref,/tmp/copy.py "bm,bn,warps,maxnreg,inplace_rows[,n_first,group,opaque,region_m,scale_pass];..."

For experiments before a template change: copy a module from generated/, edit it (a different grid
order, a different statement order, ...), and time it beside the shipped module (`ref`) in one run.
Each configuration is compared byte for byte with the shipped module's output (options all on, or all
off with `@off`) and reported as ms and % of a copy measured in the same process. `bench/sass.py
--file` compiles the same copy for sm_90 without a GPU (registers, spills, instruction mix).
"""
import argparse
import torch

from quantlay import inputs
from quantlay.bench import bytes_moved, copy_gbps, time_call

import named  # bench/named.py: KERNEL[@off] names

p = argparse.ArgumentParser()
p.add_argument("kernel", help="shipped kernel name; @off sets every option off")
p.add_argument("files", help="comma-separated module paths; `ref` is the shipped module")
p.add_argument("configs", help="semicolon-separated bm,bn,warps,maxnreg(0: none),inplace_rows(0|1)"
               "[,grid_n_first(0|1),grid_group,opaque_widen(0|1),region_m,scale_pass(0|1),l2_prefetch]")
p.add_argument("--shape", default="16384x8192")
p.add_argument("--uneven", type=int, default=0, help="grouped kernels: this many random group lengths "
               "(some empty) summing to M, instead of 8 equal groups")
a = p.parse_args()
M, N = (int(v) for v in a.shape.split("x"))
kernel, shipped = named.shipped(a.kernel)
x = inputs.normal(M, N, seed=1).cuda()
x.view(-1)[::977] = 0  # zeros and subnormals among the normal values
x.view(-1)[5::1231] *= 1e-30
x.view(-1)[7::100003] = float("inf")  # a few blocks with Inf and NaN
x.view(-1)[11::200003] = float("nan")
if a.uneven and kernel.groups:  # MoE-like: random cut points, so most groups end inside a 128-row block
    g = torch.Generator().manual_seed(a.uneven)
    cuts = torch.sort(torch.randint(0, M + 1, (a.uneven - 1,), generator=g)).values
    lens = torch.diff(torch.cat([torch.tensor([0]), cuts, torch.tensor([M])]))
    args = (lens.cuda(),)
else:
    args = (inputs.equal_groups(M, "cuda"),) if kernel.groups else ()
expected = shipped.quantize(x, *args)
copy = copy_gbps()
for path in a.files.split(","):
    if path == "ref":
        mod = shipped
    else:
        mod = named.module_copy(path)
    for c in a.configs.split(";"):
        cfg = named.launch_config(c)
        try:
            out = mod.quantize(x, *args, **cfg)
            same = all(torch.equal(out[k].tensor.view(torch.uint8), expected[k].tensor.view(torch.uint8))
                       for k in shipped.LAYOUTS)
            ms = time_call(lambda: mod.quantize(x, *args, **cfg))[0]
            moved = bytes_moved(x, out.values())
            print(f"{path:40s} {c:18s} exact={same} {ms:.4f} ms {moved / ms / 1e6 / copy * 100:.1f}% of copy", flush=True)
        except Exception as exc:  # report and go on: one broken variant must not end the run
            print(f"{path:40s} {c:18s} ERROR {type(exc).__name__}: {str(exc)[:200]}", flush=True)
