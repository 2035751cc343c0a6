"""The same bit-exact checks on the GPU at realistic sizes (skipped without CUDA)."""
import itertools

import pytest
import torch

from quantlay import inputs, reference
from quantlay.generated import find

pytestmark = pytest.mark.gpu

KERNELS = ["mxfp4_cast_transpose_hw", "mxfp4_cast_transpose_te"]
FLAGS = ["shuffle_rowwise_data", "shuffle_columnwise_data", "with_gemm_swizzled_scales"]
COMBOS = [dict(zip(FLAGS, bits)) for bits in itertools.product([False, True], repeat=3)]


def exact(res, ref):
    return {k: torch.equal(res[k].tensor, ref[k]) for k in ref}


@pytest.mark.parametrize("shape", [(4096, 6144), (8192, 8192)])
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("opts", COMBOS, ids=lambda o: "".join(str(int(v)) for v in o.values()))
def test_bit_exact_at_realistic_sizes(mxfp4_kernels, kernel, opts, shape):
    variant = mxfp4_kernels[kernel].variant(**opts)
    mod = find(kernel, **opts)
    for cname, make in inputs.CLASSES.items():
        x = make(*shape, seed=sum(shape)).cuda()
        res = mod.quantize(x)
        ok = exact(res, reference.quantize(variant, x))
        assert all(ok.values()), (cname, ok)


@pytest.mark.parametrize("opts", COMBOS, ids=lambda o: "".join(str(int(v)) for v in o.values()))
def test_poisoned_ragged_shapes(mxfp4_kernels, opts):
    variant = mxfp4_kernels["mxfp4_cast_transpose_hw"].variant(**opts)
    mod = find("mxfp4_cast_transpose_hw", **opts)
    # not multiples of the tile; multiples of what each enabled preshuffle needs (M % 64 / N % 16 ...)
    M = 704 if opts["shuffle_columnwise_data"] else (1008 if opts["shuffle_rowwise_data"] else 1000)
    N = 1344 if opts["shuffle_rowwise_data"] else (1232 if opts["shuffle_columnwise_data"] else 1234)
    for poison in (0x00, 0xAB):
        x = inputs.specials(M, N, seed=5).cuda()
        shapes = mod._shapes(M, N)
        out = {k: torch.full(s[2], poison, dtype=torch.uint8, device="cuda") for k, s in shapes.items()}
        res = mod.quantize(x, out=out)
        assert all(exact(res, reference.quantize(variant, x)).values())
        for d in ("rowwise", "colwise"):
            ref = reference.quantize(variant, x)
            assert reference.same_values(mod.dequantize(res, d), reference.dequantize(variant, d, ref, M, N))


@pytest.mark.big_memory
def test_more_than_2_31_elements(mxfp4_kernels):
    """One input of 2^31 + 2^21 elements: the kernel must switch to 64-bit offsets."""
    opts = dict.fromkeys(FLAGS, True)
    variant = mxfp4_kernels["mxfp4_cast_transpose_hw"].variant(**opts)
    mod = find("mxfp4_cast_transpose_hw", **opts)
    M, N = 65600, 32768
    assert M * N > 2 ** 31
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16, generator=g)
    res = mod.quantize(x)
    logical = {k: reference.logical_view(variant.output(k), res[k].tensor, M, N) for k in res}
    del res
    for r0 in (0, 32768, M - 2048):  # first, middle and last rows (the last lie past 2^31 elements)
        chunk = x[r0:r0 + 2048]
        ref = reference.quantize(variant.kernel.variant(), chunk)  # plain layouts: logical == physical
        assert torch.equal(logical["rowwise_data"][r0:r0 + 2048], reference.unpack(ref["rowwise_data"], 1, "even"))
        assert torch.equal(logical["rowwise_scale"][r0:r0 + 2048], ref["rowwise_scale"])
        assert torch.equal(logical["colwise_data"][r0:r0 + 2048], reference.unpack(ref["colwise_data"].t(), 0, "even"))
        assert torch.equal(logical["colwise_scale"][r0 // 32:(r0 + 2048) // 32], ref["colwise_scale"].t())
