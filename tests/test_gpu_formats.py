"""MXFP8, MXFP6, blockwise FP8 and segment-padded kernels on the GPU at realistic sizes (skipped without CUDA):
every shipped kernel and option setting, bit-exact against the reference, poisoned output buffers,
more than 2^31 elements, and use from torch.compile and CUDA graphs."""
import pytest
import torch

from quantlay import inputs, reference
from quantlay.generated import find
from quantlay.spec import SPECS_DIR, load

from conftest import DEVICE

pytestmark = pytest.mark.gpu

SPECS = ("mxfp8.ql", "mxfp6.ql", "fp8_blockwise.ql")
KERNELS = {k.name: k for s in SPECS for k in load(SPECS_DIR / s)}
PLAIN = [k for k in KERNELS.values() if not k.groups]
VARIANTS = [(k.name, dict(v.options)) for k in PLAIN for v in k.variants()]
REALISTIC = (4096, 6144)
RAGGED = (1000, 1250)
RAGGED_6BIT = (1000, 1252)  # 6-bit codes pack four to three bytes along either side: multiples of 4
SEGMENT_SHAPE = (8192, 4096)
BIG = (65664, 32768)  # 2^31 + 2^22 elements
IDS = [n + "".join(f"-{o}{int(b)}" for o, b in opts.items()) for n, opts in VARIANTS]


def check(name, opts, x, out=None, groups=None):
    variant = KERNELS[name].variant(**opts)
    mod = find(name, **opts)
    args = () if groups is None else (groups.to(DEVICE),)
    res = mod.quantize(x, *args, out=out)
    ref = reference.quantize(variant, x, groups)
    bad = [k for k in ref if not reference.same_values(res[k].tensor, ref[k])]
    assert not bad, (name, opts, tuple(x.shape), bad)
    return mod, variant, res, ref


@pytest.mark.parametrize("name,opts", VARIANTS, ids=IDS)
def test_bit_exact_at_realistic_sizes(name, opts):
    for cname, make in inputs.CLASSES.items():
        x = make(*REALISTIC, seed=7).to(DEVICE)
        mod, variant, res, ref = check(name, opts, x)
        if cname == "normal":
            for d in variant.directions:
                y = mod.dequantize(res, d.name)
                assert reference.same_values(y, reference.dequantize(variant, d.name, ref, *REALISTIC)), d.name


@pytest.mark.parametrize("name,opts", VARIANTS, ids=IDS)
def test_poisoned_ragged_shapes(name, opts):
    """Not multiples of any tile: every output element, padding included, is written."""
    mod = find(name, **opts)
    M, N = RAGGED_6BIT if name.startswith("mxfp6") else RAGGED
    for poison in (0x00, 0xAB):
        x = inputs.specials(M, N, seed=3).to(DEVICE)
        out = {k: (torch.full(s[2], poison, dtype=torch.uint8, device=DEVICE) if mod.DTYPES[k] == torch.uint8
                   else torch.full(s[2], float(poison), dtype=mod.DTYPES[k], device=DEVICE))
               for k, s in mod._shapes(M, N).items()}
        check(name, opts, x, out=out)


@pytest.mark.parametrize("name,fused", [("fp8_segment_m", False), ("fp8_segment_m", True),
                                        ("fp8_segment_m_transposed", None)])
def test_segments_at_realistic_sizes(name, fused):
    M, N = SEGMENT_SHAPE
    lens = torch.tensor([0, 1, 127, 128, 129, M // 3, 0, M - M // 3 - 385])
    for cname in ("normal", "specials"):
        x = inputs.CLASSES[cname](M, N, seed=11).to(DEVICE)
        _, _, res, _ = check(name, {} if fused is None else {"fused_rowwise": fused}, x, groups=lens)
        _, offsets = reference.segment_rows(x[:, :1].float(), lens, 128)
        assert res.extras["padded_offsets"].cpu().tolist() == torch.as_tensor(offsets).tolist()


@pytest.mark.big_memory
@pytest.mark.parametrize("name", ["fp8_1x128_rocm_te", "mxfp8_rocm_te"])
def test_more_than_2_31_elements(name):
    """Row-major layouts only, so a row range of the output is the output of that row range."""
    M, N = BIG
    assert M * N > 2 ** 31
    variant = KERNELS[name].variant()
    g = torch.Generator(device=DEVICE).manual_seed(0)
    x = torch.randn(M, N, device=DEVICE, dtype=torch.bfloat16, generator=g)
    res = {k: v.tensor for k, v in find(name).quantize(x).items()}
    for r0 in (0, 32768, M - 2048):
        ref = reference.quantize(variant, x[r0:r0 + 2048])
        for k, want in ref.items():
            rows_per = 1 if want.shape[0] == 2048 else 2048 // want.shape[0]  # colwise scales: one row per block
            got = res[k][r0 // rows_per:(r0 + 2048) // rows_per]
            assert reference.same_values(got, want), (name, r0, k)


@pytest.mark.parametrize("name", [k.name for k in KERNELS.values()])
def test_custom_op_compiles_and_captures(name):
    """torch.compile traces the custom op (fake implementation) and a CUDA graph replays it (no host sync)."""
    opts = dict.fromkeys(KERNELS[name].options, True)
    mod = find(name, **opts)
    x = inputs.normal(1024, 2048, seed=4).to(DEVICE)
    args = (torch.tensor([300, 0, 724], device=DEVICE),) if KERNELS[name].groups else ()
    want = mod.quantize_op(x, *args)
    # every parametrization compiles the same lambda for another op: without a reset, Dynamo's limit of
    # 8 recompilations per code object fails the ninth kernel (fullgraph=True), whatever the kernel
    torch._dynamo.reset()
    fn = torch.compile(lambda t, *a: mod.quantize_op(t * 1.0, *a), fullgraph=True)
    assert all(torch.equal(a, b) for a, b in zip(fn(x, *args), want))
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = mod.quantize_op(x, *args)
    x.copy_(inputs.normal(1024, 2048, seed=5).to(DEVICE))
    graph.replay()
    fresh = mod.quantize_op(x, *args)
    assert all(torch.equal(a, b) for a, b in zip(captured, fresh))
