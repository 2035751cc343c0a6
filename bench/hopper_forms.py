"""Time the casts' Hopper (Gluon) kernel in several forms beside their Triton kernel (GPU, sm_90).

    python bench/hopper_forms.py [--shapes 4096x6144,8192x8192] [--forms 2:0:4:1:0,2:1:0:1:1]
                                 [--kernels mxfp4_cast_transpose_te,mxfp8_floor_transposed]

A form is num_warps:grid_n_first:grid_group:column tiles a program:scale pass[:register cap] (see the modules'
_launch_hopper; the fused 1x128 casts' kernel takes 4, 8 or 16 warps). A segmented cast runs on 8 equal groups (as `quantlay
bench`), its programs scanning the lengths, or with --map reading the map kernel's row map.
Prints % of a same-run copy for each kernel with a Hopper kernel (by default both MXFP4 profiles and the
transposing MXFP8 cast) with its layout flags on and off (where it has any). Timing only: the GPU tests check
the bytes.
"""
import argparse
import itertools

import torch

from quantlay import inputs, runtime
from quantlay.bench import bytes_moved, copy_gbps, time_call
from quantlay.generated import VARIANTS, find
from quantlay.spec import shipped_kernels

p = argparse.ArgumentParser()
p.add_argument("--shapes", default="4096x6144,8192x8192,16384x8192")
p.add_argument("--forms", default="2:0:4:1:0,2:0:4:1:1,2:0:8:1:1,2:0:4:2:1,4:0:4:1:1,2:1:0:1:1,4:1:0:1:0,1:0:4:1:1")
p.add_argument("--kernels", default="mxfp4_cast_transpose_hw,mxfp4_cast_transpose_te,mxfp8_floor_transposed")
p.add_argument("--map", action="store_true", help="segmented casts: the map kernel's row map")
a = p.parse_args()
forms = [tuple(int(v) for v in f.split(":")) + (0,) * (6 - len(f.split(":"))) for f in a.forms.split(",")]
copy = copy_gbps()
print(f"copy {copy:.0f} GB/s")
for shape in (tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")):
    x = inputs.normal(*shape, seed=0).cuda()
    for name, on in itertools.product(a.kernels.split(","), (True, False)):
        flags = shipped_kernels()[name].options
        if not hasattr(find(name, **dict.fromkeys(flags, True)), "_launch_hopper"):
            have = sorted({k for k, o in VARIANTS if not k.startswith("fp8_gemm") and "gluon" in find(k, **dict(o)).BACKENDS})
            raise SystemExit(f"{name} has no Hopper kernel (these have one: {', '.join(have)})")
        if not flags and not on:
            continue  # no layout flags: one setting
        mod = find(name, **dict.fromkeys(flags, on))
        if not hasattr(mod, "_launch_hopper"):
            continue  # (a setting without one: the segmented cast without its rowwise direction)
        lens = (inputs.equal_groups(shape[0], "cuda"),) if shipped_kernels()[name].groups else ()
        if lens and a.map:
            mod.INLINE_MAP_GROUPS = 0
        moved = bytes_moved(x, mod.quantize(x, *lens, backend="triton").values())
        ms = time_call(lambda: mod.quantize(x, *lens, backend="triton"))[0]
        row = [f"triton {moved / ms / 1e6 / copy * 100:.1f}"]
        segs = runtime.segment_buffers(name, lens[0], x) if lens else ()
        bufs = {k: torch.empty(s[2], dtype=mod.DTYPES[k], device="cuda") for k, s in mod._shapes(*shape, *segs[:1]).items()}
        for w, n_first, g, t, staged, cap in forms:
            form = (*((segs[0], segs[1:]) if segs else ()), w, bool(n_first), g, t, bool(staged), cap)
            ms = time_call(lambda: mod._launch_hopper(x, bufs, *shape, *form))[0]
            row.append(f"{form[-6:]} {moved / ms / 1e6 / copy * 100:.1f}")
        print(shape, name, ("on" if on else "off") if flags else "", " | ".join(row), flush=True)
