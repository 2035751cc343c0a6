"""Generated kernels as torch custom ops: fake implementations for tracing, CUDA-graph capture on GPU."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from quantlay import inputs
from quantlay.generated import find

from conftest import DEVICE

FLAGS = dict.fromkeys(["shuffle_rowwise_data", "shuffle_columnwise_data", "with_gemm_swizzled_scales"], True)


def test_custom_op_matches_quantize_and_tags_back():
    mod = find("mxfp4_cast_transpose_hw", **FLAGS)
    x = inputs.normal(128, 128, seed=2).to(DEVICE)
    bufs = mod.quantize_op(x)
    res = mod.quantize(x)
    assert [tuple(b.shape) for b in bufs] == [tuple(res[k].tensor.shape) for k in mod.LAYOUTS]
    assert all(torch.equal(b, res[k].tensor) for b, k in zip(bufs, mod.LAYOUTS))
    tagged = mod.tag(x, bufs)
    assert tagged["colwise_data"].layout == res["colwise_data"].layout


def test_fake_implementation_gives_the_physical_shapes():
    mod = find("mxfp4_cast_transpose_hw", **FLAGS)
    with FakeTensorMode():
        x = torch.empty(4, 256, 512, dtype=torch.bfloat16)
        bufs = mod.quantize_op(x)
    assert [tuple(b.shape) for b in bufs] == [(1024, 256), (1024, 16), (512, 512), (512, 32)]
    assert all(b.dtype == torch.uint8 for b in bufs)


@pytest.mark.gpu
def test_torch_compile_traces_the_op():
    mod = find("mxfp4_cast_transpose_hw", **FLAGS)
    x = inputs.normal(1024, 2048, seed=3).cuda()
    fn = torch.compile(lambda t: mod.quantize_op(t * 1.0), fullgraph=True)
    got = fn(x)
    want = mod.quantize_op(x)
    assert all(torch.equal(a, b) for a, b in zip(got, want))


@pytest.mark.gpu
def test_cuda_graph_capture_and_replay():
    mod = find("mxfp4_cast_transpose_hw", **FLAGS)
    x = inputs.normal(1024, 2048, seed=4).cuda()
    mod.quantize(x)  # compile outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        res = mod.quantize(x)
    x.copy_(inputs.normal(1024, 2048, seed=5).cuda())
    g.replay()
    torch.cuda.synchronize()
    want = mod.quantize(x)
    assert all(torch.equal(res[k].tensor, want[k].tensor) for k in want)
