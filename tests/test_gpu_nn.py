"""quantlay.nn on the GPU: a whole training step (forward, backward, weight gradients added into
main_grad) captured in a CUDA graph and replayed with new tokens and new group lengths: no host sync,
the same gradients as the eager step."""
import pytest
import torch

import quantlay.nn as qnn
from quantlay import runtime

from test_gemm import rel_err

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("pow2", [False, True])
def test_expert_weight_gradients_when_programs_cross_experts(pow2, monkeypatch):
    """Four persistent programs, so each program of the weight gradient runs tiles of several experts
    (its token range changes from tile to tile): every expert's gradient against full precision. The
    FP8 error here is 7e-4 (the same step in the interpreter); an expert fed another's tokens is near 1."""
    monkeypatch.setattr(runtime, "sm_count", lambda device: 4)
    torch.manual_seed(2)
    layer = qnn.FP8GroupedLinear(4, 512, 256, recipe=qnn.Recipe(pow2=pow2, accumulate=False), device="cuda")
    lens = [300, 0, 500, 224]
    x = torch.randn(1024, 512, device="cuda").to(torch.bfloat16).requires_grad_()
    y = layer(x, torch.tensor(lens, device="cuda"))
    dy = torch.randn_like(y)
    y.backward(dy)
    lo = 0
    for g, n in enumerate(lens):
        want = dy[lo:lo + n].float().t() @ x.detach()[lo:lo + n].float()
        got = layer.weight.grad[g]
        assert (not got.any()) if n == 0 else rel_err(got, want) < 2e-3, g
        lo += n


@pytest.mark.parametrize("pow2", [False, True])
def test_training_step_in_a_cuda_graph(pow2):
    torch.manual_seed(0)
    recipe = qnn.Recipe(pow2=pow2)
    layer = qnn.FP8GroupedLinear(4, 512, 256, recipe=recipe, device="cuda")
    layer.weight.main_grad = torch.zeros(4, 256, 512, device="cuda")
    x = torch.randn(1024, 512, device="cuda").to(torch.bfloat16).requires_grad_()
    lens = torch.tensor([300, 0, 500, 224], device="cuda")

    def step():
        layer(x, lens).float().square().mean().backward()

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()  # warm up: compile every kernel outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    x.grad = None
    qnn.clear_cache()  # so the weight casts are captured: a replayed step casts the current weights
    with torch.cuda.graph(graph):
        step()
    for trial in range(2):
        new_x = torch.randn(1024, 512, device="cuda").to(torch.bfloat16)
        new_lens = torch.tensor([[100, 400, 0, 524], [256, 256, 256, 256]][trial], device="cuda")
        with torch.no_grad():
            x.copy_(new_x)
        lens.copy_(new_lens)
        layer.weight.main_grad.zero_()
        graph.replay()
        torch.cuda.synchronize()
        got_dx, got_dw = x.grad.clone(), layer.weight.main_grad.clone()
        # the same step eagerly
        qnn.clear_cache()
        xe = new_x.clone().requires_grad_()
        layer.weight.main_grad.zero_()
        layer(xe, new_lens).float().square().mean().backward()
        assert torch.equal(got_dx, xe.grad) and torch.equal(got_dw, layer.weight.main_grad), trial
