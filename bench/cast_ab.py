"""Time this tree's casts against copies of earlier generated modules (GPU), in one process, on the same
seeded inputs, outputs compared bit for bit (a speed change never changes bytes).

    mkdir /tmp/base && for f in $(git ls-files 'generated/*.py'); do git show REV:$f > /tmp/base/${f#generated/}; done
    python bench/cast_ab.py /tmp/base [/tmp/base2 ...] [--kernels mxfp4_cast_transpose_te@off,...]
                            [--shapes 16384x8192,4096x6144] [--backend gluon|triton] [--config LINE]

A kernel is KERNEL[@off] (bench/named.py: every option on, or off). Each call is `quantize(x)` as users make
it (the launcher's own choice of kernel and configuration) unless --backend or --config (a bench/named.py
launch_config line, for every version: an A/B of the code at one configuration) is given; each version is timed
twice, alternating, and the faster time kept. Prints % of a copy measured in the same process.
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import named  # noqa: E402  (bench/named.py: shipped kernels by name, copies of generated modules)
from quantlay import inputs  # noqa: E402
from quantlay.bench import bytes_moved, copy_gbps, fastest_in_turn, pct_of_copy, same_bytes  # noqa: E402
from quantlay.runtime import LAUNCH_DEFAULTS  # noqa: E402

KERNELS = ("mxfp4_cast_transpose_hw,mxfp4_cast_transpose_hw@off,mxfp4_cast_transpose_te,"
           "mxfp4_cast_transpose_te@off,mxfp8_nvte,mxfp8_nvte@off,fp8_1x128_rocm_te")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("baselines", nargs="+", help="folders of earlier generated modules (same file names)")
    p.add_argument("--kernels", default=KERNELS)
    p.add_argument("--shapes", default="16384x8192,8192x8192,4096x6144")
    p.add_argument("--backend", default=None, choices=("gluon", "triton"))
    p.add_argument("--config", default=None, help="a launch configuration for every version (bench/named.py)")
    a = p.parse_args()
    shapes = [tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")]
    kw = {"backend": a.backend} if a.backend else {}
    if a.config:  # the settings a line leaves out take their defaults, not the table's
        kw.update({**LAUNCH_DEFAULTS, **named.launch_config(a.config)})
    copy = copy_gbps()
    print(f"{torch.cuda.get_device_name()}; copy {copy:.0f} GB/s; versions: tree, "
          + ", ".join(a.baselines), flush=True)
    for name in a.kernels.split(","):
        kernel, mod = named.shipped(name)
        mods = [("tree", mod)] + [(d, named.module_copy(str(Path(d) / Path(mod.__file__).name))) for d in a.baselines]
        for M, N in shapes:
            x = inputs.normal(M, N, seed=0).cuda()
            args = (inputs.equal_groups(M, "cuda"),) if kernel.groups else ()
            outs = [m.quantize(x, *args, **kw) for _, m in mods]
            same = same_bytes(outs)
            moved = bytes_moved(x, [v for k, v in outs[0].items() if k != "tensor_scale"])
            best = fastest_in_turn([lambda m=m: m.quantize(x, *args, **kw) for _, m in mods])
            pct = [pct_of_copy(moved, t, copy) for t in best]
            print(f"{name:34s} {M}x{N:<6d} " + "  ".join(f"{v} {q:5.1f}% ({t * 1e3:6.1f} us)" for (v, _), q, t
                                                          in zip(mods, pct, best)) + ("" if same else "  BYTES DIFFER"),
                  flush=True)


if __name__ == "__main__":
    main()
