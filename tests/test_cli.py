"""The CLI commands a user runs: show, verify, demo, and the run-time build cache."""
import pytest
import torch

import quantlay
from quantlay import reference
from quantlay.cli import main

from conftest import DEVICE, MXFP4_SPEC


def test_show_prints_formats_layouts_and_pictures(capsys):
    assert main(["show", str(MXFP4_SPEC)]) == 0
    out = capsys.readouterr().out
    assert "kernel mxfp4_cast_transpose_hw" in out and "E2M1(ties='even'" in out
    assert "store data  as transpose | packed(low: even) | preshuffle16x16 if shuffle_columnwise_data" in out
    assert "padded to [(((M + 255) // 256) * 256), (((((N + 31) // 32) + 7) // 8) * 8)] with 127" in out
    assert "0 <- (0, 0)   1 <- (16, 0)   2 <- (0, 4)   3 <- (16, 4)" in out  # e8m0_shuffle picture


SMALL_SPEC = """
kernel small_rne(x: bf16[M, N]) {
    option swizzle
    rowwise blocks 1x32 {
        element e2m1(ties: even)
        scale e8m0(mode: rceil)
        store data as packed(low: even)
        store scale as cublas_blocked_128x4 if swizzle
    }
    colwise blocks 32x1 {
        element e2m1(ties: zero, zero_sign: positive, nan: 0)
        scale e8m0(mode: floor, zero_amax: 127)
        store data as transpose | packed(low: odd)
        store scale as row_major
    }
}
"""


def test_verify_passes_and_proves_each_option(tmp_path, capsys):
    spec = tmp_path / "small.ql"
    spec.write_text(SMALL_SPEC)
    assert main(["verify", str(spec), "--shapes", "96x160"]) == 0
    out = capsys.readouterr().out
    assert "option small_rne.swizzle: flipping it changes the output bytes" in out
    assert "verify passed" in out


def test_build_compiles_text_into_a_content_addressed_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("QUANTLAY_CACHE", str(tmp_path))
    mod = quantlay.build(SMALL_SPEC, options={"swizzle": True})
    again = quantlay.build(SMALL_SPEC, options={"swizzle": True})
    assert mod is again
    files = list(tmp_path.rglob("*.py"))
    assert len(files) == 1 and files[0].parent.name != "" and len(files[0].parent.name) == 32
    from quantlay.spec import load
    variant = load(SMALL_SPEC)[0].variant(swizzle=True)
    x = torch.randn(130, 96).to(torch.bfloat16)
    res = mod.quantize(x.to(DEVICE))
    ref = reference.quantize(variant, x)
    for k in ref:
        assert torch.equal(res[k].tensor.cpu(), ref[k]), k
    assert res["rowwise_scale"].tensor.shape == (256, 4)  # padded to 128 x 4 tiles, zero-filled
    with pytest.raises(quantlay.SpecError, match="has no kernel 'nope'"):
        quantlay.build(SMALL_SPEC, kernel="nope")


def test_demo_runs(capsys):
    assert main(["demo", "--m", "64", "--n", "128"]) == 0
    assert "all outputs equal the reference bit for bit" in capsys.readouterr().out
