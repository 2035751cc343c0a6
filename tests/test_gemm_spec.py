"""GEMM declarations: operands name producer outputs; every rule is a SpecError at the operand."""
import pytest

from quantlay.errors import SpecError
from quantlay.spec import load_gemms


@pytest.mark.parametrize("text,fragment", [
    ("gemm g(a: fp8_1x128_rocm_tx.rowwise, b: fp8_128x128_rocm_te.rowwise) -> bf16",
     "unknown kernel 'fp8_1x128_rocm_tx'"),
    ("gemm g(a: fp8_1x128_nvte(gemm_redy).rowwise, b: fp8_128x128_rocm_te.rowwise) -> bf16",
     "has no option 'gemm_redy'"),
    ("gemm g(a: fp8_1x128_deepgemm.colwise, b: fp8_128x128_rocm_te.rowwise) -> bf16",
     "writes no colwise outputs"),
    ("gemm g(b: fp8_1x128_rocm_te.rowwise, a: fp8_128x128_rocm_te.rowwise) -> bf16",
     "the operands are a (rows of the output) and b"),
    ("gemm g(a: mxfp8_nvte.rowwise, b: fp8_128x128_rocm_te.rowwise) -> bf16",
     "e8m0 scales; the GEMM template reads blockwise fp32 scales"),
    ("gemm g(a: mxfp4_cast_transpose_hw.rowwise, b: fp8_128x128_rocm_te.rowwise) -> bf16",
     "e2m1 codes; the GEMM template reads 8-bit FP8 codes"),
    ("gemm g(a: fp8_1x128_rocm_te.rowwise, b: fp8_128x128_rocm_te.rowwise) -> fp16",
     "output dtype 'fp16' is not one of bf16, fp32"),
    ("gemm g(a: fp8_1x128_rocm_te.rowwise, b: fp8_128x128_rocm_te.rowwise) -> bf16 accumulate",
     "accumulate adds into an fp32 buffer"),
    ("gemm g(a: fp8_1x128_rocm_te.rowwise, b: fp8_128x128_rocm_te.rowwise, groups: row) -> bf16",
     "did you mean 'rows'?"),
    ("gemm g(a: fp8_1x128_rocm_te.rowwise, b: fp8_128x128_rocm_te.rowwise, groups: contraction) -> fp32",
     "reads segment-padded columnwise operands"),
    ("gemm g(a: fp8_segment_m.colwise, b: fp8_segment_m.colwise) -> fp32",
     "only groups: contraction reads such operands"),
    ("gemm fp8_1x128_rocm_te(a: fp8_1x128_rocm_te.rowwise, b: fp8_128x128_rocm_te.rowwise) -> bf16",
     "'fp8_1x128_rocm_te' is already declared"),
])
def test_gemm_rules(text, fragment):
    with pytest.raises(SpecError) as info:
        load_gemms(text + "\n")
    msg = str(info.value)
    assert fragment in msg and "^" in msg, msg


def test_a_gemm_may_consume_a_kernel_of_its_own_spec():
    spec = """
kernel act(x: bf16[M, N]) {
    rowwise blocks 1x128 profile fp8_block_nvte {
        store data  as row_major
        store scale as mn_major_pad4
    }
}
gemm act_gemm(a: act.rowwise, b: fp8_128x128_nvte.rowwise) -> fp32
"""
    (g,) = load_gemms(spec)
    assert g.a.variant.kernel.name == "act" and g.a.scale.layout_name() == "mn_major_pad4"
