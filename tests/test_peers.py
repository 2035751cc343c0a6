"""Conformance with the peers' own code, run on the CPU where a peer is installed (the `test` extra
installs torchao). A profile named after a peer must equal it on every input; `mxfp8_floor_transposed`
has torchao's layouts but is not named after torchao because torchao's special blocks differ, and these
tests pin both facts."""
import os

import pytest
import torch

from quantlay import inputs
from quantlay.generated import find

from conftest import DEVICE

os.environ.setdefault("TORCHAO_FORCE_SKIP_LOADING_SO_FILES", "1")  # its CUDA extensions are not needed
mx = pytest.importorskip("torchao.prototype.mx_formats.mx_tensor")
from torchao.prototype.mx_formats.config import ScaleCalculationMode  # noqa: E402

M, N = 96, 160


def torchao_floor(x):
    """torchao's rowwise MXFP8 cast (to_mx, FLOOR) and its "dim1" cast (to_mx of x^T): bytes."""
    s, d = mx.to_mx(x, torch.float8_e4m3fn, 32, ScaleCalculationMode.FLOOR)
    st, dt = mx.to_mx(x.t().contiguous(), torch.float8_e4m3fn, 32, ScaleCalculationMode.FLOOR)
    return {"rowwise_data": d.view(torch.uint8), "rowwise_scale": s.view(torch.uint8),
            "colwise_data": dt.view(torch.uint8), "colwise_scale": st.view(torch.uint8)}


def ours(x):
    res = find("mxfp8_floor_transposed", with_gemm_swizzled_scales=False).quantize(x.to(DEVICE))
    return {k: v.tensor.cpu() for k, v in res.items()}


@pytest.mark.parametrize("cls", ["normal", "ties", "zero_blocks"])
def test_equal_to_torchao_where_no_block_is_special(cls):
    x = inputs.COMPARE_CLASSES[cls](M, N, seed=5)
    want, got = torchao_floor(x), ours(x)
    for k in want:
        assert torch.equal(got[k], want[k].reshape(got[k].shape)), k


@pytest.mark.parametrize("cls", ["inf", "nan"])
def test_torchao_differs_on_special_blocks(cls):
    """Why the profile does not carry torchao's name: an Inf amax gives byte 255 - 8 = 247 in torchao
    (255 here), and a NaN block's finite elements become +-0 there (0x7F here)."""
    x = inputs.COMPARE_CLASSES[cls](M, N, seed=5)
    want, got = torchao_floor(x), ours(x)
    assert not torch.equal(got["rowwise_scale"], want["rowwise_scale"]) or \
        not torch.equal(got["rowwise_data"], want["rowwise_data"])
    if cls == "inf":
        assert 247 in want["rowwise_scale"].unique().tolist() and 247 not in got["rowwise_scale"].unique().tolist()
