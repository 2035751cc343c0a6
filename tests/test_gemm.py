"""Generated blockwise FP8 GEMMs (dsl/specs/fp8_gemm.ql) against the reference: each operand
dequantized through its producer's layouts, then a matmul.

* Engineered exact inputs (codes that are small integers, scales that are distinct powers of two per
  block): every product and partial sum is exact in fp32, so the kernel equals the reference bit for bit.
* Random inputs through the real producers: 1 - 2<y, r> / (|y|^2 + |r|^2) < 1e-6 against the reference
  rounded to the output dtype.
* Broken variants (a mask on indices reduced % N, one b scale per wide tile, the last K block dropped, a
  group offset off by one) are rendered by editing the generated source; each must fail.
"""
import importlib.util
import sys

import pytest
import torch

from quantlay import LayoutMismatchError, bench, inputs, reference
from quantlay.errors import LaunchError
from quantlay.generated import find
from quantlay.spec import SPECS_DIR, load_gemms

from conftest import DEVICE

GEMMS = {g.name: g for g in load_gemms(SPECS_DIR / "fp8_gemm.ql")}
TILE = {"block_m": 32, "block_n": 64}  # small tiles keep the interpreter fast; partial tiles everywhere


def producer(op):
    """The generated module of an operand's producer variant."""
    return find(op.variant.kernel.name, **{n: v for n, v in op.variant.options if v})


def engineered(op, shape, G=1, lens=None, seed=0, code=3, exp=2):
    return inputs.exact_operand(op, shape, DEVICE, G, lens, seed, code, exp)


def rel_err(y, r):
    """1 - 2 <y, r> / (|y|^2 + |r|^2), the bench's check of a GEMM's output (here on the CPU)."""
    return bench.relative_error(y.detach().cpu(), r.detach().cpu())


def expect(g, y, ref, exact):
    want = ref.to(y.dtype).cpu() if exact else ref
    if exact:
        assert torch.equal(y.cpu(), want), f"{(y.cpu() != want).sum().item()} of {y.numel()} outputs differ"
    else:
        assert rel_err(y.float(), ref.to(y.dtype).float()) < 1e-6


def offsets_of(lens):
    return torch.cat([torch.zeros(1, dtype=torch.int64), torch.tensor(lens, dtype=torch.int64).cumsum(0)])


# ---- dense ---------------------------------------------------------------------------------------
DENSE = ["fp8_gemm_fprop", "fp8_gemm_fprop_nvte", "fp8_gemm_dgrad_nvte", "fp8_gemm_fprop_deepgemm"]
SHAPES = [(100, 200, 320), (64, 576, 128), (33, 130, 64), (129, 192, 384)]  # ragged M, N and K; K = 64, 128


def dense_shapes(g, M, N, K):
    """The producers' input shapes for Y[M, N] = A[M, K] B[N, K]^T."""
    a = (M, K) if g.a.direction.name == "rowwise" else (K, M)
    b = (N, K) if g.b.direction.name == "rowwise" else (K, N)
    return a, b


@pytest.mark.parametrize("name", DENSE)
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_dense_bit_exact_on_engineered_inputs(name, M, N, K):
    g = GEMMS[name]
    sa, sb = dense_shapes(g, M, N, K)
    a, b = engineered(g.a, sa, seed=1), engineered(g.b, sb, seed=2)
    y = find(name).gemm(a, b, **TILE)
    assert y.shape == (M, N)
    expect(g, y, reference.gemm(g, a, b), exact=True)


@pytest.mark.parametrize("name", DENSE)
def test_dense_random_inputs_within_the_bound(name):
    g = GEMMS[name]
    M, N, K = 96, 200, 320
    sa, sb = dense_shapes(g, M, N, K)
    x, w = torch.randn(sa).to(torch.bfloat16), torch.randn(sb).to(torch.bfloat16)
    a, b = producer(g.a).quantize(x.to(DEVICE)), producer(g.b).quantize(w.to(DEVICE))
    y = find(name).gemm(a, b, **TILE)
    ref = reference.gemm(g, a, b)
    expect(g, y, ref, exact=False)
    full = (x.float() if g.a.direction.name == "rowwise" else x.float().t()) @ \
        (w.float() if g.b.direction.name == "rowwise" else w.float().t()).t()
    assert rel_err(ref, full) < 2e-3  # FP8 quantization error itself, a sanity check of the reference


def test_every_output_cell_is_written_and_nothing_outside():
    g = GEMMS["fp8_gemm_fprop"]
    a, b = engineered(g.a, (70, 128)), engineered(g.b, (150, 128))
    big = torch.full((70 * 150 + 64,), float("nan"), dtype=torch.bfloat16, device=DEVICE)
    out = big[:70 * 150].view(70, 150)
    find("fp8_gemm_fprop").gemm(a, b, out=out, **TILE)
    assert not torch.isnan(out).any() and torch.isnan(big[70 * 150:]).all()


def with_nan_scale(q):
    """The quantized operand q with its first fp32 scale NaN (in place): an output row or column of NaN."""
    for key, t in q.tensors().items():
        if key.endswith("scale") and t.dtype == torch.float32:
            t.view(-1)[0] = float("nan")
    return q


def test_a_nan_is_written_as_the_canonical_bf16_nan():
    """NaN outputs are 0x7FFF, the canonical bf16 NaN the GPU's convert writes (the Hopper path's epilogue
    and cuBLAS's), not torch's 0x7FC0; the other cells are the reference's."""
    g = GEMMS["fp8_gemm_fprop"]
    a, b = with_nan_scale(engineered(g.a, (70, 256), seed=1)), engineered(g.b, (150, 256), seed=2)
    y = find("fp8_gemm_fprop").gemm(a, b, **TILE).cpu()
    nan = torch.isnan(y)
    assert nan[0].all() and nan.sum() == 150, "a's first scale (row 0, K block 0) is NaN: row 0 alone"
    assert (y.view(torch.int16)[nan] == 0x7FFF).all()
    assert torch.equal(y[1:], reference.gemm(g, a, b)[1:].to(y.dtype).cpu())


# ---- grouped -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["fp8_gemm_grouped_fprop", "fp8_gemm_grouped_dgrad"])
@pytest.mark.parametrize("lens", [[0, 1, 127, 129], [64], [30, 0, 70, 0]])
def test_grouped_rows_bit_exact(name, lens):
    g = GEMMS[name]
    G, M, N, K = len(lens), sum(lens), 128, 256
    a = engineered(g.a, (M, K), seed=3)
    b = engineered(g.b, (G * N, K) if g.b.direction.name == "rowwise" else (G * K, N), seed=4)
    offs = offsets_of(lens).to(DEVICE)
    y = find(name).gemm(a, b, offs, **TILE)
    expect(g, y, reference.gemm(g, a, b, offs), exact=True)


@pytest.mark.parametrize("lens", [[0, 1, 127, 129], [200], [0, 0, 5]])
@pytest.mark.parametrize("name", ["fp8_gemm_grouped_wgrad", "fp8_gemm_grouped_wgrad_t"])
def test_grouped_wgrad_bit_exact_and_accumulates(lens, name):
    g = GEMMS[name]
    G, T, M, N = len(lens), sum(lens), 64, 192
    t = torch.tensor(lens, device=DEVICE)
    a = engineered(g.a, (T, M), G=G, lens=t, seed=5)
    b = engineered(g.b, (T, N), G=G, lens=t, seed=6)
    offs = a.extras["padded_offsets"]
    y = find(name).gemm(a, b, offs, **TILE)
    ref = reference.gemm(g, a, b, offs)
    expect(g, y, ref, exact=True)
    for i, n in enumerate(lens):
        if n == 0:
            assert not y[i].any(), "a group without tokens gives exact zeros"
    main_grad = torch.full((G, M, N), 0.5, device=DEVICE)
    out = find(name + "_acc").gemm(a, b, offs, out=main_grad, **TILE)
    assert out.data_ptr() == main_grad.data_ptr()
    for i, n in enumerate(lens):
        want = torch.full((M, N), 0.5) if n == 0 else ref[i].cpu() + 0.5
        assert torch.equal(main_grad[i].cpu(), want), f"group {i}"


@pytest.mark.parametrize("name", ["fp8_gemm_grouped_wgrad_t_bf16", "fp8_gemm_grouped_wgrad_t_pow2_bf16"])
def test_bf16_wgrad_is_the_fp32_one_rounded(name):
    """Written in bf16, the weight gradient is the fp32 kernel's output rounded to nearest even, bit for bit
    (random producer operands, so the fp32 sums round); a group without tokens gives zeros."""
    g = GEMMS[name]
    lens = torch.tensor([0, 1, 127, 129], device=DEVICE)
    G, T, M, N = len(lens), int(lens.sum()), 64, 192
    cast = producer(g.a)
    a, b = cast.quantize(torch.randn(T, M).to(torch.bfloat16).to(DEVICE), lens), cast.quantize(
        torch.randn(T, N).to(torch.bfloat16).to(DEVICE), lens)
    offs = a.extras["padded_offsets"]
    y = find(name).gemm(a, b, offs, **TILE)
    assert y.dtype == torch.bfloat16 and find(name).OUT_DTYPE == torch.bfloat16
    y32 = find(name.replace("_bf16", "")).gemm(a, b, offs, **TILE)
    assert torch.equal(y.cpu(), y32.to(torch.bfloat16).cpu())
    assert not y[0].any()
    expect(g, y, reference.gemm(g, a, b, offs), exact=False)


def test_grouped_random_inputs_within_the_bound():
    g = GEMMS["fp8_gemm_grouped_fprop"]
    lens = [40, 0, 88]
    x, w = torch.randn(128, 256).to(torch.bfloat16), torch.randn(3 * 128, 256).to(torch.bfloat16)
    a, b = producer(g.a).quantize(x.to(DEVICE)), producer(g.b).quantize(w.to(DEVICE))
    offs = offsets_of(lens).to(DEVICE)
    y = find("fp8_gemm_grouped_fprop").gemm(a, b, offs, **TILE)
    expect(g, y, reference.gemm(g, a, b, offs), exact=False)


# ---- the contract ----------------------------------------------------------------------------------
def test_a_tensor_in_another_layout_is_refused_before_launch():
    x = torch.randn(64, 256).to(torch.bfloat16).to(DEVICE)
    w = find("fp8_128x128_rocm_te").quantize(torch.randn(128, 256).to(torch.bfloat16).to(DEVICE))
    gemm_ready = find("fp8_1x128_nvte", gemm_ready=True).quantize(x)  # MN-major scales, not row-major
    with pytest.raises(LayoutMismatchError, match=r"a scale: this consumer reads .*'row_major'.* but the tensor is .*'mn_major_pad4'"):
        find("fp8_gemm_fprop").gemm(gemm_ready, w)
    w1x128 = find("fp8_1x128_nvte", gemm_ready=True).quantize(torch.randn(256, 128).to(torch.bfloat16).to(DEVICE))
    with pytest.raises(LayoutMismatchError, match="differs in block"):  # 128x1 blocks where 128x128 are read
        find("fp8_gemm_dgrad_nvte").gemm(gemm_ready, w1x128)


def test_grouped_dgrad_refuses_blocks_straddling_two_matrices():
    g = GEMMS["fp8_gemm_grouped_dgrad"]
    a = engineered(g.a, (64, 192))
    b = engineered(g.b, (2 * 192, 128))  # two matrices of K = 192 rows: 128x128 blocks straddle them
    with pytest.raises(LaunchError, match=r"contraction K = 192\) must be a multiple of 128"):
        find(g.name).gemm(a, b, offsets_of([30, 34]).to(DEVICE))


def test_shape_and_buffer_errors():
    x = find("fp8_1x128_rocm_te").quantize(torch.randn(64, 256).to(torch.bfloat16).to(DEVICE))
    w = find("fp8_128x128_rocm_te").quantize(torch.randn(128, 384).to(torch.bfloat16).to(DEVICE))
    with pytest.raises(LaunchError, match="a contracts over K = 256 and b over K = 384"):
        find("fp8_gemm_fprop").gemm(x, w)
    with pytest.raises(LaunchError, match="accumulate needs out"):
        seg = find("fp8_segment_m").quantize(torch.randn(64, 128).to(torch.bfloat16).to(DEVICE), torch.tensor([64], device=DEVICE))
        find("fp8_gemm_grouped_wgrad_acc").gemm(seg, seg, seg.extras["padded_offsets"])


# ---- the tests can fail ----------------------------------------------------------------------------
def edited(name, edits, **options):
    """The text of the generated module of `name` (with `options`) with edits [(old, new)]; each target text
    must be there."""
    src = open(find(name, **options).__file__).read()
    for old, new in edits:
        assert old in src, f"the mutation's target text is gone from {name}: {old!r}"
        src = src.replace(old, new)
    return src


def mutated(name, edits, tmp_path, **options):
    """The generated module of `name` (with `options`) with edits [(old, new)], imported (see `edited`)."""
    mod = find(name, **options)
    src = edited(name, edits, **options)
    path = tmp_path / f"mutant_{abs(hash((name, tuple(edits))))}.py"
    src = src.replace(f'NAME = "{mod.NAME}"', f'NAME = "{path.stem}"')  # its own custom op, not the module's
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    m = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = m
    spec.loader.exec_module(m)
    return m


MUTATIONS = {  # the bugs a review of a hand-written grouped FP8 GEMM found
    # the tail tile's columns reduced % N before the store: its masked lanes land on columns 0..
    "store mask on indices reduced % N": ("fp8_gemm_fprop", [
        ("c_off = i[:, None] * N + j[None, :]", "c_off = i[:, None] * N + (j % N)[None, :]"),
        ("mask = (i[:, None] < row_end) & (j[None, :] < N)", "mask = (i[:, None] < row_end) & ((j % N)[None, :] < N)")]),
    "one b scale per column tile": ("fp8_gemm_fprop", [("            r = j\n", "            r = j * 0 + pid_n * BLOCK_N\n")]),
    "last K block dropped": ("fp8_gemm_fprop", [("kb_hi = KB\n", "kb_hi = K // 128\n")]),
    "group offset off by one": ("fp8_gemm_grouped_fprop", [("row0 = tl.sum(tl.where(hit, g_lo + ",
                                                             "row0 = tl.sum(tl.where(hit, 1 + g_lo + ")]),
}


@pytest.mark.parametrize("bug", sorted(MUTATIONS))
def test_planted_bugs_are_caught(bug, tmp_path):
    name, edits = MUTATIONS[bug]
    m = mutated(name, edits, tmp_path)
    g = GEMMS[name]
    M, N, K = 70, 200, 320  # N spans two 128-column scale blocks in one 256-wide tile; K ends in a partial block
    tile = {"block_m": 32, "block_n": 256}
    a = engineered(g.a, (M, K), seed=7)
    if g.groups == "rows":
        lens = [30, 40]
        b = engineered(g.b, (2 * 128, K), seed=8)
        offs = offsets_of(lens).to(DEVICE)
        y, ref = m.gemm(a, b, offs, **tile), reference.gemm(g, a, b, offs)
    else:
        b = engineered(g.b, (N, K), seed=8)
        y, ref = m.gemm(a, b, **tile), reference.gemm(g, a, b)
    assert not torch.equal(y.cpu(), ref.to(y.dtype).cpu()), f"the suite misses: {bug}"


# ---- custom ops ------------------------------------------------------------------------------------
def test_custom_op_matches_gemm():
    g = GEMMS["fp8_gemm_fprop"]
    a, b = engineered(g.a, (70, 256), seed=9), engineered(g.b, (130, 256), seed=10)
    mod = find("fp8_gemm_fprop")
    tensors, (M, N, K) = mod.args(a, b)
    assert torch.equal(mod.gemm_op(*tensors, M, N, K).cpu(), mod.gemm(a, b).cpu())
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as fm:
        fake = mod.gemm_op(*(fm.from_tensor(t) for t in tensors), M, N, K)
    assert tuple(fake.shape) == (70, 130) and fake.dtype == torch.bfloat16


def test_accumulating_custom_op_mutates_its_buffer():
    g = GEMMS["fp8_gemm_grouped_wgrad_acc"]
    t = torch.tensor([50, 78], device=DEVICE)
    a = engineered(g.a, (128, 64), G=2, lens=t, seed=11)
    b = engineered(g.b, (128, 32), G=2, lens=t, seed=12)
    mod = find("fp8_gemm_grouped_wgrad_acc")
    offs = a.extras["padded_offsets"]
    tensors, (M, N, K) = mod.args(a, b, offs)
    buf = torch.zeros(2, M, N, device=DEVICE)
    assert mod.gemm_op(*tensors, buf, M, N, K) is None
    assert torch.equal(buf.cpu(), reference.gemm(g, a, b, offs).cpu())


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["fp8_gemm_fprop", "fp8_gemm_grouped_fprop"])
def test_torch_compile_and_cuda_graph(name):
    g = GEMMS[name]
    mod = find(name)
    lens = [300, 0, 212]
    a = engineered(g.a, (512, 1024), seed=13)
    b = engineered(g.b, ((3 if g.groups else 1) * 256, 1024), seed=14)
    extra = (offsets_of(lens).to(DEVICE),) if g.groups else ()
    tensors, (M, N, K) = mod.args(a, b, *extra)
    want = mod.gemm(a, b, *extra)
    torch._dynamo.reset()
    fn = torch.compile(lambda *t: mod.gemm_op(*t, M, N, K), fullgraph=True)
    assert torch.equal(fn(*tensors), want)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = mod.gemm_op(*tensors, M, N, K)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(y, want)
