"""What a cast's access pattern alone costs (GPU): copy kernels with no arithmetic, shaped as the casts'
tiles (128x128, N-first grid), reading bf16 and writing one array (a tiled copy), two byte arrays (the fused
1x128 cast's two code outputs) or one byte array (a rowwise-only cast), each timed as CUDA-graph replays
beside a 2 GiB copy by plain launches (what `quantlay bench` divides by); then the fused 1x128 cast with
its outputs placed apart or carved from one allocation.

    python bench/stream_probe.py [--shapes 16384x8192,8192x8192,4096x6144]
"""
import argparse
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent))
import named  # noqa: E402
from quantlay import inputs  # noqa: E402
from quantlay.bench import bytes_moved, copy_gbps, pct_of_copy, same_bytes, time_call  # noqa: E402


@triton.jit
def _tiles(x_ptr, a_ptr, b_ptr, M, N, GRID_N, BM: tl.constexpr, BN: tl.constexpr, MODE: tl.constexpr):
    pid = tl.program_id(0)
    pm = pid // GRID_N
    pn = pid % GRID_N
    rm = (pm * BM + tl.arange(0, BM)).to(tl.int64)
    rn = pn * BN + tl.arange(0, BN)
    offs = rm[:, None] * N + rn[None, :]
    v = tl.load(x_ptr + offs)
    if MODE == 0:
        tl.store(a_ptr + offs, v)
    elif MODE == 1:
        tl.store(a_ptr + offs, (v & 255).to(tl.int8))
        tl.store(b_ptr + offs, (v >> 8).to(tl.int8))
    else:
        tl.store(a_ptr + offs, (v & 255).to(tl.int8))


@triton.jit
def _flat(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=o < n), mask=o < n)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="16384x8192,8192x8192,4096x6144")
    a = p.parse_args()
    copy = copy_gbps()
    print(f"{torch.cuda.get_device_name()}; copy {copy:.0f} GB/s (2 GiB, plain launches)", flush=True)
    _, mod = named.shipped("fp8_1x128_rocm_te")
    for s in a.shapes.split(","):
        M, N = (int(v) for v in s.split("x"))
        x = inputs.normal(M, N, seed=0).cuda()
        xi = x.view(torch.int16)
        grid_n = N // 128

        def pct(fn, nbytes, graph=True):
            t = time_call(fn)[0] if graph else triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")
            return f"{pct_of_copy(nbytes, t, copy):5.1f}% ({t * 1e3:6.1f} us)"

        y16 = torch.empty_like(xi)
        a8, b8 = torch.empty(M, N, dtype=torch.int8, device="cuda"), torch.empty(M, N, dtype=torch.int8, device="cuda")
        one = torch.empty(2 * M * N + (3 << 20), dtype=torch.int8, device="cuda")
        row = {}
        for mode, name, (pa, pb), nb in ((0, "tiled copy bf16", (y16, y16), 4), (1, "two byte arrays, apart", (a8, b8), 4),
                                         (1, "two byte arrays, adjacent", (one[:M * N], one[M * N:2 * M * N]), 4),
                                         (1, "two byte arrays, 3 MiB apart", (one[:M * N], one[M * N + (3 << 20):]), 4),
                                         (2, "one byte array", (a8, a8), 3)):
            row[name] = pct(lambda: _tiles[(M // 128 * grid_n,)](xi, pa, pb, M, N, grid_n, BM=128, BN=128, MODE=mode,
                                                                  num_warps=4), nb * M * N)
        row["flat copy (graph)"] = pct(lambda: _flat[(triton.cdiv(M * N, 8192),)](xi, y16, M * N, BLOCK=8192,
                                                                                   num_warps=8), 4 * M * N)
        row["torch copy_ (launches)"] = pct(lambda: y16.copy_(xi), 4 * M * N, graph=False)
        shapes = {k: v[2] for k, v in mod._shapes(M, N).items()}
        sizes = {k: int(torch.Size(v).numel()) * torch.empty(0, dtype=mod.DTYPES[k]).element_size()
                 for k, v in shapes.items()}
        ref = mod.quantize(x)
        moved = bytes_moved(x, ref.values())
        row["fused cast, outputs apart"] = pct(lambda: mod.quantize(x), moved)
        for gap_name, gap in (("adjacent", 0), ("3 MiB apart", 3 << 20)):
            big = torch.empty(sum(sizes.values()) + 4 * gap + 4096, dtype=torch.uint8, device="cuda")
            out, at = {}, 0
            for k in ("rowwise_data", "colwise_data", "rowwise_scale", "colwise_scale"):
                out[k] = big[at:at + sizes[k]].view(mod.DTYPES[k]).view(shapes[k])
                at += sizes[k] + gap
            res = mod.quantize(x, out=out)
            same = same_bytes([ref, res])
            row[f"fused cast, outputs {gap_name}"] = pct(lambda: mod.quantize(x, out=out), moved) + (
                "" if same else " BYTES DIFFER")
        for k, v in row.items():
            print(f"{M}x{N:<6d} {k:32s} {v}", flush=True)


if __name__ == "__main__":
    main()
