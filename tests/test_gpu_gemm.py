"""The generated FP8 GEMMs on the GPU at the shapes that broke a hand-written peer: N not a multiple of
128, K from 64 to 7168 with partial blocks, groups of 0, 1, 127, 129 and 4096 rows, 1 and 64 groups.
Engineered exact inputs must equal the reference bit for bit; random inputs stay within the bound."""
import pytest
import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from quantlay import reference, runtime
from quantlay.generated import find

from quantlay.errors import LaunchError
from test_gemm import (GEMMS, dense_shapes, engineered, expect, mutated, offsets_of, producer, rel_err,
                       with_nan_scale)

pytestmark = pytest.mark.gpu
DEVICE = "cuda"
NS = [576, 2112, 7168, 7748]
KS = [64, 128, 2880, 3884, 7168]


def exact_ranges(K):
    return {"code": 3, "exp": 2} if K <= 4096 else {"code": 2, "exp": 1}


@pytest.mark.parametrize("N", NS)
@pytest.mark.parametrize("K", KS)
def test_fprop_exact(N, K):
    g = GEMMS["fp8_gemm_fprop"]
    a = engineered(g.a, (384, K), seed=N + K, **exact_ranges(K))
    b = engineered(g.b, (N, K), seed=N * K, **exact_ranges(K))
    expect(g, find(g.name).gemm(a, b), reference.gemm(g, a, b), exact=True)


@pytest.mark.parametrize("name", ["fp8_gemm_fprop_nvte", "fp8_gemm_dgrad_nvte", "fp8_gemm_fprop_deepgemm"])
@pytest.mark.parametrize("N,K", [(576, 7168), (7748, 3884), (2112, 64), (7168, 128)])
def test_other_dense_exact(name, N, K):
    g = GEMMS[name]
    sa, sb = dense_shapes(g, 300, N, K)
    a = engineered(g.a, sa, seed=1, **exact_ranges(K))
    b = engineered(g.b, sb, seed=2, **exact_ranges(K))
    expect(g, find(name).gemm(a, b), reference.gemm(g, a, b), exact=True)


@pytest.mark.big_memory
def test_dense_random_large():
    g = GEMMS["fp8_gemm_fprop"]
    x = torch.randn(4096, 7168, device=DEVICE).to(torch.bfloat16)
    w = torch.randn(7748, 7168, device=DEVICE).to(torch.bfloat16)
    a, b = producer(g.a).quantize(x), producer(g.b).quantize(w)
    expect(g, find(g.name).gemm(a, b), reference.gemm(g, a, b), exact=False)


LENS = {"edge": [0, 1, 127, 129, 4096], "one": [3000], "64": None}


def lens_of(kind):
    if LENS[kind] is not None:
        return LENS[kind]
    gen = torch.Generator().manual_seed(3)
    return torch.randint(0, 1024, (64,), generator=gen).tolist()


@pytest.mark.parametrize("kind", sorted(LENS))
@pytest.mark.parametrize("name", ["fp8_gemm_grouped_fprop", "fp8_gemm_grouped_dgrad"])
def test_grouped_rows_exact(kind, name):
    g = GEMMS[name]
    lens = lens_of(kind)
    G, M, N, K = len(lens), sum(lens), 576, 2816 if name == "fp8_gemm_grouped_dgrad" else 2880
    a = engineered(g.a, (M, K), seed=4)
    b = engineered(g.b, (G * N, K) if g.b.direction.name == "rowwise" else (G * K, N), seed=5)
    offs = offsets_of(lens).to(DEVICE)
    expect(g, find(name).gemm(a, b, offs), reference.gemm(g, a, b, offs), exact=True)


@pytest.mark.parametrize("kind", sorted(LENS))
@pytest.mark.parametrize("name", ["fp8_gemm_grouped_wgrad", "fp8_gemm_grouped_wgrad_t"])
def test_grouped_wgrad_exact_and_accumulate(kind, name):
    g = GEMMS[name]
    lens = lens_of(kind)
    G, T, M, N = len(lens), sum(lens), 576, 384
    t = torch.tensor(lens, device=DEVICE)
    a, b = engineered(g.a, (T, M), G=G, lens=t, seed=6), engineered(g.b, (T, N), G=G, lens=t, seed=7)
    offs = a.extras["padded_offsets"]
    ref = reference.gemm(g, a, b, offs)
    expect(g, find(g.name).gemm(a, b, offs), ref, exact=True)
    buf = torch.ones(G, M, N, device=DEVICE)
    find(name + "_acc").gemm(a, b, offs, out=buf)
    want = torch.stack([torch.ones(M, N) if n == 0 else ref[i].cpu() + 1 for i, n in enumerate(lens)])
    assert torch.equal(buf.cpu(), want)


def test_grouped_random_within_the_bound():
    g = GEMMS["fp8_gemm_grouped_fprop"]
    lens = lens_of("64")
    G, M, N, K = len(lens), sum(lens), 2112, 2880
    x = torch.randn(M, K, device=DEVICE).to(torch.bfloat16)
    w = torch.randn(G * N, K, device=DEVICE).to(torch.bfloat16)
    a, b = producer(g.a).quantize(x), producer(g.b).quantize(w)
    offs = offsets_of(lens).to(DEVICE)
    y = find(g.name).gemm(a, b, offs)
    assert rel_err(y.float(), reference.gemm(g, a, b, offs).to(y.dtype).float()) < 1e-6


@pytest.mark.big_memory
def test_64_bit_offsets():
    """An output past 2^31 elements (int64 index arithmetic): the last rows against the reference."""
    g = GEMMS["fp8_gemm_fprop"]
    M, N, K = 2 ** 31 // 16384 + 256, 16384, 128
    a = engineered(g.a, (M, K), seed=8)
    b = engineered(g.b, (N, K), seed=9)
    y = find(g.name).gemm(a, b)
    ref_rows = reference.gemm(g, a, b)[-300:]
    assert torch.equal(y[-300:].cpu(), ref_rows.to(y.dtype).cpu())


@pytest.mark.big_memory
def test_wgrad_output_past_2_31_elements():
    """64 groups of a [G, 8192, 8192] fp32 gradient: the group offset g * M * N passes 2^31."""
    g = GEMMS["fp8_gemm_grouped_wgrad"]
    G, M, N = 64, 8192, 4160
    lens = [128] * G
    t = torch.tensor(lens, device=DEVICE)
    a = engineered(g.a, (sum(lens), M), G=G, lens=t, seed=10)
    b = engineered(g.b, (sum(lens), N), G=G, lens=t, seed=11)
    offs = a.extras["padded_offsets"]
    y = find(g.name).gemm(a, b, offs)
    ref = reference.gemm(g, a, b, offs)
    assert torch.equal(y[-1].cpu(), ref[-1].cpu()) and torch.equal(y[0].cpu(), ref[0].cpu())


# ---- the Hopper (Gluon) kernels: against the Triton kernel and the reference ---------------------------
HOPPER = sorted(n for n in GEMMS if "gluon" in find(n).BACKENDS)
sm90 = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
                          reason="the Hopper kernel runs on sm_90 only")


def both(name, *args):
    """(Gluon, Triton) outputs of one call."""
    mod = find(name)
    return mod.gemm(*args, backend="gluon"), mod.gemm(*args, backend="triton")


def test_hopper_kernels_cover_dense_grouped_rows_and_wgrad():
    assert {"fp8_gemm_fprop", "fp8_gemm_fprop_nvte", "fp8_gemm_dgrad_nvte", "fp8_gemm_fprop_deepgemm",
            "fp8_gemm_grouped_fprop", "fp8_gemm_grouped_dgrad", "fp8_gemm_grouped_wgrad_t",
            "fp8_gemm_grouped_wgrad_t_acc", "fp8_gemm_grouped_wgrad_t_bf16"} <= set(HOPPER)


@sm90
@pytest.mark.parametrize("name", [n for n in HOPPER if GEMMS[n].groups is None])
@pytest.mark.parametrize("M,N,K", [(300, 576, 7168), (1, 7748, 2880), (129, 2112, 64), (64, 7168, 128),
                                   (1000, 130, 272)])
def test_hopper_dense_exact(name, M, N, K):
    g = GEMMS[name]
    sa, sb = dense_shapes(g, M, N, K)
    a = engineered(g.a, sa, seed=M + N, **exact_ranges(K))
    b = engineered(g.b, sb, seed=N + K, **exact_ranges(K))
    yg, yt = both(name, a, b)
    expect(g, yg, reference.gemm(g, a, b), exact=True)
    assert torch.equal(yg, yt)


@sm90
@pytest.mark.parametrize("kind", sorted(LENS))
@pytest.mark.parametrize("name", [n for n in HOPPER if GEMMS[n].groups == "rows"])
@pytest.mark.parametrize("N", [576, 200, 384])
def test_hopper_grouped_rows_exact(kind, name, N):
    g = GEMMS[name]
    lens = lens_of(kind)
    G, M, K = len(lens), sum(lens), 2816 if g.b.direction.name == "colwise" else 2880
    a = engineered(g.a, (M, K), seed=4)
    b = engineered(g.b, (G * N, K) if g.b.direction.name == "rowwise" else (G * K, N), seed=5)
    offs = offsets_of(lens).to(DEVICE)
    # into NaNs, so that a cell no tile writes shows (a group's last row tile of at most 64 rows runs as
    # wide tiles, two column tiles each: N = 576 ends in an odd one, whose second warpgroup has none)
    mod = find(name)
    yg = mod.gemm(a, b, offs, out=torch.full((M, N), float("nan"), dtype=mod.OUT_DTYPE, device=DEVICE), backend="gluon")
    yt = mod.gemm(a, b, offs, backend="triton")
    expect(g, yg, reference.gemm(g, a, b, offs), exact=True)
    assert torch.equal(yg, yt)


@sm90
@pytest.mark.parametrize("kind", sorted(LENS))
@pytest.mark.parametrize("name", ["fp8_gemm_grouped_wgrad_t", "fp8_gemm_grouped_wgrad_t_pow2"])
def test_hopper_wgrad_exact_and_accumulate(kind, name, monkeypatch):
    """Over each group's tokens (0, 1, 127, 129, 4096 and 64 random groups): written, then added into a
    buffer of ones (a group without tokens leaves it untouched). Four persistent programs, so that each
    runs tiles of several groups (each tile's token range is read a tile ahead)."""
    monkeypatch.setattr(runtime, "sm_count", lambda device: 4)
    g = GEMMS[name]
    lens = lens_of(kind)
    G, T, M, N = len(lens), sum(lens), 576, 328
    t = torch.tensor(lens, device=DEVICE)
    a, b = engineered(g.a, (T, M), G=G, lens=t, seed=6), engineered(g.b, (T, N), G=G, lens=t, seed=7)
    offs = a.extras["padded_offsets"]
    yg, yt = both(name, a, b, offs)
    ref = reference.gemm(g, a, b, offs)
    expect(g, yg, ref, exact=True)
    assert torch.equal(yg, yt)
    buf = torch.ones(G, M, N, device=DEVICE)
    find(name + "_acc").gemm(a, b, offs, out=buf, backend="gluon")
    want = torch.stack([torch.ones(M, N) if n == 0 else ref[i].cpu() + 1 for i, n in enumerate(lens)])
    assert torch.equal(buf.cpu(), want)


@sm90
@pytest.mark.parametrize("name", [n for n in HOPPER if GEMMS[n].out_dtype == "bf16"])
def test_hopper_nan_bits_are_the_triton_kernels(name):
    """An operand's NaN scale: the Hopper path's NaN outputs (the convert instruction's) have the Triton
    kernel's bits, 0x7FFF, as every other cell does."""
    g = GEMMS[name]
    if g.groups == "contraction":
        t = torch.tensor([130, 0, 300], device=DEVICE)
        a, b = engineered(g.a, (430, 256), G=3, lens=t, seed=1), engineered(g.b, (430, 200), G=3, lens=t, seed=2)
        args = (a.extras["padded_offsets"],)
    elif g.groups == "rows":
        a = engineered(g.a, (300, 640), seed=1)
        b = engineered(g.b, (2 * 200, 640) if g.b.direction.name == "rowwise" else (2 * 640, 200), seed=2)
        args = (offsets_of([130, 170]).to(DEVICE),)
    else:
        sa, sb = dense_shapes(g, 300, 200, 640)
        a, b, args = engineered(g.a, sa, seed=1), engineered(g.b, sb, seed=2), ()
    with_nan_scale(a)
    yg, yt = both(name, a, b, *args)
    bits = yg.view(torch.int16)
    assert torch.isnan(yg).any() and (bits[torch.isnan(yg)] == 0x7FFF).all()
    assert torch.equal(bits, yt.view(torch.int16))


@sm90
@pytest.mark.parametrize("name", ["fp8_gemm_grouped_wgrad_t_bf16", "fp8_gemm_grouped_wgrad_t_pow2_bf16"])
def test_hopper_bf16_wgrad_is_the_fp32_one_rounded(name, monkeypatch):
    """Written in bf16 by either backend: the fp32 kernel's output rounded to nearest even, bit for bit, on
    random producer operands (the sums round) and on engineered ones (the reference, rounded); N = 200
    ends in a partial tile."""
    monkeypatch.setattr(runtime, "sm_count", lambda device: 4)
    g = GEMMS[name]
    lens = lens_of("edge")
    G, T, M, N = len(lens), sum(lens), 576, 200
    t = torch.tensor(lens, device=DEVICE)
    cast = producer(g.a)
    a, b = (cast.quantize(torch.randn(T, M, device=DEVICE).to(torch.bfloat16), t),
            cast.quantize(torch.randn(T, N, device=DEVICE).to(torch.bfloat16), t))
    offs = a.extras["padded_offsets"]
    for backend in ("gluon", "triton"):
        y = find(name).gemm(a, b, offs, backend=backend)
        y32 = find(name.replace("_bf16", "")).gemm(a, b, offs, backend=backend)
        assert y.dtype == torch.bfloat16 and torch.equal(y, y32.to(torch.bfloat16)), backend
    a, b = engineered(g.a, (T, M), G=G, lens=t, seed=6), engineered(g.b, (T, N), G=G, lens=t, seed=7)
    offs = a.extras["padded_offsets"]
    yg, yt = both(name, a, b, offs)
    expect(g, yg, reference.gemm(g, a, b, offs), exact=True)
    assert torch.equal(yg, yt)


@sm90
@pytest.mark.parametrize("backend,add_by_tma", [("gluon", False), ("gluon", True), ("triton", False)])
def test_wgrad_adds_into_any_fp32_buffer_bit_exactly(backend, add_by_tma, monkeypatch):
    """Accumulating, each output is the fp32 sum of the buffer's value and the tile's, bit for bit, where the
    buffer holds subnormals, signed zeros, infinities, NaN, values of every exponent and values that cancel
    the tile's; a group without tokens leaves its slice as it was. The Hopper kernel adds either after
    loading the buffer's tile or by a TMA reduce-add (where groups are long; forced here both ways)."""
    g = GEMMS["fp8_gemm_grouped_wgrad_t_acc"]
    monkeypatch.setattr(find(g.name), "HOPPER_ADD_BY_TMA_TOKENS", 0 if add_by_tma else 1 << 40)
    lens = [300, 0, 1000, 129]
    G, T, M, N = len(lens), sum(lens), 256, 384
    t = torch.tensor(lens, device=DEVICE)
    a, b = engineered(g.a, (T, M), G=G, lens=t, seed=11), engineered(g.b, (T, N), G=G, lens=t, seed=12)
    offs = a.extras["padded_offsets"]
    ref = reference.gemm(g, a, b, offs).cpu()
    gen = torch.Generator().manual_seed(13)
    special = torch.tensor([1e-40, -1e-40, 1.4e-45, 0.0, -0.0, float("inf"), -float("inf"), float("nan"), 3.0e38])
    buf = torch.randn(G, M, N, generator=gen) * 2.0 ** torch.randint(-140, 100, (G, M, N), generator=gen).float()
    pick = torch.randint(0, 3, (G, M, N), generator=gen)
    buf = torch.where(pick == 0, special[torch.randint(0, len(special), (G, M, N), generator=gen)], buf)
    buf = torch.where(pick == 1, -ref, buf)  # exact cancellation
    want = torch.stack([buf[i] if n == 0 else buf[i] + ref[i] for i, n in enumerate(lens)])
    out = buf.to(DEVICE)
    find(g.name).gemm(a, b, offs, out=out, backend=backend)
    got = out.cpu()
    same = (got.view(torch.int32) == want.view(torch.int32)) | (got.isnan() & want.isnan())
    assert same.all(), (f"{int((~same).sum())} sums differ, e.g. {got[~same][:4].tolist()} against "
                        f"{want[~same][:4].tolist()}")


@pytest.mark.big_memory
@sm90
def test_hopper_random_within_the_bound():
    g = GEMMS["fp8_gemm_grouped_fprop"]
    lens = lens_of("64")
    G, M, N, K = len(lens), sum(lens), 2112, 7168
    a = producer(g.a).quantize(torch.randn(M, K, device=DEVICE).to(torch.bfloat16))
    b = producer(g.b).quantize(torch.randn(G * N, K, device=DEVICE).to(torch.bfloat16))
    offs = offsets_of(lens).to(DEVICE)
    y = find(g.name).gemm(a, b, offs, backend="gluon")
    assert rel_err(y.float(), reference.gemm(g, a, b, offs).to(y.dtype).float()) < 1e-6


@sm90
def test_hopper_is_the_default_and_falls_back_where_tma_cannot_load():
    g = GEMMS["fp8_gemm_fprop"]
    a, b = engineered(g.a, (256, 3884), seed=1), engineered(g.b, (576, 3884), seed=2)  # rows of 3884 bytes
    with pytest.raises(LaunchError, match="16-byte aligned"):
        find(g.name).gemm(a, b, backend="gluon")
    expect(g, find(g.name).gemm(a, b), reference.gemm(g, a, b), exact=True)  # the Triton kernel takes it
    a, b = engineered(g.a, (256, 512), seed=1), engineered(g.b, (576, 512), seed=2)
    assert torch.equal(find(g.name).gemm(a, b), find(g.name).gemm(a, b, backend="gluon"))


@pytest.mark.big_memory
@sm90
def test_hopper_64_bit_offsets():
    g = GEMMS["fp8_gemm_fprop"]
    M, N, K = 2 ** 31 // 16384 + 256, 16384, 128
    a, b = engineered(g.a, (M, K), seed=8), engineered(g.b, (N, K), seed=9)
    y = find(g.name).gemm(a, b, backend="gluon")
    assert torch.equal(y[-300:].cpu(), reference.gemm(g, a, b)[-300:].to(y.dtype).cpu())


HOPPER_MUTATIONS = {
    "store mask on indices reduced % N": ("fp8_gemm_fprop", [
        ("c_off = i[:, None] * N + j[None, :]", "c_off = i[:, None] * N + (j % N)[None, :]"),
        ("mask = rows[:, None] & (j[None, :] < N)", "mask = rows[:, None] & ((j % N)[None, :] < N)")]),
    "last K block dropped": ("fp8_gemm_fprop", [("c_desc, M, N, K, triton.cdiv(K, BK)", "c_desc, M, N, K, K // BK")]),
    "one b scale per tile across two groups' blocks": ("fp8_gemm_grouped_fprop", [(" and N % 128 == 0", "")]),
    "group offset off by one": ("fp8_gemm_grouped_fprop", [("row0 = (g_lo + ", "row0 = (1 + g_lo + ")]),
    "second half reads the first half's rows": ("fp8_gemm_fprop", [("a_bufs.index(2 * st + HALF)", "a_bufs.index(2 * st)")]),
    # (the K loop's two sets of scale registers: K = 320 is three blocks, a trip and an odd last block)
    "second block of a trip takes the scales loaded for the block after next": ("fp8_gemm_fprop", [
        ("scale = (na2 * nb2)[:, None]", "scale = (na * nb)[:, None]")]),
    "a tile's second block's scales loaded from its first block's": ("fp8_gemm_fprop", [("c = 1 * 128", "c = 0 * 128")]),
    # (groups of 130 and 170 rows end in 2 and 42 rows: wide tiles, whose second warpgroup takes b's next tile)
    "wide tile's second warpgroup reads the first column tile": ("fp8_gemm_grouped_fprop", [
        ("b_bufs.index(st + HALF * (st2 - st))", "b_bufs.index(st)")]),
    # (the two groups' last row tiles hold 2 and 42 rows: their halves leave through the windows)
    "window store of a half across its group's end one row late": ("fp8_gemm_grouped_fprop", [
        ("[row_end - HM, HM - (row_end - r0), ", "[row_end - HM + 1, HM - (row_end - r0), ")]),
    "accumulation drops the loaded tile": ("fp8_gemm_grouped_wgrad_t_acc", [("acc += c_buf.load(mma)", "pass")]),
    # (the scales only: the stage index also names the barrier a promoted block frees, and a wrong one hangs)
    "weight-gradient pair promotes its first block with the second's b scales": ("fp8_gemm_grouped_wgrad_t", [
        ("acc += p * (sa[:, None] * sb_bufs.index(st)", "acc += p * (sa[:, None] * sb_bufs.index((st + 1) % STAGES)")]),
    "accumulation by TMA stores the tile instead of adding it": ("fp8_gemm_grouped_wgrad_t_acc", [
        ("HOPPER_ADD_BY_TMA_TOKENS = 1024", "HOPPER_ADD_BY_TMA_TOKENS = 0"),
        ("tma_add_shared_to_global(c_desc, ", "tma.async_copy_shared_to_global(c_desc, ")]),
    "weight-gradient store ignores the group": ("fp8_gemm_grouped_wgrad_t", [("[(g * M + r0).to(gl.int32), ", "[r0, ")]),
    "weight-gradient tile takes the previous tile's token range": ("fp8_gemm_grouped_wgrad_t", [
        ("g_next = (t + gl.num_programs(0)) // (num_m * num_n)", "g_next = t // (num_m * num_n)")]),
}


@sm90
@pytest.mark.parametrize("bug", sorted(HOPPER_MUTATIONS))
def test_hopper_planted_bugs_are_caught(bug, tmp_path, monkeypatch):
    name, edits = HOPPER_MUTATIONS[bug]
    m = mutated(name, edits, tmp_path)
    g = GEMMS[name]
    # four persistent programs: each runs several tiles, across groups (the weight gradient's token ranges
    # are loaded a tile ahead)
    monkeypatch.setattr(runtime, "sm_count", lambda device: 4)
    M, N, K = 300, 200, 320  # N ends in a partial tile, K in a partial block
    if g.groups != "contraction":
        a = engineered(g.a, (M, K), seed=7)
    if g.groups == "rows":
        b = engineered(g.b, (2 * N, K), seed=8)
        offs = offsets_of([130, 170]).to(DEVICE)
        y, ref = m.gemm(a, b, offs, backend="gluon"), reference.gemm(g, a, b, offs)
    elif g.groups == "contraction":  # 256 x 384 outputs over the tokens of three groups, added into ones
        t = torch.tensor([130, 0, 170], device=DEVICE)
        a, b = engineered(g.a, (300, 256), G=3, lens=t, seed=7), engineered(g.b, (300, 384), G=3, lens=t, seed=8)
        offs = a.extras["padded_offsets"]
        out = torch.ones(3, 256, 384, device=DEVICE) if g.accumulate else None
        y, ref = m.gemm(a, b, offs, out=out, backend="gluon"), reference.gemm(g, a, b, offs) + (1 if g.accumulate else 0)
    else:
        b = engineered(g.b, (N, K), seed=8)
        y, ref = m.gemm(a, b, backend="gluon"), reference.gemm(g, a, b)
    assert not torch.equal(y.cpu(), ref.to(y.dtype).cpu()), f"the suite misses: {bug}"


# ---- the rows-grouped kernel's short last wave cut along K (HOPPER_SPLIT_TAIL) ------------------------------
SPLIT_LENS = [130, 170, 0, 129, 1, 300]  # wide last row tiles (2, 42, 1, 1 and 44 rows), an empty group
SPLIT_CASES = [(576, 3), (576, 9), (576, 13), (576, 16), (384, 3), (384, 4), (384, 8)]  # (N, programs): all split


def split_plan(lens, N, K, programs, min_kb):
    """[tiles before the tail, pieces a tail tile, tiles]: the tile count by the grouped kernel's rule (a last
    row tile of at most 64 rows runs as wide tiles, two column tiles each), the tail cut where it is short."""
    num_n = -(-N // 128)
    tiles = sum(-(-r // 128) * num_n - (0 < r % 128 <= 64) * (num_n // 2) for r in lens)
    tail = tiles % programs
    pieces = min(programs // max(tail, 1), -(-K // 128) // min_kb)
    pieces = pieces if tiles > programs and tail and pieces >= 2 else 0
    return [tiles - tail * (pieces > 0), pieces, tiles]


def split_run(mod, N, programs, monkeypatch, K=7168, name="fp8_gemm_grouped_fprop"):
    """(Gluon output with the split on `programs` programs, written into NaNs; reference; Triton output)."""
    g = GEMMS[name]
    monkeypatch.setattr(runtime, "sm_count", lambda device: programs)
    monkeypatch.setattr(mod, "HOPPER_SPLIT_TAIL", True)
    monkeypatch.setattr(mod, "HOPPER_SPLIT_MAX_WAVES", 1000)  # these tiles take up to 20 waves of few programs
    G, M = len(SPLIT_LENS), sum(SPLIT_LENS)
    a = engineered(g.a, (M, K), seed=N, **exact_ranges(K))
    b = engineered(g.b, (G * N, K) if g.b.direction.name == "rowwise" else (G * K, N), seed=programs,
                   **exact_ranges(K))
    offs = offsets_of(SPLIT_LENS).to(DEVICE)
    y = mod.gemm(a, b, offs, out=torch.full((M, N), float("nan"), dtype=mod.OUT_DTYPE, device=DEVICE), backend="gluon")
    return y, reference.gemm(g, a, b, offs), find(g.name).gemm(a, b, offs, backend="triton")


ROWS_GROUPED = [n for n in HOPPER if GEMMS[n].groups == "rows"]


@sm90
@pytest.mark.parametrize("name", ROWS_GROUPED)
@pytest.mark.parametrize("N,programs", [(576, 13), (384, 4)])
def test_hopper_split_tail_every_rows_grouped_gemm(name, N, programs, monkeypatch):
    """Every rows-grouped Hopper GEMM (fprop and dgrad, both layouts) with its short last wave split: the
    reference's bits (exact inputs) in every cell, as the Triton kernel's."""
    y, ref, yt = split_run(find(name), N, programs, monkeypatch, 7168, name)
    expect(GEMMS[name], y, ref, exact=True)
    assert torch.equal(y, yt)


@gluon.jit
def _plan_probe(offs_ptr, G, N, KB, P, plan_ptr, plan: gl.constexpr, GB: gl.constexpr, BLOCK_M: gl.constexpr,
                BLOCK_N: gl.constexpr, MIN_KB: gl.constexpr):
    """The plan every grid of a split call computes (`plan`, a module's _hopper_plan), written out."""
    before, pieces, tiles = plan(offs_ptr, G, N, KB, P, GB, BLOCK_M, BLOCK_N, MIN_KB)
    gl.store(plan_ptr, before)
    gl.store(plan_ptr + 1, pieces)
    gl.store(plan_ptr + 2, tiles)


@sm90
@pytest.mark.parametrize("N,programs", SPLIT_CASES)
def test_hopper_split_tail_plan_exact_and_every_cell_written(N, programs, monkeypatch):
    """On few programs, so that these groups' tiles leave a short last wave: the plan the kernel makes on the
    device is the tile rule's, and the tail's pieces summed in piece order give the reference's bits (exact
    inputs) in every cell."""
    mod, K = find("fp8_gemm_grouped_fprop"), 7168
    plan = torch.empty(3, dtype=torch.int32, device=DEVICE)
    offs = offsets_of(SPLIT_LENS).to(DEVICE)
    _plan_probe[(1,)](offs, len(SPLIT_LENS), N, K // 128, programs, plan, mod._hopper_plan, GB=128, BLOCK_M=128,
                      BLOCK_N=128, MIN_KB=mod.HOPPER_SPLIT_MIN_KB, num_warps=4)
    expected = split_plan(SPLIT_LENS, N, K, programs, mod.HOPPER_SPLIT_MIN_KB)
    assert plan.tolist() == expected and expected[1] >= 2, (plan.tolist(), expected)
    y, ref, yt = split_run(mod, N, programs, monkeypatch, K)
    expect(GEMMS["fp8_gemm_grouped_fprop"], y, ref, exact=True)
    assert torch.equal(y, yt)


@pytest.mark.big_memory
@sm90
@pytest.mark.parametrize("name", ["fp8_gemm_grouped_fprop", "fp8_gemm_grouped_dgrad"])
def test_hopper_split_tail_random_within_the_bound(name, monkeypatch):
    """8 random-length groups at 4096x2048x7168 on the GPU's own programs (on the H200's 132: 552 tiles, a
    tail of 24 in 4 pieces): within the bound of the reference, as the whole kernel is."""
    g = GEMMS[name]
    mod = find(g.name)
    cuts = sorted(torch.randint(1, 4096, (7,), generator=torch.Generator().manual_seed(4)).tolist())
    lens = [hi - lo for lo, hi in zip([0] + cuts, cuts + [4096])]
    assert split_plan(lens, 2048, 7168, runtime.sm_count(torch.device(DEVICE)), mod.HOPPER_SPLIT_MIN_KB)[1] >= 2
    a = producer(g.a).quantize(torch.randn(4096, 7168, device=DEVICE).to(torch.bfloat16))
    b_shape = (8 * 2048, 7168) if g.b.direction.name == "rowwise" else (8 * 7168, 2048)
    b = producer(g.b).quantize(torch.randn(*b_shape, device=DEVICE).to(torch.bfloat16))
    offs = offsets_of(lens).to(DEVICE)
    monkeypatch.setattr(mod, "HOPPER_SPLIT_TAIL", True)
    y = mod.gemm(a, b, offs, backend="gluon")
    assert rel_err(y.float(), reference.gemm(g, a, b, offs).to(y.dtype).float()) < 1e-6


@sm90
@pytest.mark.parametrize("programs,launched", [(3, False), (9, True)])
def test_hopper_split_tail_only_where_the_tiles_take_few_waves(programs, launched, monkeypatch):
    """The launcher plans a split only where the tiles can take at most HOPPER_SPLIT_MAX_WAVES waves (on 3
    programs these groups' 60 tiles at most take 20, on 9 programs 7) and K holds two pieces."""
    mod, planned = find("fp8_gemm_grouped_fprop"), []
    kernel = mod._hopper_kernel

    class Spy:  # the Hopper kernel, whether each launch may split its tail noted
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                planned.append(kwargs["SPLIT"])
                return kernel[grid](*args, **kwargs)
            return launch

    monkeypatch.setattr(mod, "_hopper_kernel", Spy())
    monkeypatch.setattr(runtime, "sm_count", lambda device: programs)
    g = GEMMS["fp8_gemm_grouped_fprop"]
    G, M, N, K = len(SPLIT_LENS), sum(SPLIT_LENS), 576, 7168
    a = engineered(g.a, (M, K), seed=1, **exact_ranges(K))
    b = engineered(g.b, (G * N, K), seed=2, **exact_ranges(K))
    offs = offsets_of(SPLIT_LENS).to(DEVICE)
    y = mod.gemm(a, b, offs, backend="gluon")
    assert planned == [int(launched)]
    expect(g, y, reference.gemm(g, a, b, offs), exact=True)


SPLIT_MUTATIONS = {
    "a tail piece drops its last K block": [("kb1 = (v % pieces + 1) * KB // pieces",
                                             "kb1 = (v % pieces + 1) * KB // pieces - 1")],
    "the queue hands every program the first piece": [("v = gl.atomic_add(cnt_ptr + gl.num_programs(0), 1,",
                                                       "v = gl.atomic_add(cnt_ptr + gl.num_programs(0), 0,")],
    "the tail sum leaves out the last piece": [("for p in range((tile - before) * pieces, (tile - before + 1) * pieces):",
                                                "for p in range((tile - before) * pieces, (tile - before + 1) * pieces - 1):")],
    "the tail sum reads the other half's partial sums": [("acc += gl.load(ws_ptr + (p * 2 + HALF) * HM",
                                                          "acc += gl.load(ws_ptr + (p * 2 + 1 - HALF) * HM")],
    "both halves of a tail tile count on one counter": [("cnt_ptr + (tile - before) * 2 + HALF, 1",
                                                         "cnt_ptr + (tile - before) * 2, 1")],
}


@sm90
@pytest.mark.parametrize("bug", sorted(SPLIT_MUTATIONS))
def test_hopper_split_tail_planted_bugs_are_caught(bug, tmp_path, monkeypatch):
    m = mutated("fp8_gemm_grouped_fprop", SPLIT_MUTATIONS[bug], tmp_path)
    # 9 programs: a tail of 4 tiles, one of them whole, so both halves of a tile hold rows (on 13 the tail is
    # one wide tile with an empty second half, where a half's bug can go unseen)
    y, ref, _ = split_run(m, 576, 9, monkeypatch)
    assert not torch.equal(y.cpu(), ref.to(y.dtype).cpu()), f"the suite misses: {bug}"


@pytest.mark.big_memory
@sm90
@pytest.mark.parametrize("name", ["fp8_gemm_grouped_wgrad_t", "fp8_gemm_grouped_wgrad_t_acc"])
def test_hopper_wgrad_output_past_2_31_elements(name):
    """64 groups of a [G, 8192, 4160] fp32 gradient, stored by TMA (rows g * M + i) or accumulated by
    pointers (g * M * N passes 2^31): the first and last groups against the reference."""
    g = GEMMS[name]
    G, M, N = 64, 8192, 4160
    t = torch.full((G,), 128, device=DEVICE)
    a = engineered(g.a, (128 * G, M), G=G, lens=t, seed=10)
    b = engineered(g.b, (128 * G, N), G=G, lens=t, seed=11)
    offs = a.extras["padded_offsets"]
    out = torch.ones(G, M, N, device=DEVICE) if g.accumulate else None
    y = find(name).gemm(a, b, offs, out=out, backend="gluon")
    ref = reference.gemm(g, a, b, offs) + (1 if g.accumulate else 0)
    assert torch.equal(y[-1].cpu(), ref[-1].cpu()) and torch.equal(y[0].cpu(), ref[0].cpu())
