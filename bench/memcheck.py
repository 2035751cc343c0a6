"""Run every generated kernel (quantize and each direction's dequantize consumer) once at a small ragged shape.

Meant to run under `compute-sanitizer --tool memcheck`: any out-of-bounds access is reported there.
MEMCHECK_KERNELS (comma-separated kernel names) limits the run to those kernels; each module is printed
as it finishes, so a run cut short still says what it covered. The launch configuration is the tuned one
(the nearest size bucket), so the one-warp and narrow tiles run here too; a kernel with REGION_BLOCK_ROWS also
runs an even shape in columns of 2 and 4 tiles per program (ragged shapes take one tile per program), and a
kernel with a Hopper (Gluon) path runs it at an even shape in several forms (on sm_90).
"""
import inspect
import json
import os
from pathlib import Path

import torch

from quantlay import inputs, runtime
import quantlay.generated as gen

# (num_warps, grid_n_first, grid_group, column tiles a program, scale pass) by Hopper family (_launch_hopper)
MX_FORMS = ((1, False, 4, 1, False), (4, False, 2, 2, True), (2, False, 0, 1, True), (2, True, 0, 2, False))
HOPPER_FORMS = {"mxfp4": MX_FORMS, "mxfp8": MX_FORMS,
                "fp8_1x128": ((4, False, 2, 2, True), (16, False, 0, 1, True), (8, True, 0, 2, False), (4, True, 0, 1, False))}
manifest = json.loads((Path(gen.__file__).parent / "MANIFEST.json").read_text())
only = set(filter(None, os.environ.get("MEMCHECK_KERNELS", "").split(",")))
count = 0
for e in manifest["files"]:
    if "kernel" not in e or (only and e["kernel"] not in only):
        continue
    mod = gen.find(e["kernel"], **e["options"])
    M = 192 if e["options"].get("shuffle_columnwise_data") else (144 if e["options"].get("shuffle_rowwise_data") else 98)
    N = 320 if e["options"].get("shuffle_rowwise_data") else (176 if e["options"].get("shuffle_columnwise_data") else 166)
    x = inputs.specials(M, N, seed=1).cuda()
    groups = (torch.tensor([M // 3, 0, M - M // 3], device="cuda"),) if "group_lens" in inspect.signature(mod.quantize).parameters else ()
    res = mod.quantize(x, *groups)
    for d in sorted({k.rsplit("_", 1)[0] for k in res}):
        mod.dequantize(res, d)
    regions = getattr(mod, "REGION_BLOCK_ROWS", 0)
    if regions:  # columns of 2 and 4 tiles per program need an even grid
        xe = inputs.specials(512, 192, seed=2).cuda()
        for r in (2, 4):
            mod.quantize(xe, block_m=64, block_n=64, num_warps=2, region_m=r)
    hopper = "gluon" in mod.BACKENDS and torch.cuda.get_device_capability() == (9, 0)
    if hopper:  # the Hopper kernel takes whole tiles only: an even shape in forms the tests run
        xe = inputs.specials(512, 768, seed=3).cuda()
        lens = torch.tensor([170, 0, 341, 1], device="cuda")  # a segmented cast's (its rows: padded blocks)
        mod.quantize(xe, *(lens,) * bool(groups), backend="gluon")
        for form in HOPPER_FORMS[mod.HOPPER_FAMILY]:
            if groups and form[4]:  # segmented rows take no scale pass
                continue
            segs = runtime.segment_buffers(mod.NAME, lens, xe) if groups else ()
            for inline in (32, 0) if groups else (None,):  # the row map scanned by each program, or the map kernel's
                if groups:
                    mod.INLINE_MAP_GROUPS = inline
                mod._launch_hopper(xe, {k: torch.empty(s[2], dtype=mod.DTYPES[k], device="cuda")
                                        for k, s in mod._shapes(512, 768, *segs[:1]).items()}, 512, 768,
                                   *((segs[0], segs[1:]) if groups else ()), *form)
    torch.cuda.synchronize()
    count += 1
    print(f"memcheck: ran {mod.NAME} at {M}x{N}" + (" and 512x192 in regions of 2 and 4 tiles" if regions else "")
          + (" and its Hopper kernel at 512x768 in five forms" if hopper else ""), flush=True)
print(f"memcheck: ran {count} generated modules (quantize + every dequantize)")
