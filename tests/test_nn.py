"""Blockwise FP8 training layers (quantlay.nn) against the reference GEMMs of their own quantized
operands, against full-precision autograd, and the recipe, cache and main_grad contracts."""
import pytest
import torch

import quantlay.nn as qnn
from quantlay import reference
from quantlay.spec import SPECS_DIR, load_gemms

from conftest import DEVICE
from test_gemm import rel_err

GEMMS = {g.name: g for g in load_gemms(SPECS_DIR / "fp8_gemm.ql")}


def ref(recipe, role, a, b, offs=None, dtype=torch.bfloat16):
    name = recipe.kernels()[role][0]
    return reference.gemm(GEMMS[name], a, b, offs).to(dtype)


def offsets(lens):
    return torch.cat([lens.new_zeros(1), lens.cumsum(0)]).to(torch.int64)


@pytest.fixture(autouse=True)
def fresh_cache():
    qnn.clear_cache()
    yield
    qnn.clear_cache()


@pytest.mark.parametrize("pow2", [False, True])
def test_dense_layer_equals_its_gemms_reference(pow2):
    torch.manual_seed(0)
    recipe = qnn.Recipe(pow2=pow2, accumulate=False)
    layer = qnn.FP8Linear(256, 128, recipe=recipe, device=DEVICE)
    x = torch.randn(2, 48, 256, device=DEVICE).to(torch.bfloat16).requires_grad_()
    y = layer(x)
    dy = torch.randn_like(y)
    y.backward(dy)
    x2, w = x.detach().reshape(-1, 256), layer.weight.detach()
    xq, wq = recipe.module("act").quantize(x2), recipe.module("weight").quantize(w)
    assert rel_err(y.reshape(-1, 128), ref(recipe, "fprop", xq, wq)) < 1e-6
    dyq = recipe.module("act").quantize(dy.reshape(-1, 128))
    wt = wq if pow2 else recipe.module("weight").quantize(w.t().contiguous())
    assert rel_err(x.grad.reshape(-1, 256), ref(recipe, "dgrad", dyq, wt)) < 1e-6
    lens = torch.tensor([96], device=DEVICE)
    a = recipe.module("segment").quantize(dy.reshape(-1, 128), lens)
    b = recipe.module("segment").quantize(x2, lens)
    dw = ref(recipe, "wgrad", a, b, a.extras["padded_offsets"], torch.float32)[0]
    assert rel_err(layer.weight.grad.float(), dw.to(torch.bfloat16).float()) < 1e-6
    # and close to the full-precision gradients (the FP8 quantization error)
    xf, wf = x2.float().requires_grad_(), w.float().requires_grad_()
    yf = xf @ wf.t()
    yf.backward(dy.reshape(-1, 128).float())
    assert rel_err(y.reshape(-1, 128), yf.detach()) < 1e-3
    assert rel_err(x.grad.reshape(-1, 256), xf.grad) < 1e-3
    assert rel_err(layer.weight.grad, wf.grad) < 1e-3


def test_grouped_layer_and_an_empty_expert():
    torch.manual_seed(1)
    recipe = qnn.Recipe(pow2=True, accumulate=False)
    layer = qnn.FP8GroupedLinear(3, 256, 128, recipe=recipe, device=DEVICE)
    lens = torch.tensor([40, 0, 88], device=DEVICE)
    x = torch.randn(128, 256, device=DEVICE).to(torch.bfloat16).requires_grad_()
    y = layer(x, lens)
    y.backward(torch.ones_like(y))
    assert not layer.weight.grad[1].any(), "an expert without tokens gets an exact zero gradient"
    o = offsets(lens).tolist()
    for g in (0, 2):
        want = x.detach()[o[g]:o[g + 1]].float() @ layer.weight.detach()[g].float().t()
        assert rel_err(y[o[g]:o[g + 1]], want) < 1e-3


def test_main_grad_accumulates_in_place():
    torch.manual_seed(2)
    layer = qnn.FP8Linear(128, 128, recipe=qnn.Recipe(pow2=False), device=DEVICE)
    layer.weight.main_grad = torch.zeros(128, 128, device=DEVICE)
    x = torch.randn(64, 128, device=DEVICE).to(torch.bfloat16)
    layer(x).sum().backward()
    once = layer.weight.main_grad.clone()
    assert layer.weight.grad is None and once.abs().sum() > 0
    layer(x).sum().backward()
    assert torch.equal(layer.weight.main_grad, once * 2)


def test_the_weight_is_cast_once_per_version_and_layout():
    w = torch.nn.Parameter(torch.randn(128, 256, device=DEVICE).to(torch.bfloat16))
    rocm, nvte = qnn.Recipe(pow2=False), qnn.Recipe(pow2=True)
    a1 = qnn.cached_weight_cast(w, rocm.module("weight"))
    assert qnn.cached_weight_cast(w, rocm.module("weight")) is a1
    b1 = qnn.cached_weight_cast(w, nvte.module("weight"))
    assert b1 is not a1 and b1["rowwise_scale"].layout.layout != a1["rowwise_scale"].layout.layout
    with torch.no_grad():
        w.add_(1.0)  # an optimizer step: a new version
    a2 = qnn.cached_weight_cast(w, rocm.module("weight"))
    assert a2 is not a1 and not torch.equal(a2["rowwise_data"].tensor, a1["rowwise_data"].tensor)
    assert sum(1 for k in qnn._CACHE if k[0] == id(w) and k[4] == rocm.module("weight").NAME) == 1


def test_a_recipe_threads_pow2_into_every_cast():
    """Every cast a recipe runs, and every operand its GEMMs read, has power-of-two scales exactly when
    the recipe says so (the peer bug: pow2 set on the recipe, never reaching the casts)."""
    from quantlay.spec import shipped_kernels
    kernels = shipped_kernels()
    for pow2 in (False, True):
        r = qnn.Recipe(pow2=pow2)
        for role, (name, opts) in r.kernels().items():
            if name in kernels:
                scales = [d.scale for d in kernels[name].variant(**opts).directions]
            else:
                scales = [op.direction.scale for op in (GEMMS[name].a, GEMMS[name].b)]
            assert all(sc.pow2 == pow2 for sc in scales), (pow2, role, name)
