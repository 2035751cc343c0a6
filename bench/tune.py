"""Tile sweep for the MXFP4 cast-transpose (flags on and off): compile, check exactness, time.

Prints registers and spills of each compiled configuration, and the best one per shape.
"""
import itertools

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
for on in (True, False):
    opts = dict.fromkeys(kernel.options, on)
    mod = find(kernel.name, **opts)
    variant = kernel.variant(**opts)
    for M, N in ((8192, 8192), (4096, 6144)):
        x = inputs.normal(M, N, seed=1).cuda()
        ref = reference.quantize(variant, x)
        moved = x.numel() * 2 + sum(t.numel() for t in ref.values())
        best = None
        for bm, bn, w in itertools.product((32, 64, 128), (64, 128, 256), (4, 8)):
            if bm * bn > 128 * 256 or (bm * bn <= 64 * 64 and w == 8):
                continue
            try:
                res = mod.quantize(x, block_m=bm, block_n=bn, num_warps=w)
                ok = all(torch.equal(res[k].tensor, ref[k]) for k in ref)
                ms = triton.testing.do_bench(lambda: mod.quantize(x, block_m=bm, block_n=bn, num_warps=w),
                                             warmup=10, rep=100)
            except Exception as exc:
                print(f"flags={on} {M}x{N} {bm}x{bn} w{w}: FAILED {type(exc).__name__}: {str(exc)[:200]}")
                continue
            k = mod._quantize_kernel
            regs = spills = "?"
            try:
                c = list(k.device_caches[0][0].values())[-1]
                regs, spills = c.n_regs, c.n_spills
            except Exception:
                pass
            gbps = moved / (ms * 1e-3) / 1e9
            print(f"flags={on} {M}x{N} tile {bm}x{bn} warps {w}: {ms:.4f} ms {gbps:6.0f} GB/s "
                  f"{100 * gbps / copy:5.1f}% exact={ok} regs={regs} spills={spills}")
            if ok and (best is None or ms < best[0]):
                best = (ms, bm, bn, w, gbps)
        print(f"BEST flags={on} {M}x{N}: tile {best[1]}x{best[2]} warps {best[3]}: {best[4]:.0f} GB/s "
              f"({100 * best[4] / copy:.1f}% of copy)")
