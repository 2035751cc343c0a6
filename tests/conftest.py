"""Shared fixtures. Kernels run in Triton's interpreter unless a CUDA device is present."""
import os
import warnings

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton.runtime.interpreter")

from quantlay import spec as specmod  # noqa: E402

MXFP4_SPEC = specmod.SPECS_DIR / "mxfp4_cast_transpose.ql"
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def pytest_collection_modifyitems(config, items):
    for item in items:  # run in parallel (pytest-xdist, --dist loadgroup), these would not fit in memory together
        if "big_memory" in item.keywords:
            item.add_marker(pytest.mark.xdist_group("big_memory"))
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def mxfp4_kernels():
    return {k.name: k for k in specmod.load(MXFP4_SPEC)}
