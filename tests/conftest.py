"""Shared fixtures. Kernels run in Triton's interpreter unless a CUDA device is present."""
import fcntl
import os
import tempfile
import warnings

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton.runtime.interpreter")

from quantlay import spec as specmod  # noqa: E402

MXFP4_SPEC = specmod.SPECS_DIR / "mxfp4_cast_transpose.ql"
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(autouse=True)
def _gpu_memory_shared(request):
    """Workers of pytest-xdist share the GPU: big_memory tests (tens of GiB) hold a file lock, so that one runs
    at a time, and every test gives its cached blocks back when it ends, so that no worker hoards memory."""
    if not torch.cuda.is_available():
        yield
        return
    lock = None
    if "big_memory" in request.keywords:
        lock = open(os.path.join(tempfile.gettempdir(), "quantlay_big_memory.lock"), "w")
        fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        yield
    finally:
        torch.cuda.empty_cache()
        if lock is not None:
            lock.close()  # (releases the lock)


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def mxfp4_kernels():
    return {k.name: k for k in specmod.load(MXFP4_SPEC)}
