"""A hand-written Gluon form of mxfp4_cast_transpose_hw with every option on, measured to decide the GPU-only
fast path for MXFP4 (not shipped: the template is to generate it from the spec, like the Hopper GEMMs).

    python bench/gluon_check.py          # GPU: bytes against the shipped Triton kernel, then timed beside it
    python bench/gluon_mxfp4.py --sass   # no GPU: sm_90 registers and SASS instructions per element

The tile is int32 words (two bf16 along N), loaded even and odd rows apart and parked in shared memory. Each
direction reads it back in a layout where one thread holds whole blocks: rowwise a row's 16 words (32
elements), colwise 16 row pairs of one word column (32 rows of two columns). So a block's amax is a
reduction inside one thread, its scale is computed once, and the encoders' constants are per thread: no
spread of block values, no transposition of code bytes. The data leave as 16-byte stores (a row's 16 code
bytes; a column's 16 bytes of its 32 rows), both contiguous in preshuffle16x16. Shapes: M and N multiples of
256 (no masks, no scale padding). Same numerics as the shipped `_hw` bf16x2 encoders.
"""
import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

# one asm instance: 4 words of one row block -> 4 bytes (byte k: the codes of word k, low element low nibble)
_ENC = """
mul.rn.bf16x2 q, {x}, {k};
and.b32 a, q, {keep};
min.bf16x2 a, a, kmax;
and.b32 t, a, 0x7F807F80;
max.bf16x2 t, t, kmin;
add.u32 m, t, 0x03000300;
add.rn.bf16x2 s, a, m;
sub.rn.bf16x2 r, s, m;
mul.rn.bf16x2 c, r, kcode;
set.lt.u32.bf16x2 z, {x}, {thr};
lop3.b32 {w}, c, z, 0x02000200, 0xF8;
"""
_HEAD = """{
.reg .b32 q, a, t, m, s, r, c, z, w0, w1, w2, w3, kmax, kmin, kcode, u0, u1, v0, v1;
mov.b32 kmax, 0x40C040C0;
mov.b32 kmin, 0x3F803F80;
mov.b32 kcode, 0x00800080;
"""
ROW_ASM = gl.constexpr(_HEAD + "".join(_ENC.format(x=f"${1 + i}", w=f"w{i}", k=f"${5 + i}", thr=f"${9 + i}",
                                                  keep=f"${13 + i}")
                           for i in range(4)) + """
shr.u32 u0, w0, 6;
mad.lo.u32 u0, w1, 4, u0;
shr.u32 v0, u0, 12;
add.u32 u0, u0, v0;
shr.u32 u1, w2, 6;
mad.lo.u32 u1, w3, 4, u1;
shr.u32 v1, u1, 12;
add.u32 u1, u1, v1;
prmt.b32 $0, u0, u1, 0x5410;
}""")

# colwise: 4 row pairs of one word column: $2..$5 even-row words, $6..$9 odd-row words, $10.. multiplier,
# $14.. threshold, $18.. keep; $0: the 4 bytes of column 2j (pairs p..p+3), $1: those of column 2j + 1
COL_ASM = gl.constexpr(_HEAD.replace("u0, u1, v0, v1", "u0, u1, u2, u3, y0, y1, y2, y3, e0, e1, e2, e3") + "".join(
    _ENC.format(x=f"${2 + i}", w=f"e{i}", k=f"${10 + i}", thr=f"${14 + i}", keep=f"${18 + i}")
    + _ENC.format(x=f"${6 + i}", w=f"w{i}", k=f"${10 + i}", thr=f"${14 + i}", keep=f"${18 + i}")
    + f"mad.lo.u32 y{i}, w{i}, 16, e{i};\nshr.u32 y{i}, y{i}, 6;\n" for i in range(4)) + """
prmt.b32 u0, y0, y1, 0x6240;
prmt.b32 u1, y2, y3, 0x6240;
prmt.b32 $0, u0, u1, 0x5410;
prmt.b32 $1, u0, u1, 0x7632;
}""")


@gluon.jit
def _max2(a, b):
    return gl.inline_asm_elementwise("max.u16x2 $0, $1, $2;", "=r,r,r", [a, b], dtype=gl.int32, is_pure=True, pack=1)


@gluon.jit
def _smax2(a, b):
    return gl.inline_asm_elementwise("max.s16x2 $0, $1, $2;", "=r,r,r", [a, b], dtype=gl.int32, is_pure=True, pack=1)


@gluon.jit
def _scale(ab):
    """block amax (fp32 bits) -> E8M0 byte e, multiplier bits, and the bf16 encoder constants (16-bit
    patterns: multiplier, sign threshold, keep mask). The shipped kernel's rules (mode even)."""
    e = ((ab + 0x200000) >> 23) - 2
    e = gl.minimum(gl.maximum(e, 0), 254)
    e = gl.where(ab == 0, 127, e)
    e = gl.where(ab == 0x7F800000, 254, e)
    e = gl.where(ab > 0x7F800000, 255, e)
    mb = (254 - e) << 23
    mb = gl.where(e == 254, 0x400000, mb)
    mb = gl.where(e == 255, 0x7FC00000, mb)
    t = 104 - (mb >> 23)
    tb = gl.where(t > 0, t << 7, 0x40 >> gl.minimum(-t, 7))
    nt = gl.where(e == 255, 0xFF80, tb | 0x8000)
    keep = gl.where(e == 255, 0, 0x7FFF)
    return e, (mb >> 16) & 0xFFFF, nt, keep


@gluon.jit
def _swz(r, c, s8):
    """e8m0_shuffle offset of scale (r, c)."""
    return ((((((r // 32) * s8 + c // 8) * 4 + c % 4) * 16 + r % 16) * 2 + (c // 4) % 2) * 2 + (r // 16) % 2)


@gluon.jit
def _rowwise(sm, row0, rd_ptr, rs_ptr, pid_n, s3, s8,
             PM: gl.constexpr, BNW: gl.constexpr, W: gl.constexpr):
    """the rows of one parity (sm: [PM, BNW] words; row0 + 2p: their rows)."""
    R: gl.constexpr = gl.BlockedLayout([1, 16], [32 // (BNW // 16), BNW // 16], [W, 1], [1, 0])
    x = sm.load(R)
    x3 = gl.reshape(x, [PM, BNW // 16, 16])
    # |x| max without an abs per word: the unsigned max holds the largest negative magnitude (if any), the
    # signed max the largest positive one (if any)
    m = _max2(gl.reduce(x3, 2, _max2) & 0x7FFF7FFF, gl.reduce(x3, 2, _smax2) & 0x7FFF7FFF)
    ab = gl.maximum(m & 0xFFFF, (m >> 16) & 0xFFFF) << 16
    e, k16, t16, keep16 = _scale(ab)
    k = gl.expand_dims(k16 | (k16 << 16), 2)
    thr = gl.expand_dims(t16 | (t16 << 16), 2)
    keep = gl.expand_dims(keep16 | (keep16 << 16), 2)
    b = gl.inline_asm_elementwise(ROW_ASM, "=r" + ",r" * 16, [x3, k, thr, keep], dtype=gl.uint8, is_pure=True,
                                  pack=4)
    # data: bytes (row, j) at (r // 16) * s3 + (j // 16) * 256 + (r % 16) * 16 + j % 16 (preshuffle16x16)
    L3: gl.constexpr = b.type.layout
    p = gl.arange(0, PM, layout=gl.SliceLayout(1, gl.SliceLayout(2, L3)))
    jb = gl.arange(0, BNW // 16, layout=gl.SliceLayout(0, gl.SliceLayout(2, L3)))
    jk = gl.arange(0, 16, layout=gl.SliceLayout(0, gl.SliceLayout(1, L3)))
    r = row0 + 2 * p
    roff = (r // 16).to(gl.int64) * s3 + (r % 16) * 16
    joff = (pid_n * (BNW // 16) + jb) * 256
    off = gl.expand_dims(gl.expand_dims(roff, 1), 2) + gl.expand_dims(gl.expand_dims(joff, 0), 2) \
        + gl.expand_dims(gl.expand_dims(jk, 0), 1)
    gl.store(rd_ptr + off, b)
    # scales (r, c): c = pid_n * blocks + jb
    LS: gl.constexpr = e.type.layout
    ps = gl.arange(0, PM, layout=gl.SliceLayout(1, LS))
    cs = gl.arange(0, BNW // 16, layout=gl.SliceLayout(0, LS))
    rr = gl.expand_dims(row0 + 2 * ps, 1)
    cc = gl.expand_dims(pid_n * (BNW // 16) + cs, 0)
    gl.store(rs_ptr + _swz(rr, cc, s8), e.to(gl.uint8))


@gluon.jit
def mxfp4_kernel(x_ptr, rd_ptr, rs_ptr, cd_ptr, cs_ptr, stride_w, s3, s8, s12, s17,
                 BM: gl.constexpr, BN: gl.constexpr, W: gl.constexpr, GROUP: gl.constexpr, COAL: gl.constexpr,
                 TILES: gl.constexpr):
    """TILES column tiles a program: the next tile's loads are issued before this tile's work."""
    PM: gl.constexpr = BM // 2
    BNW: gl.constexpr = BN // 2
    # groups of GROUP programs side by side along N, M fastest across groups (the tuned grid order)
    pid_m = gl.program_id(0) // GROUP
    pid_p = gl.program_id(1) * GROUP + gl.program_id(0) % GROUP
    LA: gl.constexpr = gl.BlockedLayout([1, 4], [32 // (BNW // 4), BNW // 4], [W, 1], [1, 0])
    p = gl.arange(0, PM, layout=gl.SliceLayout(1, LA))
    j = gl.arange(0, BNW, layout=gl.SliceLayout(0, LA))
    rows = (pid_m * BM + 2 * p).to(gl.int64)
    ptrs = x_ptr + gl.expand_dims(rows * stride_w, 1) + gl.expand_dims(pid_p * TILES * BNW + j, 0)
    xe = gl.load(ptrs)
    xo = gl.load(ptrs + stride_w)
    SL: gl.constexpr = gl.SwizzledSharedLayout(4, 1, 8, [1, 0])
    se = gl.allocate_shared_memory(gl.int32, [2 if TILES > 1 else 1, PM, BNW], SL)
    so = gl.allocate_shared_memory(gl.int32, [2 if TILES > 1 else 1, PM, BNW], SL)
    for t in gl.static_range(TILES):
        se.index(t % 2).store(xe)
        so.index(t % 2).store(xo)
        gl.thread_barrier()
        if t + 1 < TILES:
            xe = gl.load(ptrs + (t + 1) * BNW)
            xo = gl.load(ptrs + (t + 1) * BNW + stride_w)
        _tile(se.index(t % 2), so.index(t % 2), rd_ptr, rs_ptr, cd_ptr, cs_ptr, s3, s8, s12, s17, pid_m,
              pid_p * TILES + t, BM, BN, W, COAL)


@gluon.jit
def _tile(se, so, rd_ptr, rs_ptr, cd_ptr, cs_ptr, s3, s8, s12, s17, pid_m, pid_n,
          BM: gl.constexpr, BN: gl.constexpr, W: gl.constexpr, COAL: gl.constexpr):
    PM: gl.constexpr = BM // 2
    BNW: gl.constexpr = BN // 2
    _rowwise(se, pid_m * BM, rd_ptr, rs_ptr, pid_n, s3, s8, PM, BNW, W)
    _rowwise(so, pid_m * BM + 1, rd_ptr, rs_ptr, pid_n, s3, s8, PM, BNW, W)

    # colwise: a thread holds 16 row pairs (one block of 32 rows) of one word column
    C: gl.constexpr = gl.BlockedLayout([16, 1], [1, 32], [W, 1], [0, 1])
    lo = gl.reshape(se.load(C), [PM // 16, 16, BNW])
    hi = gl.reshape(so.load(C), [PM // 16, 16, BNW])
    m = _max2(gl.reduce(_max2(lo, hi), 1, _max2) & 0x7FFF7FFF, gl.reduce(_smax2(lo, hi), 1, _smax2) & 0x7FFF7FFF)
    e0, k0, t0, q0 = _scale((m & 0xFFFF) << 16)  # column 2j
    e1, k1, t1, q1 = _scale(m & 0x7FFF0000)  # column 2j + 1
    k = gl.expand_dims(k0 | (k1 << 16), 1)
    thr = gl.expand_dims(t0 | (t1 << 16), 1)
    keep = gl.expand_dims(q0 | (q1 << 16), 1)
    be, bo = gl.inline_asm_elementwise(COL_ASM, "=r,=r" + ",r" * 20, [lo, hi, k, thr, keep],
                                       dtype=(gl.uint8, gl.uint8), is_pure=True, pack=4)
    if COAL:  # through shared memory into lanes that cover whole 512-byte runs: full-sector stores
        t = gl.reshape(gl.permute(gl.join(be, bo), [2, 3, 0, 1]), [BN, PM])
        LT: gl.constexpr = gl.BlockedLayout([1, 16], [16, 2], [W, 1], [1, 0])
        t = gl.convert_layout(t, LT)
        n = pid_n * BN + gl.arange(0, BN, layout=gl.SliceLayout(1, LT))
        i = gl.arange(0, PM, layout=gl.SliceLayout(0, LT))
        noff = (n // 16).to(gl.int64) * s12 + (n % 16) * 16
        ioff = pid_m * (PM // 32) * 512 + (i // 16) * 256 + i % 16
        gl.store(cd_ptr + gl.expand_dims(noff, 1) + gl.expand_dims(ioff, 0), t)
    else:  # column 2j's bytes and column 2j + 1's: data row n, bytes i = 16 blk + k (a thread's 16 contiguous)
        L3: gl.constexpr = be.type.layout
        blk3 = gl.arange(0, PM // 16, layout=gl.SliceLayout(1, gl.SliceLayout(2, L3)))
        k3 = gl.arange(0, 16, layout=gl.SliceLayout(0, gl.SliceLayout(2, L3)))
        j3 = gl.arange(0, BNW, layout=gl.SliceLayout(0, gl.SliceLayout(1, L3)))
        n3 = pid_n * BN + 2 * j3
        noff3 = gl.expand_dims(gl.expand_dims((n3 // 16).to(gl.int64) * s12 + (n3 % 16) * 16, 0), 1)
        ioff3 = gl.expand_dims(gl.expand_dims(pid_m * (PM // 32) * 512 + blk3 * 256, 1), 2) \
            + gl.expand_dims(gl.expand_dims(k3, 0), 2)
        gl.store(cd_ptr + noff3 + ioff3, be)
        gl.store(cd_ptr + noff3 + 16 + ioff3, bo)
    # colwise scales: row n = 2j (+1), column c = pid_m * BM / 32 + blk
    LS: gl.constexpr = e0.type.layout
    blk = gl.arange(0, PM // 16, layout=gl.SliceLayout(1, LS))
    jj = gl.arange(0, BNW, layout=gl.SliceLayout(0, LS))
    cc = gl.expand_dims(pid_m * (BM // 32) + blk, 1)
    nn = gl.expand_dims(pid_n * BN + 2 * jj, 0)
    gl.store(cs_ptr + _swz(nn, cc, s17), e0.to(gl.uint8))
    gl.store(cs_ptr + _swz(nn + 1, cc, s17), e1.to(gl.uint8))


def quantize(mod, x, BM=64, BN=64, W=2, GROUP=4, maxnreg=None, COAL=False, TILES=1):
    """Outputs in the shipped module's buffers and shapes (even shapes only: M % 256, N % 256; 64-column tiles,
    BM = 32 * W: the colwise layout is one word column a lane, 16 row pairs a thread)."""
    M, N = x.shape
    assert BN == 64 and BM == 32 * W and M % 256 == 0 and N % 256 == 0 and M % BM == 0 and N % BN == 0
    shapes = mod._shapes(M, N)
    bufs = {k: torch.empty(s[2], dtype=torch.uint8, device=x.device) for k, s in shapes.items()}
    s = mod._sizes(M, N)
    gm, gn = M // BM, N // BN // TILES
    assert gn % GROUP == 0 and N % (BN * TILES) == 0
    grid = (gm * GROUP, gn // GROUP)
    kw = {"maxnreg": maxnreg} if maxnreg else {}
    mxfp4_kernel[grid](x.view(torch.int32), bufs["rowwise_data"], bufs["rowwise_scale"], bufs["colwise_data"],
                       bufs["colwise_scale"], x.stride(0) // 2, s[3], s[8], s[12], s[17],
                       BM=BM, BN=BN, W=W, GROUP=GROUP, COAL=COAL, TILES=TILES, num_warps=W, **kw)
    return bufs


if __name__ == "__main__":  # --sass: compile for sm_90 here (no GPU) and count the SASS
    import argparse, collections, os, re, sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    from triton.runtime import driver
    from hopper_compile import Sm90, cuobjdump, resources
    from quantlay.generated import find
    p = argparse.ArgumentParser()
    p.add_argument("--sass", action="store_true", required=True)
    p.add_argument("--bm", type=int, default=64)
    p.add_argument("--warps", type=int, default=2)
    p.add_argument("--tiles", type=int, default=1)
    p.add_argument("--coal", action="store_true")
    a = p.parse_args()
    driver.set_active(Sm90())
    mod = find("mxfp4_cast_transpose_hw", shuffle_rowwise_data=True, shuffle_columnwise_data=True,
               with_gemm_swizzled_scales=True)
    M, N = 4096, 6144
    x = torch.zeros(M, N, dtype=torch.bfloat16)
    s = mod._sizes(M, N)
    bufs = {k: torch.empty(v[2], dtype=torch.uint8) for k, v in mod._shapes(M, N).items()}
    k = mxfp4_kernel.warmup(x.view(torch.int32), bufs["rowwise_data"], bufs["rowwise_scale"], bufs["colwise_data"],
                            bufs["colwise_scale"], N // 2, s[3], s[8], s[12], s[17], BM=a.bm, BN=64, W=a.warps,
                            GROUP=4, COAL=a.coal, TILES=a.tiles, num_warps=a.warps, grid=(1,))
    ops = collections.Counter(m.group(2) for m in re.finditer(r"/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)",
                                                              cuobjdump(k.asm["cubin"], "-sass")))
    n = sum(ops.values())
    print(resources(k.asm["cubin"]), f"shared {k.metadata.shared}; {n} SASS instructions = "
          f"{n * 32 * a.warps / (a.bm * 64 * a.tiles):.2f} lane-instructions per element")
    for op, c in ops.most_common(12):
        print(f"  {op:24s} {c}")
