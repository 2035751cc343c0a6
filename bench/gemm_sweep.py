"""Time a generated GEMM under several launch configurations (GPU), bytes compared first.

    python bench/gemm_sweep.py [NAME] [MxNxK,...] ["BM,BN,warps,stages,group_m;..."]

Every configuration's output must equal the default configuration's bit for bit (the configurations
change speed only); then each is timed as CUDA-graph replays and reported in TFLOP/s.
"""
import sys

import torch
import triton

from quantlay.gemm import producer_shape
from quantlay.generated import find
from quantlay.spec import SPECS_DIR, load_gemms

NAME = sys.argv[1] if len(sys.argv) > 1 else "fp8_gemm_fprop"
SHAPES = [tuple(int(v) for v in s.split("x")) for s in
          (sys.argv[2] if len(sys.argv) > 2 else "8192x8192x8192,4096x2048x7168").split(",")]
CONFIGS = [tuple(int(v) for v in c.split(",")) for c in (sys.argv[3] if len(sys.argv) > 3 else
           "128,128,8,3,8;128,128,4,3,8;128,128,8,4,8;128,256,8,3,8;256,128,8,3,8;64,128,4,4,8;"
           "128,64,4,4,8;128,256,8,2,8;256,128,8,2,8;128,128,8,3,1").split(";")]

g = next(g for g in load_gemms(SPECS_DIR / "fp8_gemm.ql") if g.name == NAME)
mod = find(NAME)


G = 8  # grouped GEMMs: 8 equal groups


def operand(op, M, N, K):
    prod = find(op.variant.kernel.name, **{n: v for n, v in op.variant.options if v})
    x = torch.randn(producer_shape(op, g.groups, M, N, K, G), device="cuda").to(torch.bfloat16)
    if g.groups == "contraction":  # tokens K, segment-padded
        return prod.quantize(x, lens(K))
    return prod.quantize(x)


def lens(rows):
    return torch.full((G,), rows // G, dtype=torch.int64, device="cuda")


print(f"{NAME} on {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
for M, N, K in SHAPES:
    a, b = operand(g.a, M, N, K), operand(g.b, M, N, K)
    extra = ()
    if g.groups == "rows":
        extra = (torch.arange(0, M + 1, M // G, dtype=torch.int64, device="cuda")[:G + 1],)
    elif g.groups == "contraction":
        extra = (a.extras["padded_offsets"],)
    gemm = lambda a, b, **kw: mod.gemm(a, b, *extra, **kw)  # noqa: E731
    ref = gemm(a, b)
    for bm, bn, w, st, gm in CONFIGS:
        cfg = dict(block_m=bm, block_n=bn, num_warps=w, num_stages=st, group_m=gm)
        try:
            out = torch.empty_like(ref)
            gemm(a, b, out=out, **cfg)
            same = torch.equal(out, ref)
            ms = triton.testing.do_bench_cudagraph(lambda: gemm(a, b, out=out, **cfg), rep=200)
            print(f"{M}x{N}x{K} {bm}x{bn} w{w} s{st} g{gm}: {ms:.4f} ms {2 * M * N * K / ms / 1e9:7.0f} TFLOP/s"
                  f"{'' if same else '  BYTES DIFFER'}", flush=True)
        except Exception as exc:  # a configuration that does not compile (shared memory) is reported
            print(f"{M}x{N}x{K} {bm}x{bn} w{w} s{st} g{gm}: {type(exc).__name__}: {str(exc)[:100]}", flush=True)
