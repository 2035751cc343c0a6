"""GPU: the Gluon MXFP4 prototype against the shipped Triton kernel (bytes of all four outputs, every form), then
timed beside it as % of a same-run copy. Exits 1 on any byte that differs."""
import sys

import torch
from quantlay import inputs
from quantlay.bench import bytes_moved, copy_gbps, time_call
from quantlay.generated import find
import gluon_mxfp4 as g

mod = find("mxfp4_cast_transpose_hw", shuffle_rowwise_data=True, shuffle_columnwise_data=True,
           with_gemm_swizzled_scales=True)
KEYS = ("rowwise_data", "rowwise_scale", "colwise_data", "colwise_scale")


def check(x, what, **cfg):
    ref = mod.quantize(x)
    got = g.quantize(mod, x, **cfg)
    bad = [k for k in KEYS if not torch.equal(ref[k].tensor.view(torch.uint8), got[k])]
    for k in bad:
        d = (ref[k].tensor.view(torch.uint8) != got[k]).nonzero()
        print(f"  MISMATCH {what} {tuple(x.shape)} {cfg} {k}: {d.shape[0]} bytes, first at {d[:3].tolist()}")
    return not bad


ok = True
allbits = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).reshape(256, 256)
cases = []
for seed in range(4):
    gen = torch.Generator().manual_seed(seed)
    p = torch.randperm(65536, generator=gen)
    cases.append(("allbits", allbits.reshape(-1)[p].reshape(256, 256)))
    cases.append(("allbits_t", allbits.reshape(-1)[p].reshape(256, 256).t().contiguous()))
for name in ("normal", "ties", "specials", "zeros", "subnormals", "infs", "nans"):
    for shape in ((256, 256), (512, 1024), (1024, 512)):
        cases.append((name, getattr(inputs, name)(*shape, seed=3)))
for name, x in cases:
    for cfg in ({}, {"BM": 128, "W": 4}, {"GROUP": 1}, {"COAL": True}, {"TILES": 2, "GROUP": 1},
                {"TILES": 2, "GROUP": 1, "COAL": True, "BM": 128, "W": 4}):
        ok &= check(x.cuda(), name, **cfg)
print("small cases exact:", ok, flush=True)
for shape in ((4096, 6144), (8192, 8192), (16384, 8192)):
    x = inputs.normal(*shape, seed=1).cuda()
    x.view(-1)[::977] = 0
    x.view(-1)[5::1231] *= 1e-30
    x.view(-1)[7::100003] = float("inf")
    x.view(-1)[11::200003] = float("nan")
    for cfg in ({}, {"COAL": True}, {"TILES": 2}, {"TILES": 2, "COAL": True}):
        ok &= check(x, "normal+specials", **cfg)
    copy = copy_gbps()
    moved = bytes_moved(x, mod.quantize(x).values())
    ms = time_call(lambda: mod.quantize(x))[0]
    print(f"{shape} shipped triton (tuned)      {ms:.4f} ms {moved / ms / 1e6 / copy * 100:.1f}%", flush=True)
    for cfg in ({}, {"GROUP": 8}, {"COAL": True}, {"COAL": True, "GROUP": 8}, {"TILES": 2}, {"TILES": 2, "COAL": True},
                {"TILES": 2, "maxnreg": 80}, {"TILES": 2, "GROUP": 1}, {"BM": 128, "W": 4, "COAL": True},
                {"BM": 128, "W": 4, "TILES": 2}):
        try:
            ms = time_call(lambda: g.quantize(mod, x, **cfg))[0]
            print(f"{shape} gluon {str(cfg):28s} {ms:.4f} ms {moved / ms / 1e6 / copy * 100:.1f}%", flush=True)
        except Exception as exc:
            print(f"{shape} gluon {cfg} ERROR {type(exc).__name__}: {str(exc)[:300]}", flush=True)
    ms = time_call(lambda: mod.quantize(x))[0]
    print(f"{shape} shipped triton again        {ms:.4f} ms {moved / ms / 1e6 / copy * 100:.1f}%", flush=True)
print("all exact:", ok)
sys.exit(0 if ok else 1)
