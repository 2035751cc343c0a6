"""Time shipped casts as their launchers configure them, with one launch setting at each of several values
(GPU), in one process, outputs compared bit for bit; % of a copy measured in the same process.

    python bench/setting_sweep.py fp8_1x128_rocm_te,fp8_segment_m l2_prefetch 0,33,66,132 \
        [--shapes 16384x8192,8192x8192,4096x6144]

    python bench/setting_sweep.py mxfp8_rocm_te,mxfp8_nvte@off config "tuned;32,64,1,0,0,1,0,0,1,1"

A kernel is KERNEL[@off] (bench/named.py); grouped kernels get 8 equal groups. The setting `config` takes
whole launch configurations, separated by `;`: `tuned` (the launcher's choice) or a bench/named.py
launch_config line. Each value is timed twice, alternating, and the faster time kept.
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import named  # noqa: E402
from quantlay import inputs  # noqa: E402
from quantlay.bench import bytes_moved, copy_gbps, fastest_in_turn, pct_of_copy, same_bytes  # noqa: E402
from quantlay.runtime import LAUNCH_DEFAULTS  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("kernels")
p.add_argument("setting", help="a quantize() launch setting, e.g. l2_prefetch or num_warps")
p.add_argument("values", help="comma-separated ints; for `config`, `;`-separated configurations")
p.add_argument("--shapes", default="16384x8192,8192x8192,4096x6144")
a = p.parse_args()
if a.setting == "config":
    labels = a.values.split(";")
    # a line's settings left out take their defaults, not the table's (launch_config drops them for old copies)
    values = [{} if v == "tuned" else {**LAUNCH_DEFAULTS, **named.launch_config(v)} for v in labels]
else:
    labels = a.values.split(",")
    values = [{a.setting: int(v)} for v in labels]
copy = copy_gbps()
print(f"{torch.cuda.get_device_name()}; copy {copy:.0f} GB/s; {a.setting} {labels}", flush=True)
for name in a.kernels.split(","):
    kernel, mod = named.shipped(name)
    for M, N in (tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")):
        x = inputs.normal(M, N, seed=0).cuda()
        args = (inputs.equal_groups(M, "cuda"),) if kernel.groups else ()
        calls = [lambda v=v: mod.quantize(x, *args, **v) for v in values]
        outs = [c() for c in calls]
        moved = bytes_moved(x, [v for k, v in outs[0].items() if k != "tensor_scale"])
        best = fastest_in_turn(calls)
        print(f"{name:30s} {M}x{N:<6d} " + "  ".join(f"{v}: {pct_of_copy(moved, t, copy):5.1f}%"
                                                     for v, t in zip(labels, best))
              + ("" if same_bytes(outs) else "  BYTES DIFFER"), flush=True)
