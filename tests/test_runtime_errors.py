"""The generated launcher refuses bad input with a message naming the value, the rule and the fix."""
import pytest
import torch

from quantlay import runtime
from quantlay.errors import LaunchError
from quantlay.generated import find

from conftest import DEVICE


@pytest.fixture
def plain():
    return find("mxfp4_cast_transpose_hw")


@pytest.fixture
def shuffled():
    return find("mxfp4_cast_transpose_hw", shuffle_rowwise_data=True, shuffle_columnwise_data=True)


def x_of(M, N, dtype=torch.bfloat16):
    return torch.randn(M, N).to(dtype).to(DEVICE)


def test_wrong_dtype(plain):
    with pytest.raises(LaunchError, match=r"dtype torch.float16; this kernel was generated for torch.bfloat16"):
        plain.quantize(x_of(64, 64, torch.float16))


def test_wrong_device(plain, monkeypatch):
    """A CPU tensor outside the interpreter is refused, on a CUDA machine as on a CPU one."""
    monkeypatch.setattr(runtime, "interpreting", lambda: False)
    with pytest.raises(LaunchError, match=r"is on cpu; generated kernels run on CUDA devices"):
        plain.quantize(torch.randn(64, 64).to(torch.bfloat16))


def test_last_dim_stride(plain):
    x = torch.randn(64, 64).to(torch.bfloat16).t().to(DEVICE)
    with pytest.raises(LaunchError, match=r"stride 64 in its last dimension; it must be 1"):
        plain.quantize(x)


def test_unflattenable_leading_dims(plain):
    x = torch.randn(4, 8, 64).to(torch.bfloat16).transpose(0, 1).to(DEVICE)
    with pytest.raises(LaunchError, match=r"cannot flatten its leading dimensions"):
        plain.quantize(x)


def test_empty_and_1d(plain):
    with pytest.raises(LaunchError, match=r"no elements"):
        plain.quantize(x_of(0, 64))
    with pytest.raises(LaunchError, match=r"at least 2 dimensions"):
        plain.quantize(torch.randn(64).to(torch.bfloat16).to(DEVICE))


def test_divisibility_names_layout_value_and_fix(shuffled):
    with pytest.raises(LaunchError) as info:
        shuffled.quantize(x_of(64, 96))
    msg = str(info.value)
    assert "rowwise_data: layout preshuffle16x16 needs its cols (N // 2) to be a multiple of 32" in msg
    assert "got N // 2 = 48" in msg and "pad N to a multiple of 64" in msg
    assert "turn off shuffle_rowwise_data" in msg
    with pytest.raises(LaunchError, match=r"colwise_data: layout preshuffle16x16 needs its cols \(M // 2\)"):
        shuffled.quantize(x_of(96, 128))


def test_packing_needs_even_sizes(plain):
    with pytest.raises(LaunchError, match=r"two 4-bit codes share a byte along N, so N must be even, got N = 33"):
        plain.quantize(x_of(32, 33))


def test_out_buffers_are_checked(plain):
    with pytest.raises(LaunchError, match=r"out\['rowwise_data'\] is torch.uint8 \(64, 16\)"):
        plain.quantize(x_of(64, 64), out={"rowwise_data": torch.empty(64, 16, dtype=torch.uint8, device=DEVICE)})
    with pytest.raises(LaunchError, match=r"unknown key 'nope'"):
        plain.quantize(x_of(64, 64), out={"nope": None})


def test_one_buffer_passed_as_two_outputs(plain):
    shapes = {k: s[2] for k, s in plain._shapes(64, 64).items()}
    shared = torch.empty(shapes["rowwise_data"], dtype=torch.uint8, device=DEVICE)
    assert shapes["rowwise_data"] == shapes["colwise_data"]
    with pytest.raises(LaunchError, match=r"out\['rowwise_data'\] and out\['colwise_data'\] share memory"):
        plain.quantize(x_of(64, 64), out={"rowwise_data": shared, "colwise_data": shared})
    big = torch.empty(2 * shared.numel(), dtype=torch.uint8, device=DEVICE)  # overlapping views
    with pytest.raises(LaunchError, match="share memory"):
        plain.quantize(x_of(64, 64), out={"rowwise_data": big[:shared.numel()].view(shared.shape),
                                          "colwise_data": big[8:8 + shared.numel()].view(shared.shape)})
    x = x_of(64, 64)
    with pytest.raises(LaunchError, match=r"and x \(the input\) share memory"):
        plain.quantize(x, out={"rowwise_data": x.view(torch.uint8).view(-1)[:64 * 32].view(64, 32)})
    ok = plain.quantize(x_of(64, 64), out={"rowwise_data": big[:shared.numel()].view(shared.shape),
                                           "colwise_data": big[shared.numel():].view(shared.shape)})
    assert ok["rowwise_data"].tensor.data_ptr() == big.data_ptr()


def test_dequantize_checks_its_operands(plain):
    res = plain.quantize(x_of(64, 64))
    from quantlay.runtime import QuantizedResult, QuantizedTensor
    data = res["rowwise_data"]
    strided = torch.empty(64, 64, dtype=torch.uint8, device=DEVICE)[:, ::2]
    strided.copy_(data.tensor)
    bad = QuantizedResult(res.kernel, {**dict(res), "rowwise_data": QuantizedTensor(strided, data.layout)})
    with pytest.raises(LaunchError, match=r"rowwise_data .* is not contiguous"):
        plain.dequantize(bad, "rowwise")
    short = QuantizedTensor(data.tensor[:32], data.layout)
    with pytest.raises(LaunchError, match=r"has shape \(32, 32\) and dtype torch.uint8; it must be torch.uint8 \(64, 32\)"):
        plain.dequantize(QuantizedResult(res.kernel, {**dict(res), "rowwise_data": short}), "rowwise")


def test_results_carry_their_layout(shuffled):
    res = shuffled.quantize(x_of(64, 128))
    lay = res["colwise_data"].layout
    assert lay.layout == "transpose|packed(low=even)|preshuffle16x16"
    assert (lay.direction, lay.role, lay.format, lay.block) == ("colwise", "data", "e2m1", "32x1")
    assert lay.shape == (64, 128) and lay.physical_shape == (128, 32)
    s = res["rowwise_scale"].layout
    assert s.fill is None and s.layout == "row_major"


def test_hardware_paths_need_a_compiled_sm90_gpu(monkeypatch):
    """HW_CVT (the 8-bit convert, the bf16x2 PTX encoder) only where they compile: an sm_90 GPU, not
    Triton's interpreter; elsewhere the kernels take their portable encoders."""
    from types import SimpleNamespace
    x = SimpleNamespace(is_cuda=True, device="cuda:0")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    for cap, want in (((8, 0), False), ((8, 9), False), ((9, 0), True), ((10, 0), True)):
        monkeypatch.setattr(runtime.torch.cuda, "get_device_capability", lambda device, c=cap: c)
        runtime._sm90.cache_clear()  # a device's capability is cached; each case is another device
        assert runtime.compiled_for_gpu(x) is want, cap
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert not runtime.compiled_for_gpu(x)
    runtime._sm90.cache_clear()
    assert not runtime.compiled_for_gpu(SimpleNamespace(is_cuda=False, device="cpu"))


def test_unsafe_skip_layout_check_is_scoped():
    from quantlay import LayoutMismatchError
    res = find("mxfp4_cast_transpose_hw", shuffle_rowwise_data=True).quantize(x_of(64, 64))
    plain = find("mxfp4_cast_transpose_hw")
    with pytest.raises(LayoutMismatchError):
        plain.dequantize(res, "rowwise")
    with runtime.unsafe_skip_layout_check():
        plain.dequantize(res, "rowwise")  # reads the shuffled bytes as plain ones: wrong, not refused
    with pytest.raises(LayoutMismatchError):
        plain.dequantize(res, "rowwise")
