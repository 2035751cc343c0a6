"""Generated MXFP4 kernels, run in Triton's interpreter (or on CUDA), bit-exact against the reference."""
import itertools

import pytest
import torch

from quantlay import inputs, reference
from quantlay.errors import LayoutMismatchError
from quantlay.generated import find

from conftest import DEVICE

KERNELS = ["mxfp4_cast_transpose_hw", "mxfp4_cast_transpose_te"]
FLAGS = ["shuffle_rowwise_data", "shuffle_columnwise_data", "with_gemm_swizzled_scales"]
COMBOS = [dict(zip(FLAGS, bits)) for bits in itertools.product([False, True], repeat=3)]


def smallest_legal(opts):
    """Rowwise preshuffle needs M % 16 and N % 64; columnwise needs N % 16 and M % 64; packing M, N even."""
    m = 64 if opts["shuffle_columnwise_data"] else (16 if opts["shuffle_rowwise_data"] else 2)
    n = 64 if opts["shuffle_rowwise_data"] else (16 if opts["shuffle_columnwise_data"] else 2)
    return m, n


def ragged(opts):
    """A shape that is not a multiple of the 128x128 tile used below."""
    m = 192 if opts["shuffle_columnwise_data"] else (144 if opts["shuffle_rowwise_data"] else 98)
    n = 320 if opts["shuffle_rowwise_data"] else (176 if opts["shuffle_columnwise_data"] else 166)
    return m, n


def run_poisoned(mod, x, poison):
    """Quantize into buffers pre-filled with `poison`: any element the kernel skips keeps it."""
    shapes = mod._shapes(*x.reshape(-1, x.shape[-1]).shape)
    out = {k: torch.full(s[2], poison, dtype=torch.uint8, device=x.device) for k, s in shapes.items()}
    return mod.quantize(x, out=out, block_m=128, block_n=128)


def assert_exact(res, ref, what):
    for k, want in ref.items():
        got = res[k].tensor.cpu()
        assert got.shape == want.shape, f"{what} {k}: shape {tuple(got.shape)} != {tuple(want.shape)}"
        bad = (got != want).nonzero()
        assert bad.numel() == 0, (f"{what} {k}: {bad.shape[0]} of {want.numel()} bytes differ, first at "
                                  f"{bad[0].tolist()}: kernel {got[tuple(bad[0])]:#x} reference "
                                  f"{want[tuple(bad[0])]:#x}")


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("opts", COMBOS, ids=lambda o: "".join(str(int(v)) for v in o.values()))
def test_every_flag_combination_is_bit_exact(mxfp4_kernels, kernel, opts):
    variant = mxfp4_kernels[kernel].variant(**opts)
    mod = find(kernel, **opts)
    cases = [(smallest_legal(opts), "specials", 0xAB), (ragged(opts), "ties", 0x5A),
             (ragged(opts), "specials", 0x00), ((128, 128), "normal", 0xFF)]
    for (M, N), cname, poison in cases:
        x = inputs.CLASSES[cname](M, N, seed=M + N)
        res = run_poisoned(mod, x.to(DEVICE), poison)
        assert_exact(res, reference.quantize(variant, x), f"{mod.NAME} {M}x{N} {cname}")


def test_leading_dims_are_flattened_and_row_strides_honoured(mxfp4_kernels):
    mod = find("mxfp4_cast_transpose_hw")
    variant = mxfp4_kernels["mxfp4_cast_transpose_hw"].variant()
    x = inputs.normal(3 * 32, 64, seed=3).reshape(3, 32, 64)
    assert_exact(mod.quantize(x.to(DEVICE)), reference.quantize(variant, x), "3-D input")
    wide = inputs.normal(64, 128, seed=4)
    view = wide[:, :96]  # row stride 128, not contiguous
    assert_exact(mod.quantize(view.to(DEVICE) if DEVICE == "cpu" else wide.to(DEVICE)[:, :96]),
                 reference.quantize(variant, view), "strided rows")


@pytest.mark.parametrize("kernel", KERNELS)
def test_dequantize_consumer_is_exact_and_checks_layouts(mxfp4_kernels, kernel):
    on = dict.fromkeys(FLAGS, True)
    variant = mxfp4_kernels[kernel].variant(**on)
    mod = find(kernel, **on)
    M, N = 128, 192
    x = inputs.specials(M, N, seed=7)
    res = mod.quantize(x.to(DEVICE))
    ref = reference.quantize(variant, x)
    for d in ("rowwise", "colwise"):
        y = mod.dequantize(res, d)
        assert reference.same_values(y, reference.dequantize(variant, d, ref, M, N)), d
    plain = find(kernel)
    with pytest.raises(LayoutMismatchError) as info:
        plain.dequantize(res, "rowwise")
    msg = str(info.value)
    assert "packed(low=even)|preshuffle16x16" in msg and "'packed(low=even)'" in msg
    with pytest.raises(LayoutMismatchError):
        plain.dequantize({"rowwise_data": res["rowwise_data"].tensor, "rowwise_scale": res["rowwise_scale"]},
                         "rowwise")


def test_profiles_differ_exactly_at_ties(mxfp4_kernels):
    """hw (ties to even) and te (ties away) agree everywhere except exact midpoints where the rules
    differ: special values (-0.0, NaN, Inf, zero and subnormal blocks) included."""
    hw, te = find("mxfp4_cast_transpose_hw"), find("mxfp4_cast_transpose_te")
    d = mxfp4_kernels["mxfp4_cast_transpose_hw"].directions[0]
    for make in (inputs.ties, inputs.normal, inputs.specials):
        x = make(128, 256, seed=11)
        a = reference.unpack(hw.quantize(x.to(DEVICE))["rowwise_data"].tensor.cpu(), 1, "even")
        b = reference.unpack(te.quantize(x.to(DEVICE))["rowwise_data"].tensor.cpu(), 1, "even")
        amax, _ = reference.block_amax(x.float(), d)
        q = x.float() * d.scale.multiplier_reference(
            d.scale.select_reference(amax, d.element)).repeat_interleave(32, dim=1)
        ties_that_differ = torch.isin(q.abs(), torch.tensor([0.25, 1.25, 2.5, 5.0]))
        assert torch.equal(a != b, ties_that_differ)
        if make is inputs.ties:
            assert ties_that_differ.sum() > 1000
