"""Prototype, to decide a path (not shipped): `mxfp8_floor_transposed` in Gluon with no transposition through
shared memory.

The Triton kernel moves its bf16 tile through shared memory so that the transposed colwise codes leave as runs
of consecutive rows (performance log: the transposition is what holds it 6.5-7 points under `mxfp8_nvte`).
Here a thread holds `rpt` (4 or 8) consecutive rows of 8 consecutive columns, `down` threads down a warp and
32 / down across: a row block (32 columns) lies in 4 threads of one row and a column block (32 rows) in
32 / rpt threads of one warp, so both amaxes are shuffles. The rowwise codes leave as 8 bytes a thread, the
transposed colwise codes as rpt bytes (a thread's rows of one column are consecutive bytes of an output row;
a warp's store writes whole sectors). Numerics are the generated module's own helpers (scale rule, E4M3
convert). Plain scales are staged and moved by the module's scale pass, as the shipped kernel's entries do
(or stored directly, --plain-direct); swizzled scales go straight into their layout by the module's own index
arithmetic (read from its _scale_block_<key>), as the shipped kernel does. With `spread` (SPREAD) each block's
scale math runs once: the block maxima go one a lane (through shared memory, its only use) and the
multipliers come back.

    python bench/proto_mxfp8_gluon.py --offline [--spread] [--rpt 8] [--down 8]   # sm_90 compile here: SASS
    python bench/proto_mxfp8_gluon.py        # GPU: bytes of every form against the shipped kernel, % of a copy

Whole tiles only (M a multiple of the tile's rows, N of its columns; with swizzled scales, no padding cell),
bf16, 32-bit offsets.
"""
import argparse
import re
import sys
import tempfile
from pathlib import Path

import torch

GLUON_KERNEL = '''

@gluon.jit
def _proto_grid_dependency(wait: gl.constexpr):
    if wait:
        gl.inline_asm_elementwise("griddepcontrol.wait; // $0", "=r", [], dtype=gl.int32, is_pure=False, pack=1)
    else:
        gl.inline_asm_elementwise("griddepcontrol.launch_dependents; // $0", "=r", [], dtype=gl.int32, is_pure=False,
                                  pack=1)


@gluon.jit
def _proto_umax2(a, b):
    """Two 16-bit unsigned maxima per instruction (max.u16x2): the reduction of |x| pairs."""
    return gl.inline_asm_elementwise("max.u16x2 $0, $1, $2;", "=r,r,r", [a, b], dtype=gl.int32, is_pure=True, pack=1)


@gluon.jit
def _proto_kernel(x_ptr, rd_ptr, rowwise_scale_ptr, cd_ptr, colwise_scale_ptr, M, N, @SIZES@, GRID_N,
                  BM: gl.constexpr, BN: gl.constexpr, W: gl.constexpr, N_FIRST: gl.constexpr, LW: gl.constexpr,
                  L: gl.constexpr, LT: gl.constexpr, SPREAD: gl.constexpr, DIRECT: gl.constexpr):
    if N_FIRST:
        pid_m = gl.program_id(1)
        pid_n = gl.program_id(0)
    else:
        pid_m = gl.program_id(0)
        pid_n = gl.program_id(1)
    # x as int32 words (two bf16 along N) in LW: a thread RPT rows of 4 words, a warp 32 rows; L: the same
    # elements one a lane slot (codes); LT: L transposed, a thread's RPT consecutive rows first (_proto_layouts)
    _proto_grid_dependency(False)
    _proto_grid_dependency(True)
    rows = pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, LW))
    wcols = pid_n * (BN // 2) + gl.arange(0, BN // 2, layout=gl.SliceLayout(0, LW))
    w = gl.load(x_ptr + gl.expand_dims(rows, 1) * (N // 2) + gl.expand_dims(wcols, 0))
    ab = w & 0x7FFF7FFF  # |x| pairs as bf16 bits: integer order is value order, NaN above Inf
    x = gl.reshape(gl.join((w << 16).to(gl.float32, bitcast=True), (w & -65536).to(gl.float32, bitcast=True)),
                   [BM, BN])

    # rowwise: 1x32 blocks, 4 threads a block
    m = gl.reduce(gl.reshape(ab, [BM, BN // 32, 16]), 2, _proto_umax2)
    if SPREAD:  # each block's scale math once: the blocks spread one a lane (BN // 32 a lane), then back
        m = gl.convert_layout(m, gl.BlockedLayout([1, BN // 32], [32, 1], [W, 1], [1, 0]))
    mult, e = _scale_rowwise(gl.maximum(m & 0xFFFF, (m >> 16) & 0xFFFF) << 16)
    x3 = gl.reshape(x, [BM, BN // 32, 32])
    q = x3 * gl.expand_dims(gl.convert_layout(mult, gl.SliceLayout(2, x3.type.layout)), 2)
    codes = gl.convert_layout(gl.reshape(_codes_rowwise(q, True), [BM, BN]), L)
    rb = gl.expand_dims(pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, L)), 1)
    cb = gl.expand_dims(pid_n * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, L)), 0)
    gl.store(rd_ptr + rb * N + cb, codes)
    LE: gl.constexpr = e.type.layout
    rr = gl.expand_dims(gl.arange(0, BM, layout=gl.SliceLayout(1, LE)), 1)
    cc = gl.expand_dims(gl.arange(0, BN // 32, layout=gl.SliceLayout(0, LE)), 0)
    if DIRECT:  # into the layout, by the module's own index arithmetic (whole tiles: no mask, no padding)
        ti = pid_m * BM + rr
        tj = pid_n * (BN // 32) + cc
        r = @R_ROW@
        c = @C_ROW@
        gl.store(rowwise_scale_ptr + @OFF_ROW@, e.to(gl.uint8))
    else:
        gl.store(rowwise_scale_ptr + (pid_m * GRID_N + pid_n) * (BM * (BN // 32)) + rr * (BN // 32) + cc,
                 e.to(gl.uint8), eviction_policy="evict_last")

    # colwise: 32x1 blocks, 32 // RPT threads of one warp a block (each word's halves: two columns); codes transposed
    m = gl.reduce(gl.reshape(ab, [BM // 32, 32, BN // 2]), 1, _proto_umax2)
    if SPREAD:
        m = gl.convert_layout(m, gl.BlockedLayout([1, BN // 64], [1, 32], [W, 1], [1, 0]))
    mult, e = _scale_colwise(gl.reshape(gl.join(m & 0xFFFF, (m >> 16) & 0xFFFF), [BM // 32, BN]) << 16)
    x3 = gl.reshape(x, [BM // 32, 32, BN])
    q = x3 * gl.expand_dims(gl.convert_layout(mult, gl.SliceLayout(1, x3.type.layout)), 1)
    codes = gl.permute(gl.convert_layout(gl.reshape(_codes_colwise(q, True), [BM, BN]), L), [1, 0])
    # the same threads and elements, the thread's 4 consecutive rows (output bytes) first: 4-byte stores
    codes = gl.convert_layout(codes, LT)
    tn = gl.expand_dims(pid_n * BN + gl.arange(0, BN, layout=gl.SliceLayout(1, LT)), 1)
    tm = gl.expand_dims(pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(0, LT)), 0)
    gl.store(cd_ptr + tn * M + tm, codes)
    LE2: gl.constexpr = e.type.layout
    rb = gl.expand_dims(gl.arange(0, BM // 32, layout=gl.SliceLayout(1, LE2)), 1)
    cc = gl.expand_dims(gl.arange(0, BN, layout=gl.SliceLayout(0, LE2)), 0)
    if DIRECT:
        ti = pid_m * (BM // 32) + rb
        tj = pid_n * BN + cc
        r = @R_COL@
        c = @C_COL@
        gl.store(colwise_scale_ptr + @OFF_COL@, e.to(gl.uint8))
    else:
        gl.store(colwise_scale_ptr + (pid_m * GRID_N + pid_n) * ((BM // 32) * BN) + rb * BN + cc, e.to(gl.uint8),
                 eviction_policy="evict_last")


def _proto_layouts(block_n, warps, rpt, down):
    """(LW, L, LT): a thread holds rpt consecutive rows of 8 consecutive columns, a warp `down` threads down and
    32 // down across (a 32-row block in 32 // rpt threads of one warp, a 32-column block in 4 threads); LT is L
    transposed ([BN, BM]) with the same threads and elements, its registers ordered with the rpt consecutive
    rows (m) first, then the 8 columns (n), then the column repeats: rpt-byte stores of the transposed codes."""
    import math
    across = 32 // down
    lw = gl.BlockedLayout([rpt, 4], [down, across], [warps, 1], [1, 0])
    lb = gl.BlockedLayout([rpt, 8], [down, across], [warps, 1], [1, 0])
    regs = ([[0, 1 << i] for i in range(int(math.log2(rpt)))] + [[1, 0], [2, 0], [4, 0]]
            + [[8 * across << i, 0] for i in range(int(math.log2(block_n // (8 * across))))])
    lanes = [[8 << i, 0] for i in range(int(math.log2(across)))] + [[0, rpt << i] for i in range(int(math.log2(down)))]
    warp_bases = [[0, down * rpt << i] for i in range(int(math.log2(warps)))]
    return lw, lb, gl.DistributedLinearLayout(regs, lanes, warp_bases, [], [block_n, down * rpt * warps])


def quantize_proto(x, block_n=64, warps=2, n_first=True, spread=False, direct=False, rpt=4, down=0,
                   compile_only=False):
    """The prototype's outputs (plain buffers, the shipped layouts) for bf16 x of whole tiles."""
    x2 = x.reshape(-1, x.shape[-1])
    M, N = x2.shape
    down = down or 32 // rpt  # threads down a warp
    block_m = down * rpt * warps
    assert M % block_m == 0 and N % block_n == 0 and M * N < 2 ** 31, "whole tiles, 32-bit offsets only"
    bufs = {k: torch.empty(s[2], dtype=DTYPES[k], device=x.device) for k, s in _shapes(M, N).items()}
    grid_m, grid_n = M // block_m, N // block_n
    scratch = {} if direct else _scale_scratch(x2, grid_m, grid_n, block_m, block_n)
    grid = (grid_n, grid_m) if n_first else (grid_m, grid_n)
    args = (x2.view(torch.int32), bufs["rowwise_data"], scratch.get("rowwise_scale", bufs["rowwise_scale"]),
            bufs["colwise_data"], scratch.get("colwise_scale", bufs["colwise_scale"]), M, N, *_sizes(M, N), grid_n)
    meta = dict(BM=block_m, BN=block_n, W=warps, N_FIRST=n_first, num_warps=warps,
                SPREAD=spread, DIRECT=direct)
    meta["LW"], meta["L"], meta["LT"] = _proto_layouts(block_n, warps, rpt, down)
    if compile_only:
        return _proto_kernel.warmup(*args, **meta, grid=(1,))
    _proto_kernel[grid](*args, **meta, launch_pdl=True)
    if not direct:
        _launch_scale_pass(scratch, bufs, M, N, grid_m, grid_n, block_m, block_n, False, True, 8)
    return bufs
'''


def layout_store(src, key):
    """(r, c, offset) expressions of an output's layout, as the module's _scale_block_<key> stores through it."""
    body = src[src.index(f"def _scale_block_{key}("):]
    body = body[:body.index("\n\n\n")]
    r = re.search(r"^    r = (.*)$", body, re.M).group(1)
    c = re.search(r"^    c = (.*)$", body, re.M).group(1)
    off = re.search(rf"tl\.store\({key}_ptr \+ (.*?), \(?val\)?\.to\(", body).group(1)
    return r, c, off


def load_module(swizzled=False):
    """The shipped module of mxfp8_floor_transposed with the prototype appended, under its own name."""
    import importlib.util
    import inspect
    from quantlay.generated import find
    mod = find("mxfp8_floor_transposed", with_gemm_swizzled_scales=swizzled)
    src = open(mod.__file__).read()
    src = src.replace(f'NAME = "{mod.NAME}"', f'NAME = "proto_{mod.NAME}"')  # its own custom op name
    src += "\n\nfrom triton.experimental import gluon\nfrom triton.experimental.gluon import language as gl\n"
    sizes = re.findall(r"^    (s\d+) = ", inspect.getsource(mod._sizes), re.M)  # the size arguments, in order
    kernel = GLUON_KERNEL.replace("@SIZES@", ", ".join(sizes))
    for key, tag in (("rowwise_scale", "ROW"), ("colwise_scale", "COL")):
        for name, expr in zip(("R", "C", "OFF"), layout_store(src, key)):
            kernel = kernel.replace(f"@{name}_{tag}@", expr)
    src += kernel
    path = Path(tempfile.mkdtemp()) / f"proto_{mod.NAME}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    m = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = m
    spec.loader.exec_module(m)
    return mod, m


def offline(m, mix=False, spread=False, direct=False, rpt=4, down=0):
    """Compile for sm_90 without a GPU: registers, spills, the SASS mix (tests/hopper_compile.py's helpers)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from triton.runtime import driver
    from hopper_compile import Sm90, resources, sass_ops
    driver.set_active(Sm90())
    for bn, warps in ((64, 1), (64, 2), (128, 1), (128, 2), (64, 4)):
        k = m.quantize_proto(torch.zeros(1024, 1024, dtype=torch.bfloat16), block_n=bn, warps=warps, spread=spread,
                             direct=direct, rpt=rpt, down=down, compile_only=True)
        ops, res = sass_ops(k.asm["cubin"]), resources(k.asm["cubin"])
        if mix:
            print(ops.most_common(30))
        mem = {o: c for o, c in ops.items() if o.startswith(("LDG", "STG", "LDS", "STS", "BAR", "SHFL"))}
        rows = (down or 32 // rpt) * rpt  # a warp's
        print(f"{label(bn, warps, spread, rpt, down, direct)}: {res['reg']} registers, {res['stack']} bytes of "
              f"stack, {sum(ops.values())} SASS instructions = {sum(ops.values()) * 32 / (rows * bn):.1f} "
              f"lane-instructions an element; {dict(sorted(mem.items()))}")


def label(bn, warps, spread, rpt, down, direct):
    return (f"{(down or 32 // rpt) * rpt * warps}x{bn}/{warps}w/{rpt}r{down or 32 // rpt}d"
            f"{' spread' if spread else ''}{' direct' if direct else ''}")


def on_gpu(mod, m, shapes, configs):
    """Bytes against the shipped kernel on special and normal inputs, then % of a copy beside it, in one process."""
    from quantlay import inputs
    from quantlay.bench import bytes_moved, copy_gbps, fastest_in_turn, pct_of_copy, same_bytes
    bad = 0
    for M, N in ((256, 512), (4096, 6144)):
        for kind, x in (("specials", inputs.specials(M, N, seed=1)), ("normal", inputs.normal(M, N, seed=2))):
            x = x.to(torch.bfloat16).cuda()
            ref = mod.quantize(x)
            for c in configs:
                if not same_bytes([ref, m.quantize_proto(x, block_n=c[0], warps=c[1], spread=c[2], rpt=c[3],
                                                         down=c[4], direct=c[5])]):
                    bad += 1
                    print(f"BYTES DIFFER: {kind} {M}x{N}, {label(*c)}", flush=True)
    print(f"bytes: {'all equal' if not bad else f'{bad} cases differ'}", flush=True)
    copy = copy_gbps()
    for M, N in shapes:
        x = inputs.normal(M, N, seed=0).to(torch.bfloat16).cuda()
        moved = bytes_moved(x, mod.quantize(x).values())
        calls = [lambda: mod.quantize(x)] + [
            lambda c=c: m.quantize_proto(x, block_n=c[0], warps=c[1], spread=c[2], rpt=c[3], down=c[4], direct=c[5])
            for c in configs]
        best = fastest_in_turn(calls)
        print(f"{M}x{N}: shipped {pct_of_copy(moved, best[0], copy):.1f}%  " + "  ".join(
            f"{label(*c)} {pct_of_copy(moved, t, copy):.1f}%" for c, t in zip(configs, best[1:])),
            flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--offline", action="store_true")
    p.add_argument("--mix", action="store_true", help="with --offline: the 30 commonest SASS instructions")
    p.add_argument("--spread", action="store_true", help="with --offline: the scale math spread (SPREAD)")
    p.add_argument("--direct", action="store_true", help="with --offline: scales stored into the layout (DIRECT)")
    p.add_argument("--rpt", type=int, default=4, help="with --offline: rows a thread (4 or 8)")
    p.add_argument("--down", type=int, default=0, help="with --offline: threads down a warp (0: 32 / rows a thread)")
    p.add_argument("--layouts", default="plain,swizzled", help="the scale layouts (plain: staged for the pass "
                   "as the shipped kernel's entries do, or direct; swizzled: direct, as shipped)")
    p.add_argument("--shapes", default="16384x8192,8192x8192,4096x6144")
    p.add_argument("--plain-direct", action="store_true", help="plain scales stored directly, not staged for the pass")
    p.add_argument("--configs", help="block_n:warps[:s][:r8][:d8] (s: the scale math spread; r8: 8 rows a "
                   "thread, else 4; d8: 8 threads down a warp, else 32 / rows a thread), comma-separated",
                   default="64:2,64:1:s,64:2:s,128:2:s,64:4:s,64:1:s:r8,64:2:s:r8,128:2:s:r8,64:1:s:r8:d8,64:2:s:r8:d8")
    a = p.parse_args()
    fields = [c.split(":") for c in a.configs.split(",")]
    configs = [(int(f[0]), int(f[1]), "s" in f[2:], 8 if "r8" in f[2:] else 4, 8 if "d8" in f[2:] else 0)
               for f in fields]
    for layout in a.layouts.split(","):
        mod, m = load_module(swizzled=layout == "swizzled")
        if a.offline:
            print(f"== {layout} scales")
            offline(m, a.mix, a.spread, a.direct or layout == "swizzled", a.rpt, a.down)
            continue
        print(f"== {mod.NAME}", flush=True)
        direct = [a.plain_direct] if layout == "plain" else [True]
        on_gpu(mod, m, [tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")],
               [c + (d,) for d in direct for c in configs])


if __name__ == "__main__":
    main()
