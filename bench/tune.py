"""Tile sweep for the MXFP4 cast-transpose (flags on and off): compile, check exactness, time.

Sweeps at 8192x8192, then times the best configuration at every benchmark shape. Prints registers
and spills of each compiled configuration.
"""
import itertools
import sys

import torch
import triton

from quantlay import inputs, reference
from quantlay import spec as specmod
from quantlay.generated import find

kernel = specmod.load(specmod.SPECS_DIR / "mxfp4_cast_transpose.ql")[0]
src = torch.empty(1 << 30, dtype=torch.bfloat16, device="cuda")
dst = torch.empty_like(src)
copy_ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=25, rep=200)
copy = 2 * src.numel() * 2 / (copy_ms * 1e-3) / 1e9
del src, dst
print(f"copy {copy:.0f} GB/s")
CONFIGS = [(bm, bn, w) for bm, bn, w in itertools.product((32, 64, 128), (64, 128, 256), (2, 4, 8))
           if 2048 <= bm * bn <= 16384 and not (bm * bn >= 16384 and w < 4)]


def measure(mod, x, ref, bm, bn, w):
    res = mod.quantize(x, block_m=bm, block_n=bn, num_warps=w)
    ok = all(torch.equal(res[k].tensor, ref[k]) for k in ref)
    ms = triton.testing.do_bench(lambda: mod.quantize(x, block_m=bm, block_n=bn, num_warps=w), warmup=10, rep=100)
    return ok, ms


for on in (True, False):
    opts = dict.fromkeys(kernel.options, on)
    mod = find(kernel.name, **opts)
    variant = kernel.variant(**opts)
    M, N = 8192, 8192
    x = inputs.normal(M, N, seed=1).cuda()
    ref = reference.quantize(variant, x)
    moved = x.numel() * 2 + sum(t.numel() for t in ref.values())
    best = None
    for bm, bn, w in CONFIGS:
        if bm % mod.BLOCK_M_MULTIPLE or bn % mod.BLOCK_N_MULTIPLE:
            continue
        try:
            ok, ms = measure(mod, x, ref, bm, bn, w)
        except Exception as exc:
            print(f"flags={on} {bm}x{bn} w{w}: FAILED {type(exc).__name__}: {str(exc)[:300]}")
            continue
        regs = spills = "?"
        try:
            for cache in mod._quantize_kernel.device_caches.values():
                for ck in cache[0].values():
                    if ck.metadata.num_warps == w:
                        regs, spills = ck.n_regs, ck.n_spills
        except Exception:
            pass
        gbps = moved / (ms * 1e-3) / 1e9
        print(f"flags={on} {M}x{N} tile {bm}x{bn} warps {w}: {ms:.4f} ms {gbps:6.0f} GB/s "
              f"{100 * gbps / copy:5.1f}% exact={ok} regs={regs} spills={spills}")
        if ok and (best is None or ms < best[0]):
            best = (ms, bm, bn, w)
    _, bm, bn, w = best
    print(f"BEST flags={on}: tile {bm}x{bn} warps {w}")
    for M, N in ((4096, 6144), (8192, 8192), (16384, 8192)):
        x = inputs.normal(M, N, seed=2).cuda()
        ref = reference.quantize(variant, x)
        moved = x.numel() * 2 + sum(t.numel() for t in ref.values())
        ok, ms = measure(mod, x, ref, bm, bn, w)
        gbps = moved / (ms * 1e-3) / 1e9
        print(f"RESULT flags={on} {M}x{N} tile {bm}x{bn} w{w}: {ms:.4f} ms {gbps:.0f} GB/s "
              f"{100 * gbps / copy:.1f}% of copy, exact={ok}")
    sys.stdout.flush()
