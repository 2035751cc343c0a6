"""The independent golden MXFP4 vectors (tests/data, provenance in its README): one check among others."""
from pathlib import Path

import pytest
import torch

from quantlay import reference
from quantlay.generated import find

from conftest import DEVICE

VECTORS = Path(__file__).resolve().parent / "data" / "mxfp4_cast_transpose_64x256.pt"
PROFILES = {"away": "mxfp4_cast_transpose_te", "even": "mxfp4_cast_transpose_hw"}
SUFFIX = {"rowwise_data": "_preshuffle16x16", "colwise_data": "_preshuffle16x16",
          "rowwise_scale": "_e8m0_shuffle_fill127", "colwise_scale": "_e8m0_shuffle_fill127"}


@pytest.fixture(scope="module")
def vectors():
    return torch.load(VECTORS, weights_only=True)


@pytest.mark.parametrize("case", ["random", "ties", "zero_and_subnormal_blocks"])
@pytest.mark.parametrize("profile", ["away", "even"])
@pytest.mark.parametrize("flags", [False, True])
def test_kernel_and_reference_match_golden(vectors, mxfp4_kernels, case, profile, flags):
    opts = dict.fromkeys(["shuffle_rowwise_data", "shuffle_columnwise_data", "with_gemm_swizzled_scales"], flags)
    kernel = PROFILES[profile]
    x = vectors[f"{case}/input_bf16_bits"].view(torch.bfloat16)
    res = find(kernel, **opts).quantize(x.to(DEVICE))
    ref = reference.quantize(mxfp4_kernels[kernel].variant(**opts), x)
    for key in ref:
        gold = vectors[f"{case}/{profile}/{key}{SUFFIX[key] if flags else ''}"]
        assert torch.equal(ref[key], gold), f"reference {key}"
        assert torch.equal(res[key].tensor.cpu(), gold), f"kernel {key}"
